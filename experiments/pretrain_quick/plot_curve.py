"""The labelled-set-size curve of a pretrain_quick attempt: the task's dev metric (each run's monitored one: accuracy
for SST-2, entity F1 for CoNLL-2003) against the number of labelled sentences,
for the pre-trained start and for random weights, from the records run.sh's ``curve`` stage wrote.

    python experiments/pretrain_quick/plot_curve.py experiments/pretrain_quick/attempts/<attempt>

Reads ``curve_pretrained/*.json`` and ``curve_random/*.json`` (plus the seed-1 run of each side's best sweep learning
rate at the study's labelled-set size, when the sweep records are there) and writes ``curve.md`` (a table) and ``curve.png``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tables import override  # noqa: E402

SIDES = ("pretrained", "random")


def _points(attempt: Path, side: str) -> tuple[dict[int, float], str]:
    """{labelled sentences: dev metric} of one side's curve runs (seed 1), and the metric's name."""
    curve = [json.loads(p.read_text()) for p in sorted((attempt / f"curve_{side}").glob("*.json"))]
    if not curve:
        raise SystemExit(f"plot_curve: no records in {attempt / f'curve_{side}'}: run run.sh's curve stage first")
    lr = override(curve[0], "optim.lr")
    sweep = [json.loads(p.read_text()) for p in (attempt / f"sweep_{side}").glob("*.json")]
    # the sweep's run at the curve's lr (seed 1; the study's labelled-set size) is the curve's missing point
    runs = curve + [r for r in sweep if override(r, "optim.lr") == lr]
    points = dict(sorted((int(override(r, "data.max_train_samples")), r["monitor"]["value"]) for r in runs))
    return points, curve[0]["monitor"]["metric"]


def main(argv: list[str]) -> int:
    attempt = Path(argv[0])
    read = {side: _points(attempt, side) for side in SIDES}
    curves = {side: points for side, (points, _) in read.items()}
    metric = read["pretrained"][1]
    sizes = sorted(set().union(*curves.values()))
    rows = ["| labelled sentences | pre-trained start | random weights | difference (points) |", "|---|---|---|---|"]
    for n in sizes:
        a, b = curves["pretrained"].get(n), curves["random"].get(n)
        diff = f"{100 * (a - b):+.1f}" if a is not None and b is not None else ""
        cells = ["–" if v is None else f"{v:.4f}" for v in (a, b)]
        rows.append(f"| {n:,} | {cells[0]} | {cells[1]} | {diff} |")
    (attempt / "curve.md").write_text("\n".join(rows) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for side, label in zip(SIDES, ("pre-trained start", "random weights, same vocabulary")):
        ax.plot(list(curves[side]), list(curves[side].values()), marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel("labelled sentences")
    ax.set_ylabel(metric)
    ax.set_title(f"{attempt.name}: {metric} by labelled-set size (seed 1)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(attempt / "curve.png", dpi=120)
    print("\n".join(rows))
    print(f"wrote {attempt / 'curve.md'} and {attempt / 'curve.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
