"""Extractive question answering (SQuAD): windowing, span labels, span decoding and the SQuAD metric.

Pure library code (no Lightning, no torch): the QA data module calls :func:`prepare_qa_features` once,
the LightningModule collects start/end logits per feature *with the feature's index* and calls
:func:`postprocess_qa_predictions` on whatever arrived, then :func:`squad_scores`.

Vocabulary used throughout:

- an **example** is one question with its context (a SQuAD ``qas`` entry);
- a **feature** is one window of it: ``[CLS] question [SEP] context[ws:we] [SEP]``;
- **context tokens** are the tokens of the whole context (tokenized once, with character offsets into the
  *original* context string); ``ws``/``we`` index them (``we`` exclusive);
- **positions** index a feature's ``input_ids``.

Windowing is the one of Hugging Face ``run_qa.py`` (``truncation="only_second"``, ``stride=doc_stride``,
``return_overflowing_tokens=True``), rebuilt on ``tokenizers`` so that each distinct context is tokenized
once and windows are cheap slices (see :func:`window_bounds` for the exact stride rule).

SQuAD v1.1 decoding always returns a span. SQuAD 2.0 (``task=squad_v2``): ``is_impossible`` questions (and
windows without the answer) are trained towards ``[CLS]``; :func:`postprocess_qa_predictions_v2` answers ""
when the null score beats the best span by more than a threshold, and :func:`squad_v2_scores` is the official
v2 metric, including the best threshold on the data.
"""

from __future__ import annotations

import bisect
import collections
import re
import string
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tokenizers import Tokenizer

__all__ = [
    "QADataError",
    "QAExample",
    "QAFeatures",
    "QASpan",
    "best_spans",
    "normalize_answer",
    "null_scores",
    "postprocess_qa_predictions",
    "postprocess_qa_predictions_v2",
    "prepare_qa_features",
    "squad_examples",
    "squad_references",
    "squad_scores",
    "squad_v2_scores",
    "validate_example",
    "window_bounds",
]


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


def squad_examples(squad: Mapping[str, Any]) -> list[QAExample]:
    """Flatten a parsed SQuAD JSON file (``{"data": [{"paragraphs": [{"context", "qas"}]}]}``)."""
    examples = []
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                examples.append(QAExample(
                    id=str(qa["id"]),
                    question=qa["question"],
                    context=paragraph["context"],
                    answers=[{"text": a["text"], "answer_start": a["answer_start"]} for a in qa["answers"]],
                    is_impossible=bool(qa.get("is_impossible", False)),
                ))
    return examples


def squad_references(examples: Sequence[QAExample]) -> dict[str, list[str]]:
    """Gold answer texts per example id, the ``references`` argument of :func:`squad_scores`."""
    return {ex.id: [a["text"] for a in ex.answers] for ex in examples}


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


