"""Exact search against faiss's HNSW graph (``bertlab.retrieve --index exact|hnsw``) on one corpus of vectors:
the time to search every query exactly, the time to build the graph once, the time to search it at several
``efSearch`` values, and its recall@k against the exact top k (the share of the exact top k it finds).

The vectors are synthetic unless ``--embeddings`` gives a saved matrix (``bertlab.retrieve``'s
``corpus-<key>.npy``, or ``bertlab.predict --output x.npy``): points around ``--centres`` random centres in
``--dim`` dimensions, queries drawn the same way — neighbourhoods like those of text embeddings, not the uniform
noise on which every approximate index does worst. Same process, same threads for both searches.

    python benchmarks/retrieval_index.py [--passages 100000] [--queries 2000] [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine_description, set_threads  # noqa: E402


def clustered(n: int, dim: int, centres: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (centres[rng.integers(0, len(centres), n)] + 0.6 * rng.normal(size=(n, dim))).astype(np.float32)


def run(passages: int, queries: int, dim: int, top_k: int, ef: list[int], threads: int, centres: int,
        embeddings: Path | None) -> dict[str, Any]:
    from bertlab.inference import retrieve as r

    set_threads(threads)
    rng = np.random.default_rng(0)
    if embeddings is not None:
        matrix = np.load(embeddings).astype(np.float32)
        order = rng.permutation(len(matrix))
        q, corpus = matrix[order[:queries]], matrix[order[queries:]]  # queries held out of the corpus
        source = str(embeddings)
    else:
        c = rng.normal(size=(centres, dim))
        corpus, q = clustered(passages, dim, c, rng), clustered(queries, dim, c, rng)
        source = f"synthetic: {centres} centres, {dim} dimensions"
    t0 = time.perf_counter()
    top_k = min(top_k, len(corpus))
    _, exact = r.search_corpus(q, corpus, top_k, "exact")
    exact_s = time.perf_counter() - t0
    faiss = r.require_faiss()
    faiss.omp_set_num_threads(threads)
    t0 = time.perf_counter()
    graph = r.hnsw_graph(faiss, corpus, None)
    build_s = time.perf_counter() - t0
    rows = []
    for e in ef:
        graph.hnsw.efSearch = max(e, top_k)
        t0 = time.perf_counter()
        _, found = graph.search(r.unit_rows(q), top_k)
        search_s = time.perf_counter() - t0
        recall = float(np.mean([len(set(a) & set(b)) / top_k for a, b in zip(exact.tolist(), found.tolist())]))
        rows.append({"ef_search": graph.hnsw.efSearch, "search_s": round(search_s, 3), "recall_at_k": round(recall, 4),
                     "speed_vs_exact": round(exact_s / search_s, 1)})
        print(rows[-1], file=sys.stderr)
    return {"benchmark": "retrieval_index", "source": source, "passages": int(corpus.shape[0]),
            "queries": int(q.shape[0]), "dim": int(corpus.shape[1]), "top_k": top_k, "threads": threads,
            "machine": machine_description(threads, peak=False), "exact_search_s": round(exact_s, 3),
            "hnsw": {"m": r.HNSW_M, "ef_construction": r.HNSW_EF_CONSTRUCTION, "build_s": round(build_s, 1),
                     "searches": rows}}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--passages", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=2000)
    p.add_argument("--dim", type=int, default=384, help="all-MiniLM-L6-v2's embedding size")
    p.add_argument("--centres", type=int, default=1000)
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--ef-search", default="32,64,128,256")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--embeddings", type=Path, default=None, help="a saved (N, D) .npy matrix instead of synthetic")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    report = run(a.passages, a.queries, a.dim, a.top_k, [int(x) for x in a.ef_search.split(",")], a.threads,
                 a.centres, a.embeddings)
    emit(report, a.json)
    return report


if __name__ == "__main__":
    main()
