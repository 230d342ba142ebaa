"""Batching: dynamic padding, length-grouped training batches, and exact (unpadded) distributed evaluation.

Lightning's default ``DistributedSampler`` pads the last shard with repeated examples, so validation under
DDP counts some examples twice. bertlab builds its own samplers (the Trainer gets
``use_distributed_sampler=False``): training batches are split across ranks, evaluation batches are
contiguous, non-overlapping shards — every example is seen exactly once whatever the world size.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from bertlab.data.documents import pack_windows
from bertlab.data.mlm import IGNORE_INDEX, mask_tokens


class IndexBatch(list):
    """A training batch of feature indices that carries ``mask_seed``: the seed of its MLM masks, a function
    of (seed, epoch, batch position) only. Masks then do not depend on which DataLoader worker collates the
    batch, nor on whether the run was resumed mid-epoch."""

    mask_seed: int | None = None


class FeatureDataset(Dataset):
    def __init__(self, features: list[dict[str, Any]]):
        self.features = features

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.features[i]

    def __getitems__(self, indices: list[int]) -> list[dict[str, Any]]:
        # The DataLoader hands the batch sampler's list here (also inside workers): pass its mask seed on.
        batch = IndexBatch(self.features[i] for i in indices)
        batch.mask_seed = getattr(indices, "mask_seed", None)
        return batch


def _dist() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _long_documents(windows: np.ndarray | None) -> np.ndarray | None:
    """Windows per feature when some document holds several, else None (batches cut as they always were)."""
    if windows is None:
        return None
    windows = np.asarray(windows, dtype=np.int64)
    return windows if (windows > 1).any() else None


def epoch_batches(num_features: int, batch_size: int, windows: np.ndarray | None = None,
                  max_windows: int | None = None) -> int:
    """Training batches in one epoch, all ranks together, as :class:`TrainBatchSampler` cuts them: ``batch_size``
    features a batch, or with long documents (``windows``, some above 1) as :func:`pack_windows` packs them
    (at most ``max_windows`` windows a batch, null: ``batch_size``). The packing follows the sorted window counts
    only, so the count is the same every epoch."""
    windows = _long_documents(windows)
    if windows is None:
        return math.ceil(num_features / batch_size)
    return len(_pack_most_windows_first(np.arange(len(windows)), windows, batch_size, max_windows))


def _pack_most_windows_first(order: np.ndarray, windows: np.ndarray, batch_size: int,
                             max_windows: int | None) -> list[np.ndarray]:
    """:func:`pack_windows` over ``order`` re-sorted by window count, most first (stable: ``order`` within a
    count); ``max_windows`` null: ``batch_size``. The batches' sizes follow the window counts alone, so the
    samplers and :func:`epoch_batches` agree on how many there are whatever the shuffle."""
    order = order[np.argsort(-windows[order], kind="stable")]
    return pack_windows(order, windows, batch_size, max_windows or batch_size)


class TrainBatchSampler(Sampler[list[int]]):
    """Shuffled training batches, optionally grouped by length (fewer pad tokens), split across ranks.

    Grouping follows the usual recipe (HF ``group_by_length``): shuffle, cut into mega-batches of 50 batches,
    sort each by length, cut into batches, shuffle the batch order. The longest batch comes first so an
    out-of-memory error shows at step one. Every rank sees the same number of batches (DDP needs it): the
    batch list is cycled to a multiple of the world size. ``set_epoch`` (called by Lightning) reshuffles, unless
    ``same_every_epoch`` (``trainer.overfit_batches``).

    Long documents (``windows``: windows per feature, some above 1): a batch holds at most ``batch_size``
    documents and ``max_windows`` windows (:func:`pack_windows`), filled over the documents ordered by window
    count, most first (the shuffled, length-grouped order within each count), then the batch order shuffled
    with the most windows first. Packing follows the sorted window counts only, so every epoch has the same
    number of batches (Lightning counts them once).
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int, group_by_length: bool = True,
                 rank: int | None = None, world_size: int | None = None, windows: np.ndarray | None = None,
                 max_windows: int | None = None):
        self.lengths = np.asarray(lengths)
        self.windows = _long_documents(windows)
        self.max_windows = int(max_windows or batch_size)
        self.epoch_batches = epoch_batches(len(self.lengths), batch_size, self.windows, self.max_windows)
        self.batch_size = batch_size
        self.seed = seed
        self.group_by_length = group_by_length
        dist_rank, dist_world = _dist()
        self.rank = dist_rank if rank is None else rank
        self.world_size = dist_world if world_size is None else world_size
        self.epoch = 0
        self.same_every_epoch = False  # set for trainer.overfit_batches
        # Mid-epoch resume: batches of the current epoch that training steps have used (batch_used), not the
        # batches yielded: loader workers and the fit loop fetch batches ahead of the steps that use them.
        self.used = 0
        self._resume_at: tuple[int, int] | None = None
        self.sampler = _EpochOrder(self)

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.used = 0
        self.epoch = epoch

    def batch_used(self) -> None:
        """A training step took the next batch of this epoch (the data module calls this for each one)."""
        self.used += 1

    def state_dict(self) -> dict[str, int]:
        """Where the epoch stands (saved in checkpoints by the data module)."""
        return {"seed": self.seed, "epoch": self.epoch, "batches_done": self.used}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue after the ``batches_done`` batches of epoch ``epoch`` (same seed → same order)."""
        epoch, done = int(state["epoch"]), int(state["batches_done"])
        if int(state.get("seed", self.seed)) != self.seed:
            warnings.warn(f"resuming with seed={self.seed} but the checkpoint was trained with seed="
                          f"{state['seed']}: the rest of the epoch follows the new seed's order", stacklevel=2)
        if done >= len(self):
            epoch, done = epoch + 1, 0
        # Set now, not only by Lightning's set_epoch: a loader with workers starts drawing batches earlier.
        self.epoch = epoch
        self.used = done
        self._resume_at = (epoch, done)

    @property
    def _order_epoch(self) -> int:
        # overfit_batches: the same batches (and MLM masks) every epoch, as Lightning's sequential sampler
        # gives a plain DataLoader: a model that cannot fit them is then wrong, not unlucky.
        return 0 if self.same_every_epoch else self.epoch

    def _batches(self) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, self._order_epoch])
        order = rng.permutation(len(self.lengths))
        if self.group_by_length:
            mega = self.batch_size * 50
            chunks = [order[i:i + mega] for i in range(0, len(order), mega)]
            order = np.concatenate([c[np.argsort(-self.lengths[c], kind="stable")] for c in chunks])
        if self.windows is not None:  # packed by window count: the batch order is shuffled below
            batches = _pack_most_windows_first(order, self.windows, self.batch_size, self.max_windows)
            weights = [self.windows[b].sum() for b in batches]
        else:
            batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
            weights = [self.lengths[b].max() for b in batches] if self.group_by_length else None
        if weights is not None and len(batches) > 1:  # the heaviest batch first, the rest shuffled
            first = int(np.argmax(weights))
            rest = [b for i, b in enumerate(batches) if i != first]
            batches = [batches[first]] + [rest[i] for i in rng.permutation(len(rest))]
        per_rank = math.ceil(len(batches) / self.world_size)
        if batches and len(batches) < per_rank * self.world_size:
            # Cycled to a multiple of the world size (any world size, even more ranks than batches).
            batches = [batches[i % len(batches)] for i in range(per_rank * self.world_size)]
        return batches[self.rank::self.world_size]

    def __iter__(self) -> Iterator[list[int]]:
        start = 0
        if self._resume_at is not None:
            epoch, done = self._resume_at
            self._resume_at = None
            if epoch == self.epoch:
                start = done  # the checkpointed run had already trained on these
        batches = self._batches()
        for pos in range(start, len(batches)):
            batch = IndexBatch(batches[pos].tolist())
            global_pos = pos * self.world_size + self.rank
            batch.mask_seed = int(np.random.SeedSequence([self.seed, self._order_epoch, global_pos])
                                  .generate_state(1)[0])
            yield batch

    def __len__(self) -> int:
        return math.ceil(self.epoch_batches / self.world_size)


class _EpochOrder(Sampler[int]):
    """The examples of a :class:`TrainBatchSampler`'s epoch, in batch order. It stands at
    ``batch_sampler.sampler`` because that is where Lightning calls ``set_epoch`` — never on a batch sampler
    itself, so without it every epoch would repeat the first one's order."""

    def __init__(self, owner: TrainBatchSampler):
        self.owner = owner

    def set_epoch(self, epoch: int) -> None:
        self.owner.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        return (i for batch in self.owner._batches() for i in batch.tolist())

    def __len__(self) -> int:
        return sum(len(batch) for batch in self.owner._batches())


