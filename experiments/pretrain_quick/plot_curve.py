"""The labelled-set-size curve of a pretrain_quick attempt: dev accuracy against the number of labelled sentences,
for the pre-trained start and for random weights, from the records run.sh's ``curve`` stage wrote.

    python experiments/pretrain_quick/plot_curve.py experiments/pretrain_quick/attempts/<attempt>

Reads ``curve_pretrained/*.json`` and ``curve_random/*.json`` (plus the 2,000-label seed-1 run of each side's best
sweep learning rate, when the sweep records are there) and writes ``curve.md`` (a table) and ``curve.png``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tables import override  # noqa: E402

SIDES = ("pretrained", "random")


def _points(attempt: Path, side: str) -> dict[int, float]:
    """{labelled sentences: dev accuracy} of one side's curve runs (seed 1)."""
    curve = [json.loads(p.read_text()) for p in sorted((attempt / f"curve_{side}").glob("*.json"))]
    if not curve:
        raise SystemExit(f"plot_curve: no records in {attempt / f'curve_{side}'}: run run.sh's curve stage first")
    lr = override(curve[0], "optim.lr")
    sweep = [json.loads(p.read_text()) for p in (attempt / f"sweep_{side}").glob("*.json")]
    # the sweep's 2,000-label run at the curve's lr (seed 1) is the curve's missing point
    runs = curve + [r for r in sweep if override(r, "optim.lr") == lr]
    return dict(sorted((int(override(r, "data.max_train_samples")), r["val"]["accuracy"]) for r in runs))


def main(argv: list[str]) -> int:
    attempt = Path(argv[0])
    curves = {side: _points(attempt, side) for side in SIDES}
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
    ax.set_xlabel("labelled SST-2 sentences")
    ax.set_ylabel("dev accuracy (872 sentences)")
    ax.set_title(f"{attempt.name}: accuracy by labelled-set size (seed 1)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(attempt / "curve.png", dpi=120)
    print("\n".join(rows))
    print(f"wrote {attempt / 'curve.md'} and {attempt / 'curve.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
