"""Named-entity recognition: tag schemes, sub-word label alignment, word-level decoding, entity scores.

Pure library code (no Lightning, no torch). The flow (BERT-SEMANTICS.md, "Heads"):

1. tags read from CoNLL files are brought to IOB2 (:func:`iob1_to_iob2` for CoNLL-2003's IOB1,
   :func:`validate_iob2` for files declared IOB2);
2. words are tokenized as pre-split words (``word_ids`` from ``tokenizers``) and :func:`align_labels`
   puts each word's label on its first sub-word, ``-100`` elsewhere;
3. the model predicts a label per token; :func:`decode_word_predictions` reads each word's label at its
   first sub-word, giving one tag per *word* — also for words that have no sub-word (a word the
   normalizer deletes, e.g. a lone zero-width space) or whose sub-words were cut by ``max_seq_length``:
   those are predicted ``O`` so the word sequence keeps its length and their gold entities count as
   missed (false negatives), never silently dropped;
4. :func:`entity_scores` scores entities, not tokens, exactly like ``seqeval.metrics`` in its default
   (conlleval-compatible) mode.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

__all__ = [
    "IGNORE_INDEX",
    "align_labels",
    "b_to_i_map",
    "decode_word_predictions",
    "entity_scores",
    "entity_scores_per_type",
    "extract_entities",
    "iob1_to_iob2",
    "validate_iob2",
]

IGNORE_INDEX = -100  # label of positions the loss skips (PyTorch cross_entropy's default ignore_index)


def _split_tag(tag: str, where: str | None = None) -> tuple[str, str]:
    """``"B-PER" -> ("B", "PER")``, ``"O" -> ("O", "")``; types may hold dashes (WNUT's ``creative-work``)."""
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BI":
        return tag[0], tag[2:]
    prefix = f"{where}: " if where else ""
    raise ValueError(f"{prefix}tag {tag!r} is neither 'O' nor 'B-TYPE' / 'I-TYPE' (IOB tagging expected)")


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """Rewrite IOB1 tags as IOB2: an ``I-X`` that starts an entity becomes ``B-X``.

    In IOB1 (CoNLL-2003's ``eng.*`` files) ``B-X`` only separates two adjacent entities of the same type;
    an entity otherwise starts with ``I-X``. An ``I-X`` starts an entity when it is first, follows ``O``,
    or follows a tag of another type. Valid IOB2 input comes back unchanged.
    """
    out = list(tags)
    prev_kind, prev_type = "O", ""
    for i, tag in enumerate(tags):
        kind, type_ = _split_tag(tag)
        if kind == "I" and (prev_kind == "O" or prev_type != type_):
            out[i] = "B-" + type_
        prev_kind, prev_type = kind, type_
    return out


def validate_iob2(tags: Sequence[str], where: str) -> None:
    """Raise ``ValueError`` naming ``where`` (e.g. ``"eng.train sentence 12"``) unless ``tags`` are IOB2.

    IOB2 starts every entity with ``B-X``: an ``I-X`` first in the sentence, after ``O`` or after another
    type is the sign of IOB1 data (or a corrupt file).
    """
    prev_kind, prev_type = "O", ""
    for i, tag in enumerate(tags):
        kind, type_ = _split_tag(tag, where)
        if kind == "I" and (prev_kind == "O" or prev_type != type_):
            before = "the sentence start" if i == 0 else repr(tags[i - 1])
            raise ValueError(
                f"{where}: tag {i} {tag!r} follows {before}, which is not valid IOB2 (an entity starts with "
                f"'B-{type_}'). If the file uses IOB1 (as CoNLL-2003's eng.* files do), declare its tag scheme "
                "as iob1 so it is converted; otherwise fix the tag"
            )
        prev_kind, prev_type = kind, type_


def b_to_i_map(label_names: Sequence[str]) -> dict[int, int]:
    """Label id -> the id :func:`align_labels` uses on continuation pieces: ``B-X`` -> ``I-X``, others unchanged.

    A ``B-X`` without an ``I-X`` in the label set keeps its own id.
    """
    index = {name: i for i, name in enumerate(label_names)}
    mapping = {}
    for i, name in enumerate(label_names):
        if name.startswith("B-") and "I-" + name[2:] in index:
            mapping[i] = index["I-" + name[2:]]
        else:
            mapping[i] = i
    return mapping


def align_labels(
    word_ids: Sequence[int | None],
    word_labels: Sequence[int],
    label_all_tokens: bool = False,
    b_to_i: Mapping[int, int] | None = None,
) -> list[int]:
    """Token labels (T,) from word labels, for one tokenized sentence.

    ``word_ids`` is the encoding's ``word_ids`` (``None`` for ``[CLS]``, ``[SEP]``, padding). The first
    sub-word of a word gets the word's label; its other sub-words get ``-100``, or with
    ``label_all_tokens`` the word's label passed through ``b_to_i`` (``B-X`` -> ``I-X``: a continuation
    piece must not start a second entity; see :func:`b_to_i_map`). Special tokens always get ``-100``.
    Words without any token (deleted by the normalizer, or truncated away) simply get no label here; see
    :func:`decode_word_predictions` for how they are predicted.
    """
    if label_all_tokens and b_to_i is None:
        raise ValueError("label_all_tokens=True needs the b_to_i map (B-X id -> I-X id); build it with b_to_i_map")
    labels = []
    previous: int | None = None
    for word in word_ids:
        if word is None:
            labels.append(IGNORE_INDEX)
        elif not 0 <= word < len(word_labels):
            raise ValueError(f"word id {word} is outside the sentence's {len(word_labels)} word labels")
        elif word != previous:
            labels.append(word_labels[word])
        elif label_all_tokens:
            label = word_labels[word]
            labels.append(b_to_i.get(label, label))
        else:
            labels.append(IGNORE_INDEX)
        previous = word
    return labels


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


def entity_scores(true_seqs: Sequence[Sequence[str]], pred_seqs: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro ``{"precision", "recall", "f1"}`` (fractions 0-1) over exact entity matches (type and span).

    Equals ``seqeval.metrics.{precision,recall,f1}_score`` in default mode; 0.0 where undefined (no
    predicted or no gold entity).
    """
    true, pred = _entity_sets(true_seqs, pred_seqs)
    tp = sum(len(true[k] & pred[k]) for k in true.keys() & pred.keys())
    return _prf(tp, sum(map(len, pred.values())), sum(map(len, true.values())))


def entity_scores_per_type(
    true_seqs: Sequence[Sequence[str]], pred_seqs: Sequence[Sequence[str]]
) -> dict[str, dict[str, float]]:
    """``{type: {"precision", "recall", "f1", "support"}}`` for every type seen in gold or predictions.

    ``support`` is the number of gold entities of the type (seqeval's ``classification_report``).
    """
    true, pred = _entity_sets(true_seqs, pred_seqs)
    report = {}
    for type_ in sorted(true.keys() | pred.keys()):
        scores = _prf(len(true[type_] & pred[type_]), len(pred[type_]), len(true[type_]))
        report[type_] = {**scores, "support": len(true[type_])}
    return report
