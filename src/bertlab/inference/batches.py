"""Prediction's forward passes: features put into batches of similar length, padded as numpy arrays, run through
the model of either backend (PyTorch or an onnxruntime session), and each feature's logits given back in the
order of the features.

Batches by length: the features of up to :data:`READ_AHEAD` batches of inputs are ordered by length (a stable
sort) before they are cut into batches, so a batch pads its rows to about their own length instead of the
longest of an arbitrary group of inputs (file order). Each row is computed with its own attention mask and read
back cropped to its own tokens, so the order changes no record beyond float rounding.

No torch at import: an ONNX prediction never loads it; :class:`TorchLogits` imports it when built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

# How many batches of inputs prediction reads before it computes (and then writes) their records: the window in
# which features are ordered by length. Larger costs memory (features, logits) and latency before the first
# record; smaller leaves more padding.
READ_AHEAD = 32

Logits = Callable[[Mapping[str, np.ndarray]], np.ndarray]


def _is_choices(feature: Mapping[str, Any]) -> bool:
    ids = feature["input_ids"]
    return bool(len(ids)) and not np.isscalar(ids[0])


def feature_length(feature: Mapping[str, Any]) -> int:
    """The padded length a feature needs: its tokens, or its longest choice's."""
    ids = feature["input_ids"]
    return max(len(row) for row in ids) if _is_choices(feature) else len(ids)


def pad_batch(features: Sequence[Mapping[str, Any]], pad_id: int) -> dict[str, np.ndarray]:
    """``input_ids`` (pad_id at padding), ``token_type_ids`` and ``attention_mask`` (0 at padding), int64, as the
    training collate (:class:`bertlab.data.batching.Collator`) pads them: (B, T) padded to the batch's longest
    row; multiple choice (B, C, T) with C the most choices, ``choice_mask`` (B, C) marking the real ones, and a
    padded choice attending to its first position only (a row with nothing to attend to would give NaN)."""
    if _is_choices(features[0]):
        longest = max(len(row) for f in features for row in f["input_ids"])
        n, c = len(features), max(len(f["input_ids"]) for f in features)
        input_ids = np.full((n, c, longest), pad_id, dtype=np.int64)
        token_type_ids = np.zeros((n, c, longest), dtype=np.int64)
        attention_mask = np.zeros((n, c, longest), dtype=np.int64)
        attention_mask[:, :, 0] = 1
        choice_mask = np.zeros((n, c), dtype=bool)
        for i, f in enumerate(features):
            for j, (ids, types) in enumerate(zip(f["input_ids"], f["token_type_ids"])):
                input_ids[i, j, :len(ids)] = ids
                token_type_ids[i, j, :len(ids)] = types
                attention_mask[i, j, :len(ids)] = 1
                choice_mask[i, j] = True
        return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
                "choice_mask": choice_mask}
    longest = max(len(f["input_ids"]) for f in features)
    input_ids = np.full((len(features), longest), pad_id, dtype=np.int64)
    token_type_ids = np.zeros((len(features), longest), dtype=np.int64)
    attention_mask = np.zeros((len(features), longest), dtype=np.int64)
    for i, f in enumerate(features):
        t = len(f["input_ids"])
        input_ids[i, :t] = f["input_ids"]
        token_type_ids[i, :t] = f["token_type_ids"]
        attention_mask[i, :t] = 1
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}


def forward_features(logits: Logits, features: Sequence[Mapping[str, Any]], batch_size: int,
                     pad_id: int) -> list[np.ndarray]:
    """Each feature's float32 logits, in the order of ``features``: (C,) for sequences, (T_i, C) cropped to its
    tokens for tagging and QA, (K_i,) over its own K_i choices for multiple choice. Batches of ``batch_size``
    features of similar length (module docstring)."""
    order = sorted(range(len(features)), key=lambda i: feature_length(features[i]))
    rows: list[np.ndarray | None] = [None] * len(features)
    for start in range(0, len(order), batch_size):
        chosen = order[start:start + batch_size]
        batch = pad_batch([features[i] for i in chosen], pad_id)
        out = logits(batch)
        if "choice_mask" in batch:  # multiple choice: (B, K) scores
            kept = batch["choice_mask"].sum(1).tolist()
        else:  # (B, C): one row each; (B, T, C): cropped to each row's tokens
            kept = batch["attention_mask"].sum(1).tolist() if out.ndim > 2 else [None] * len(chosen)
        for k, (i, n) in enumerate(zip(chosen, kept)):
            rows[i] = out[k] if n is None else out[k, :n]
    return rows  # type: ignore[return-value]


class TorchLogits:
    """A PyTorch ``TaskModel`` as :data:`Logits`: numpy batches in, float32 numpy logits out, in inference
    mode on the model's device."""

    def __init__(self, model: Any) -> None:
        import torch

        self.torch = torch
        self.model = model

    def __call__(self, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        torch = self.torch
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            inputs = {k: torch.from_numpy(batch[k]).to(device) for k in ("input_ids", "token_type_ids",
                                                                         "attention_mask")}
            if "choice_mask" in batch:
                out = self.model(inputs, num_choices=batch["input_ids"].shape[1])
            else:
                out = self.model(inputs)
            return out.float().cpu().numpy()
