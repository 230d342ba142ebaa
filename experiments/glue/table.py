"""The GLUE study's table: bertlab's presets vs the Hugging Face Trainer on CoLA and STS-B dev.

    python experiments/glue/table.py [RESULTS_DIR]   → RESULTS_DIR/TABLE.md (default experiments/glue/results)

Reads the records run.sh wrote (bertlab-<task>-seed<s>.json from record_runs.py, hf-<task>-seed<s>.json from
hf_glue.py, bertlab-refbudget-<task>-seed1.json); cells are mean ± sample std (ddof=1) over seeds.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

METRICS = {"cola": ["matthews_correlation"], "stsb": ["pearson", "spearmanr"]}
SIDES = [("bertlab", "bertlab preset"), ("hf", "HF Trainer, run_glue recipe"),
         ("bertlab-refbudget", "bertlab at the reference's batch/lr/epochs")]


def cell(values: list[float]) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.4f} (1 seed)"
    return f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f} ({len(values)} seeds)"


def main(argv: list[str]) -> int:
    results = Path(argv[0]) if argv else Path(__file__).parent / "results"
    records: dict[tuple[str, str], list[dict]] = {}
    for path in sorted(results.glob("*.json")):
        m = re.fullmatch(r"(bertlab-refbudget|bertlab|hf)-(cola|stsb)-seed\d+", path.stem)
        if m:
            records.setdefault((m[1], m[2]), []).append(json.loads(path.read_text()))
    lines = ["# GLUE study: CoLA and STS-B dev, all-MiniLM-L6-v2", "",
             "| task | metric | " + " | ".join(label for _, label in SIDES) + " |",
             "|---|---|" + "---|" * len(SIDES)]
    for task, metrics in METRICS.items():
        for metric in metrics:
            cells = [cell([r["val"][metric] for r in records.get((side, task), []) if metric in r["val"]])
                     for side, _ in SIDES]
            lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    if (results / "GLUE.md").is_file():
        lines += ["", "The GLUE table of every task with data (`python -m bertlab.glue run`, seed 1): `GLUE.md`."]
    if any("note" in r for rs in records.values() for r in rs):
        lines += ["", "NOTE: smoke records (bundled samples, a few steps): not results."]
    (results / "TABLE.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
