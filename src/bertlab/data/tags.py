"""Tagging data: tag schemes and sub-word label alignment for token classification (NER).

1. Tags read from CoNLL files are brought to IOB2 (:func:`iob1_to_iob2` for CoNLL-2003's IOB1,
   :func:`validate_iob2` for files declared IOB2).
2. Words are tokenized as pre-split words (``word_ids`` from ``tokenizers``) and :func:`align_labels` puts
   each word's label on its first sub-word, ``IGNORE_INDEX`` (-100) elsewhere.
3. :func:`tag_windows` makes a sentence's model inputs: one window when its sub-words fit
   ``max_seq_length``, else overlapping windows (:mod:`bertlab.data.windows`) in which every token belongs
   to exactly one window, the one where it has the most context: a label is trained, and a word predicted,
   only there, so every word is trained once and scored once.

Reading predictions back per word and scoring entities is :mod:`bertlab.tasks.token`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bertlab.data.templates import Template
from bertlab.data.windows import (
    LongTexts,
    WindowCap,
    check_long_text,
    long_text_stride,
    max_context_owner,
)

__all__ = ["IGNORE_INDEX", "UNLABELLED_WORD", "TagWindow", "align_labels", "b_to_i_map", "iob1_to_iob2", "split_tag", "tag_features",
           "tag_windows", "validate_iob2"]

# The label of a position no loss reads (torch's cross-entropy ``ignore_index``): sub-words after a word's first,
# special tokens, padding, unmasked MLM positions. Defined here, torch-free (``data.mlm`` imports it), so that
# tagging at prediction time loads no torch.
IGNORE_INDEX = -100
# The label of a word of data.distill_file's unlabelled sentences (its first piece, as a gold tag would sit):
# the distillation teacher's term reads the position, the task loss ignores it (bertlab.tasks.distill).
UNLABELLED_WORD = -99


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


@dataclass(frozen=True)
class TagWindow:
    """One model input of a tagged sentence. ``word_ids`` has one entry per position: the word of a token
    this window owns, -1 at special tokens and at tokens another window owns; ``labels`` (None without word
    labels) holds a label only where this window owns the token. Windows come in sentence order, and owners
    never decrease along a sentence, so reading the windows' ``word_ids`` one after the other finds each
    word's first sub-word exactly once."""

    input_ids: list[int]
    token_type_ids: list[int]
    labels: list[int] | None
    word_ids: list[int]


