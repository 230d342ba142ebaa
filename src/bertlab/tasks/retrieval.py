"""Exact dense retrieval and its scores: cosine search by blocked matrix products, then nDCG@10, MRR@10 and
Recall@1/10/100 computed by ``ir_measures`` (pytrec_eval underneath), never by hand here.

pytrec_eval averages over the queries of the *run* only: a query missing from the run would silently drop
out of the mean. Every query therefore gets a run entry (its top-k, which is never empty), and a query whose
relevant passages are absent from the corpus, or that has none, is an error rather than a quiet zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bertlab.data.readers import DataError

# metric name (logged as val/<name>) → ir_measures measure (its own notation)
RETRIEVAL_MEASURES = {"ndcg_at_10": "nDCG@10", "mrr_at_10": "RR@10", "recall_at_1": "R@1",
                      "recall_at_10": "R@10", "recall_at_100": "R@100"}
TOP_K = 100


def search(queries: torch.Tensor, corpus: torch.Tensor, top_k: int = TOP_K, block: int = 1024,
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``top_k`` corpus rows of highest cosine similarity for each query: (scores, indices), (Q, k) each,
    best first. Exact: the (Q, P) similarity matrix is computed ``block`` queries at a time."""
    if corpus.shape[0] == 0:
        raise DataError("retrieval evaluation: the corpus is empty")
    k = min(top_k, corpus.shape[0])
    corpus = F.normalize(corpus.float(), dim=-1)
    scores, indices = [], []
    for start in range(0, queries.shape[0], block):
        q = F.normalize(queries[start:start + block].float(), dim=-1)
        s, i = (q @ corpus.T).topk(k, dim=1)
        scores.append(s)
        indices.append(i)
    if not scores:
        return torch.zeros((0, k)), torch.zeros((0, k), dtype=torch.long)
    return torch.cat(scores), torch.cat(indices)


def retrieval_scores(scores: torch.Tensor, indices: torch.Tensor, relevant: list[list[int]],
                     passage_ids: list[str], query_ids: list[str] | None = None) -> dict[str, float]:
    """The measures of :data:`RETRIEVAL_MEASURES` for a run (``scores`` / ``indices``: each query's retrieved
    corpus positions, best first) against ``relevant`` (each query's relevant corpus positions), by ir_measures.
    ``passage_ids`` name the corpus positions; ``query_ids`` the queries (default ``q<k>``)."""
    query_ids = query_ids or [f"q{k}" for k in range(len(relevant))]
    if len(query_ids) != len(relevant) or scores.shape[0] != len(relevant):
        raise ValueError("retrieval_scores: one run row and one relevance list per query")
    qrels, run = {}, {}
    for q, (qid, rel) in enumerate(zip(query_ids, relevant)):
        if not rel:
            raise DataError(f"retrieval evaluation: query {qid} has no relevant passage; every query needs one")
        missing = [p for p in rel if not 0 <= p < len(passage_ids)]
        if missing:
            raise DataError(f"retrieval evaluation: query {qid}'s relevant passage(s) {missing} are not in the "
                            f"corpus of {len(passage_ids)} passages")
        qrels[qid] = {passage_ids[p]: 1 for p in rel}
        run[qid] = {passage_ids[int(i)]: float(s) for s, i in zip(scores[q].tolist(), indices[q].tolist())}
    return run_scores(qrels, run)


def run_scores(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    """The measures of :data:`RETRIEVAL_MEASURES`, by ir_measures, of ``run`` ({query id: {doc id: score}})
    against ``qrels`` ({query id: {doc id: relevance}}, graded: a relevance above 0 is relevant). The mean is
    over the queries of the run: the caller decides which queries are scored."""
    import ir_measures

    measures = [ir_measures.parse_measure(m) for m in RETRIEVAL_MEASURES.values()]
    values = ir_measures.calc_aggregate(measures, qrels, run)
    return {name: float(values[ir_measures.parse_measure(m)]) for name, m in RETRIEVAL_MEASURES.items()}
