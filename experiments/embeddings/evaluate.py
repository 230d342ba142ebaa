"""The evaluation every model of the embeddings measurement gets, whichever framework trained it: SQuAD dev
retrieval (each question of ``squad_v1.1/dev.json`` searched among all of the file's distinct paragraphs; nDCG@10,
MRR@10, Recall@1/10/100 by ir_measures, through bertlab's exact search) and STS-B dev (Spearman and Pearson of the
cosine similarity of each sentence pair with the gold score).

A model is an embedding function ``texts -> (N, D) float32``: a bertlab run (its best checkpoint, as
``bertlab.predict`` loads it) or a sentence-transformers folder (``SentenceTransformer.encode``), both at the
same batch size and max length.

    python experiments/embeddings/evaluate.py (--bertlab RUN | --st FOLDER) [--data-dir ../shared/data]
        [--max-seq-length 256] [--batch-size 64] [--max-queries N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "data"
Embed = Callable[[list[str]], np.ndarray]


def squad_dev(data_dir: Path, max_queries: int | None = None) -> tuple[list[str], list[str], list[list[int]]]:
    """(questions, distinct paragraphs in file order, each question's paragraph position) of the dev file."""
    data = json.loads((data_dir / "squad_v1.1" / "dev.json").read_text(encoding="utf-8"))
    questions, paragraphs, relevant = [], [], []
    position: dict[str, int] = {}
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"].strip()
            p = position.setdefault(context, len(position))
            if p == len(paragraphs):
                paragraphs.append(context)
            for qa in paragraph["qas"]:
                questions.append(qa["question"].strip())
                relevant.append([p])
    if max_queries is not None:
        questions, relevant = questions[:max_queries], relevant[:max_queries]
    return questions, paragraphs, relevant


def stsb_dev(data_dir: Path, max_pairs: int | None = None) -> tuple[list[str], list[str], list[float]]:
    import csv

    with (data_dir / "stsb" / "dev.tsv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    rows = rows[:max_pairs] if max_pairs is not None else rows
    return [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [float(r["score"]) for r in rows]


def dev_search(embed: Embed, data_dir: Path, max_queries: int | None = None, top_k: int = 100) -> dict[str, Any]:
    """The dev questions searched among the dev paragraphs (exact cosine search): the texts, each question's
    relevant positions, its ``top_k`` passages (``scores``, ``indices``: tensors, best first), the passage ids
    (``p<k>``) and the embedding time. What :func:`retrieval` scores, and what rerank_eval.py reranks."""
    import torch

    from bertlab.tasks.retrieval import search

    questions, paragraphs, relevant = squad_dev(data_dir, max_queries)
    started = time.perf_counter()
    corpus = torch.from_numpy(embed(paragraphs))
    queries = torch.from_numpy(embed(questions))
    seconds = time.perf_counter() - started
    scores, indices = search(queries, corpus, top_k=top_k)
    return {"questions": questions, "paragraphs": paragraphs, "relevant": relevant, "scores": scores,
            "indices": indices, "ids": [f"p{k}" for k in range(len(paragraphs))], "embed_s": round(seconds, 2)}


def retrieval(embed: Embed, data_dir: Path, max_queries: int | None = None) -> dict[str, Any]:
    from bertlab.tasks.retrieval import retrieval_scores

    dev = dev_search(embed, data_dir, max_queries)
    out = retrieval_scores(dev["scores"], dev["indices"], dev["relevant"], dev["ids"])
    return {**out, "queries": len(dev["questions"]), "passages": len(dev["paragraphs"]), "embed_s": dev["embed_s"]}


def similarity(embed: Embed, data_dir: Path, max_pairs: int | None = None) -> dict[str, Any]:
    from scipy.stats import pearsonr, spearmanr

    first, second, gold = stsb_dev(data_dir, max_pairs)
    a, b = embed(first), embed(second)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"spearman": float(spearmanr(cos, gold).statistic), "pearson": float(pearsonr(cos, gold).statistic),
            "pairs": len(gold)}


def bertlab_embedder(run: Path, batch_size: int) -> Embed:
    from bertlab.inference.predictor import Predictor

    predictor = Predictor.from_run(run, device="cpu", batch_size=batch_size)
    return lambda texts: predictor.embed_texts(texts, batch_size)


def st_embedder(folder: Path, batch_size: int, max_seq_length: int) -> Embed:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    model.max_seq_length = max_seq_length
    return lambda texts: model.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                      show_progress_bar=False).astype(np.float32)


def evaluate(embed: Embed, data_dir: Path, max_queries: int | None = None,
             max_pairs: int | None = None) -> dict[str, Any]:
    return {"squad_dev": retrieval(embed, data_dir, max_queries), "stsb_dev": similarity(embed, data_dir, max_pairs)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--bertlab", type=Path, help="a bertlab run dir (task=embedding)")
    model.add_argument("--st", type=Path, help="a sentence-transformers folder")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--max-seq-length", type=int, default=256, help="sentence-transformers only (a run has its own)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-queries", type=int, default=None, help="smoke tests: the first N dev questions")
    p.add_argument("--max-pairs", type=int, default=None, help="smoke tests: the first N STS-B dev pairs")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    embed = bertlab_embedder(args.bertlab, args.batch_size) if args.bertlab else \
        st_embedder(args.st, args.batch_size, args.max_seq_length)
    result = evaluate(embed, args.data_dir.resolve(), args.max_queries, args.max_pairs)
    return report(result, args.json)


def report(result: dict[str, Any], path: Path | None) -> dict[str, Any]:
    """Print one model's results as a JSON line and, with ``path``, write them there (what table.py reads)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