class EvalBatchSampler(Sampler[list[int]]):
    """Contiguous, non-overlapping shards, no padding: each example is evaluated exactly once.

    Within a shard, batches are cut from length-sorted indices (less padding); the batch carries each
    feature's ``index`` so the order never matters for the metrics. Shards may differ by a few examples
    (and ranks by a batch): evaluation has no gradient all-reduce, so uneven counts are safe.
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, rank: int | None = None,
                 world_size: int | None = None, windows: np.ndarray | None = None, max_windows: int | None = None):
        dist_rank, dist_world = _dist()
        rank = dist_rank if rank is None else rank
        world_size = dist_world if world_size is None else world_size
        n = len(lengths)
        lo, hi = n * rank // world_size, n * (rank + 1) // world_size
        shard = np.arange(lo, hi)
        shard = shard[np.argsort(-np.asarray(lengths)[lo:hi], kind="stable")]
        windows = _long_documents(windows)
        if windows is not None:  # long documents: at most max_windows windows a batch (pack_windows)
            self.batches = [b.tolist() for b in _pack_most_windows_first(shard, windows, batch_size, max_windows)]
        else:
            self.batches = [shard[i:i + batch_size].tolist() for i in range(0, len(shard), batch_size)]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class Collator:
    """Pads each batch to its longest sequence (optionally a multiple of 8 for tensor cores / AMX) and, for
    MLM, masks it afresh (dynamic masking) with a generator seeded per epoch and batch position (the
    ``mask_seed`` of :class:`IndexBatch`; the collator's own generator for batches without one).

    ``max_windows`` (sequence tasks with ``data.long_text=windows``): a feature with one row of ids per window
    is a long document (:mod:`bertlab.data.documents`). A batch holding one becomes rows — every window of
    every document, a document read whole being one — with ``window_doc`` (the document of each row: the
    model pools a document's windows into one vector) and ``window_chunk`` = ``max_windows``, the most rows
    the encoder reads at once. Labels and ``index`` stay one per document.
    """

    def __init__(self, pad_id: int, pad_to_multiple_of: int | None = None, mlm: dict[str, Any] | None = None,
                 max_windows: int | None = None):
        self.pad_id = pad_id
        self.multiple = pad_to_multiple_of
        # {"vocab_size", "mask_id", "special_ids", "probability", "seed", "whole_word", "continuation"}
        self.mlm = mlm
        self.max_windows = max_windows

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        nested = [len(f["input_ids"]) > 0 and not np.isscalar(f["input_ids"][0]) for f in features]
        if self.max_windows is not None and any(nested):
            return self._documents(features, nested)
        if nested[0]:
            return self._choices(features)
        return self._rows(features)

    def _rows(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        longest = max(len(f["input_ids"]) for f in features)
        if self.multiple:
            longest = -(-longest // self.multiple) * self.multiple
        n = len(features)
        input_ids = torch.full((n, longest), self.pad_id, dtype=torch.long)
        token_type_ids = torch.zeros((n, longest), dtype=torch.long)
        attention_mask = torch.zeros((n, longest), dtype=torch.long)
        token_labels = "labels" in features[0] and not np.isscalar(features[0]["labels"])
        labels = torch.full((n, longest), IGNORE_INDEX, dtype=torch.long) if token_labels else None
        for i, f in enumerate(features):
            t = len(f["input_ids"])
            input_ids[i, :t] = torch.as_tensor(np.asarray(f["input_ids"], dtype=np.int64))
            token_type_ids[i, :t] = torch.as_tensor(np.asarray(f["token_type_ids"], dtype=np.int64))
            attention_mask[i, :t] = 1
            if labels is not None:
                labels[i, :t] = torch.as_tensor(np.asarray(f["labels"], dtype=np.int64))
        batch = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
                 "index": torch.tensor([f["index"] for f in features], dtype=torch.long),
                 # Real (non-padding) tokens, counted here on the host so throughput needs no device sync.
                 "num_tokens": int(attention_mask.sum())}
        if labels is not None:
            batch["labels"] = labels
        elif "labels" in features[0]:
            values = [f["labels"] for f in features]
            dtype = torch.float32 if isinstance(values[0], float) else torch.long
            batch["labels"] = torch.tensor(values, dtype=dtype)
        if "features" in features[0]:  # cached frozen-encoder features (bertlab.training.feature_cache)
            batch["features"] = self._stack_features([f["features"] for f in features], longest)
        for key in ("start_positions", "end_positions", "next_sentence_label"):
            if key in features[0]:
                batch[key] = torch.tensor([int(f[key]) for f in features], dtype=torch.long)
        if self.mlm is not None:
            word_starts = None
            if "word_starts" in features[0]:  # the first piece of each word, from the encodings' word ids
                word_starts = torch.ones((n, longest), dtype=torch.bool)
                for i, f in enumerate(features):
                    word_starts[i, :len(f["word_starts"])] = torch.as_tensor(np.asarray(f["word_starts"]) != 0)
            self._mask(batch, getattr(features, "mask_seed", None), word_starts)
        return batch

    def _documents(self, features: Sequence[dict[str, Any]], nested: list[bool]) -> dict[str, torch.Tensor]:
        """Long documents: every window a row, ``window_doc`` their documents (class docstring)."""
        rows, docs, cached = [], [], []
        for d, (f, many) in enumerate(zip(features, nested)):
            windows = zip(f["input_ids"], f["token_type_ids"]) if many else [(f["input_ids"], f["token_type_ids"])]
            for ids, types in windows:
                rows.append({"input_ids": ids, "token_type_ids": types, "index": d})
                docs.append(d)
            if "features" in f:  # cached frozen-encoder features: (windows, D), or (D,) for a document read whole
                cached.append(np.atleast_2d(f["features"]))
        batch = self._rows(rows)
        batch["window_doc"] = torch.tensor(docs, dtype=torch.long)
        batch["window_chunk"] = int(self.max_windows)
        batch["index"] = torch.tensor([f["index"] for f in features], dtype=torch.long)
        if cached:
            batch["features"] = torch.from_numpy(np.concatenate(cached)).float()  # (rows, D)
        if "labels" in features[0]:
            values = [f["labels"] for f in features]
            dtype = torch.float32 if isinstance(values[0], float) else torch.long
            batch["labels"] = torch.tensor(values, dtype=dtype)
        return batch

    def _choices(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Multiple choice: (B, C, T) ids / types / attention, C the most choices in the batch; ``choice_mask``
        (B, C) marks the real choices. A padded choice attends to its first position only (a row with no
        position to attend to would make attention NaN); its score is masked out by the family."""
        longest = max(len(row) for f in features for row in f["input_ids"])
        if self.multiple:
            longest = -(-longest // self.multiple) * self.multiple
        n, c = len(features), max(len(f["input_ids"]) for f in features)
        input_ids = torch.full((n, c, longest), self.pad_id, dtype=torch.long)
        token_type_ids = torch.zeros((n, c, longest), dtype=torch.long)
        attention_mask = torch.zeros((n, c, longest), dtype=torch.long)
        attention_mask[:, :, 0] = 1
        choice_mask = torch.zeros((n, c), dtype=torch.bool)
        for i, f in enumerate(features):
            for j, (ids, types) in enumerate(zip(f["input_ids"], f["token_type_ids"])):
                t = len(ids)
                input_ids[i, j, :t] = torch.as_tensor(np.asarray(ids, dtype=np.int64))
                token_type_ids[i, j, :t] = torch.as_tensor(np.asarray(types, dtype=np.int64))
                attention_mask[i, j, :t] = 1
                choice_mask[i, j] = True
        batch = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
                 "choice_mask": choice_mask, "index": torch.tensor([f["index"] for f in features], dtype=torch.long),
                 "num_tokens": int(attention_mask[choice_mask].sum())}
        if "labels" in features[0]:
            batch["labels"] = torch.tensor([int(f["labels"]) for f in features], dtype=torch.long)
        return batch

    @staticmethod
    def _stack_features(rows: list[np.ndarray], longest: int) -> torch.Tensor:
        if rows[0].ndim == 1:
            return torch.from_numpy(np.stack(rows))  # (B, D)
        out = torch.zeros((len(rows), longest, rows[0].shape[-1]), dtype=torch.float32)
        for i, x in enumerate(rows):
            out[i, : len(x)] = torch.from_numpy(x)  # (B, T, D), zeros at padding
        return out

    def _mask(self, batch: dict[str, torch.Tensor], mask_seed: int | None = None,
              word_starts: torch.Tensor | None = None) -> None:
        cfg = self.mlm
        ids = batch["input_ids"]
        special = torch.isin(ids, cfg["special_ids"]) | (batch["attention_mask"] == 0)
        generator = cfg.get("generator")
        if mask_seed is not None:
            generator = torch.Generator().manual_seed(mask_seed)
        word_ids = None
        if cfg.get("whole_word") and (word_starts is not None or cfg.get("continuation") is not None):
            # A piece that does not start a word continues the one before it: the features' word starts (from
            # word ids), else the tokenizer's own marking of pieces (``EncoderTokenizer.continuation_table``).
            cont = (~word_starts if word_starts is not None else cfg["continuation"][ids]) & ~special
            word_ids = torch.cumsum((~cont).long(), dim=1)
            word_ids[special] = -1
        if cfg.get("fixed_eval_masks"):
            # Evaluation masks depend only on (seed, example index), never on the batch, its padding or the
            # rank: every validation pass scores the same corruption (comparable val/loss curves), and any
            # eval batch size or world size scores exactly the same masked tokens.
            masked, labels = ids.clone(), torch.full_like(ids, IGNORE_INDEX)
            lengths = batch["attention_mask"].sum(1).tolist()
            for row, (index, t) in enumerate(zip(batch["index"].tolist(), lengths)):
                seed = int(np.random.SeedSequence([cfg["seed"], index]).generate_state(1)[0])
                m, lab = mask_tokens(ids[row:row + 1, :t], special[row:row + 1, :t], cfg["vocab_size"],
                                     cfg["mask_id"], generator=torch.Generator().manual_seed(seed),
                                     mlm_probability=cfg["probability"],
                                     word_ids=word_ids[row:row + 1, :t] if word_ids is not None else None)
                masked[row, :t], labels[row, :t] = m[0], lab[0]
        else:
            masked, labels = mask_tokens(ids, special, cfg["vocab_size"], cfg["mask_id"], generator=generator,
                                         mlm_probability=cfg["probability"], word_ids=word_ids)
        batch["input_ids"] = masked
        batch["labels"] = labels
