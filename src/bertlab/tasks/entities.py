"""Word-level decoding and entity extraction of token classification: each word's tag from its sub-words'
predictions (a long sentence's windows stitched back first) and the entities a tag sequence spells, as seqeval
reads them, and seqeval's entity-level precision, recall and F1 over them. Plain Python and numpy, no torch: prediction from an ONNX export runs it without loading torch."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

__all__ = ["decode_word_predictions", "entity_prf", "extract_entities", "stitch_windows"]


def decode_word_predictions(
    pred_token_labels: Sequence[int],
    word_ids: Sequence[int | None],
    num_words: int,
    o_id: int = 0,
) -> list[int]:
    """Word-level label ids (num_words,) from token-level predictions (T,) of one sentence.

    A word's prediction is the one at its first sub-word. Words with no sub-word in ``word_ids`` (a word
    the tokenizer turns into nothing, or one cut off by ``max_seq_length``) are predicted ``o_id`` — the id
    of ``"O"`` in the task's label list (0 by default) — so the sequence lines up with the gold tags and a
    missed entity is counted. ``pred_token_labels`` may be longer than ``word_ids`` (batch padding).
    """
    words = [o_id] * num_words
    seen = [False] * num_words
    for position, word in enumerate(word_ids):
        if word is None or not 0 <= word < num_words or seen[word]:
            continue
        seen[word] = True
        words[word] = int(pred_token_labels[position])
    return words


def stitch_windows(outputs: Sequence[np.ndarray], word_ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, list[int]]:
    """One sentence's windows (in sentence order) as one sequence: their per-position outputs (each cut to
    its window's length: batch padding off) and word ids, one after the other. A window's ``word_ids`` name
    a word only where the window owns the token (:class:`bertlab.data.tags.TagWindow`), so the first
    position naming a word is the word's first sub-word in the window that owns it, and
    :func:`decode_word_predictions` over the result reads each word where it has the most context. A
    sentence that fits is one window: the result is that window's outputs."""
    if len(outputs) != len(word_ids):
        raise ValueError(f"{len(outputs)} window outputs for {len(word_ids)} windows")
    parts = [np.asarray(out)[: len(ids)] for out, ids in zip(outputs, word_ids)]
    return np.concatenate(parts), [w for ids in word_ids for w in ids]


# --------------------------------------------------------------------------------------------------------
# Entity-level scores with seqeval's default-mode semantics (seqeval.metrics.sequence_labeling.get_entities)


def _chunk_ends(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def _chunk_starts(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def extract_entities(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """Entities ``(type, start, end)`` of one tag sequence, ``end`` **inclusive** (as seqeval).

    seqeval's default mode (conlleval): lenient about scheme errors — an ``I-X`` after ``O`` or after
    another type starts an entity, a type change ends one; ``E-``/``S-`` prefixes are understood too.
    """
    entities = set()
    prev_tag, prev_type, begin = "O", "", 0
    for i, chunk in enumerate([*tags, "O"]):
        tag = chunk[0]
        type_ = chunk[1:].split("-", maxsplit=1)[-1] or "_"
        if _chunk_ends(prev_tag, tag, prev_type, type_):
            entities.add((prev_type, begin, i - 1))
        if _chunk_starts(prev_tag, tag, prev_type, type_):
            begin = i
        prev_tag, prev_type = tag, type_
    return entities


def _prf(tp: int, n_pred: int, n_true: int) -> dict[str, float]:
    # 0.0 where undefined, as seqeval (zero_division="warn" -> 0, without the warning).
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _entity_sets(
    true_seqs: Sequence[Sequence[str]], pred_seqs: Sequence[Sequence[str]]
) -> tuple[dict[str, set], dict[str, set]]:
    if len(true_seqs) != len(pred_seqs):
        raise ValueError(f"{len(true_seqs)} gold sequences but {len(pred_seqs)} predicted ones")
    true: dict[str, set] = defaultdict(set)
    pred: dict[str, set] = defaultdict(set)
    for n, (t, p) in enumerate(zip(true_seqs, pred_seqs)):
        if len(t) != len(p):
            raise ValueError(f"sequence {n}: {len(t)} gold tags but {len(p)} predicted tags (one per word)")
        for type_, start, end in extract_entities(t):
            true[type_].add((n, start, end))
        for type_, start, end in extract_entities(p):
            pred[type_].add((n, start, end))
    return true, pred


def entity_prf(true_seqs: Sequence[Sequence[str]], pred_seqs: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro ``{"precision", "recall", "f1"}`` (fractions 0-1) over exact entity matches (type and span).

    Equals ``seqeval.metrics.{precision,recall,f1}_score`` in default mode; 0.0 where undefined (no
    predicted or no gold entity).
    """
    true, pred = _entity_sets(true_seqs, pred_seqs)
    tp = sum(len(true[k] & pred[k]) for k in true.keys() & pred.keys())
    return _prf(tp, sum(map(len, pred.values())), sum(map(len, true.values())))
