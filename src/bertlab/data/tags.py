"""Tagging data: tag schemes and sub-word label alignment for token classification (NER).

1. Tags read from CoNLL files are brought to IOB2 (:func:`iob1_to_iob2` for CoNLL-2003's IOB1,
   :func:`validate_iob2` for files declared IOB2).
2. Words are tokenized as pre-split words (``word_ids`` from ``tokenizers``) and :func:`align_labels` puts
   each word's label on its first sub-word, ``IGNORE_INDEX`` (-100) elsewhere.

Reading predictions back per word and scoring entities is :mod:`bertlab.tasks.token`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bertlab.data.mlm import IGNORE_INDEX

__all__ = ["IGNORE_INDEX", "align_labels", "b_to_i_map", "iob1_to_iob2", "split_tag", "validate_iob2"]


def split_tag(tag: str, where: str | None = None) -> tuple[str, str]:
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
        kind, type_ = split_tag(tag)
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
        kind, type_ = split_tag(tag, where)
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

