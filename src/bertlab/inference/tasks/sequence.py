"""Classification and regression (``task.family=sequence``): ``{"text", "label", "score", "scores"}`` per input
with the label strings of the data (pair tasks add ``"text_pair"``), regression ``{"text", "value"}``; a text
past the window read as the run read its data (in windows pooled by the model, or cut)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from bertlab.data.documents import encode_documents, is_windowed
from bertlab.data.readers import DataError
from bertlab.inference.tasks.base import Item, Reading, TaskPrediction, softmax
from bertlab.runtime.config import ConfigError, TaskSpec


def read_input(reading: Reading, x: Any, where: str) -> tuple[str, str | None]:
    """A string (pair tasks: ``"text<TAB>pair"``), a ``(text, pair)`` tuple or a dict (``"text"`` or the run's
    text column, ``"text_pair"`` or its pair column) as ``(text, pair)``."""
    s = reading.settings
    pair = None
    if isinstance(x, dict):
        text = x.get(s.text_column, x.get("text"))
        pair = x.get(s.text_pair_column, x.get("text_pair")) if s.text_pair_column else x.get("text_pair")
        if text is None:
            raise DataError(f"{where}: no {s.text_column!r} or 'text' key in {sorted(x)}")
    elif isinstance(x, tuple | list) and len(x) == 2:
        text, pair = x
    elif isinstance(x, str):
        text = x
        if s.pair is not False and "\t" in x:
            text, pair = x.split("\t", 1)
    else:
        raise DataError(f"{where}: expected a text, a (text, pair) tuple or a dict, got {type(x).__name__}")
    text, pair = str(text).strip(), None if pair is None else str(pair).strip()
    if s.pair and not pair:
        raise DataError(f"{where}: task {reading.task.name} classifies sentence pairs, and this input has one "
                        "text: give 'sentence<TAB>pair' on a line, a (text, pair) tuple, or a JSON object "
                        f"with {s.text_column!r} and {s.text_pair_column!r}")
    if s.pair is False and pair is not None:
        raise DataError(f"{where}: task {reading.task.name} classifies single texts, and this input has a pair")
    if not text:
        raise DataError(f"{where}: the text is empty")
    return text, pair


def features(reading: Reading, pairs: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """One feature per input, read as the run read its data: a text past the window in windows (one row of
    ids per window, pooled by the model) or cut (``data.long_text``; :mod:`bertlab.data.documents`)."""
    s = reading.settings
    out: list[dict[str, Any]] = [{} for _ in pairs]
    cut = 0
    for is_pair in (False, True):  # a Hugging Face folder takes single texts and pairs in one batch
        at = [i for i, (_, pair) in enumerate(pairs) if (pair is not None) == is_pair]
        if not at:
            continue
        rows, long = encode_documents(reading.tokenizer, [pairs[i][0] for i in at],
                                      [pairs[i][1] for i in at] if is_pair else None, s.max_seq_length,
                                      s.long_text, s.window_stride, reading.window_cap())
        cut += long.truncated
        for i, row in zip(at, rows):
            out[i] = {**row, "index": i}
    reading.warn_cut(cut, "each was read up to the window and the rest ignored, as the run was trained "
                          "(data.long_text=truncate; a run trained with windows reads the whole text)"
                     if s.long_text == "truncate" else "the first text of each pair was cut to leave the second "
                     "at least half the window, as the run was trained (data.long_text=windows)")
    return out


def forward(reading: Reading, feats: list[dict[str, Any]], size: int) -> list[np.ndarray]:
    """(C,) logits per feature; long documents read in windows are batched as documents."""
    if any(is_windowed(f) for f in feats):
        return reading.forward_documents(feats, size)
    return reading.forward(feats, size)


def records(reading: Reading, chunk: list[Item], size: int, word_scores: bool = False) -> Iterator[dict[str, Any]]:
    pairs = [read_input(reading, x, where) for where, x in chunk]
    labels = reading.labels
    for (text, pair), logits in zip(pairs, forward(reading, features(reading, pairs), size)):
        record: dict[str, Any] = {"text": text}
        if pair is not None:
            record["text_pair"] = pair
        if reading.task.regression:
            record["value"] = float(logits[0])
        else:
            probs = softmax(logits.astype(np.float64))
            best = int(probs.argmax())
            record.update(label=labels[best], score=float(probs[best]),
                          scores={label: float(p) for label, p in zip(labels, probs)})
        yield record


TASK = TaskPrediction("sequence", records, output="row", windows=True, file_format="table")


def reranker_refusal(task: TaskSpec, source: str) -> str | None:
    """Why ``source`` cannot score (query, passage) pairs, None when it can: a reranker is a sequence model with
    one real-valued output (a task=rerank run or its export)."""
    if task.family == TASK.family and task.regression:
        return None
    return (f"{source}: a {task.family} model (task {task.name}) gives no single score per (query, passage) pair; "
            "a reranker is a task=rerank run or its export (python train.py task=rerank ...)")


def score_pairs(reading: Reading, pairs: list[tuple[str, str]], size: int | None, source: object) -> np.ndarray:
    """(N,) float32: a one-output sequence model's score of each (query, passage) pair (a reranker,
    task=rerank: the relevance logit), read as the run read its pairs; ``size`` pairs per forward."""
    why = reranker_refusal(reading.task, str(source))
    if why:
        raise ConfigError(why)
    rows = forward(reading, features(reading, [(q, p) for q, p in pairs]), int(size or reading.settings.batch_size))
    return np.asarray([float(row[0]) for row in rows], dtype=np.float32)
