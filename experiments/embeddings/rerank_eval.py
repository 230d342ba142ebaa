"""The reranker measurement's evaluation: each SQuAD dev question's top ``--top-k`` paragraphs retrieved by a
bi-encoder run (evaluate.py's dev set and search), then reranked by a ``task=rerank`` run (the scoring of
``python -m bertlab.retrieve --rerank``); nDCG@10, MRR@10, R@1 and R@10 by ir_measures before and after, over
the same k candidates (with k ≥ 10 the "before" scores are the bi-encoder's own: the measures at 10 read the top
10 only). The results JSON adds the reranker run's training throughput and the mined negatives' record.

    python experiments/embeddings/rerank_eval.py --bi-encoder RUN --reranker RUN --json OUT.json
        [--top-k 20] [--data-dir DATA_DIR] [--batch-size 64] [--max-queries N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluate import DEFAULT_DATA, bertlab_embedder, dev_search, report  # noqa: E402

MEASURES = ("ndcg_at_10", "mrr_at_10", "recall_at_1", "recall_at_10")  # R@100 means nothing over k < 100


def rerank_dev(bi_encoder: Path, reranker: Path, data_dir: Path, top_k: int, batch_size: int,
               max_queries: int | None = None) -> dict[str, Any]:
    import torch

    from bertlab.inference.rerank import load_reranker, rerank
    from bertlab.tasks.retrieval import retrieval_scores

    scorer = load_reranker(reranker, "cpu", batch_size)  # refused before any embedding if it is no reranker
    dev = dev_search(bertlab_embedder(bi_encoder, batch_size), data_dir, max_queries, top_k)
    before = retrieval_scores(dev["scores"], dev["indices"], dev["relevant"], dev["ids"])
    started = time.perf_counter()
    scores, indices = rerank(scorer, dev["questions"], dev["paragraphs"], dev["indices"].numpy(), top_k, batch_size,
                             progress=False)
    seconds = time.perf_counter() - started
    after = retrieval_scores(torch.from_numpy(scores), torch.from_numpy(indices), dev["relevant"], dev["ids"])
    return {"first_stage": {k: before[k] for k in MEASURES}, "reranked": {k: after[k] for k in MEASURES},
            "top_k": int(indices.shape[1]), "queries": len(dev["questions"]), "passages": len(dev["paragraphs"]),
            "pairs_scored": int(indices.size), "embed_s": dev["embed_s"], "rerank_s": round(seconds, 2)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bi-encoder", type=Path, required=True, help="the first stage: a task=embedding run")
    p.add_argument("--reranker", type=Path, required=True, help="a task=rerank run")
    p.add_argument("--top-k", type=int, default=20, help="candidates reranked per question")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-queries", type=int, default=None, help="smoke tests: the first N dev questions")
    p.add_argument("--budget", default="{}", help="the reranker's training budget (JSON), copied into the results")
    p.add_argument("--json", type=Path, required=True)
    args = p.parse_args(argv)
    metrics = json.loads((args.reranker / "metrics.json").read_text())
    mined = args.reranker / "negatives" / "mined.json"
    result = {"framework": "bertlab + reranker", "seed": metrics.get("seed", (metrics.get("config") or {}).get("seed")),
              "bi_encoder": str(args.bi_encoder), "reranker": str(args.reranker),
              "train": {k: metrics["train"].get(k) for k in ("samples_per_s", "wall_s", "steps")},
              "negatives": {k: v for k, v in json.loads(mined.read_text()).items() if k != "key"}
              if mined.is_file() else None,
              "budget": json.loads(args.budget),
              "squad_dev": rerank_dev(args.bi_encoder, args.reranker, args.data_dir.resolve(), args.top_k,
                                      args.batch_size, args.max_queries)}
    return report(result, args.json)


if __name__ == "__main__":
    main()
