"""The embeddings measurement's table: one row per framework (bertlab, sentence-transformers, the checkpoint before
fine-tuning), mean ± sample standard deviation over seeds of SQuAD dev retrieval (nDCG@10, MRR@10, R@1/10/100, in
points), STS-B dev Spearman and training pairs per second, then the issue's two comparisons (nDCG@10 difference in
points, throughput ratio). With the reranker's results (rerank.sh: ``rerank-<loss>-e<epochs>-seed*.json``) a table per
reranker budget (loss, epochs and the rest; the title names loss and epochs): the bi-encoder alone against the bi-encoder + reranker over the same top-k
candidates, and the MRR@10 gain.

    python experiments/embeddings/table.py [RESULTS_DIR] [--out RESULTS_DIR/TABLE.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ("bertlab", "sentence-transformers", "checkpoint (before fine-tuning)")
RERANKED = "bertlab + reranker"  # rerank_eval.py's records
RERANK_COLUMNS = (("nDCG@10", "ndcg_at_10"), ("MRR@10", "mrr_at_10"), ("R@1", "recall_at_1"), ("R@10", "recall_at_10"))
COLUMNS = (("nDCG@10", "squad_dev", "ndcg_at_10", 100), ("MRR@10", "squad_dev", "mrr_at_10", 100),
           ("R@1", "squad_dev", "recall_at_1", 100), ("R@10", "squad_dev", "recall_at_10", 100),
           ("R@100", "squad_dev", "recall_at_100", 100), ("STS-B Spearman", "stsb_dev", "spearman", 100),
           ("train pairs/s", "train", "samples_per_s", 1))


def cell(values: list[float], digits: int = 2) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def values(records: list[dict], block: str, key: str, scale: float) -> list[float]:
    return [float(r[block][key]) * scale for r in records if r.get(block, {}).get(key) is not None]


def render(results: list[dict]) -> str:
    groups = {name: [r for r in results if r.get("framework") == name] for name in ORDER}
    lines = ["| model | seeds | " + " | ".join(c[0] for c in COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    for name, records in groups.items():
        if not records:
            continue
        seeds = ", ".join(str(r["seed"]) for r in records if r.get("seed") is not None) or "–"
        lines.append(f"| {name} | {seeds} | " + " | ".join(cell(values(records, b, k, s)) for _, b, k, s in COLUMNS)
                     + " |")
    ours, ref = groups["bertlab"], groups["sentence-transformers"]
    budget = next((r["budget"] for r in ref if "budget" in r), None)
    out = ["Scores in points (× 100), mean ± sample standard deviation over seeds (ddof 1).", ""]
    out += lines if any(groups.values()) else []  # a results folder of reranker records alone: their table only
    # The comparisons read the seeds both frameworks ran (side by side), whatever other seeds one of them has.
    common = sorted({r.get("seed") for r in ours} & {r.get("seed") for r in ref} - {None})
    if common:
        ours, ref = ([r for r in rs if r.get("seed") in common] for rs in (ours, ref))
        ndcg = statistics.mean(values(ours, "squad_dev", "ndcg_at_10", 100)) - \
            statistics.mean(values(ref, "squad_dev", "ndcg_at_10", 100))
        speed = statistics.mean(values(ours, "train", "samples_per_s", 1)) / \
            statistics.mean(values(ref, "train", "samples_per_s", 1))
        on = f" on seed{'s' if len(common) > 1 else ''} {', '.join(map(str, common))}"
        out += ["", f"- nDCG@10, bertlab − sentence-transformers{on}: {ndcg:+.2f} points (goal ≥ −0.5)",
                f"- training pairs/s, bertlab ÷ sentence-transformers{on}: {speed:.2f}× (goal ≥ 1.5×)"]
    if budget:
        out += ["", "Budget: " + ", ".join(f"{k} {v}" for k, v in budget.items())]
    reranked = [r for r in results if r.get("framework") == RERANKED]
    # One table per budget (threads aside): pointwise first, then listwise, fewer epochs first.
    groups: dict[str, list[dict]] = {}
    for r in reranked:
        groups.setdefault(budget_key(r), []).append(r)
    for records in sorted(groups.values(), key=lambda rs: (rerank_recipe(rs[0])[0] != "pointwise",
                                                           rerank_recipe(rs[0]), budget_key(rs[0]))):
        out += ["", *render_rerank(records)]
    return "\n".join(out) + "\n"


def rerank_loss(record: dict) -> str:
    """The reranker's training loss (rerank.sh's LOSS; records before it had one were trained pointwise)."""
    return (record.get("budget") or {}).get("loss", "pointwise")


def budget_key(record: dict) -> str:
    """Reranker records measured alike: the same budget, whatever the threads."""
    return json.dumps({k: v for k, v in (record.get("budget") or {}).items() if k != "threads"}, sort_keys=True)


def rerank_recipe(record: dict) -> tuple[str, float]:
    """What tells two reranker measurements apart: the loss and the epochs trained (records without: 1)."""
    return rerank_loss(record), float((record.get("budget") or {}).get("epochs", 1))


def pairs_per_s(record: dict) -> float:
    """The reranker's training throughput in (query, passage) pairs a second: a listwise run's samples are
    groups of a positive and its negatives."""
    speed = float(record["train"]["samples_per_s"])
    if rerank_loss(record) == "listwise":
        speed *= 1 + int(record["budget"]["negatives_per_question"])
    return speed


def epochs(n: float) -> str:
    return f"{n:g} epoch" + ("" if n == 1 else "s")


def render_rerank(records: list[dict]) -> list[str]:
    """The bi-encoder's top k of each dev question before and after the reranker, per the same seeds."""
    records = sorted(records, key=lambda r: r.get("seed") or 0)
    k = sorted({r["squad_dev"]["top_k"] for r in records})
    seeds = ", ".join(str(r["seed"]) for r in records)
    lines = [f"## Reranking the bi-encoder's top {'/'.join(map(str, k))} (SQuAD dev, "
             f"{records[0]['squad_dev']['queries']} questions; reranker trained {rerank_loss(records[0])}, "
             f"{epochs(rerank_recipe(records[0])[1])})", "",
             "| model | seeds | " + " | ".join(c[0] for c in RERANK_COLUMNS) + " | train pairs/s |",
             "|---|---|" + "---|" * (len(RERANK_COLUMNS) + 1)]
    for name, block in (("bertlab bi-encoder alone", "first_stage"), ("+ MiniLM reranker (task=rerank)", "reranked")):
        cells = [cell([float(r["squad_dev"][block][key]) * 100 for r in records]) for _, key in RERANK_COLUMNS]
        speed = cell([pairs_per_s(r) for r in records]) if block == "reranked" else "–"
        lines.append(f"| {name} | {seeds} | " + " | ".join(cells) + f" | {speed} |")
    gains = [(r["squad_dev"]["reranked"]["mrr_at_10"] - r["squad_dev"]["first_stage"]["mrr_at_10"]) * 100
             for r in records]
    verdict = "met" if statistics.mean(gains) > 0 and all(g > 0 for g in gains) else "not met"
    mean = f"{statistics.mean(gains):+.2f}" + (f" ± {statistics.stdev(gains):.2f}" if len(gains) > 1 else "")
    lines += ["", f"- MRR@10, + reranker − bi-encoder alone: {mean} points (per seed: "
              + ", ".join(f"{g:+.2f}" for g in gains) + f"); goal: the reranker raises MRR@10 over the bi-encoder "
              f"alone — {verdict} (every seed above 0)"]
    budget = next((r["budget"] for r in records if r.get("budget")), None)
    if budget:
        lines += ["", "Reranker budget: " + ", ".join(f"{k} {v}" for k, v in budget.items())]
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, nargs="?", default=HERE / "results" / "len256")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    results = [json.loads(f.read_text()) for f in sorted(args.results.glob("*.json"))]
    text = render(results)
    out = args.out or args.results / "TABLE.md"
    out.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
