"""Prediction throughput as a user runs it: whole processes (start-up and model loading included), bertlab's
backends against ``transformers.pipeline`` on the run's exported folder, same inputs, same batch size, same
threads; each side's accuracy on the gold labels and its peak memory.

Sides: ``bertlab_torch`` (``python -m bertlab.predict RUN --backend torch``), ``bertlab_onnx`` (the ONNX export,
fp32), ``bertlab_onnx_int8`` (its gated int8 graph), ``hf_pipeline`` (``pipeline("text-classification")`` or
``pipeline("token-classification")`` on ``export=true``'s folder). Each side runs ``--rounds`` times, sides in
turn; the report gives the median wall time and the ratios against the pipeline.

    python benchmarks/predict_speed.py --sst2-run RUN [--conll-run RUN] [--threads 2] [--rounds 3] [--json out.json]
    python benchmarks/predict_speed.py --train [--data-dir ../shared/data]   # trains the two MiniLM runs first
    python benchmarks/predict_speed.py --sst2-run TEACHER --student-run STUDENT [--sides a,b,...] [--input-repeat K]

``--student-run`` (``--conll-student-run``): a distilled student of the SST-2 (CoNLL-2003) run
(docs/distillation.md) joins that task's sides as ``student_torch`` and ``student_onnx_int8`` (its own gated
int8 export), each with ``speed_vs_teacher`` (the teacher's same backend over the student's wall time), and the
gates' verdicts are reported. With ``--train`` an SST-2 student is trained too: 3 of MiniLM-L6's 6 layers
(``distill.student_layers=[0,2,4]``), distilled from the SST-2 run on the same 8,000 sentences. ``--sides``
keeps only the sides named (e.g. ``bertlab_torch,bertlab_onnx_int8,student_torch,student_onnx_int8``).

``--train`` fine-tunes MiniLM-L6 (SST-2: the first 8,000 training sentences, one epoch; CoNLL-2003: the first
2,000 sentences, one epoch) with export=true and then the ONNX export with int8. SST-2's inputs are the 872 dev
sentences in file order; CoNLL-2003's the sentences of eng.testa (words joined by spaces for the pipeline).

``--input-repeat K`` (default 1) gives every side the same input file with those sentences K times over, one copy
after the other, so that prediction, not the process start and the model load (a few seconds each), makes the
wall time: e.g. ``--input-repeat 23`` predicts 20,056 SST-2 texts (``--input-repeat 6``: 19,500 CoNLL-2003
sentences). The score is taken on the first copy (the dev set's own, as with K = 1); the report says how many
texts each side predicted (``predicted``, next to the scored ``examples`` / ``sentences``).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO,
    SHARED_DATA,
    emit,
    int8_gate,
    machine_description,
    onnx_export,
    python,
    run_child,
    thread_env,
    time_processes,
)

BATCH = 32
PIPELINE = """
import json, sys
from transformers import pipeline
task, model, inputs, out, batch = sys.argv[1:6]
texts = [line.rstrip("\\n") for line in open(inputs, encoding="utf-8")]
pipe = pipeline(task, model=model, device=-1, **({"aggregation_strategy": "none"} if task == "token-classification" else {}))
results = pipe(texts, batch_size=int(batch))
with open(out, "w", encoding="utf-8") as f:
    for r in results:
        f.write(json.dumps(r, default=float) + "\\n")