def window_bounds(num_tokens: int, max_window: int, doc_stride: int) -> list[tuple[int, int]]:
    """Context token windows ``[(ws, we), ...]`` exactly as Hugging Face overflowing truncation cuts them.

    ``doc_stride`` is the number of context tokens that consecutive windows **share** (the
    ``stride`` of HF tokenizers' ``truncation`` with ``return_overflowing_tokens=True``; not the step).
    Windows start at ``0, step, 2*step, ...`` with ``step = max_window - doc_stride``, each holds
    ``min(max_window, num_tokens - ws)`` tokens, and the last one is the first that reaches the end of
    the context (``tokenizers`` ``Encoding::truncate``). So ``n`` tokens give
    ``1 + ceil(max(0, n - max_window) / step)`` windows, and every token is in at least one window.
    """
    if max_window <= doc_stride:
        raise ValueError(
            f"the context window holds {max_window} tokens but doc_stride is {doc_stride}: windows would "
            "not advance. Lower data.doc_stride or data.max_query_length, or raise data.max_seq_length"
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
      context tokens inside ``input_ids[i]`` (``context_start = len(question) + 2``);
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


def prepare_qa_features(
    examples: Sequence[QAExample],
    tokenizer: Tokenizer,
    *,
    cls_id: int,
    sep_id: int,
    train: bool,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
) -> QAFeatures:
    """Cut every example into ``[CLS] question [SEP] window [SEP]`` features.

    The question keeps its first ``max_query_length`` tokens (as original BERT); the context is tokenized
    once per distinct context string (SQuAD has ~5 questions per passage) with
    ``encode_batch(..., add_special_tokens=False)`` and cut into windows of at most
    ``max_seq_length - len(question) - 3`` tokens overlapping by ``doc_stride`` tokens
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
    if max_seq_length - max_query_length - 3 <= doc_stride:
        raise ValueError(
            f"data.doc_stride {doc_stride} must be smaller than the smallest context window, "
            f"max_seq_length - max_query_length - 3 = {max_seq_length - max_query_length - 3}: lower "
            "data.doc_stride or data.max_query_length, or raise data.max_seq_length"
        )
    for ex in examples:
        validate_example(ex, train)

    # Each distinct context once (one passage serves several questions).
    context_slot: dict[str, int] = {}
    for ex in examples:
        context_slot.setdefault(ex.context, len(context_slot))
    contexts: list[_Context] = []
    for enc in tokenizer.encode_batch(list(context_slot), add_special_tokens=False):
        offsets = np.asarray(enc.offsets, dtype=np.int32).reshape(-1, 2)  # (n, 2)
        contexts.append(_Context(np.asarray(enc.ids, dtype=np.int32), offsets,
                                 offsets[:, 0].tolist(), offsets[:, 1].tolist()))
    questions = tokenizer.encode_batch([ex.question for ex in examples], add_special_tokens=False)

    out = QAFeatures()
    if train:
        out.start_positions, out.end_positions = [], []
    cls_arr, sep_arr = np.array([cls_id], dtype=np.int32), np.array([sep_id], dtype=np.int32)
    for ex_index, (ex, q_enc) in enumerate(zip(examples, questions)):
        ctx = contexts[context_slot[ex.context]]
        n_ctx = len(ctx.ids)
        if n_ctx == 0:
            raise QADataError(
                f"QA example {ex.id!r}: the context yields no token (only characters the normalizer "
                "deletes); fix the passage or remove the example"
            )
        q_ids = np.asarray(q_enc.ids[:max_query_length], dtype=np.int32)
        head = np.concatenate((cls_arr, q_ids, sep_arr))  # [CLS] q [SEP]
        c0 = len(head)
        span = None
        if train and not ex.is_impossible and ex.answers:
            span = _answer_token_span(ex, ctx)
        for ws, we in window_bounds(n_ctx, max_seq_length - c0 - 1, doc_stride):
            length = c0 + (we - ws) + 1
            out.input_ids.append(np.concatenate((head, ctx.ids[ws:we], sep_arr)))
            types = np.ones(length, dtype=np.int8)
            types[:c0] = 0
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
    return out


# --------------------------------------------------------------------------------------------------------
# Span decoding


@dataclass(frozen=True)
class QASpan:
    """The chosen answer of one example: its text, ``start_logit + end_logit``, and where it came from."""

    text: str
    score: float
    start_char: int
    end_char: int
    feature_index: int
    start_position: int
    end_position: int


def _max_context_mask(features: QAFeatures, feature: int, siblings: Sequence[int]) -> np.ndarray:
    """(W,) bool over the window's context tokens: True where this window gives the token most context.

    BERT's ``_check_is_max_context``: a token's score in a window is ``min(left, right) + 0.01 * length``
    (tokens of context on each side inside the window); the first window with the best score owns it.
    """
    ws = features.window_start[feature]
    width = features.context_end[feature] - features.context_start[feature]
    tokens = np.arange(ws, ws + width)  # (W,) context token indices
    best = np.full(width, -np.inf)
    owner = np.full(width, -1)
    for j in siblings:
        js = features.window_start[j]
        jw = features.context_end[j] - features.context_start[j]
        inside = (tokens >= js) & (tokens < js + jw)
        score = np.minimum(tokens - js, js + jw - 1 - tokens) + 0.01 * jw
        better = inside & (score > best)
        best[better], owner[better] = score[better], j
    return owner == feature


def _extend_combining(context: str, end: int) -> int:
    # tokenizers' offsets stop before trailing combining marks of decomposed text ("cafe\u0301"): keep
    # them, they belong to the word's last letter (and to the gold answer).
    while end < len(context) and unicodedata.category(context[end]) == "Mn":
        end += 1
    return end


def best_spans(
    examples: Sequence[QAExample],
    features: QAFeatures,
    start_logits: Sequence[Any] | np.ndarray,
    end_logits: Sequence[Any] | np.ndarray,
    feature_indices: Sequence[int] | None = None,
    *,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    use_max_context: bool = False,
) -> dict[str, QASpan]:
    """Best valid span per example over all of its windows whose logits arrived.

    ``start_logits[k]`` / ``end_logits[k]``: (T,) scores of feature ``feature_indices[k]`` (default:
    feature ``k``); rows may be longer than the feature (batch padding is ignored), and a (K, T) array
    works as well (numpy, lists, or float32/float64 CPU tensors: call ``.float().cpu()`` on bf16 ones). Only some features may arrive (Lightning's sanity check, ``limit_val_batches``, a
    partial gather): examples none of whose features arrived are **left out** of the result; a feature
    that arrives twice (DDP sampler padding) changes nothing.

    Per window the candidates are the ``n_best_size`` best start and the ``n_best_size`` best end
    positions *among the window's context positions* (so never the question, ``[CLS]`` or ``[SEP]``;
    ``run_qa.py`` takes the top n over all positions and then drops those, which can leave fewer
    candidates); a pair is valid when ``end >= start`` and ``end - start + 1 <= max_answer_length``, and
    scores ``start_logit + end_logit``. With ``use_max_context`` a start token must also be in the window
    where it has the most context (original BERT; ``run_qa.py`` does not check it). The best score over
    all windows wins (the first one on ties); its text is ``context[start_char:end_char]`` of the
    original context string.
    """
    if feature_indices is None:
        feature_indices = range(len(start_logits))
    if not (len(feature_indices) == len(start_logits) == len(end_logits)):
        raise ValueError(
            f"feature_indices ({len(feature_indices)}), start_logits ({len(start_logits)}) and end_logits "
            f"({len(end_logits)}) must be aligned: one row of logits per collected feature index"
        )
    if n_best_size < 1 or max_answer_length < 1:
        raise ValueError(f"n_best_size ({n_best_size}) and max_answer_length ({max_answer_length}) must be >= 1")
    siblings = features.features_of() if use_max_context else {}
    best: dict[int, tuple[float, int, int, int]] = {}  # example index -> (score, feature, start pos, end pos)
    for k, f in enumerate(feature_indices):
        f = int(f)
        cs, ce = features.context_start[f], features.context_end[f]
        s_row = np.asarray(start_logits[k], dtype=np.float64).reshape(-1)
        e_row = np.asarray(end_logits[k], dtype=np.float64).reshape(-1)
        if min(len(s_row), len(e_row)) < ce:
            raise ValueError(
                f"feature {f} has {ce} positions up to its last context token but its logits row holds "
                f"{min(len(s_row), len(e_row))}: pass one full row of logits per feature"
            )
        s, e = s_row[cs:ce], e_row[cs:ce]  # (W,) context positions only
        s_top = _top_k(s, n_best_size)
        e_top = _top_k(e, n_best_size)
        length = e_top[None, :] - s_top[:, None] + 1  # (S, E)
        valid = (length >= 1) & (length <= max_answer_length)
        if use_max_context:
            owned = _max_context_mask(features, f, siblings[features.example_index[f]])
            valid &= owned[s_top][:, None]
        if not valid.any():
            continue
        scores = np.where(valid, s[s_top][:, None] + e[e_top][None, :], -np.inf)
        i, j = np.unravel_index(int(np.argmax(scores)), scores.shape)
        score = float(scores[i, j])
        ex = features.example_index[f]
        if ex not in best or score > best[ex][0]:
            best[ex] = (score, f, cs + int(s_top[i]), cs + int(e_top[j]))

    spans = {}
    for ex_index, (score, f, sp, ep) in best.items():
        context = examples[ex_index].context
        start_char = int(features.offsets[f][sp, 0])
        end_char = _extend_combining(context, int(features.offsets[f][ep, 1]))
        spans[examples[ex_index].id] = QASpan(context[start_char:end_char], score, start_char, end_char, f, sp, ep)
    return spans


def _top_k(x: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest entries of ``x`` (all of them when ``len(x) <= k``), unordered."""
    if len(x) <= k:
        return np.arange(len(x))
    return np.argpartition(-x, k - 1)[:k]


