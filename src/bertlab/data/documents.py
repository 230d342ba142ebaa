"""Sequence-level tasks (classification, regression, sentence pairs) on text longer than the model's window.

``data.long_text=windows``: a text whose tokens exceed ``data.max_seq_length`` becomes overlapping windows
(:func:`bertlab.data.windows.window_bounds`, ``data.window_stride`` tokens shared by neighbours), each wrapped in
the tokenizer's own special-token template (``[CLS] w [SEP]``, ``<s> w </s>``). The model encodes every window
and pools the windows' vectors into one per document (``model.window_pooling``), so the document gets one
prediction and one loss on its own label. A pair keeps its first text whole in every window and windows the
second. A first text too long for that is cut (counted as truncated): to what leaves the second text whole when
that is at least half the window (where truncation would cut it too), else to half the window, so that every
window leaves the second text at least half the room.

A text that fits is encoded exactly as the tokenizer encodes it, and ``data.long_text=truncate`` cuts long text
at the window as before. No example causes unbounded work: at most ``data.max_windows_per_example`` windows
(:class:`bertlab.data.windows.WindowCap`), and no text is tokenized past what those windows (or, truncated, the
one window) can hold; texts are tokenized a chunk at a time, so a stop signal is answered between chunks. A feature of a document read in several windows holds one row of ids per window
(``input_ids``: a list of lists); the collator turns a batch into rows plus ``window_doc``, the document of
each row (:class:`bertlab.data.batching.Collator`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.data.windows import CHARS_PER_TOKEN, LongTexts, WindowCap, check_long_text, long_text_stride

ENCODE_CHUNK = 1024  # texts a tokenizer call encodes: a stop signal is answered between calls


def _encode(encode: Any, texts: Sequence[str], pairs: Sequence[str] | None = None, **kwargs: Any) -> list[Any]:
    """``encode(texts[, pairs])`` a chunk of :data:`ENCODE_CHUNK` texts at a time (one Rust call on a whole
    split would hold off a stop signal until it returns)."""
    out: list[Any] = []
    for start in range(0, len(texts), ENCODE_CHUNK):
        part = None if pairs is None else pairs[start:start + ENCODE_CHUNK]
        out += encode(texts[start:start + ENCODE_CHUNK], part, **kwargs)
    return out


def encode_documents(tokenizer: EncoderTokenizer, texts: Sequence[str], pairs: Sequence[str] | None,
                     max_seq_length: int, long_text: str = "windows", window_stride: int | None = None,
                     cap: WindowCap | None = None, names: Sequence[str] | None = None,
                     ) -> tuple[list[dict[str, Any]], LongTexts]:
    """One ``{"input_ids", "token_type_ids"}`` per text (or pair): flat lists for a text that fits or is cut,
    a list of windows (one list per window) for a text read in several. Returns them with the counts.
    ``cap``: the most windows a text is read in (None: no cap); ``names``: the examples, for its messages."""
    check_long_text(long_text)
    cap = cap or WindowCap(None)
    template = tokenizer.template
    single = max_seq_length - template.num_single  # a window's text tokens (a single text)
    stride = long_text_stride(single, window_stride) if long_text == "windows" else 0
    name = (lambda i: names[i]) if names is not None else (lambda i: f"{cap.source}, text {i + 1}")
    # Nothing is tokenized past what can be read: one window's worth (a first text of a pair, a truncated
    # text; at CHARS_PER_TOKEN characters a token), or the cap's windows of a windowed text (WindowCap.cut).
    head = max_seq_length * CHARS_PER_TOKEN
    if long_text == "windows":
        read = [cap.cut(t, single, stride, name(i)) for i, t in enumerate(pairs if pairs is not None else texts)]
        texts, pairs = ([t[:head] for t in texts], read) if pairs is not None else (read, None)
    else:
        texts = [t[:head] for t in texts]
        pairs = None if pairs is None else [t[:head] for t in pairs]
    encodings = _encode(tokenizer.truncated(max_seq_length).encode_batch, texts, pairs)
    rows = [{"input_ids": e.ids, "token_type_ids": e.type_ids} for e in encodings]
    long = [i for i, e in enumerate(encodings) if e.overflowing]
    counts = LongTexts()
    if long_text == "truncate" or not long:
        counts.truncated, counts.capped = len(long), cap.capped
        return rows, counts
    firsts = [enc.ids for enc in _encode(tokenizer.encode_batch, [texts[i] for i in long], add_special_tokens=False)]
    seconds = [enc.ids for enc in _encode(tokenizer.encode_batch, [pairs[i] for i in long],
                                          add_special_tokens=False)] if pairs is not None else None
    for k, i in enumerate(long):
        if seconds is None:
            ids = firsts[k]
            windows = [template.single(ids[ws:we]) for ws, we in cap.bounds(len(ids), single, stride, name(i))]
        else:
            # The first text stays whole unless that leaves the second less than half the window; then it keeps
            # what leaves the second whole (truncation's cut), or half the window when the second is longer.
            room, ids = max_seq_length - template.num_pair, seconds[k]
            first = firsts[k][:max(room // 2, room - len(ids))]
            counts.truncated += len(first) < len(firsts[k])
            window = room - len(first)
            if len(ids) <= window:
                windows = [template.pair(first, ids)]
            else:
                windows = [template.pair(first, ids[ws:we])
                           for ws, we in cap.bounds(len(ids), window, long_text_stride(window, window_stride), name(i))]
        if len(windows) == 1:  # a pair whose first text was cut to make room: one window, flat as any text
            rows[i] = {"input_ids": windows[0][0], "token_type_ids": windows[0][1]}
            continue
        rows[i] = {"input_ids": [w[0] for w in windows], "token_type_ids": [w[1] for w in windows]}
        counts.windowed += 1
        counts.extra_windows += len(windows) - 1
    counts.capped = cap.capped
    return rows, counts


def is_windowed(feature: dict[str, Any]) -> bool:
    """Whether a sequence feature holds several windows (one row of ids per window)."""
    ids = feature["input_ids"]
    return len(ids) > 0 and not np.isscalar(ids[0])


def window_counts(features: Sequence[dict[str, Any]]) -> np.ndarray:
    """Windows per feature of a sequence split (1 for a text read whole or cut)."""
    return np.fromiter((len(f["input_ids"]) if is_windowed(f) else 1 for f in features), dtype=np.int64,
                       count=len(features))


def pack_windows(order: Sequence[int], windows: np.ndarray, max_docs: int, max_windows: int) -> list[np.ndarray]:
    """Batches of documents in ``order``, each of at most ``max_docs`` documents and ``max_windows`` windows in
    all (a document with more windows than that gets a batch of its own; the encoder reads it in chunks)."""
    batches, current, used = [], [], 0
    for i in order:
        w = int(windows[i])
        if current and (len(current) == max_docs or used + w > max_windows):
            batches.append(np.asarray(current, dtype=np.int64))
            current, used = [], 0
        current.append(int(i))
        used += w
    if current:
        batches.append(np.asarray(current, dtype=np.int64))
    return batches


def long_text_report(long_text: str, max_seq_length: int, splits: dict[str, Any]) -> dict[str, Any]:
    """metrics.json's ``data.long_text``: how texts longer than the window were read, per split that had any:
    ``windowed`` texts read in ``windows`` windows in all, ``truncated`` texts that lost tokens."""
    per_split = {name: {"examples": s.num_examples, "windowed": s.windowed, "windows": s.windowed + s.extra_windows,
                        "truncated": s.truncated, **({"capped": s.capped} if getattr(s, "capped", 0) else {})}
                 for name, s in splits.items()
                 if getattr(s, "windowed", 0) or getattr(s, "truncated", 0) or getattr(s, "capped", 0)}
    return {"mode": long_text, "max_seq_length": max_seq_length, "splits": per_split}
