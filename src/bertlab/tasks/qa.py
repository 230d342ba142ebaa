"""Extractive question answering (SQuAD): span decoding (:mod:`bertlab.tasks.spans`, re-exported here), the SQuAD
metrics, and the QA family.

Pure library code apart from the family (no Lightning): the data module prepares windows once
(:mod:`bertlab.data.qa`), the LightningModule collects start/end logits per feature *with the feature's
index*, and :func:`postprocess_qa_predictions` decodes whatever arrived, scored by :func:`squad_scores`.

SQuAD v1.1 decoding always returns a span. SQuAD 2.0 (``task=squad_v2``): :func:`postprocess_qa_predictions_v2`
answers "" when the null score beats the best span by more than a threshold, and :func:`squad_v2_scores` is
the official v2 metric, including the best threshold on the data.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

import torch.nn.functional as F

from bertlab.data.qa import QAExample
from bertlab.models.heads import SpanHead
from bertlab.tasks.base import Evaluation, Family
from bertlab.tasks.spans import (
    QASpan,
    best_spans,
    null_scores,
    postprocess_qa_predictions,
    postprocess_qa_predictions_v2,
)

__all__ = [
    "QASpan",
    "best_spans",
    "normalize_answer",
    "null_scores",
    "postprocess_qa_predictions",
    "postprocess_qa_predictions_v2",
    "squad_references",
    "squad_scores",
    "squad_v2_scores",
    "QAFamily",
]


def squad_references(examples: Sequence[QAExample]) -> dict[str, list[str]]:
    """Gold answer texts per example id, the ``references`` argument of :func:`squad_scores`."""
    return {ex.id: [a["text"] for a in ex.answers] for ex in examples}


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


class QAFamily(Family):
    head_kind = "span"

    @classmethod
    def logged_metrics(cls, task, data):
        scores = {"loss": "min", "exact_match": "max", "f1": "max"}
        if data.get("version_2_with_negative"):  # squad_v2_scores (HasAns/NoAns: when the split has such questions)
            scores.update({f"{p}_{m}": "max" for p in ("HasAns", "NoAns") for m in ("exact", "f1")})
            scores.update({f"{p}_total": None for p in ("HasAns", "NoAns")})
            scores.update({"best_exact": "max", "best_f1": "max", "best_exact_thresh": None,
                           "best_f1_thresh": None})
        return scores

    def build_head(self, config, head, word_embeddings):
        return SpanHead(config, head)

    def loss(self, logits, batch):
        # Mean of start and end cross-entropies, as BertForQuestionAnswering, over the real tokens only: with
        # dynamic padding the pad positions of a window depend on its batch, so counting them in the softmax
        # would make the loss (and val/loss) depend on the batch size and the world size.
        t = logits.shape[1]
        start = batch["start_positions"].clamp(0, t - 1)
        end = batch["end_positions"].clamp(0, t - 1)
        if "attention_mask" in batch:
            logits = logits.masked_fill(~batch["attention_mask"].bool()[..., None], -1e4)  # float32 logits
        return (F.cross_entropy(logits[..., 0], start) + F.cross_entropy(logits[..., 1], end)) / 2

    def eval_step(self, logits, batch, state):
        if "start_positions" in batch:  # labelled evaluation windows carry the first answer's positions
            state.add_loss(self.loss(logits, batch) * len(logits), len(logits))
        mask = batch["attention_mask"].bool()
        logits = logits.masked_fill(~mask[..., None], -1e4).cpu()
        lengths = mask.sum(1).cpu()
        state.index.append(batch["index"].cpu())
        state.outputs.extend(logits[i, : lengths[i]].numpy() for i in range(len(logits)))

    def score(self, index, outputs, split, loss, extra):
        return self.evaluate(index, outputs, split, loss, extra).scores

    def evaluate(self, index, outputs, split, loss, extra) -> Evaluation:
        """The SQuAD scores and the predicted answer text per example id."""
        examples, features = split.eval_data.examples, split.eval_data.features
        if getattr(self.data_cfg, "version_2_with_negative", False):
            return self._evaluate_v2(index, outputs, examples, features, loss)
        predictions = postprocess_qa_predictions(
            examples, features, [o[:, 0] for o in outputs], [o[:, 1] for o in outputs],
            feature_indices=index.tolist(), n_best_size=self.data_cfg.n_best_size,
            max_answer_length=self.data_cfg.max_answer_length, use_max_context=True,
        )
        references = squad_references(examples)
        arrived = {k: references[k] for k in predictions}
        scores = squad_scores(predictions, arrived)
        return Evaluation({"loss": loss, **scores, "num_examples": len(predictions)}, predictions)

    def _evaluate_v2(self, index, outputs, examples, features, loss) -> Evaluation:
        """SQuAD 2.0: "" when the null score wins by more than data.null_score_diff_threshold; the official v2
        metrics, with the best threshold on this split from the null-score differences."""
        cfg = self.data_cfg
        predictions, diffs = postprocess_qa_predictions_v2(
            examples, features, [o[:, 0] for o in outputs], [o[:, 1] for o in outputs],
            feature_indices=index.tolist(), null_score_diff_threshold=cfg.null_score_diff_threshold,
            n_best_size=cfg.n_best_size, max_answer_length=cfg.max_answer_length, use_max_context=True,
        )
        references = squad_references(examples)
        scores = squad_v2_scores(predictions, {k: references[k] for k in predictions}, na_probs=diffs)
        scores.pop("total")
        return Evaluation({"loss": loss, **scores, "num_examples": len(predictions)}, predictions)
