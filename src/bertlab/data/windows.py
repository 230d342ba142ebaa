"""Overlapping token windows over a sequence longer than the model's window: one rule for every task.

QA contexts, long documents (classification, regression, pairs) and long token-task sentences are all cut
the same way (:func:`window_bounds`), and a token that sits in several windows is owned by the window that
gives it the most context on both sides (:func:`max_context_owner`, BERT's ``_check_is_max_context``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bertlab.runtime.errors import ConfigError

LONG_TEXT_MODES = ("windows", "truncate")


@dataclass
class LongTexts:
    """What reading a split did with its texts longer than the window (the :class:`bertlab.data.features.Split`
    fields of the same names, counted where the windows are cut): ``truncated`` texts lost tokens (cut at the
    window with ``data.long_text=truncate``; with ``windows``, first texts of pairs cut to make room for the
    second); ``windowed`` texts were read whole in windows, ``extra_windows`` beyond one per text."""

    truncated: int = 0
    windowed: int = 0
    extra_windows: int = 0


def window_bounds(num_tokens: int, max_window: int, doc_stride: int) -> list[tuple[int, int]]:
    """Token windows ``[(ws, we), ...]`` exactly as Hugging Face overflowing truncation cuts them.

    ``doc_stride`` is the number of tokens that consecutive windows **share** (the ``stride`` of HF
    tokenizers' ``truncation`` with ``return_overflowing_tokens=True``; not the step). Windows start at
    ``0, step, 2*step, ...`` with ``step = max_window - doc_stride``, each holds
    ``min(max_window, num_tokens - ws)`` tokens, and the last one is the first that reaches the end of
    the sequence (``tokenizers`` ``Encoding::truncate``). So ``n`` tokens give
    ``1 + ceil(max(0, n - max_window) / step)`` windows, every token is in at least one window, and an
    empty sequence gives one empty window (it still gets a prediction).
    """
    if max_window <= doc_stride:
        raise ValueError(
            f"a window holds {max_window} tokens but the overlap (stride) is {doc_stride}: windows would "
            "not advance. Lower the stride (data.doc_stride for QA, data.window_stride for long text), "
            "or raise data.max_seq_length"
        )
    step = max_window - doc_stride
    bounds = []
    start = 0
    while True:
        stop = min(start + max_window, num_tokens)
        bounds.append((start, stop))
        if stop >= num_tokens:
            return bounds
        start += step


def max_context_owner(bounds: Sequence[tuple[int, int]], num_tokens: int) -> np.ndarray:
    """(num_tokens,) int: for each token, the index in ``bounds`` of the window that owns it.

    A token's score in window ``(ws, we)`` is ``min(left, right) + 0.01 * (we - ws)``, ``left``/``right``
    being the tokens of that window on each side of it; the first window with the best score owns it. With
    one window every token is its own.
    """
    tokens = np.arange(num_tokens)
    best = np.full(num_tokens, -np.inf)
    owner = np.full(num_tokens, -1, dtype=np.int64)
    for j, (ws, we) in enumerate(bounds):
        inside = (tokens >= ws) & (tokens < we)
        score = np.minimum(tokens - ws, we - 1 - tokens) + 0.01 * (we - ws)
        better = inside & (score > best)
        best[better], owner[better] = score[better], j
    return owner


def check_long_text(long_text: str) -> None:
    """``data.long_text`` is one of :data:`LONG_TEXT_MODES` (a :class:`ConfigError` otherwise)."""
    if long_text not in LONG_TEXT_MODES:
        raise ConfigError(f"data.long_text must be windows or truncate, got {long_text!r}")


def long_text_stride(content: int, window_stride: int | None) -> int:
    """The overlap (tokens two windows share) of long-text windows holding ``content`` tokens each:
    ``data.window_stride``, or a quarter of ``content`` when it is null. A stride that leaves the windows no
    room to advance is a :class:`ConfigError` naming both settings."""
    stride = content // 4 if window_stride is None else int(window_stride)
    if stride >= content:
        raise ConfigError(
            f"data.window_stride={window_stride}: long-text windows hold {content} tokens of text each "
            "(data.max_seq_length minus the special tokens), so an overlap that large leaves them no room to "
            f"advance. Set data.window_stride below {content} (null: a quarter of the window), or raise "
            "data.max_seq_length"
        )
    return stride
