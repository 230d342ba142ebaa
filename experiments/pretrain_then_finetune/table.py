"""Write experiments/pretrain_then_finetune/RESULTS.md from the recorded runs (see run.sh)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tables import machine, override, spread  # noqa: E402

HERE = Path(__file__).resolve().parent


def init_from(m: dict) -> str:
    value = override(m, "model.init_from")
    if value is None:
        return "?"
    return "random init" if value in ("null", "None", "") else "pre-trained (stage 1)"


def main() -> None:
    pre = json.loads((HERE / "pretrain" / "pretrain.json").read_text())
    out = ["# Pre-train, then fine-tune: results", "",
           "Produced by `bash experiments/pretrain_then_finetune/run.sh` (commands and budget in its header); "
           "`python experiments/pretrain_then_finetune/table.py` wrote this file from the recorded runs.", "",
           "## Stage 1: masked-LM pre-training of bert_mini on WikiText-2", "",
           "| train text | val text | epochs | steps | train wall s | tokens/s | val loss | val perplexity | val MLM accuracy |",
           "|---|---|---|---|---|---|---|---|---|",
           f"| wiki.valid ({pre['data']['train_examples']:,} sequences) | wiki.test ({pre['data']['val_examples']:,}) | "
           f"{pre['train']['epochs']} | {pre['train']['steps']} | {pre['train']['wall_s']:.0f} | "
           f"{pre['train']['tokens_per_s']:.0f} | {pre['val']['loss']:.3f} | {pre['val']['perplexity']:.1f} | "
           f"{pre['val']['mlm_accuracy']:.4f} |", "",
           "## Stage 2: SST-2 (8,000 training sentences, 3 epochs, full dev set), bert_mini", "",
           "Random init trains its own WordPiece vocabulary on the 8,000 SST-2 sentences; the pre-trained start "
           "uses stage 1's (WikiText-2) vocabulary; the control row is random weights with stage 1's vocabulary.", "",
           "| start | dev accuracy | seeds | train wall s | samples/s |", "|---|---|---|---|---|"]
    groups: dict[str, list[dict]] = {}
    for path in sorted((HERE / "finetune" / "runs").glob("*.json")):
        m = json.loads(path.read_text())
        groups.setdefault(init_from(m), []).append(m)
    for path in sorted((HERE / "control" / "runs").glob("*.json")):  # run.sh control
        groups.setdefault("random init, stage-1 vocabulary", []).append(json.loads(path.read_text()))
    for name, ms in sorted(groups.items(), reverse=True):
        out.append(f"| {name} | {spread([m['val']['accuracy'] for m in ms])} | "
                   f"{', '.join(str(m['seed']) for m in ms)} | {spread([m['train']['wall_s'] for m in ms], '.0f')} | "
                   f"{spread([m['train']['samples_per_s'] for m in ms], '.0f')} |")
    out += ["", f"Machine: {machine()}; CPU only. Plot and per-group table: `finetune/comparison.{{png,md}}`; "
            "the pre-training curves: `pretrain/curves.csv`."]
    (HERE / "RESULTS.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
