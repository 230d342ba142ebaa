"""Collect experiments/reference_budget/results/*.json into TABLE.md beside the Hugging Face reference.

One row per run name (the file name; ``conll2003-grouped`` is a variant of ``conll2003``); runs with several
seeds (``<name>-seed<N>.json``) are shown as mean ± sample std over the seeds.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tables import machine, spread  # noqa: E402

HERE = Path(__file__).resolve().parent
# ../shared/docs/REFERENCE-RESULTS.md: Trainer + MiniLM-L6 at the same budget on this kind of machine.
# task: (metric label, metric key, reference value, reference train wall s, reference as shown)
REFERENCE = {
    "conll2003": ("entity F1", "f1", 0.838, 410.0, "0.8380 (1 epoch)"),
    "sst2": ("accuracy", "accuracy", 0.8933, 2087.0, "0.8933 (1 epoch)"),
    "squad": ("EM / F1", "f1", 24.42, 1437.0, "13.15 / 24.42 (4,000 questions, 1 epoch)"),
    "conll2003-defaults": ("entity F1", "f1", 0.899, 1165.0, "0.8990 (3 epochs)"),  # the reference's 3-epoch run
}


def main() -> None:
    runs: dict[str, list[dict]] = defaultdict(list)
    for path in sorted((HERE / "results").glob("*.json")):
        m = json.loads(path.read_text())
        runs[re.sub(r"-seed\d+$", "", path.stem)].append(m)  # conll2003 (3 seeds), conll2003-grouped, mrpc, ...
    rows = ["| run | metric | bertlab | seeds | HF reference | bertlab train wall s | reference wall s | samples/s |",
            "|---|---|---|---|---|---|---|---|"]
    for name, ms in sorted(runs.items()):
        task = ms[0]["task"]
        # A variant (conll2003-defaults-bs32, sst2-defaults-mean) is compared with the longest reference its name
        # extends; names no reference covers fall back to their task's.
        base = max((k for k in REFERENCE if name == k or name.startswith(k + "-")), key=len, default=task)
        label, key, _, ref_wall, ref_shown = REFERENCE.get(base) or (
            "", ms[0]["monitor"]["metric"].split("/")[1], None, None, "not in REFERENCE-RESULTS.md")
        values = [m["val"][key] for m in ms]
        shown = spread(values, ".2f" if task == "squad" else ".4f")
        if task == "squad":
            shown = f"{spread([m['val']['exact_match'] for m in ms], '.2f')} / {shown}"
        if task == "mrpc":  # MRPC reports accuracy and F1
            shown = f"acc {spread([m['val']['accuracy'] for m in ms], '.4f')}, F1 {shown}"
            label = "accuracy, F1"
        rows.append(f"| {name} | {label or key} | {shown} | {', '.join(str(m['seed']) for m in ms)} | {ref_shown} | "
                    f"{spread([m['train']['wall_s'] for m in ms], '.0f')} | {ref_wall or '–'} | "
                    f"{spread([m['train']['samples_per_s'] for m in ms], '.1f')} |")
    text = "# bertlab vs the Hugging Face reference at equal budget\n\n" + "\n".join(rows) + f"\n\nMachine: {machine()}.\n"
    (HERE / "results" / "TABLE.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
