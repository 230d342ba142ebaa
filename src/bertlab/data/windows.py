"""Overlapping token windows over a sequence longer than the model's window: one rule for every task.

QA contexts, long documents (classification, regression, pairs) and long token-task sentences are all cut
the same way (:func:`window_bounds`), and a token that sits in several windows is owned by the window that
gives it the most context on both sides (:func:`max_context_owner`, BERT's ``_check_is_max_context``).

The work one example can cause is bounded in one place, :class:`WindowCap`: at most
``data.max_windows_per_example`` windows an example (a 20 MB line was 44,151 windows, one training step of over
six minutes at 8 GB). An example over the cap is an error naming it, or with ``data.on_bad_example=skip`` is
read in its first windows, warned about and counted (``capped``). The text handed to the tokenizer is cut
first to what the cap's windows could hold (:meth:`WindowCap.char_limit`), so tokenizing it is bounded too.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bertlab.runtime.errors import ConfigError, DataError

log = logging.getLogger(__name__)

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
    capped: int = 0  # examples over data.max_windows_per_example, read in their first windows (WindowCap)


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


# The most characters one token of the cap's windows stands for when the text is cut before tokenizing: far
# above any language's average (4-6 for English WordPiece), so only text that is over the cap loses characters.
CHARS_PER_TOKEN = 32
DEFAULT_MAX_WINDOWS = 128  # data.max_windows_per_example's default (conf/train.yaml)


@dataclass
class WindowCap:
    """At most ``limit`` windows an example (``data.max_windows_per_example``; None: no cap), the one bound on
    the work one example causes, for every task that reads windows (long documents, QA contexts, token-task
    sentences). Over it: a :class:`DataError` naming the example (``on_bad_example=error``), or its first
    ``limit`` windows read, with a warning, counted in ``capped`` (``skip``). ``source``: the file, naming an
    example that has no place of its own ("file:line") in messages."""

    limit: int | None = DEFAULT_MAX_WINDOWS
    on_bad_example: str = "error"
    source: str = "the input"
    capped: int = 0
    _counted: set[str] = field(default_factory=set, repr=False)

    def bounds(self, num_tokens: int, max_window: int, stride: int, example: str) -> list[tuple[int, int]]:
        """:func:`window_bounds`, at most ``limit`` of them (``example`` names the example in messages)."""
        bounds = window_bounds(num_tokens, max_window, stride)
        if self.limit is not None and len(bounds) > self.limit:
            self.over(example, f"{len(bounds):,} windows of {max_window} tokens ({num_tokens:,} tokens)")
            return bounds[:self.limit]
        return bounds

    def char_limit(self, max_window: int, stride: int) -> int | None:
        """The characters worth tokenizing of one text read in windows of ``max_window`` tokens sharing
        ``stride``: what ``limit`` windows can hold at :data:`CHARS_PER_TOKEN` characters a token (None: no cap)."""
        if self.limit is None:
            return None
        return (max_window + (self.limit - 1) * (max_window - stride)) * CHARS_PER_TOKEN

    def cut(self, text: str, max_window: int, stride: int, example: str) -> str:
        """``text``, or its first :meth:`char_limit` characters when it is longer (an example over the cap:
        :meth:`over`), before it is tokenized: a 20 MB line is never tokenized whole."""
        limit = self.char_limit(max_window, stride)
        if limit is None or len(text) <= limit:
            return text
        self.over(example, f"{len(text):,} characters (more than the {limit:,} that {self.limit} windows of "
                           f"{max_window} tokens can hold)")
        return text[:limit]

    def over(self, example: str, size: str) -> None:
        if example in self._counted:  # cut before tokenizing, then its windows: one example, counted once
            return
        message = (f"{example}: an example of {size}, over data.max_windows_per_example={self.limit}: one "
                   "example that long would make one step encode all of them at once (memory and "
                   "time without bound, and a stop signal waiting for it)")
        if self.on_bad_example == "error":
            raise DataError(message + ". Split such texts into documents of their own, raise "
                            "data.max_windows_per_example (null: no cap), or set data.on_bad_example=skip to read "
                            "their first windows and count them")
        self.capped += 1
        self._counted.add(example)
        if self.capped <= 5:
            log.warning("%s; read its first %d windows (data.on_bad_example=skip; counted as capped)", message,
                        self.limit)


def window_bound_text(data: Any, family: str) -> str | None:
    """The run plan's words for the bound on one example's work (``data``: a DataConfig), for a task that reads
    windows (QA always; classification, regression and tagging with ``data.long_text=windows``); else None."""
    if family != "qa" and (family not in ("sequence", "token") or data.long_text != "windows"):
        return None
    limit = data.max_windows_per_example
    if limit is None:
        return "no cap on one example's windows (data.max_windows_per_example=null)"
    over = "an error" if data.on_bad_example == "error" else "its first windows read, counted"
    return f"at most {limit} windows an example (data.max_windows_per_example; over: {over})"
