"""The pre-training curves of pretrain_quick attempts: validation masked-LM loss and accuracy against the optimizer
step, one line per attempt, from the ``pretrain/curves.csv`` that run.sh's ``pretrain`` stage records.

    python experiments/pretrain_quick/plot_pretrain.py OUT.png ATTEMPT_DIR [ATTEMPT_DIR ...]

Each ATTEMPT_DIR is ``experiments/pretrain_quick/attempts/<attempt>``; its line is labelled with the attempt's
name. Losses of attempts that masked a different share of tokens are not on the same scale (the table in
docs/pretraining.md says which masked what).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

PANELS = (("val/loss", "validation masked-LM loss"), ("val/mlm_accuracy", "validation masked-LM accuracy"))


def validation_curve(curves_csv: Path) -> dict[str, list[tuple[int, float]]]:
    """{column: [(step, value), ...]} of the validation rows (the rows that carry a val/loss)."""
    with curves_csv.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("val/loss")]
    return {column: [(int(r["step"]), float(r[column])) for r in rows if r.get(column)] for column, _ in PANELS}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    out, attempts = Path(argv[0]), [Path(a) for a in argv[1:]]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PANELS), figsize=(11, 4))
    for attempt in attempts:
        path = attempt / "pretrain" / "curves.csv"
        if not path.is_file():
            raise SystemExit(f"plot_pretrain: {path} not found: run run.sh's pretrain stage for {attempt.name} first")
        curve = validation_curve(path)
        for ax, (column, _) in zip(axes, PANELS):
            steps, values = zip(*curve[column])
            ax.plot(steps, values, label=attempt.name)
    for ax, (_, title) in zip(axes, PANELS):
        ax.set_xlabel("optimizer step")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
