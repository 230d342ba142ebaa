"""Collect experiments/reference_budget/results/*.json into TABLE.md beside the Hugging Face reference."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
# ../shared/docs/REFERENCE-RESULTS.md: Trainer + MiniLM-L6 at the same budget on this kind of machine.
REFERENCE = {
    "conll2003": ("entity F1", "f1", 0.838, 410.0),
    "sst2": ("accuracy", "accuracy", 0.8933, 2087.0),
    "squad": ("EM / F1", "f1", 24.42, 1437.0),
}


def main() -> None:
    rows = ["| task | metric | bertlab | HF reference | bertlab train wall s | reference wall s | samples/s |",
            "|---|---|---|---|---|---|---|"]
    for path in sorted((HERE / "results").glob("*.json")):
        m = json.loads(path.read_text())
        task = m["task"]
        label, key, ref, ref_wall = REFERENCE.get(task, ("", m["monitor"]["metric"].split("/")[1], None, None))
        value = m["val"][key]
        shown = f"{m['val']['exact_match']:.2f} / {value:.2f}" if task == "squad" else f"{value:.4f}"
        ref_shown = "13.15 / 24.42" if task == "squad" else (f"{ref:.4f}" if ref is not None else "–")
        rows.append(f"| {task} | {label or key} | {shown} | {ref_shown} | {m['train']['wall_s']:.0f} | "
                    f"{ref_wall or '–'} | {m['train']['samples_per_s']:.1f} |")
    machine = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"
    text = "# bertlab vs the Hugging Face reference at equal budget\n\n" + "\n".join(rows) + f"\n\nMachine: {machine}.\n"
    (HERE / "results" / "TABLE.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
