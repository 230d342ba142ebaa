"""The study's table: one row per task and model, metric ± std over seeds, parameters, wall time, throughput.

    python experiments/rnn_vs_transformer/table.py logs/rnn_vs_transformer [--out experiments/rnn_vs_transformer/results.md]

Reads every ``metrics.json`` under the folder (the layout the experiment config writes:
``<task>/<model>/seed<N>/metrics.json``). ``python -m bertlab.compare`` gives the per-task detail (every metric,
a plot); this puts the columns of the argument side by side for both tasks.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

# What each model stands for in the argument (RNN vs Transformer at similar size, then pre-training).
WEIGHTS = {"bilstm": "scratch", "bert_mini": "scratch", "minilm_l6": "pre-trained"}
ARCHITECTURE = {"bilstm": "BiLSTM (2 × 256 per direction)", "bert_mini": "Transformer (4 × 256)",
                "minilm_l6": "Transformer (6 × 384)"}
MODEL_ORDER = ("bilstm", "bert_mini", "minilm_l6")


def _mean_std(values: list[float], digits: int) -> str:
    if not values:
        return ""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def rows(root: Path) -> list[dict[str, str]]:
    """One row per (task, model) over the seeds found under ``root``."""
    runs: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for path in sorted(root.rglob("metrics.json")):
        m = json.loads(path.read_text())
        runs[(m["task"], m["model"])].append(m)
    if not runs:
        raise SystemExit(f"no metrics.json under {root}")
    out = []
    order = {name: i for i, name in enumerate(MODEL_ORDER)}
    for (task, model), group in sorted(runs.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        metric = group[0]["monitor"]["metric"]
        scores = [m["monitor"]["value"] for m in group if m["monitor"]["value"] is not None]
        out.append({
            "task": task,
            "model": model,
            "architecture": ARCHITECTURE.get(model, model),
            "weights": WEIGHTS.get(model, "?"),
            "params (M)": f"{group[0]['params']['total'] / 1e6:.2f}",
            f"dev {metric.split('/', 1)[-1]}": _mean_std(scores, 4),
            "n": str(len(group)),
            "train wall (s)": _mean_std([m["train"]["wall_s"] for m in group], 1),
            "samples/s": _mean_std([m["train"]["samples_per_s"] for m in group], 1),
            "tokens/s": _mean_std([m["train"]["tokens_per_s"] for m in group], 0),
        })
    return out


def markdown(table: list[dict[str, str]]) -> str:
    """Markdown, one block per task (the metric column differs between tasks)."""
    blocks = []
    for task in dict.fromkeys(r["task"] for r in table):
        part = [r for r in table if r["task"] == task]
        header = list(part[0])
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r[h] for h in header) + " |" for r in part]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="the study's log folder (logs/rnn_vs_transformer)")
    parser.add_argument("--out", type=Path, help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    text = markdown(rows(args.root))
    print(text, end="")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
