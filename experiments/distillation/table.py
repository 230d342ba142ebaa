"""Write experiments/distillation/RESULTS.md from the recorded runs (<part>/runs/*.json, see run.sh).

Per task: the teacher, the 3-layer student without distillation (distill.alpha=1.0) and with it (0.5; with
layer matching when the *_matched part ran; with unlabelled text, data.distill_file, when the *_unlabelled part
ran), mean ± sample std over seeds, with the goals of issue 56 (within 1.5 points of the teacher on SST-2, 2 on
CoNLL-2003; at least 2 points above the plain student) for each distilled row; the cost of a training step of each
against the plain student's (and, where the teacher's kept outputs answered some runs' steps, which ran it); then
prediction as whole processes (student against teacher, torch and the gated int8 ONNX graph; goal ≥ 1.8× faster)
from <task>/predict_speed.json, with how many texts each process predicted.

    python experiments/distillation/table.py [--dir experiments/distillation] [--out RESULTS.md]

``--dir``: where run.sh recorded them (its RECORD; default this folder).
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


RECORDED = HERE  # run.sh's RECORD (table.py --dir)


def runs(part: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((RECORDED / part / "runs").glob("*.json"))]


def arm(m: dict) -> str:
    """Which row a recorded run belongs to."""
    if not m.get("distill"):
        return "teacher"
    if float(override(m, "distill.alpha", m["distill"].get("alpha", 0.5))) == 1.0:
        return "student"
    if override(m, "data.distill_file"):
        return "unlabelled"
    if float(m["distill"].get("hidden_weight") or 0) > 0 or float(m["distill"].get("attention_weight") or 0) > 0:
        return "matched"
    return "distilled"


ARMS = ("teacher", "student", "distilled", "matched", "unlabelled")
LABELS = {"teacher": "teacher (MiniLM-L6, 6 layers)", "student": "student, 3 layers, no distillation (alpha 1.0)",
          "distilled": "student, 3 layers, distilled (alpha 0.5, T 2)",
          "matched": "student, 3 layers, distilled + hidden/attention matching",
          "unlabelled": "student, 3 layers, distilled + {n:,} unlabelled texts (alpha 0.5, T 2)"}


def row_name(a: str, ms: list[dict], groups: dict[str, list[dict]]) -> str:
    """The row's name; the unlabelled row says how many texts joined the labelled ones."""
    labelled = (groups.get("student") or groups.get("teacher") or [{}])[0].get("data", {}).get("train_examples")
    extra = ms[0]["data"]["train_examples"] - labelled if labelled else None
    return LABELS[a].format(n=extra) if extra is not None else LABELS[a].replace("{n:,} ", "")


def step_cells(ms: list[dict], plain_step: float | None) -> tuple[str, str]:
    """ms per step and its ratio to the plain student's. Where the teacher's kept outputs answered some runs'
    steps (metrics.json's distill.teacher_outputs: read; older runs do not say), the runs that ran the teacher
    and those that read its outputs are given apart: their steps differ by a teacher forward."""
    def ratio(steps: list[float]) -> str:
        return f"{statistics.mean(steps) / plain_step:.2f}×" if plain_step and steps else "–"

    read = [(m.get("distill") or {}).get("teacher_outputs") == "read" for m in ms]
    if not any(read) or all(read):
        steps = [step_ms(m) for m in ms]
        return spread(steps, ".1f") + (" (teacher's outputs read)" if all(read) else ""), ratio(steps)
    ran = [step_ms(m) for m, r in zip(ms, read) if not r]
    kept = [step_ms(m) for m, r in zip(ms, read) if r]
    seeds = ", ".join(str(m["seed"]) for m, r in zip(ms, read) if not r)
    return (f"teacher run (seed {seeds}): {spread(ran, '.1f')}; outputs read: {spread(kept, '.1f')}",
            f"{ratio(ran)}; {ratio(kept)}")


def step_ms(m: dict) -> float:
    return 1000.0 * m["train"]["wall_s"] / max(1, m["train"]["steps"])


