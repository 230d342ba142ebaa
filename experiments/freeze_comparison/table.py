"""Write experiments/freeze_comparison/RESULTS.md from the recorded runs (<part>/runs/*.json, see run.sh).

Per task: one row per freeze policy (mean ± sample std over seeds), with trainable parameters, training wall
time, samples/s and the speed-up over full fine-tuning; then the frozen-feature cache's epoch times and the
bf16-mixed vs float32 comparison, each with the target the freeze and performance issues set.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tables import machine, override, spread  # noqa: E402

HERE = Path(__file__).resolve().parent
POLICIES = ("none", "embeddings", "bottom_k", "bitfit", "lora", "encoder")
TASK_METRIC = {"sst2": ("accuracy", "dev accuracy"), "conll2003": ("f1", "dev entity F1")}


def runs(part: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((HERE / part / "runs").glob("*.json"))]


def mean(values: list[float]) -> float:
    return statistics.mean(values) if values else float("nan")


def policy_table(part: str) -> list[str]:
    key, label = TASK_METRIC[part]
    by_policy: dict[str, list[dict]] = defaultdict(list)
    for m in runs(part):
        by_policy[m["freeze"]].append(m)
    if not by_policy:
        return [f"_{part}: no recorded runs._"]
    base = mean([m["train"]["samples_per_s"] for m in by_policy.get("none", [])])
    lines = [f"| freeze | trainable params | {label} | seeds | train wall s | samples/s | speed vs none |",
             "|---|---|---|---|---|---|---|"]
    for policy in [p for p in POLICIES if p in by_policy]:
        ms = by_policy[policy]
        sps = [m["train"]["samples_per_s"] for m in ms]
        lines.append(f"| {policy} | {ms[0]['params']['trainable']:,} | {spread([m['val'][key] for m in ms])} | "
                     f"{len(ms)} | {spread([m['train']['wall_s'] for m in ms], '.1f')} | {spread(sps, '.1f')} | "
                     f"{mean(sps) / base:.2f}× |")
    return lines


def cache_table() -> list[str]:
    ms = runs("cache")
    if not ms:
        return ["_cache: no recorded runs._"]
    lines = ["| head.cache_features | feature pass s | epoch wall s (1, 2, 3) | dev accuracy |", "|---|---|---|---|"]
    epochs: dict[str, list[float]] = {}
    for m in sorted(ms, key=lambda m: str(override(m, "head.cache_features", "false")).lower()):
        cached = str(override(m, "head.cache_features", "false")).lower()
        epochs[cached] = m["timing"]["epoch_wall_s"]
        extraction = m["timing"]["feature_extraction_s"]
        lines.append(f"| {cached} | {'–' if extraction is None else f'{extraction:.1f}'} | "
                     f"{', '.join(f'{t:.2f}' for t in epochs[cached])} | {m['val']['accuracy']:.4f} |")
    if {"true", "false"} <= set(epochs) and len(epochs["true"]) > 1:
        later = mean(epochs["true"][1:])
        none_epoch = mean([m["train"]["wall_s"] for m in runs("sst2") if m["freeze"] == "none"])
        lines += ["", f"Epochs after the first with the cache: {later:.2f} s, against {mean(epochs['false']):.1f} s "
                  f"for an uncached frozen-encoder epoch (**{mean(epochs['false']) / later:.0f}×**) and "
                  f"{none_epoch:.1f} s for a full fine-tuning epoch (**{none_epoch / later:.0f}×**); target ≥ 20×."]
    return lines


def by_override(part: str, key: str, default: str) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for m in runs(part):
        groups[str(override(m, key, default))].append(m)
    return groups


def accuracy_table(key: str, groups: dict[str, list[dict]], order: list[str]) -> list[str]:
    """One row per value of ``key``: SST-2 dev accuracy and samples/s over the seeds."""
    lines = [f"| {key} | dev accuracy | seeds | samples/s |", "|---|---|---|---|"]
    for value in [v for v in order if v in groups]:
        ms = groups[value]
        lines.append(f"| {value} | {spread([m['val']['accuracy'] for m in ms])} | {len(ms)} | "
                     f"{spread([m['train']['samples_per_s'] for m in ms], '.1f')} |")
    return lines


def bf16_table() -> list[str]:
    groups = by_override("bf16", "trainer.precision", "32-true")
    if not groups:
        return ["_bf16: no recorded runs._"]
    lines = accuracy_table("trainer.precision", groups, sorted(groups))
    if {"32-true", "bf16-mixed"} <= set(groups):
        acc = {p: mean([m["val"]["accuracy"] for m in groups[p]]) for p in groups}
        sps = {p: mean([m["train"]["samples_per_s"] for m in groups[p]]) for p in groups}
        lines += ["", f"bf16-mixed ÷ float32: {sps['bf16-mixed'] / sps['32-true']:.2f}× samples/s end to end; "
                  f"dev accuracy {100 * (acc['bf16-mixed'] - acc['32-true']):+.2f} points (target: within ± 0.5)."]
    return lines


def probe_table() -> list[str]:
    groups = by_override("probe", "head.pooling", "pooler")
    return accuracy_table("head.pooling", groups, ["pooler", "cls", "mean"]) if groups else ["_probe: no recorded runs._"]


def main() -> None:
    out = ["# Freeze comparison: results", "",
           "Produced by `bash experiments/freeze_comparison/run.sh` (commands and budget in its header); "
           "`python experiments/freeze_comparison/table.py` wrote this file from `<part>/runs/*.json`. "
           "Per-part plots and tables from `python -m bertlab.compare`: `<part>/comparison.{md,png}`.", ""]
    for part in ("sst2", "conll2003"):
        out += [f"## {part}", ""] + policy_table(part) + [""]
    out += ["## Frozen-feature cache (SST-2 subset, freeze=encoder, 3 epochs, seed 1)", ""] + cache_table() + [""]
    out += ["## bf16-mixed vs float32 (SST-2 subset, freeze=none, seeds 1 and 2)", ""] + bf16_table() + [""]
    out += ["## Linear probes on the frozen encoder (SST-2 subset, freeze=encoder, lr 1e-2, seeds 1 and 2)", "",
            "How the sentence vector is read: the pooler (dense + tanh over [CLS], the default and the `encoder` "
            "row above, there at lr 1e-3), the raw [CLS] vector, or the mean over real tokens. Their samples/s are not "
            "speed figures: the test suite shared the cores during these runs.", ""]
    out += probe_table() + [""]
    out += [f"Machine: {machine()}; CPU only. The speed-up of `freeze=encoder` over `freeze=none` (target ≥ 3×) is "
            "the `speed vs none` column."]
    (HERE / "RESULTS.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
