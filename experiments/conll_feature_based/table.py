"""Collect the CoNLL-2003 feature-based runs (runs/*.json) and the fine-tuning run into TABLE.md.

Rows in the order of the BERT paper's Table 7: fine-tuning, then the frozen encoder read at the embedding layer,
the second-to-last layer, the last layer, the sum and the concatenation of the last four layers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tables import machine, override  # noqa: E402

HERE = Path(__file__).resolve().parent
FINE_TUNING = HERE.parent / "reference_budget" / "results" / "conll2003-defaults.json"
FEATURES = {  # head.layers → what the row reads (the paper's wording)
    "0": "Embeddings (layer 0 output)",
    "-2": "Second-to-last hidden",
    "last": "Last hidden",
    "sum_last4": "Sum last four hidden",
    "concat_last4": "Concat last four hidden",
}


def row(label: str, m: dict) -> str:
    timing = m.get("timing", {})
    extraction = timing.get("feature_extraction_s")
    return (f"| {label} | {m['val']['f1']:.4f} | {m['val']['precision']:.4f} | {m['val']['recall']:.4f} | "
            f"{m['params']['trainable']:,} | {m['train']['epochs']} | "
            f"{'–' if extraction is None else f'{extraction:.0f}'} | {m['train']['wall_s']:.0f} |")


def main() -> None:
    rows = ["| approach | dev entity F1 | precision | recall | trainable params | epochs | feature extraction s | "
            "train wall s |", "|---|---|---|---|---|---|---|---|"]
    if FINE_TUNING.is_file():
        rows.append(row("Fine-tuning (all layers, `freeze=none`, project defaults)", json.loads(FINE_TUNING.read_text())))
    probes = {override(m, "head.layers"): m for m in map(lambda p: json.loads(p.read_text()),
                                                          sorted((HERE / "runs").glob("*.json")))}
    for layers, label in FEATURES.items():
        if layers in probes:
            rows.append(row(f"Frozen: {label} (`head.layers={layers}`)", probes[layers]))
    # The frozen runs' shared command line, as recorded (the row's head.layers and logging switches left out).
    shared = [o for o in next(iter(probes.values()), {}).get("overrides", [])
              if not o.startswith(("head.layers=", "logger=", "trainer.enable_progress_bar="))]
    text = ("# CoNLL-2003 dev (eng.testa): fine-tuning vs frozen MiniLM-L6 features\n\n" + "\n".join(rows)
            + f"\n\nFrozen rows: `{' '.join(shared)}` (other settings: the conll2003 preset)."
            f" Machine: {machine()}.\n")
    (HERE / "TABLE.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