def tag_windows(
    ids: Sequence[int],
    word_ids: Sequence[int | None],
    template: Template,
    content: int,
    stride: int | None,
    word_labels: Sequence[int] | None = None,
    label_all_tokens: bool = False,
    b_to_i: Mapping[int, int] | None = None,
    cap: WindowCap | None = None,
    example: str = "a sentence",
) -> list[TagWindow]:
    """The windows of one sentence tokenized **without** special tokens (``ids``, ``word_ids``).

    Each window holds at most ``content`` tokens wrapped in the tokenizer's own special tokens
    (``template``). ``stride`` (tokens two windows share, :func:`bertlab.data.windows.window_bounds`) or
    None: truncate, the first window only; the words cut off have no token and are predicted ``O``. A token
    in several windows belongs to the one where it has the most context
    (:func:`bertlab.data.windows.max_context_owner`). Labels are aligned over the whole sentence
    (:func:`align_labels`) before it is cut, so a window starting inside a word does not take that word's
    continuation for a first sub-word. A window after the first that owns no labelled position (without
    labels: no word start), e.g. the middle of one very long word, is left out: it would train and predict
    nothing, and a batch of such windows has no label at all (a NaN loss). A sentence that fits is one
    window equal to its plain encoding with special tokens.
    """
    n = len(ids)
    aligned = None if word_labels is None else align_labels(word_ids, word_labels, label_all_tokens, b_to_i)
    before, after = len(template.prefix), len(template.suffix)
    if n <= content:  # one window owning every token (most sentences): no ownership to work out
        input_ids, types = template.single(ids)
        labels = None if aligned is None else [IGNORE_INDEX] * before + aligned + [IGNORE_INDEX] * after
        words = [-1] * before + [-1 if w is None else w for w in word_ids] + [-1] * after
        return [TagWindow(input_ids, types, labels, words)]
    # At most cap.limit windows (data.max_windows_per_example): the words past them are cut, as truncation's.
    bounds = [(0, content)] if stride is None else (cap or WindowCap(None)).bounds(n, content, stride, example)
    owner = max_context_owner(bounds, n)
    if aligned is None:  # no labels: a window must own a word start to be of use
        marks = [w is not None and (g == 0 or word_ids[g - 1] != w) for g, w in enumerate(word_ids)]
    else:
        marks = [label != IGNORE_INDEX for label in aligned]
    windows = []
    for j, (ws, we) in enumerate(bounds):
        mine = [int(owner[g]) == j for g in range(ws, we)]
        if j and not any(m and marks[g] for m, g in zip(mine, range(ws, we))):
            continue
        input_ids, types = template.single(ids[ws:we])
        words = [w if m and w is not None else -1 for m, w in zip(mine, word_ids[ws:we])]
        labels = None
        if aligned is not None:
            labels = [IGNORE_INDEX] * before + [label if m else IGNORE_INDEX
                                                for m, label in zip(mine, aligned[ws:we])] + [IGNORE_INDEX] * after
        windows.append(TagWindow(input_ids, types, labels, [-1] * before + words + [-1] * after))
    return windows


def tag_features(
    encodings: Sequence[Any],
    template: Template,
    max_seq_length: int,
    long_text: str = "windows",
    window_stride: int | None = None,
    word_labels: Sequence[Sequence[int]] | None = None,
    label_all_tokens: bool = False,
    b_to_i: Mapping[int, int] | None = None,
    cap: WindowCap | None = None,
    names: Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], list[list[int]], list[int], LongTexts]:
    """The model features of many sentences (``tokenizers`` encodings without special tokens): every window
    of each (:func:`tag_windows`; windows of ``max_seq_length`` tokens, special tokens included, sharing
    ``data.window_stride`` tokens, or the first one only with ``data.long_text=truncate``), sentence after
    sentence, ``index`` its position (``labels`` with word labels); with each feature's ``word_ids``, the
    sentence it reads, and the counts of the sentences longer than the window (``windowed`` or ``truncated``).
    Training, evaluation and prediction all cut sentences here; ``cap`` bounds the windows of one sentence
    (:class:`bertlab.data.windows.WindowCap`, ``names``: the sentences, for its messages)."""
    check_long_text(long_text)
    content = max_seq_length - template.num_single
    stride = None if long_text == "truncate" else long_text_stride(content, window_stride)
    features: list[dict[str, Any]] = []
    word_ids: list[list[int]] = []
    sentence: list[int] = []
    counts = LongTexts()
    cap = cap or WindowCap(None)
    for i, enc in enumerate(encodings):
        labels = None if word_labels is None else word_labels[i]
        windows = tag_windows(enc.ids, enc.word_ids, template, content, stride, labels, label_all_tokens, b_to_i,
                              cap, names[i] if names is not None else f"{cap.source}, sentence {i + 1}")
        for window in windows:
            feature = {"input_ids": window.input_ids, "token_type_ids": window.token_type_ids}
            if window.labels is not None:
                feature["labels"] = window.labels
            feature["index"] = len(features)
            features.append(feature)
            word_ids.append(window.word_ids)
            sentence.append(i)
        if len(enc.ids) > content:  # read in windows (some may own nothing and be left out), or cut
            counts.windowed += stride is not None
            counts.truncated += stride is None
            counts.extra_windows += len(windows) - 1
    counts.capped = cap.capped
    return features, word_ids, sentence, counts