"""


def sst2_dev(data_dir: Path) -> tuple[list[str], list[str]]:
    with (data_dir / "sst2" / "dev.tsv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["sentence"] for r in rows], [r["label"] for r in rows]


def conll_testa(data_dir: Path) -> tuple[list[list[str]], list[list[str]]]:
    sentences, tags, words, labels = [], [], [], []
    for line in (data_dir / "conll2003" / "eng.testa").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(words)
                tags.append(labels)
            words, labels = [], []
            continue
        parts = line.split()
        words.append(parts[0])
        labels.append(parts[-1])
    if words:
        sentences.append(words)
        tags.append(labels)
    return sentences, tags


def train_runs(data_dir: Path, workdir: Path, threads: int) -> tuple[Path, Path]:
    runs = {"sst2": ["task=sst2", "data.max_train_samples=8000"],
            "conll": ["task=conll2003", "data.max_train_samples=2000"]}
    out = {name: train_one(name, args, data_dir, workdir, threads) for name, args in runs.items()}
    return out["sst2"], out["conll"]


def train_one(name: str, args: list[str], data_dir: Path, workdir: Path, threads: int) -> Path:
    run_dir = workdir / f"run_{name}"
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run, never a resume of an earlier one
    cmd = [python(), str(REPO / "train.py"), "model=minilm_l6", *args, "trainer.max_epochs=1", "export=true",
           "logger=csv", "trainer.enable_progress_bar=false", f"paths.data_dir={data_dir}",
           f"hydra.run.dir={run_dir}"]
    child = run_child(cmd, env=thread_env(threads))
    if child.returncode != 0:
        raise SystemExit(f"training {name} failed:\n{child.stderr[-3000:]}")
    return run_dir


def train_student(teacher: Path, data_dir: Path, workdir: Path, threads: int) -> Path:
    """A 3-layer student of the SST-2 run (its layers 0, 2, 4), distilled on the same sentences."""
    return train_one("sst2_student", ["task=sst2", "data.max_train_samples=8000", f"distill.teacher={teacher}",
                                      "distill.student_layers=[0,2,4]"], data_dir, workdir, threads)


def predict_command(model: Path, backend: str, name: str, inputs: Path, work: Path) -> list[str]:
    return [python(), "-m", "bertlab.predict", str(model), str(inputs), "--backend", backend, "--batch-size",
            str(BATCH), "--no-progress", "--output", str(work / f"{name}.jsonl")]


def sides(run_dir: Path, onnx_dir: Path, inputs: Path, hf_task: str, work: Path) -> dict[str, list[str]]:
    return {"bertlab_torch": predict_command(run_dir, "torch", "bertlab_torch", inputs, work),
            "bertlab_onnx": predict_command(onnx_dir, "onnx", "bertlab_onnx", inputs, work),
            "bertlab_onnx_int8": predict_command(onnx_dir, "onnx-int8", "bertlab_onnx_int8", inputs, work),
            "hf_pipeline": [python(), "-c", PIPELINE, hf_task, str(run_dir / "export"), str(inputs),
                            str(work / "hf_pipeline.jsonl"), str(BATCH)]}


# A student's side → the teacher's side it is timed against.
STUDENT_SIDES = {"student_torch": "bertlab_torch", "student_onnx_int8": "bertlab_onnx_int8"}


def student_sides(student_run: Path, onnx_dir: Path, inputs: Path, work: Path) -> dict[str, list[str]]:
    return {"student_torch": predict_command(student_run, "torch", "student_torch", inputs, work),
            "student_onnx_int8": predict_command(onnx_dir, "onnx-int8", "student_onnx_int8", inputs, work)}


def first_copy(path: Path, n: int) -> list[str]:
    """The output lines of the inputs' first copy (``--input-repeat``): the ones scored against the gold labels."""
    return path.read_text(encoding="utf-8").splitlines()[:n]


def write_inputs(path: Path, lines: list[str], repeat: int) -> Path:
    """One input line per example, the whole list ``repeat`` times over."""
    path.write_text("".join(line + "\n" for line in lines) * repeat, encoding="utf-8")
    return path


def sequence_accuracy(path: Path, gold: list[str], hf: bool, id2label: dict[str, str]) -> float:
    preds = []
    for line in first_copy(path, len(gold)):
        r = json.loads(line)
        preds.append(r["label"] if not hf else id2label.get(r["label"], r["label"]))
    return round(sum(p == g for p, g in zip(preds, gold)) / len(gold), 4)


def entity_f1(path: Path, gold: list[list[str]]) -> float | None:
    from seqeval.metrics import f1_score

    preds = [json.loads(line)["tags"] for line in first_copy(path, len(gold))]
    if len(preds) != len(gold) or any(len(p) != len(g) for p, g in zip(preds, gold)):
        return None
    return round(float(f1_score(gold, preds)), 4)


def measure(name: str, commands: dict[str, list[str]], threads: int, rounds: int) -> dict[str, Any]:
    out = time_processes(name, commands, threads, rounds)
    if "hf_pipeline" in out:
        base = out["hf_pipeline"]["wall_s"]
        for side in out:
            out[side]["speed_vs_pipeline"] = round(base / out[side]["wall_s"], 3)
    for side, teacher in STUDENT_SIDES.items():
        if side in out and teacher in out:
            out[side]["speed_vs_teacher"] = round(out[teacher]["wall_s"] / out[side]["wall_s"], 3)
    return out


def with_student(cmds: dict[str, list[str]], key: str, student_run: Path | None, keep: set[str] | None,
                 inputs: Path, work: Path, threads: int) -> dict[str, list[str]]:
    """The task's commands with the student's sides added, then only those ``keep`` names (None: all)."""
    if student_run is not None:
        cmds.update(student_sides(student_run, onnx_export(student_run, work / f"onnx_{key}_student", threads),
                                  inputs, work))
    return {side: cmd for side, cmd in cmds.items() if keep is None or side in keep}


