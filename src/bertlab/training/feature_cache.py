"""Frozen-feature cache: with ``freeze=encoder head.cache_features=true`` the encoder runs once per split and
the head then trains on stored tensors, so every epoch after the first costs only the head.

The cache is keyed by the encoder weights, the tokenizer, the split's data and the feature choice
(``head.pooling``, ``head.layers``), so a changed checkpoint or setting never reuses stale features. A frozen
encoder runs in eval mode, so cached features equal what the uncached path computes at every step.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from bertlab.data.batching import Collator, EvalBatchSampler, FeatureDataset
from bertlab.data.documents import is_windowed, window_counts
from bertlab.data.features import Split, lengths
from bertlab.data.safe_cache import cached
from bertlab.models.heads import TaskModel
from bertlab.runtime.config import ConfigError

log = logging.getLogger(__name__)

CACHEABLE_FAMILIES = ("sequence", "token")


def weights_fingerprint(module: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def check_cacheable(family: str, encoder_frozen: bool) -> None:
    if not encoder_frozen:
        raise ConfigError(
            "head.cache_features=true needs a frozen encoder (freeze=encoder): features of an encoder that "
            "trains change at every step"
        )
    if family not in CACHEABLE_FAMILIES:
        raise ConfigError(
            f"head.cache_features=true supports the {', '.join(CACHEABLE_FAMILIES)} families, not {family!r} "
            "(QA windows would need gigabytes of per-token features)"
        )


@torch.no_grad()
def attach_features(model: TaskModel, split: Split, collator: Collator, batch_size: int, key: str,
                    cache_dir: str | None) -> None:
    """Compute (or load) the head's input features for every row of ``split`` into ``f["features"]``."""
    path = Path(cache_dir) / "frozen_features" / f"{split.name}-{key}.safetensors" if cache_dir else None

    def compute() -> list[np.ndarray]:
        was_training = model.training
        model.eval()
        stored: list[np.ndarray | None] = [None] * len(split.features)
        windows = window_counts(split.features) if collator.max_windows and split.windowed else None
        loader = DataLoader(FeatureDataset(split.features), collate_fn=collator,
                            batch_sampler=EvalBatchSampler(lengths(split.features), batch_size, rank=0, world_size=1,
                                                           windows=windows, max_windows=collator.max_windows))
        for batch in loader:
            feats = model.encode(batch).float()  # (B, H·m) or (B, T, H·m); (windows, H·m) with long documents
            if "window_doc" in batch:  # a long document keeps one vector per window, the head pools them
                for doc, index in enumerate(batch["index"].tolist()):
                    x = feats[batch["window_doc"] == doc]
                    stored[index] = (x if is_windowed(split.features[index]) else x[0]).numpy().copy()
                continue
            real = batch["attention_mask"].sum(1)
            for row, index in enumerate(batch["index"].tolist()):
                x = feats[row]
                stored[index] = (x[: real[row]] if x.dim() == 2 else x).numpy().copy()
        model.train(was_training)
        return stored

    def fits(stored) -> bool:  # one array per feature, of its length for per-token features
        return isinstance(stored, list) and len(stored) == len(split.features) and all(
            isinstance(x, np.ndarray) and (x.ndim == 1 or len(x) == len(f["input_ids"]))
            for x, f in zip(stored, split.features))

    # A damaged file is reported with its path, removed and recomputed; nothing in it can run code.
    stored = cached(path, compute, f"frozen features for {split.name}", check=fits)
    for feature, x in zip(split.features, stored):
        feature["features"] = x
