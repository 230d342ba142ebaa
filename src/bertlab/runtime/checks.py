"""Checks before training: configuration mistakes that would otherwise surface late (mid-epoch, as a
traceback from Lightning, the tokenizer or the DataLoader) or never (a monitor that leaks test data)."""

from __future__ import annotations

import os
from typing import Any

from bertlab.runtime.config import DataConfig, TaskSpec
from bertlab.runtime.errors import ConfigError


def preflight(task: TaskSpec, data: DataConfig, max_position_embeddings: int | None) -> None:
    """Configuration mistakes that would otherwise surface late (mid-epoch) or never (a leaky monitor).

    ``max_position_embeddings``: the model's position table, None for an encoder without one (recurrent)."""
    if not task.monitor.startswith("val/"):
        raise ConfigError(
            f"task.monitor={task.monitor}: checkpoint selection and early stopping must read a validation "
            "metric (val/<name>); selecting on test or training metrics leaks them into the result"
        )
    if max_position_embeddings is not None and data.max_seq_length > max_position_embeddings:
        raise ConfigError(
            f"data.max_seq_length={data.max_seq_length} is larger than the model's position table "
            f"(max_position_embeddings={max_position_embeddings}): set data.max_seq_length to "
            f"{max_position_embeddings} or less"
        )


def min_seq_length(family: str, pair: bool, nsp: bool, specials: tuple[int, int] = (2, 3)) -> int:
    """The shortest ``max_seq_length`` that leaves one position of text per segment: [CLS] text [SEP], or
    [CLS] a [SEP] b [SEP] for pairs and next-sentence pairs. ``specials``: the special tokens a single sequence
    and a pair cost with the run's tokenizer (BERT's 2 and 3 by default; RoBERTa's pair costs 4)."""
    single, double = specials
    if family in ("sequence", "token", "mlm"):
        return double + 2 if (pair or nsp) else single + 1
    if family == "qa":
        return double + 1  # [CLS] question [SEP] context [SEP], the window check then asks for more
    return 2


def check_seq_length(length: Any, family: str | None, pair: bool, nsp: bool, specials: tuple[int, int] = (2, 3),
                     shape: str | None = None) -> None:
    """``data.max_seq_length`` must leave room for text besides the special tokens (:func:`min_seq_length`);
    ``shape`` shows the template (default BERT's)."""
    if not isinstance(length, int) or not family:
        return
    minimum = min_seq_length(family, pair, nsp, specials)
    if 0 < length < minimum:
        shape = shape or f"[CLS]{' a [SEP] b' if pair or nsp else ' text'} [SEP]"
        raise ConfigError(
            f"data.max_seq_length={length} leaves no room for text: the special tokens of a "
            f"{'pair' if pair or nsp else family} input ({shape}) "
            f"already take {minimum - (2 if pair or nsp else 1)} positions. Use at least {minimum} "
            "(BERT's fine-tuning default is 128)"
        )


def check_settings(cfg: Any) -> None:
    """Values that Lightning, the tokenizer or the DataLoader would reject with a traceback, or worse accept:
    a ``max_seq_length`` below the special tokens turns truncation off (the tokenizer ignores a limit it
    cannot meet) and trains on full-length text."""
    data, task, trainer = cfg.get("data") or {}, cfg.get("task") or {}, cfg.get("trainer") or {}
    family = task.get("family")
    pair, nsp = bool(data.get("text_pair_column")) and family == "sequence", bool(task.get("nsp"))
    check_seq_length(data.get("max_seq_length"), family, pair, nsp)  # BERT's count; the tokenizer's: data module
    workers = data.get("num_workers")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 0):
        raise ConfigError(
            f"data.num_workers={workers!r}: the number of DataLoader worker processes must be 0 (load in the "
            f"training process) or a positive integer (e.g. data.num_workers={min(os.cpu_count() or 1, 4)})"
        )
    accumulate = trainer.get("accumulate_grad_batches")
    if accumulate is not None and (not isinstance(accumulate, int) or isinstance(accumulate, bool) or accumulate < 1):
        raise ConfigError(
            f"trainer.accumulate_grad_batches={accumulate!r}: the number of batches whose gradients are summed "
            "before each optimizer step must be a positive integer (1 = no accumulation)"
        )