def student_record(key: str, teacher: Path, student_run: Path, work: Path) -> dict[str, Any]:
    return {"run": str(student_run), "teacher": str(teacher), "int8_gate": int8_gate(work / f"onnx_{key}_student"),
            "teacher_int8_gate": int8_gate(work / f"onnx_{key}")}


def run(sst2_run: Path | None, conll_run: Path | None, data_dir: Path, threads: int, rounds: int,
        students: dict[str, Path | None] | None = None, keep: set[str] | None = None,
        repeat: int = 1) -> dict[str, Any]:
    students = students or {}
    report: dict[str, Any] = {"machine": machine_description(threads, peak=False), "batch_size": BATCH,
                              "rounds": rounds, "input_repeat": repeat}
    with tempfile.TemporaryDirectory(prefix="predict_speed_") as tmp:
        work = Path(tmp)
        if sst2_run is not None:
            texts, gold = sst2_dev(data_dir)
            inputs = write_inputs(work / "sst2.txt", texts, repeat)
            cmds = sides(sst2_run, onnx_export(sst2_run, work / "onnx_sst2", threads), inputs, "text-classification", work)
            cmds = with_student(cmds, "sst2", students.get("sst2"), keep, inputs, work, threads)
            r = measure("sst2", cmds, threads, rounds)
            config = json.loads((sst2_run / "export" / "config.json").read_text())
            for side in r:
                r[side]["accuracy"] = sequence_accuracy(work / f"{side}.jsonl", gold, side == "hf_pipeline",
                                                        {v: v for v in config.get("id2label", {}).values()})
            report["sst2"] = {"examples": len(texts), "predicted": len(texts) * repeat, "sides": r}
            if students.get("sst2") is not None:
                report["sst2"]["student"] = student_record("sst2", sst2_run, students["sst2"], work)
        if conll_run is not None:
            sentences, tags = conll_testa(data_dir)
            inputs = write_inputs(work / "conll.jsonl", [json.dumps({"tokens": s}) for s in sentences], repeat)
            cmds = sides(conll_run, onnx_export(conll_run, work / "onnx_conll", threads), inputs, "token-classification", work)
            # the pipeline reads raw text: the words joined by spaces
            plain = write_inputs(work / "conll.txt", [" ".join(s) for s in sentences], repeat)
            cmds["hf_pipeline"][cmds["hf_pipeline"].index(str(inputs))] = str(plain)
            cmds = with_student(cmds, "conll", students.get("conll"), keep, inputs, work, threads)
            r = measure("conll", cmds, threads, rounds)
            for side in r:
                if side != "hf_pipeline":
                    r[side]["entity_f1"] = entity_f1(work / f"{side}.jsonl", tags)
            report["conll"] = {"sentences": len(sentences), "predicted": len(sentences) * repeat, "sides": r}
            if students.get("conll") is not None:
                report["conll"]["student"] = student_record("conll", conll_run, students["conll"], work)
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sst2-run", type=Path, default=None)
    p.add_argument("--conll-run", type=Path, default=None)
    p.add_argument("--train", action="store_true", help="train both MiniLM runs first (minutes)")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/bertlab_predict_bench"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    p.add_argument("--student-run", type=Path, default=None,
                   help="a distilled student of the SST-2 run, timed against it (with --train: trained too)")
    p.add_argument("--conll-student-run", type=Path, default=None,
                   help="a distilled student of the CoNLL-2003 run, timed against it")
    p.add_argument("--sides", default=None, help="comma-separated: only these sides (default: all)")
    p.add_argument("--input-repeat", type=int, default=1, metavar="K",
                   help="predict the dev inputs K times over (one file), scored on the first copy (default 1)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    sst2_run, conll_run, student_run = args.sst2_run, args.conll_run, args.student_run
    if args.train:
        sst2_run, conll_run = train_runs(args.data_dir.resolve(), args.workdir, args.threads)
        student_run = train_student(sst2_run, args.data_dir.resolve(), args.workdir, args.threads)
    if sst2_run is None and conll_run is None:
        p.error("give --sst2-run / --conll-run, or --train")
    if (student_run is not None and sst2_run is None) or (args.conll_student_run is not None and conll_run is None):
        p.error("a student is timed against its teacher: give --sst2-run (--conll-run) too")
    if args.input_repeat < 1:
        p.error(f"--input-repeat {args.input_repeat}: give a whole number of copies, 1 or more")
    keep = set(args.sides.split(",")) if args.sides else None
    report = run(sst2_run, conll_run, args.data_dir, args.threads, args.rounds,
                 {"sst2": student_run, "conll": args.conll_student_run}, keep, args.input_repeat)
    emit(report, args.json)
    return report


if __name__ == "__main__":
    main()