def postprocess_qa_predictions(
    examples: Sequence[QAExample],
    features: QAFeatures,
    start_logits: Sequence[Any] | np.ndarray,
    end_logits: Sequence[Any] | np.ndarray,
    feature_indices: Sequence[int] | None = None,
    *,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    use_max_context: bool = False,
) -> dict[str, str]:
    """Predicted answer text per example id (``id -> text``); see :func:`best_spans` for the rules.

    Examples none of whose features arrived are not in the result (:func:`squad_scores` counts them as
    wrong; score only the arrived ones with ``{k: refs[k] for k in predictions}``).
    """
    spans = best_spans(examples, features, start_logits, end_logits, feature_indices,
                       n_best_size=n_best_size, max_answer_length=max_answer_length,
                       use_max_context=use_max_context)
    return {qid: span.text for qid, span in spans.items()}


# --------------------------------------------------------------------------------------------------------
# SQuAD v1.1 metric (the official evaluate-v1.1.py)

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace (official v1.1)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _f1(prediction: str, gold: str) -> float:
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """SQuAD v1.1 ``{"exact_match", "f1"}`` in percent (0-100), each the max over an example's gold answers.

    The denominator is ``len(references)``: a referenced id without prediction scores 0 (as the official
    script); predictions for ids outside ``references`` are ignored. No references gives 0.0 for both.
    """
    if not references:
        return {"exact_match": 0.0, "f1": 0.0}
    exact = f1 = 0.0
    for qid, golds in references.items():
        if qid not in predictions or not golds:
            continue
        pred = predictions[qid]
        exact += max(float(normalize_answer(pred) == normalize_answer(g)) for g in golds)
        f1 += max(_f1(pred, g) for g in golds)
    return {"exact_match": 100.0 * exact / len(references), "f1": 100.0 * f1 / len(references)}


