"""Write experiments/distillation/RESULTS.md from the recorded runs (<part>/runs/*.json, see run.sh).

Per task: the teacher, the 3-layer student without distillation (distill.alpha=1.0) and with it (0.5; and with
layer matching when the *_matched part ran), mean ± sample std over seeds, with the goals of issue 56 (within
1.5 points of the teacher on SST-2, 2 on CoNLL-2003; at least 2 points above the plain student); the cost of a
training step of each against the plain student's; then prediction as whole processes (student against teacher,
torch and the gated int8 ONNX graph; goal ≥ 1.8× faster) from <part>/predict_speed.json.

    python experiments/distillation/table.py [--out RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tables import machine, override, spread  # noqa: E402

HERE = Path(__file__).resolve().parent
TASKS = {"sst2": ("accuracy", "dev accuracy", 1.5, "predict: SST-2 dev", "sst2"),
         "conll2003": ("f1", "dev entity F1", 2.0, "predict: CoNLL-2003 eng.testa", "conll")}
SPEED_GOAL = 1.8
GAIN_GOAL = 2.0  # points above the student without distillation


def runs(part: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((HERE / part / "runs").glob("*.json"))]


def arm(m: dict) -> str:
    """Which row a recorded run belongs to."""
    if not m.get("distill"):
        return "teacher"
    if float(override(m, "distill.alpha", m["distill"].get("alpha", 0.5))) == 1.0:
        return "student"
    if float(m["distill"].get("hidden_weight") or 0) > 0 or float(m["distill"].get("attention_weight") or 0) > 0:
        return "matched"
    return "distilled"


LABELS = {"teacher": "teacher (MiniLM-L6, 6 layers)", "student": "student, 3 layers, no distillation (alpha 1.0)",
          "distilled": "student, 3 layers, distilled (alpha 0.5, T 2)",
          "matched": "student, 3 layers, distilled + hidden/attention matching"}


def step_ms(m: dict) -> float:
    return 1000.0 * m["train"]["wall_s"] / max(1, m["train"]["steps"])


def points(value: float) -> float:
    return 100.0 * value  # accuracy and F1 are fractions: points are percent


def task_table(task: str) -> list[str]:
    key, label, within, _, _ = TASKS[task]
    groups: dict[str, list[dict]] = {}
    for m in runs(task) + runs(f"{task}_matched"):
        groups.setdefault(arm(m), []).append(m)
    if not groups:
        return [f"_{task}: no recorded runs (bash experiments/distillation/run.sh DATA_DIR {task})._"]
    mean = {a: statistics.mean(m["val"][key] for m in ms) for a, ms in groups.items()}
    plain_step = statistics.mean(step_ms(m) for m in groups.get("student", [])) if "student" in groups else None
    lines = [f"| run | params | {label} | seeds | vs teacher (points) | vs plain student (points) | "
             "ms per training step | step cost vs plain student |", "|---|---|---|---|---|---|---|---|"]
    for a in ("teacher", "student", "distilled", "matched"):
        ms = groups.get(a)
        if not ms:
            continue
        to_teacher = f"{points(mean[a] - mean['teacher']):+.2f}" if "teacher" in mean and a != "teacher" else "–"
        to_plain = (f"{points(mean[a] - mean['student']):+.2f}" if "student" in mean and a not in
                    ("teacher", "student") else "–")
        steps = [step_ms(m) for m in ms]
        cost = f"{statistics.mean(steps) / plain_step:.2f}×" if plain_step else "–"
        lines.append(f"| {LABELS[a]} | {ms[0]['params']['total']:,} | {spread([m['val'][key] for m in ms])} | "
                     f"{len(ms)} | {to_teacher} | {to_plain} | {spread(steps, '.1f')} | {cost} |")
    if {"teacher", "student", "distilled"} <= set(mean):
        gap = points(mean["teacher"] - mean["distilled"])
        gain = points(mean["distilled"] - mean["student"])
        lines += ["", f"Goals: distilled student within {within:g} points of the teacher: {gap:.2f} points below "
                  f"({'met' if gap <= within else 'not met'}); at least {GAIN_GOAL:g} points above the student "
                  f"without distillation: {gain:+.2f} ({'met' if gain >= GAIN_GOAL else 'not met'})."]
    return lines


def speed_table(task: str) -> list[str]:
    _, _, _, label, key = TASKS[task]
    path = HERE / task / "predict_speed.json"
    if not path.is_file():
        return [f"_{task}: no prediction timing recorded._"]
    report = json.loads(path.read_text())
    case = report.get(key) or {}
    sides = case.get("sides") or {}
    score = "accuracy" if key == "sst2" else "entity_f1"
    host = report.get("machine") or {}
    where = f"{host.get('cpu', '?')}, {host.get('torch_threads', '?')} threads, load {host.get('load_average', ['?'])[0]}"
    lines = [f"{label}, {report['batch_size']} a batch, median of {report['rounds']} rounds ({where}):", "",
             "| side | wall s (whole process) | peak RSS MiB | score | speed vs teacher |", "|---|---|---|---|---|"]
    for side, r in sides.items():
        vs = r.get("speed_vs_teacher")
        vs_text = "–" if vs is None else f"{vs:.2f}× ({'met' if vs >= SPEED_GOAL else 'not met'}: goal ≥ {SPEED_GOAL}×)"
        lines.append(f"| {side} | {r['wall_s']:.2f} | {r['peak_rss_mib']:.0f} | {r.get(score, '–')} | {vs_text} |")
    gate = (case.get("student") or {}).get("int8_gate")
    if gate:
        lines += ["", f"The student's int8 ONNX gate: {gate['metric']} {gate['fp32']:.4f} fp32 → {gate['int8']:.4f} "
                  f"int8 ({gate['drop_points']:.2f} points), {'passed' if gate['passed'] else 'FAILED'}."]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = p.parse_args(argv)
    out = ["# Distillation: results", "", "Made by `bash experiments/distillation/run.sh` and "
           "`python experiments/distillation/table.py` (see README.md); training on " + machine() + ".", ""]
    for task in TASKS:
        out += [f"## {task}", "", *task_table(task), "", *speed_table(task), ""]
    args.out.write_text("\n".join(out))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
