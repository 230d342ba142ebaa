"""Tagging (``task.family=token``): ``{"text", "entities": [{"type", "text", "start", "end", "score"}], "tags",
"words", "offsets"}`` per input: one IOB2 tag per word (the prediction at the word's first sub-word, an ``I-X``
that would start an entity written ``B-X``; a text longer than ``max_seq_length`` is read in overlapping windows
as in training, each word tagged by the window where it has the most context); raw text is split into words by
:func:`bertlab.inference.text.split_words`, ``offsets`` are each word's ``[start, end)`` in ``text``, and
entities carry character offsets into ``text`` too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from bertlab.data.readers import DataError
from bertlab.data.tags import iob1_to_iob2, tag_features
from bertlab.inference.tasks.base import Item, Reading, TaskPrediction, softmax
from bertlab.inference.text import split_words
from bertlab.tasks.entities import decode_word_predictions, extract_entities, stitch_windows


def word_tags_to_entities(text: str, words: list[tuple[str, int]], tags: list[str],
                          scores: list[float | None]) -> tuple[list[str], list[dict[str, Any]]]:
    """Valid IOB2 tags and the entities they spell, for one text.

    ``words`` are ``(word, start character in text)``, ``tags`` the predicted tag of each word and ``scores``
    its probability (None for a word the model did not see: one the tokenizer turns into nothing, or one cut
    by ``data.long_text=truncate``). An ``I-X`` that would start an entity (first word, after ``O`` or after
    another type) becomes ``B-X``: the model's ``I-X`` says "inside an X", and an X that nothing opened
    starts here. An entity's ``end`` is exclusive and its score
    the mean probability of its words' tags.
    """
    fixed = iob1_to_iob2(tags)
    entities = []
    for type_, first, last in sorted(extract_entities(fixed), key=lambda e: e[1]):
        start, end = words[first][1], words[last][1] + len(words[last][0])
        probs = [s for s in scores[first:last + 1] if s is not None]
        entities.append({"type": type_, "text": text[start:end], "start": start, "end": end,
                         "score": float(np.mean(probs)) if probs else 0.0})
    return fixed, entities


def read_input(x: Any, where: str) -> tuple[str, list[tuple[str, int]]]:
    """A string (split into words), a list of words, or a dict with ``"tokens"`` / ``"words"`` or ``"text"``
    as ``(text, [(word, its first character in text)])``."""
    if isinstance(x, dict):
        x = x.get("tokens", x.get("words", x.get("text")))
    if isinstance(x, str):
        text = x
        words = split_words(x)
    elif isinstance(x, list | tuple) and all(isinstance(w, str) for w in x):
        words, at = [], 0
        for w in x:
            words.append((w, at))
            at += len(w) + 1
        text = " ".join(x)
    else:
        raise DataError(f"{where}: expected a text, a list of words or a dict with 'tokens' or 'text', got "
                        f"{type(x).__name__}")
    if not words:
        raise DataError(f"{where}: no words to tag")
    return text, words


def records(reading: Reading, chunk: list[Item], size: int, word_scores: bool = False) -> Iterator[dict[str, Any]]:
    inputs = [read_input(x, where) for where, x in chunk]
    s, labels = reading.settings, reading.labels
    # Windows as in training (data.long_text, data.window_stride), cut outside the model: every backend
    # (PyTorch, ONNX) reads the same ones.
    encodings = reading.tokenizer.encode_words_batch([[w for w, _ in words] for _, words in inputs],
                                                     add_special_tokens=False)
    features, word_ids, sentence, long = tag_features(encodings, reading.tokenizer.template, s.max_seq_length,
                                                      s.long_text, s.window_stride, cap=reading.window_cap())
    rows = reading.forward(features, size)
    spans = np.searchsorted(sentence, np.arange(len(inputs) + 1))  # sentence i: features spans[i]:spans[i+1]
    o_id = labels.index("O") if "O" in labels else 0
    for (text, words), a, b in zip(inputs, spans[:-1], spans[1:]):
        logits, ids_of = stitch_windows(rows[a:b], word_ids[a:b])
        probs = softmax(logits.astype(np.float64))  # (T, C)
        ids = decode_word_predictions(logits.argmax(-1), ids_of, len(words), o_id=o_id)
        first: dict[int, int] = {}
        for position, w in enumerate(ids_of):
            if w >= 0:
                first.setdefault(w, position)
        scores = [float(probs[first[w], ids[w]]) if w in first else None for w in range(len(words))]
        tags, entities = word_tags_to_entities(text, words, [labels[i] for i in ids], scores)
        record = {"text": text, "entities": entities, "tags": tags, "words": [w for w, _ in words],
                  "offsets": [[at, at + len(w)] for w, at in words]}
        if word_scores:
            record["word_scores"] = scores
        yield record
    reading.warn_cut(long.truncated, "their last words are tagged O (data.long_text=truncate)")


TASK = TaskPrediction("token", records, output="tokens", file_format="conll")
