"""Extractive question answering (SQuAD) data: examples, their validation, windowing and span labels.

Vocabulary used throughout:

- an **example** is one question with its context (a SQuAD ``qas`` entry);
- a **feature** is one window of it: ``[CLS] question [SEP] context[ws:we] [SEP]``, or whatever the tokenizer's
  pair template is (RoBERTa: ``<s> question </s></s> context[ws:we] </s>``; :mod:`bertlab.data.templates`);
- **context tokens** are the tokens of the whole context (tokenized once, with character offsets into the
  *original* context string); ``ws``/``we`` index them (``we`` exclusive);
- **positions** index a feature's ``input_ids``.

Windowing is the one of Hugging Face ``run_qa.py`` (``truncation="only_second"``, ``stride=doc_stride``,
``return_overflowing_tokens=True``), rebuilt on ``tokenizers`` so that each distinct context is tokenized
once and windows are cheap slices (see :func:`window_bounds` for the exact stride rule). SQuAD 2.0's
``is_impossible`` questions (and windows without the answer) are labelled with ``[CLS]``.

Decoding spans back to answers and the SQuAD metrics are :mod:`bertlab.tasks.qa`.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from bertlab.data.templates import Template
from bertlab.data.windows import WindowCap, window_bounds  # noqa: F401  (QA's windows are the shared rule)


class QADataError(ValueError):
    """A QA example cannot be used as given; the message names the example id and what to change."""


@dataclass
class QAExample:
    """One question over one context.

    ``answers`` holds ``{"text": str, "answer_start": int}`` dicts, ``answer_start`` being a character
    index into ``context``. Training uses the first answer; evaluation scores against all of them.
    ``is_impossible`` marks SQuAD 2.0 questions without an answer (trained towards [CLS]).
    """

    id: str
    question: str
    context: str
    answers: list[dict[str, Any]] = field(default_factory=list)
    is_impossible: bool = False


def validate_example(ex: QAExample, train: bool) -> None:
    """Raise :class:`QADataError` when ``ex`` cannot be used; return ``None`` when it can.

    Checked: an empty question or context; in a training set a question with no answer (unless
    ``is_impossible``); every answer's ``text`` must be non-empty and sit at ``answer_start`` in the
    context (the char span is what the start/end labels are computed from). The data module decides
    whether to raise or to skip (``data.on_bad_example``).
    """
    where = f"QA example {ex.id!r}"
    if not ex.context or not ex.context.strip():
        raise QADataError(f"{where}: the context is empty; give it a passage or remove the example")
    if not ex.question or not ex.question.strip():
        raise QADataError(f"{where}: the question is empty; fill it in or remove the example")
    if train and not ex.is_impossible and not ex.answers:
        raise QADataError(
            f"{where}: a training question needs at least one answer; add one, mark it is_impossible "
            "(SQuAD 2.0 data), or set data.on_bad_example=skip"
        )
    for k, answer in enumerate(ex.answers):
        if "text" not in answer or "answer_start" not in answer:
            raise QADataError(f"{where}: answer {k} must have 'text' and 'answer_start', got keys {sorted(answer)}")
        text, start = answer["text"], answer["answer_start"]
        if not isinstance(text, str) or not text.strip():
            raise QADataError(f"{where}: answer {k} has an empty text; fill it in or remove the answer")
        if not isinstance(start, int) or isinstance(start, bool):
            raise QADataError(f"{where}: answer {k} answer_start must be an integer, got {start!r}")
        found = ex.context[start:start + len(text)] if start >= 0 else ""
        if found != text:
            at = ex.context.find(text)
            fix = (f"the text occurs at character {at}: set answer_start to {at}" if at >= 0
                   else "the text does not occur in the context: fix the answer text")
            raise QADataError(
                f"{where}: answer {k} text {text!r} is not at answer_start {start} "
                f"(the context there reads {found!r}); {fix}"
            )


# --------------------------------------------------------------------------------------------------------
# Windowing


@dataclass
class QAFeatures:
    """Windows of QA examples, one entry per feature in every list (the data module's dataset).

    Per feature ``i`` (``T_i`` = its length, at most ``max_seq_length``; no padding here, the collator
    pads dynamically):

    - ``input_ids[i]``: (T_i,) int32, ``[CLS] question [SEP] context[ws:we] [SEP]``;
    - ``token_type_ids[i]``: (T_i,) int8, 0 for ``[CLS] question [SEP]``, 1 for the window and final ``[SEP]``;
    - ``offsets[i]``: (T_i, 2) int32, ``(start_char, end_char)`` into the **original** context string for
      context positions, ``(-1, -1)`` for the question and special tokens;
    - ``example_index[i]``: index of the example in the list given to :func:`prepare_qa_features`;
    - ``context_start[i]``, ``context_end[i]``: positions ``[context_start, context_end)`` of the window's
      context tokens inside ``input_ids[i]`` (BERT: ``context_start = len(question) + 2``);
    - ``window_start[i]``: index of the window's first token among the context tokens (``ws``);
    - ``start_positions[i]``, ``end_positions[i]`` (``train=True`` only, else ``None``): positions of the
      first answer's first and last token when the answer lies entirely inside the window, else ``(0, 0)``
      (``[CLS]``), as in BERT and ``run_qa.py``.
    """

    input_ids: list[np.ndarray] = field(default_factory=list)
    token_type_ids: list[np.ndarray] = field(default_factory=list)
    offsets: list[np.ndarray] = field(default_factory=list)
    example_index: list[int] = field(default_factory=list)
    context_start: list[int] = field(default_factory=list)
    context_end: list[int] = field(default_factory=list)
    window_start: list[int] = field(default_factory=list)
    start_positions: list[int] | None = None
    end_positions: list[int] | None = None
    capped: int = 0  # examples over data.max_windows_per_example, read in their first windows

    def __len__(self) -> int:
        return len(self.input_ids)

    def features_of(self) -> dict[int, list[int]]:
        """Feature indices per example index, in window order."""
        groups: dict[int, list[int]] = collections.defaultdict(list)
        for i, ex in enumerate(self.example_index):
            groups[ex].append(i)
        return dict(groups)


@dataclass
class _Context:
    """A context tokenized once: ids (n,) int32, offsets (n, 2) int32, and the two offset columns as lists."""

    ids: np.ndarray
    offsets: np.ndarray
    starts: list[int]
    ends: list[int]


def _answer_token_span(ex: QAExample, ctx: _Context) -> tuple[int, int] | None:
    """Context token indices (first, last) covering the first answer, or ``None`` when it has no token.

    First token = the first whose end char is past the answer's first non-space char; last token = the
    last that starts before the answer's end (after trailing spaces). For answers that begin and end on
    token boundaries this is the token span ``run_qa.py`` labels; unlike it, an answer ending on the last
    token of a window is labelled correctly (``run_qa.py`` walks into the ``[SEP]``/padding offsets there).
    """
    text, start_char = ex.answers[0]["text"], ex.answers[0]["answer_start"]
    first_char = start_char + (len(text) - len(text.lstrip()))
    end_char = start_char + len(text.rstrip())  # exclusive
    first = bisect.bisect_right(ctx.ends, first_char)
    last = bisect.bisect_left(ctx.starts, end_char) - 1
    if first > last:  # the answer is made of characters the normalizer deletes
        return None
    return first, last


def _encode_chunks(tokenizer: Tokenizer, texts: list[str], chunk: int = 1024) -> list[Any]:
    """The contexts' encodings, ``chunk`` texts a call (a stop signal is answered between calls)."""
    return [enc for start in range(0, len(texts), chunk)
            for enc in tokenizer.encode_batch(texts[start:start + chunk], add_special_tokens=False)]


def prepare_qa_features(
    examples: Sequence[QAExample],
    tokenizer: Tokenizer,
    *,
    cls_id: int | None = None,
    sep_id: int | None = None,
    template: Template | None = None,
    train: bool,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    cap: WindowCap | None = None,
) -> QAFeatures:
    """Cut every example into ``[CLS] question [SEP] window [SEP]`` features (with ``template``, the tokenizer's
    own pair template, e.g. ``<s> question </s></s> window </s>``; without it, BERT's from ``cls_id`` / ``sep_id``).

    The question keeps its first ``max_query_length`` tokens (as original BERT); the context is tokenized
    once per distinct context string (SQuAD has ~5 questions per passage) with
    ``encode_batch(..., add_special_tokens=False)`` and cut into windows of at most
    ``max_seq_length - len(question) - <the pair's special tokens>`` tokens overlapping by ``doc_stride`` tokens
    (:func:`window_bounds`, identical to HF's ``stride``). The special tokens are placed here, so the
    tokenizer's post-processor is not used. ``tokenizer`` must have padding and truncation switched off.

    Every example is checked with :func:`validate_example` first (filter beforehand to skip bad ones);
    a context that yields no token at all is a :class:`QADataError` too. With ``train=True`` each
    feature gets start/end labels (see :class:`QAFeatures`); an answer whose characters all vanish in
    normalization gets ``(0, 0)`` in every window.
    """
    if tokenizer.padding is not None or tokenizer.truncation is not None:
        raise ValueError(
            "the QA tokenizer must not pad or truncate (windows are cut here and batches are padded by the "
            "collator): call tokenizer.no_padding() and tokenizer.no_truncation() after loading it"
        )
    if max_query_length < 1:
        raise ValueError(f"data.max_query_length must be at least 1, got {max_query_length}")
    if template is None:
        if cls_id is None or sep_id is None:
            raise ValueError("prepare_qa_features needs the tokenizer's template (or BERT's cls_id and sep_id)")
        template = Template(prefix=(cls_id,), suffix=(sep_id,), prefix_types=(0,), suffix_types=(0,),
                            pair_prefix=(cls_id,), pair_middle=(sep_id,), pair_suffix=(sep_id,),
                            pair_prefix_types=(0,), pair_middle_types=(0,), pair_suffix_types=(1,), pair_b_type=1)
    specials = template.num_pair  # the pair's special tokens (BERT 3, RoBERTa 4)
    if max_seq_length - max_query_length - specials <= doc_stride:
        raise ValueError(
            f"data.doc_stride {doc_stride} must be smaller than the smallest context window, "
            f"max_seq_length - max_query_length - {specials} = {max_seq_length - max_query_length - specials}: lower "
            "data.doc_stride or data.max_query_length, or raise data.max_seq_length"
        )
    for ex in examples:
        validate_example(ex, train)
    # No context is tokenized past what the cap's windows can hold (bertlab.data.windows.WindowCap); the
    # largest window a context can have (the shortest question) bounds the characters kept.
    cap = cap or WindowCap(None)
    longest = max_seq_length - specials

    # Each distinct context once (one passage serves several questions).
    context_slot: dict[str, int] = {}
    for ex in examples:
        context_slot.setdefault(ex.context, len(context_slot))
    names = {ex.context: f"QA example {ex.id!r}" for ex in reversed(examples)}  # the first question of a context
    texts = [cap.cut(c, longest, doc_stride, names[c]) for c in context_slot]
    contexts: list[_Context] = []
    for enc in _encode_chunks(tokenizer, texts):
        offsets = np.asarray(enc.offsets, dtype=np.int32).reshape(-1, 2)  # (n, 2)
        contexts.append(_Context(np.asarray(enc.ids, dtype=np.int32), offsets,
                                 offsets[:, 0].tolist(), offsets[:, 1].tolist()))
    questions = tokenizer.encode_batch([ex.question for ex in examples], add_special_tokens=False)

    out = QAFeatures()
    if train:
        out.start_positions, out.end_positions = [], []
    prefix, middle, suffix = (np.asarray(part, dtype=np.int32) for part in
                              (template.pair_prefix, template.pair_middle, template.pair_suffix))
    for ex_index, (ex, q_enc) in enumerate(zip(examples, questions)):
        ctx = contexts[context_slot[ex.context]]
        n_ctx = len(ctx.ids)
        if n_ctx == 0:
            raise QADataError(
                f"QA example {ex.id!r}: the context yields no token (only characters the normalizer "
                "deletes); fix the passage or remove the example"
            )
        q_ids = np.asarray(q_enc.ids[:max_query_length], dtype=np.int32)
        head = np.concatenate((prefix, q_ids, middle))  # [CLS] q [SEP] (RoBERTa: <s> q </s></s>)
        head_types = np.asarray([*template.pair_prefix_types, *[template.pair_a_type] * len(q_ids),
                                 *template.pair_middle_types], dtype=np.int8)
        c0 = len(head)
        span = None
        if train and not ex.is_impossible and ex.answers:
            span = _answer_token_span(ex, ctx)
        for ws, we in cap.bounds(n_ctx, max_seq_length - c0 - len(suffix), doc_stride, f"QA example {ex.id!r}"):
            length = c0 + (we - ws) + len(suffix)
            out.input_ids.append(np.concatenate((head, ctx.ids[ws:we], suffix)))
            types = np.full(length, template.pair_b_type, dtype=np.int8)
            types[:c0] = head_types
            types[length - len(suffix):] = template.pair_suffix_types
            out.token_type_ids.append(types)
            offsets = np.full((length, 2), -1, dtype=np.int32)
            offsets[c0:c0 + we - ws] = ctx.offsets[ws:we]
            out.offsets.append(offsets)
            out.example_index.append(ex_index)
            out.context_start.append(c0)
            out.context_end.append(c0 + we - ws)
            out.window_start.append(ws)
            if train:
                if span is not None and ws <= span[0] and span[1] < we:
                    out.start_positions.append(c0 + span[0] - ws)
                    out.end_positions.append(c0 + span[1] - ws)
                else:
                    out.start_positions.append(0)
                    out.end_positions.append(0)
    out.capped = cap.capped
    return out




@dataclass
class QAEvalData:
    """What scoring a QA split needs beyond its features: the examples (gold answers, by id) and the windows
    (where each feature's tokens sit in its context)."""

    examples: list[QAExample]
    features: QAFeatures
