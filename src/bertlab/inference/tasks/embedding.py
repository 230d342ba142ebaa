"""Embeddings (``task=embedding``): ``{"text", "embedding"}`` per input, the vector as the run computes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from bertlab.data.readers import DataError
from bertlab.inference.tasks.base import Item, Reading, TaskPrediction


def embed_texts(reading: Reading, texts: list[str], batch_size: int | None = None) -> np.ndarray:
    """(N, D) float32: each text's embedding as the run computes it (an embedding model only), texts
    longer than ``max_seq_length`` tokens cut there (counted in a warning), ``batch_size`` per forward."""
    encodings = reading.tokenizer.truncated(reading.settings.max_seq_length).encode_batch(texts)
    reading.warn_cut(sum(bool(e.overflowing) for e in encodings), "each was embedded from its first "
                     "max_seq_length tokens, as the run read its data")
    features = [{"input_ids": e.ids, "token_type_ids": e.type_ids, "index": i} for i, e in enumerate(encodings)]
    vectors = reading.forward(features, batch_size)
    return np.stack(vectors).astype(np.float32) if vectors else np.zeros((0, 0), dtype=np.float32)


def input_texts(reading: Reading, chunk: list[Item]) -> list[str]:
    """The text of each input: a string, or a dict's run text column (else ``text``); empty is an error."""
    s = reading.settings
    texts = []
    for where, x in chunk:
        text = x.get(s.text_column, x.get("text")) if isinstance(x, dict) else x
        if not isinstance(text, str):
            raise DataError(f"{where}: expected a text, or a dict with {s.text_column!r} or 'text', got "
                            f"{type(x).__name__}")
        if not text.strip():
            raise DataError(f"{where}: the text is empty")
        texts.append(text.strip())
    return texts


def records(reading: Reading, chunk: list[Item], size: int, word_scores: bool = False) -> Iterator[dict[str, Any]]:
    texts = input_texts(reading, chunk)
    for text, vector in zip(texts, embed_texts(reading, texts, size)):
        yield {"text": text, "embedding": [float(v) for v in vector]}


# The ONNX graph's output is the pooled (and, with task.normalize, L2-normalised) vector, named "embedding";
# its int8 graph is gated on retrieval (bertlab.inference.onnx.gate_metric).
TASK = TaskPrediction("embedding", records, output="row", onnx=True, one_text=True, file_format="table",
                      graph_outputs=("embedding",), gate_metrics=("ndcg_at_10", "spearmanr"), vector=True)