def points(value: float) -> float:
    return 100.0 * value  # accuracy and F1 are fractions: points are percent


def task_table(task: str) -> list[str]:
    key, label, within, _, _ = TASKS[task]
    groups: dict[str, list[dict]] = {}
    for m in runs(task) + runs(f"{task}_matched") + runs(f"{task}_unlabelled"):
        groups.setdefault(arm(m), []).append(m)
    if not groups:
        return [f"_{task}: no recorded runs (bash experiments/distillation/run.sh DATA_DIR {task})._"]
    mean = {a: statistics.mean(m["val"][key] for m in ms) for a, ms in groups.items()}
    plain_step = statistics.mean(step_ms(m) for m in groups.get("student", [])) if "student" in groups else None
    lines = [f"| run | params | {label} | seeds | vs teacher (points) | vs plain student (points) | "
             "ms per training step | step cost vs plain student |", "|---|---|---|---|---|---|---|---|"]
    for a in ARMS:
        ms = groups.get(a)
        if not ms:
            continue
        to_teacher = f"{points(mean[a] - mean['teacher']):+.2f}" if "teacher" in mean and a != "teacher" else "–"
        to_plain = (f"{points(mean[a] - mean['student']):+.2f}" if "student" in mean and a not in
                    ("teacher", "student") else "–")
        steps, cost = step_cells(ms, plain_step)
        lines.append(f"| {row_name(a, ms, groups)} | {ms[0]['params']['total']:,} | "
                     f"{spread([m['val'][key] for m in ms])} | {len(ms)} | {to_teacher} | {to_plain} | "
                     f"{steps} | {cost} |")
    goals = [goal_line(a, mean, within) for a in ARMS[2:] if {"teacher", "student", a} <= set(mean)]
    return lines + (["", *goals] if goals else [])


def goal_line(a: str, mean: dict[str, float], within: float) -> str:
    gap = points(mean["teacher"] - mean[a])
    gain = points(mean[a] - mean["student"])
    name = {"distilled": "distilled student", "matched": "matched student", "unlabelled": "student with unlabelled text"}
    where = f"{gap:.2f} points below" if gap >= 0 else f"{-gap:.2f} points above it"
    return (f"Goals, {name[a]}: within {within:g} points of the teacher: {where} "
            f"({'met' if gap <= within else 'not met'}); at least {GAIN_GOAL:g} points above the student without "
            f"distillation: {gain:+.2f} ({'met' if gain >= GAIN_GOAL else 'not met'}).")


def speed_table(task: str) -> list[str]:
    _, _, _, label, key = TASKS[task]
    path = RECORDED / task / "predict_speed.json"
    if not path.is_file():
        return [f"_{task}: no prediction timing recorded._"]
    report = json.loads(path.read_text())
    case = report.get(key) or {}
    sides = case.get("sides") or {}
    score = "accuracy" if key == "sst2" else "entity_f1"
    host = report.get("machine") or {}
    where = f"{host.get('cpu', '?')}, {host.get('torch_threads', '?')} threads, load {host.get('load_average', ['?'])[0]}"
    scored = case.get("examples") or case.get("sentences")
    predicted = case.get("predicted") or scored  # reports before --input-repeat predicted the dev set once
    texts = (f"{predicted:,} texts a process (the {scored:,} dev texts × {predicted // scored}, scored on the "
             "first copy)" if predicted != scored else f"{scored:,} texts a process")
    lines = [f"{label}: {texts}, {report['batch_size']} a batch, median of {report['rounds']} rounds ({where}):", "",
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
    p.add_argument("--dir", type=Path, default=HERE, help="run.sh's RECORD folder (default: this folder)")
    p.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = p.parse_args(argv)
    global RECORDED
    RECORDED = args.dir.resolve()
    out = ["# Distillation: results", "", "Made by `bash experiments/distillation/run.sh` and "
           "`python experiments/distillation/table.py` (see README.md); training on " + machine() + ".", ""]
    for task in TASKS:
        out += [f"## {task}", "", *task_table(task), "", *speed_table(task), ""]
    args.out.write_text("\n".join(out))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