# --------------------------------------------------------------------------------------------------------
# SQuAD v2.0: the null answer, and the official evaluate-v2.0.py metric


def null_scores(
    features: QAFeatures,
    start_logits: Sequence[Any] | np.ndarray,
    end_logits: Sequence[Any] | np.ndarray,
    feature_indices: Sequence[int] | None = None,
) -> dict[int, float]:
    """Example index → its null ("no answer") score: the smallest ``start_logit[CLS] + end_logit[CLS]`` over
    its windows that arrived (BERT's ``run_squad.py`` and ``run_qa.py`` take the minimum over windows)."""
    if feature_indices is None:
        feature_indices = range(len(start_logits))
    out: dict[int, float] = {}
    for k, f in enumerate(feature_indices):
        ex = features.example_index[int(f)]
        score = float(np.asarray(start_logits[k]).reshape(-1)[0]) + float(np.asarray(end_logits[k]).reshape(-1)[0])
        out[ex] = min(score, out.get(ex, np.inf))
    return out


def postprocess_qa_predictions_v2(
    examples: Sequence[QAExample],
    features: QAFeatures,
    start_logits: Sequence[Any] | np.ndarray,
    end_logits: Sequence[Any] | np.ndarray,
    feature_indices: Sequence[int] | None = None,
    *,
    null_score_diff_threshold: float = 0.0,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    use_max_context: bool = False,
) -> tuple[dict[str, str], dict[str, float]]:
    """SQuAD 2.0 answers: ``(id → text or "" for no answer, id → null score minus best span score)``.

    As BERT's ``run_squad.py``: an example answers "" when ``null score - best span score`` exceeds
    ``null_score_diff_threshold``, else the best span of :func:`best_spans`; an example without any valid span
    answers "". The differences are the official script's ``--na-prob-file`` values (larger = more likely
    unanswerable), from which :func:`squad_v2_scores` finds the best threshold. Every example with at least
    one arrived window is in both results.
    """
    if feature_indices is None:
        feature_indices = range(len(start_logits))
    spans = best_spans(examples, features, start_logits, end_logits, feature_indices, n_best_size=n_best_size,
                       max_answer_length=max_answer_length, use_max_context=use_max_context)
    predictions, diffs = {}, {}
    for ex_index, null in null_scores(features, start_logits, end_logits, feature_indices).items():
        qid = examples[ex_index].id
        span = spans.get(qid)
        diff = null - span.score if span is not None else np.inf
        diffs[qid] = float(min(diff, 1e9))  # finite: it goes to a JSON file
        predictions[qid] = "" if span is None or diff > null_score_diff_threshold else span.text
    return predictions, diffs


