"""Prediction's forward passes: features put into batches of similar length, padded as numpy arrays, run through
the model of either backend (PyTorch or an onnxruntime session), and each feature's logits given back in the
order of the features.

Batches by length: the features of up to :data:`READ_AHEAD` batches of inputs are ordered by length (a stable
sort) before they are cut into batches, so a batch pads its rows to about their own length instead of the
longest of an arbitrary group of inputs (file order). Each row is computed with its own attention mask and read
back cropped to its own tokens, so the order changes no record beyond float rounding.

Long documents (classification read in windows) are batched as documents instead: :func:`forward_documents`.
No torch at import: an ONNX prediction never loads it; :class:`TorchLogits` imports it when built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from bertlab.data.documents import is_windowed, pack_windows, window_counts

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


def forward_documents(logits: Logits, features: Sequence[Mapping[str, Any]], batch_size: int, max_windows: int,
                      pad_id: int) -> list[np.ndarray]:
    """(C,) logits per feature of classification inputs holding long documents (a feature with one row of ids per
    window, :mod:`bertlab.data.documents`), in the order of ``features``. The documents, ordered by their window
    count and length, go in batches of at most ``batch_size`` documents and ``max_windows`` windows
    (:func:`~bertlab.data.documents.pack_windows`); a batch is every window as a row, ``window_doc`` the document
    of each row and ``window_chunk`` the most rows the encoder reads at once, as the training collate makes it,
    and the model pools each document's windows into its one row of logits."""
    windows = window_counts(features)
    order = sorted(range(len(features)), key=lambda i: (windows[i], feature_length(features[i])))
    out: list[np.ndarray | None] = [None] * len(features)
    for part in pack_windows(order, windows, batch_size, max_windows):
        rows, docs = [], []
        for d, i in enumerate(part.tolist()):
            f = features[i]
            pieces = zip(f["input_ids"], f["token_type_ids"]) if is_windowed(f) else \
                [(f["input_ids"], f["token_type_ids"])]
            for ids, types in pieces:
                rows.append({"input_ids": ids, "token_type_ids": types})
                docs.append(d)
        batch: dict[str, Any] = pad_batch(rows, pad_id)
        batch["window_doc"] = np.asarray(docs, dtype=np.int64)
        batch["window_chunk"] = int(max_windows)
        result = logits(batch)  # (documents, C)
        for d, i in enumerate(part.tolist()):
            out[i] = result[d]
    return out  # type: ignore[return-value]


class TorchLogits:
    """A PyTorch ``TaskModel`` as :data:`Logits`: numpy batches in, float32 numpy logits out, in inference
    mode on the model's device. Its plain Linear layers become
    :class:`~bertlab.models.kernels.PrepackedLinear` (in place): on the CPU in float32 they multiply with a
    weight reordered once for oneDNN, equal to ``nn.Linear`` within float rounding; elsewhere they are
    ``nn.Linear``."""

    def __init__(self, model: Any) -> None:
        import torch

        from bertlab.models.kernels import prepack_linears

        self.torch = torch
        self.model = model
        prepack_linears(model)

    def __call__(self, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        torch = self.torch
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            inputs = {k: torch.from_numpy(batch[k]).to(device) for k in ("input_ids", "token_type_ids",
                                                                         "attention_mask")}
            if "choice_mask" in batch:
                out = self.model(inputs, num_choices=batch["input_ids"].shape[1])
            elif "window_doc" in batch:  # long documents: the model pools each document's windows
                inputs["window_chunk"] = batch["window_chunk"]
                out = self.model(inputs, window_doc=torch.from_numpy(batch["window_doc"]).to(device))
            else:
                out = self.model(inputs)
            return out.float().cpu().numpy()
