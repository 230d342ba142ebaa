"""The embeddings measurement's table: one row per framework (bertlab, sentence-transformers, the checkpoint before
fine-tuning), mean ± sample standard deviation over seeds of SQuAD dev retrieval (nDCG@10, MRR@10, R@1/10/100, in
points), STS-B dev Spearman and training pairs per second, then the issue's two comparisons (nDCG@10 difference in
points, throughput ratio).

    python experiments/embeddings/table.py [RESULTS_DIR] [--out RESULTS_DIR/TABLE.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ("bertlab", "sentence-transformers", "checkpoint (before fine-tuning)")
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
    out = ["Scores in points (× 100), mean ± sample standard deviation over seeds (ddof 1).", ""] + lines
    if ours and ref:
        ndcg = statistics.mean(values(ours, "squad_dev", "ndcg_at_10", 100)) - \
            statistics.mean(values(ref, "squad_dev", "ndcg_at_10", 100))
        speed = statistics.mean(values(ours, "train", "samples_per_s", 1)) / \
            statistics.mean(values(ref, "train", "samples_per_s", 1))
        out += ["", f"- nDCG@10, bertlab − sentence-transformers: {ndcg:+.2f} points (goal ≥ −0.5)",
                f"- training pairs/s, bertlab ÷ sentence-transformers: {speed:.2f}× (goal ≥ 1.5×)"]
    if budget:
        out += ["", "Budget: " + ", ".join(f"{k} {v}" for k, v in budget.items())]
    return "\n".join(out) + "\n"


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
