"""Cross-encoder reranker (``task=rerank``: ``task.family=sequence`` with ``task.rerank=true``): the sequence
head with one output scores a (query, passage) pair; the loss is binary cross-entropy with logits on the pair's
relevance in [0, 1] (sentence-transformers' CrossEncoder default), or, with ``task.rerank_loss=listwise``, the
softmax cross-entropy over a query's positive and its negatives scored together (a training batch holds (B, C)
groups, the positive first: :func:`bertlab.data.rerank.listwise_groups`; the localized contrastive loss rerankers
are commonly trained with on mined hard negatives). Validation reranks each query's candidates
(:mod:`bertlab.data.rerank`) by the scores and computes nDCG@10, MRR@10 and Recall@1/10/100 with ir_measures
(:func:`bertlab.tasks.retrieval.run_scores`) for the reranked order and, as ``first_stage_<measure>``, for the
first stage's order; ``loss`` is the BCE over every candidate (relevant: 1, the others: 0).

The score is the raw logit: what a ``sentence_transformers.CrossEncoder`` loading the export returns (the export
names the identity as its activation), and what orders the candidates.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
import torch.nn.functional as F

from bertlab.tasks.retrieval import RETRIEVAL_MEASURES, run_scores
from bertlab.tasks.sequence import SequenceFamily

log = logging.getLogger(__name__)


def rerank_measures() -> dict[str, str]:
    """The logged ranking measures and their better direction: reranked, then the first stage's."""
    return {**{name: "max" for name in RETRIEVAL_MEASURES}, **{f"first_stage_{n}": "max" for n in RETRIEVAL_MEASURES}}


def ranked_run(query_ids: list[str], passage_ids: list[str], pair_query, pair_passage,
               scores) -> dict[str, dict[str, float]]:
    """{query id: {passage id: score}} of the pairs scored (a score of NaN: the pair was not scored)."""
    run: dict[str, dict[str, float]] = {}
    for q, p, s in zip(pair_query, pair_passage, scores):
        if not np.isnan(s):
            run.setdefault(query_ids[q], {})[passage_ids[p]] = float(s)
    return run


class RerankFamily(SequenceFamily):
    @classmethod
    def logged_metrics(cls, task, data):
        return {"loss": "min", **rerank_measures()}

    def loss(self, logits, batch):
        if batch["input_ids"].dim() == 3:  # listwise: (B, C) groups, the positive first (bertlab.data.rerank)
            scores = logits.float().view(batch["input_ids"].shape[:2])
            scores = scores.masked_fill(~batch["choice_mask"], float("-inf"))  # a group with fewer negatives
            return F.cross_entropy(scores, batch["labels"])
        target = batch["labels"].float()
        return F.binary_cross_entropy_with_logits(logits.float().squeeze(-1), target)

    def eval_step(self, logits, batch, state):
        scores = logits.float().squeeze(-1)
        per = F.binary_cross_entropy_with_logits(scores, batch["labels"].float(), reduction="none")
        state.add_loss(per.sum(), per.numel())
        state.index.append(batch["index"].cpu())
        state.outputs.append(scores.cpu())

    def score(self, index, outputs, split, loss, extra):
        data = split.eval_data
        n = len(split.features)
        scores = np.full(n, np.nan)
        if outputs:
            scores[index] = torch.cat(outputs).numpy()
        if np.isnan(scores).any():
            log.warning("%s: %d of %d (query, candidate) pairs were scored (a limited validation pass): ranked "
                        "over those only", split.name, int((~np.isnan(scores)).sum()), n)
        after = ranked_run(data.query_ids, data.passage_ids, data.pair_query, data.pair_passage, scores)
        first = np.where(np.isnan(scores), np.nan, np.asarray(data.first_stage, dtype=np.float64))
        before = ranked_run(data.query_ids, data.passage_ids, data.pair_query, data.pair_passage, first)
        queries = [q for q in data.qrels if q in after]
        if not queries:
            return {"loss": loss, **{name: float("nan") for name in rerank_measures()}, "num_examples": 0}
        qrels = {q: data.qrels[q] for q in queries}
        reranked = run_scores(qrels, {q: after[q] for q in queries})
        first_stage = run_scores(qrels, {q: before[q] for q in queries})
        return {"loss": loss, **reranked, **{f"first_stage_{k}": v for k, v in first_stage.items()},
                "num_examples": len(queries)}