def _v2_tokens(s: str) -> list[str]:
    return normalize_answer(s).split() if s else []


def _v2_exact(gold: str, pred: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(pred))


def _v2_f1(gold: str, pred: str) -> float:
    gold_toks, pred_toks = _v2_tokens(gold), _v2_tokens(pred)
    if not gold_toks or not pred_toks:  # no-answer on either side: 1 when both are empty, else 0
        return float(gold_toks == pred_toks)
    same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_toks), same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def _best_threshold(predictions: Mapping[str, str], scores: Mapping[str, float], na_probs: Mapping[str, float],
                    has_ans: Mapping[str, bool]) -> tuple[float, float]:
    # evaluate-v2.0.py find_best_thresh: start from "no answer everywhere", then hand each question its
    # prediction in increasing na_prob order; keep the best running total and the na_prob where it was reached.
    # One change: when "no answer everywhere" stays best, the script reports 0.0, which (for probabilities)
    # means "every question above 0"; with null-score differences, which can be negative, 0.0 would not
    # reproduce it, so the threshold reported is then one below the smallest difference.
    best = current = sum(1 for q in scores if not has_ans[q])
    scored = [na_probs[q] for q in na_probs if q in scores]
    best_thresh = min(scored) - 1.0 if scored else 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in scores:
            continue
        if has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if predictions[qid] else 0
        current += diff
        if current > best:
            best, best_thresh = current, na_probs[qid]
    return 100.0 * best / len(scores), float(best_thresh)


def squad_v2_scores(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]],
                    na_probs: Mapping[str, float] | None = None) -> dict[str, float]:
    """The official SQuAD 2.0 metric (``evaluate-v2.0.py``), in percent, on the questions in ``references``.

    ``references``: id → gold answer texts (empty for an unanswerable question); ``predictions``: id → text,
    "" meaning no answer. Gold answers that normalize to nothing are dropped, and a question left without any
    counts as unanswerable (gold ""); exact match and F1 are maxima over the golds; F1 with no tokens on
    either side is 1 when both are empty, else 0. Returns ``exact_match`` (the script's ``exact``), ``f1``,
    ``total``; ``HasAns_*`` / ``NoAns_*`` (exact, f1, total) when such questions exist; and, with ``na_probs``
    (id → the script's --na-prob-file values), ``best_exact``, ``best_exact_thresh``, ``best_f1``,
    ``best_f1_thresh`` (the script's, except that when answering nothing is best the threshold reported is
    below every na_prob, so that it reproduces that choice). As without --na-prob-file, the main figures
    score the predictions as given.
    A referenced id without prediction scores 0 (unanswerable questions: as if answered).
    """
    exact, f1, has_ans = {}, {}, {}
    for qid, golds in references.items():
        golds = [g for g in golds if normalize_answer(g)] or [""]
        has_ans[qid] = golds != [""]
        pred = predictions.get(qid)
        if pred is None:
            exact[qid], f1[qid] = 0.0, 0.0
            continue
        exact[qid] = float(max(_v2_exact(g, pred) for g in golds))
        f1[qid] = max(_v2_f1(g, pred) for g in golds)
    if not references:
        return {"exact_match": 0.0, "f1": 0.0, "total": 0}

    def block(qids: list[str]) -> tuple[float, float]:
        return 100.0 * sum(exact[q] for q in qids) / len(qids), 100.0 * sum(f1[q] for q in qids) / len(qids)

    out: dict[str, float] = {}
    out["exact_match"], out["f1"] = block(list(references))
    out["total"] = len(references)
    for name, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in references if has_ans[q] is wanted]
        if qids:
            out[f"{name}_exact"], out[f"{name}_f1"] = block(qids)
            out[f"{name}_total"] = len(qids)
    if na_probs is not None:
        preds = {q: predictions.get(q, "") for q in references}
        probs = {q: na_probs.get(q, 0.0) for q in references}
        out["best_exact"], out["best_exact_thresh"] = _best_threshold(preds, exact, probs, has_ans)
        out["best_f1"], out["best_f1_thresh"] = _best_threshold(preds, f1, probs, has_ans)
    return out
