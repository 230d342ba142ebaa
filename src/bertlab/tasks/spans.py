"""Extractive QA's span decoding: the best answer span of each example over its windows' start and end logits,
and SQuAD 2.0's null answer. Plain numpy, no torch: prediction from an ONNX export runs it without loading torch.
The SQuAD metrics and the QA family are :mod:`bertlab.tasks.qa`."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertlab.data.qa import QAExample, QAFeatures
from bertlab.data.windows import max_context_owner

__all__ = ["QASpan", "best_spans", "null_answers", "null_scores", "postprocess_qa_predictions",
           "postprocess_qa_predictions_v2"]


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

    The shared rule of :func:`bertlab.data.windows.max_context_owner` (BERT's ``_check_is_max_context``)
    over the windows of one example.
    """
    bounds = [(features.window_start[j],
               features.window_start[j] + features.context_end[j] - features.context_start[j]) for j in siblings]
    owner = max_context_owner(bounds, max(we for _, we in bounds))
    mine = list(siblings).index(feature)
    ws, we = bounds[mine]
    return owner[ws:we] == mine


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
    **rules: Any,
) -> dict[str, str]:
    """Predicted answer text per example id (``id -> text``): the text of :func:`best_spans`, whose keywords
    (``n_best_size``, ``max_answer_length``, ``use_max_context``) ``rules`` are, with its defaults.

    Examples none of whose features arrived are not in the result (:func:`squad_scores` counts them as
    wrong; score only the arrived ones with ``{k: refs[k] for k in predictions}``).
    """
    spans = best_spans(examples, features, start_logits, end_logits, feature_indices, **rules)
    return {qid: span.text for qid, span in spans.items()}


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


def null_answers(
    examples: Sequence[QAExample],
    spans: dict[str, QASpan],
    nulls: dict[int, float],
    null_score_diff_threshold: float = 0.0,
) -> tuple[dict[str, str], dict[str, float]]:
    """SQuAD 2.0's choice between the best span (:func:`best_spans`) and no answer, per example of ``nulls``
    (:func:`null_scores`): ``(id → text or "" for no answer, id → null score minus best span score)``.

    As BERT's ``run_squad.py``: an example answers "" when ``null score - best span score`` exceeds
    ``null_score_diff_threshold``, else its best span; an example without any valid span answers "". The
    differences are the official script's ``--na-prob-file`` values (larger = more likely unanswerable), from
    which :func:`squad_v2_scores` finds the best threshold.
    """
    predictions, diffs = {}, {}
    for ex_index, null in nulls.items():
        qid = examples[ex_index].id
        span = spans.get(qid)
        diff = null - span.score if span is not None else np.inf
        diffs[qid] = float(min(diff, 1e9))  # finite: it goes to a JSON file
        predictions[qid] = "" if span is None or diff > null_score_diff_threshold else span.text
    return predictions, diffs


def postprocess_qa_predictions_v2(
    examples: Sequence[QAExample],
    features: QAFeatures,
    start_logits: Sequence[Any] | np.ndarray,
    end_logits: Sequence[Any] | np.ndarray,
    feature_indices: Sequence[int] | None = None,
    *,
    null_score_diff_threshold: float = 0.0,
    **rules: Any,
) -> tuple[dict[str, str], dict[str, float]]:
    """SQuAD 2.0 answers: :func:`null_answers` over :func:`best_spans` (``rules``: its keywords) and
    :func:`null_scores`. Every example with at least one arrived window is in both results."""
    spans = best_spans(examples, features, start_logits, end_logits, feature_indices, **rules)
    nulls = null_scores(features, start_logits, end_logits, feature_indices)
    return null_answers(examples, spans, nulls, null_score_diff_threshold)
