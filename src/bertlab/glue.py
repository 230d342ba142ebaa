"""All of GLUE with one command, and the GLUE table.

    python -m bertlab.glue run [--tasks cola,stsb,...] [--out DIR] [hydra overrides ...]
    python -m bertlab.glue table DIR [--out DIR]
    python -m bertlab.glue submit DIR --out DIR   # GLUE test-server files from runs made with predict=true

``run`` checks which of the nine GLUE tasks have their data (the files of their presets under
``paths.data_dir``, the bundled samples with ``data.source=sample``, or the hub when online), runs the ones
that do as one multirun (``python train.py -m experiment=glue task=<those> <overrides>``, run from the
repository root), records the others with the reason in ``<DIR>/glue_missing.json``, then writes the table.
``table`` writes ``glue.md`` and ``glue.csv`` for any folder of finished runs (read with
``bertlab.compare.find_runs``).

The table follows GLUE's scoring: per task its official metric(s) — CoLA Matthews correlation, STS-B Pearson
and Spearman, MRPC and QQP F1 and accuracy, MNLI matched and mismatched accuracy, accuracy for the others —
in percent; a task's score is the mean of its metrics, and the GLUE score the mean of the task scores. With
several seeds every cell is the mean ± sample std (ddof=1) over them. Tasks without runs are listed under the
table with the reason, and the average says over how many of the nine tasks it was taken.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertlab.analysis.runs import CompareError, Run, default_group_keys, find_runs
from bertlab.runtime.errors import ConfigError, OutputError, RecordError
from bertlab.runtime.files import writing
from bertlab.runtime.outputs import refuse_folder_in_bertlab_folders, refuse_replacing_bertlab_files
from bertlab.runtime.paths import existing_path, missing_message, typed_path
from bertlab.runtime.records import read_record

log = logging.getLogger(__name__)

# GLUE's nine tasks in the order of the GLUE paper's tables, with their official metrics:
# (column name, metrics.json block, metric name in that block).
TASKS: dict[str, list[tuple[str, str, str]]] = {
    "cola": [("MCC", "val", "matthews_correlation")],
    "sst2": [("acc", "val", "accuracy")],
    "mrpc": [("F1", "val", "f1"), ("acc", "val", "accuracy")],
    "stsb": [("Pearson", "val", "pearson"), ("Spearman", "val", "spearmanr")],
    "qqp": [("F1", "val", "f1"), ("acc", "val", "accuracy")],
    "mnli": [("m acc", "val", "accuracy"), ("mm acc", "val_mismatched", "accuracy")],
    "qnli": [("acc", "val", "accuracy")],
    "rte": [("acc", "val", "accuracy")],
    "wnli": [("acc", "val", "accuracy")],
}
MISSING_FILE = "glue_missing.json"


class GlueError(CompareError):
    """Nothing usable for a GLUE table, or an unknown task; the CLI prints it and exits with status 2."""


# ---------------------------------------------------------------- the table
@dataclass
class TaskRow:
    task: str
    runs: list[Path] = field(default_factory=list)
    seeds: list[Any] = field(default_factory=list)  # the seed of each run, in the order of ``values``
    # column name → the per-run values (percent)
    values: dict[str, list[float]] = field(default_factory=dict)

    def cell(self, column: str) -> tuple[float | None, float | None]:
        return _mean_std(self.values.get(column, []))

    @property
    def per_run_scores(self) -> list[float]:
        """The task score of each run (mean of its metrics), for the score's own mean ± std."""
        columns = [c for c, _, _ in TASKS[self.task]]
        n = min((len(self.values.get(c, [])) for c in columns), default=0)
        return [statistics.fmean(self.values[c][i] for c in columns) for i in range(n)]


@dataclass
class GlueTable:
    rows: list[TaskRow]
    missing: dict[str, str]  # task → why it has no row
    score: tuple[float | None, float | None]  # GLUE average over the rows' task scores: mean ± std over seeds
    score_without_wnli: tuple[float | None, float | None] | None  # the BERT paper's average (WNLI left out)
    md_path: Path
    csv_path: Path


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    # compare.py's convention: sample std (ddof=1), none for a single run.
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def _block(run: Run, block: str) -> dict[str, Any]:
    """A metrics.json block: val from compare's reading, other blocks (val_mismatched) from the file itself."""
    if block == "val":
        return {k.split("/", 1)[1]: v for k, v in run.values.items() if k.startswith("val/")}
    try:
        return json.loads((run.run_dir / "metrics.json").read_text()).get(block) or {}
    except (OSError, ValueError):
        return {}


def collect(dirs: list[Path]) -> tuple[dict[str, TaskRow], dict[str, str]]:
    """The GLUE runs under ``dirs`` per task, and the tasks that could not be scored (with the reason)."""
    runs = find_runs(dirs)
    glue_runs = [r for r in runs if r.config.get("task") in TASKS]
    if not glue_runs:
        found = sorted({str(r.config.get("task")) for r in runs})
        raise GlueError(f"no GLUE task among the runs under {', '.join(map(str, dirs))} (tasks found: {found})")
    varying = [k for k in default_group_keys(glue_runs) if k != "task"]
    if varying:
        raise GlueError(
            f"the runs differ in {', '.join(varying)} besides the task and the seed, so one GLUE table would mix "
            "configurations: give `table` the folder of one configuration (or compare them with "
            "python -m bertlab.compare)"
        )
    rows: dict[str, TaskRow] = {}
    missing: dict[str, str] = {}
    for run in glue_runs:
        task = run.config["task"]
        row = rows.setdefault(task, TaskRow(task))
        blocks = {b: _block(run, b) for _, b, _ in TASKS[task]}
        absent = [f"{b}/{m}" for _, b, m in TASKS[task] if not isinstance(blocks[b].get(m), int | float)]
        if absent:
            log.warning("%s: no %s in its metrics.json; left out of the table", run.run_dir, ", ".join(absent))
            continue
        row.runs.append(run.run_dir)
        row.seeds.append(run.config.get("seed"))
        for column, block, metric in TASKS[task]:
            row.values.setdefault(column, []).append(100.0 * float(blocks[block][metric]))
    for task in list(rows):
        if not rows[task].runs:
            missing[task] = "its runs lack the official metrics (see the warnings)"
            del rows[task]
    return rows, missing


def glue_table(dirs: list[Path], out: Path | None = None, missing: dict[str, str] | None = None) -> GlueTable:
    """Write ``glue.md`` and ``glue.csv`` into ``out`` (default: the first dir) for the GLUE runs under ``dirs``.

    ``missing`` adds tasks known to have no runs (``run`` passes what it found without data); tasks neither
    run nor named there are listed as "not run".
    """
    rows_by_task, unscored = collect(dirs)
    recorded: dict[str, str] = {}
    for d in dirs:
        path = Path(d) / MISSING_FILE
        if path.is_file():
            recorded.update(read_record(path, "the record of GLUE tasks without data", "Delete it and run "
                                        "bertlab.glue again (it is written anew)"))
    missing = {**recorded, **(missing or {}), **unscored}
    rows = [rows_by_task[t] for t in TASKS if t in rows_by_task]
    missing = {t: missing.get(t, "not run") for t in TASKS if t not in rows_by_task}
    without = [r for r in rows if r.task != "wnli"]
    score_without_wnli = _average(without) if len(without) < len(rows) and without else None
    out = Path(out) if out is not None else Path(dirs[0])
    _refuse_bertlab_files(out, ("glue.md", "glue.csv"))
    out.mkdir(parents=True, exist_ok=True)
    table = GlueTable(rows, missing, _average(rows), score_without_wnli, out / "glue.md", out / "glue.csv")
    _write_csv(table)
    _write_md(table, out)
    return table


def _average(rows: list[TaskRow]) -> tuple[float | None, float | None]:
    """The macro-average of the task scores: per seed (every task's run with that seed), then mean ± std over
    the seeds. When the tasks were not run with the same seeds (each once), it is the mean of the task means,
    without a std."""
    if not rows:
        return None, None
    by_seed = [dict(zip(r.seeds, r.per_run_scores)) for r in rows]
    seeds = set(by_seed[0])
    if all(set(s) == seeds and len(s) == len(r.seeds) for s, r in zip(by_seed, rows)):
        return _mean_std([statistics.fmean(s[seed] for s in by_seed) for seed in sorted(seeds, key=str)])
    return statistics.fmean(statistics.fmean(r.per_run_scores) for r in rows), None


def _fmt(mean: float | None, std: float | None) -> str:
    if mean is None:
        return ""
    return f"{mean:.1f}" if std is None else f"{mean:.1f} ± {std:.1f}"


def _columns() -> list[str]:
    return [f"{task}/{column}" for task, metrics in TASKS.items() for column, _, _ in metrics]


def _write_csv(table: GlueTable) -> None:
    with table.csv_path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["task", "metric", "mean", "std", "n"])
        for row in table.rows:
            for column, _, _ in TASKS[row.task]:
                mean, std = row.cell(column)
                writer.writerow([row.task, column, mean, "" if std is None else std, len(row.values[column])])
            mean, std = _mean_std(row.per_run_scores)
            writer.writerow([row.task, "score", mean, "" if std is None else std, len(row.per_run_scores)])
        mean, std = table.score
        writer.writerow(["glue", "average", "" if mean is None else mean, "" if std is None else std,
                         len(table.rows)])
        if table.score_without_wnli is not None:
            mean, std = table.score_without_wnli
            writer.writerow(["glue", "average_without_wnli", mean, "" if std is None else std, len(table.rows) - 1])
        for task in table.missing:
            writer.writerow([task, "missing", "", "", 0])


def _write_md(table: GlueTable, out: Path) -> None:
    header = ["task", "metric(s)", "value", "task score", "runs"]
    lines = ["# GLUE (dev sets)", "",
             "Metrics in percent as GLUE reports them; a task's score is the mean of its metrics, the average is "
             "the mean of the task scores (GLUE's macro-average). Cells are mean ± sample std over seeds; no ± for "
             "a single run.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.rows:
        names = " / ".join(c for c, _, _ in TASKS[row.task])
        values = " / ".join(_fmt(*row.cell(c)) for c, _, _ in TASKS[row.task])
        lines.append(f"| {row.task} | {names} | {values} | {_fmt(*_mean_std(row.per_run_scores))} | "
                     f"{len(row.runs)} |")
    scored = len(table.rows)
    label = "**GLUE average**" if scored == len(TASKS) else f"**average over {scored} of {len(TASKS)} tasks**"
    lines.append(f"| {label} | | | **{_fmt(*table.score)}** | |")
    if table.score_without_wnli is not None:
        lines.append(f"| average without WNLI (as the BERT paper) | | | {_fmt(*table.score_without_wnli)} | |")
    if table.missing:
        lines += ["", "Not in the table (so not in the average):", ""]
        lines += [f"- {task}: {reason}" for task, reason in table.missing.items()]
    lines += ["", "## Runs", ""]
    for row in table.rows:
        lines.append(f"- {row.task}: " + ", ".join(f"`{os.path.relpath(p, out.resolve())}`" for p in row.runs))
    table.md_path.write_text("\n".join(lines) + "\n")


def print_table(table: GlueTable) -> None:
    print(table.md_path.read_text().split("\n## Runs")[0].rstrip())


def _refuse_bertlab_files(out: Path, names: list[str] | tuple[str, ...]) -> None:
    """``out/<name>`` for each name this command writes: never a run's or an export's file
    (:mod:`bertlab.runtime.outputs`); its own earlier file of that name is replaced."""
    for name in names:
        try:
            refuse_replacing_bertlab_files(out / name, f"{out / name}", "Name another folder with --out DIR",
                                           replaces=names)
        except ConfigError as err:
            raise GlueError(str(err)) from None


# ---------------------------------------------------------------- test-server submission files
# The GLUE server's file per task and the predictions it accepts (bertlab's presets use the same label strings).
SUBMISSION = {"cola": ("CoLA", {"0", "1"}), "sst2": ("SST-2", {"0", "1"}), "mrpc": ("MRPC", {"0", "1"}),
              "stsb": ("STS-B", None), "qqp": ("QQP", {"0", "1"}),
              "mnli": ("MNLI-m", {"entailment", "neutral", "contradiction"}),
              "qnli": ("QNLI", {"entailment", "not_entailment"}), "rte": ("RTE", {"entailment", "not_entailment"}),
              "wnli": ("WNLI", {"0", "1"})}
NOT_FROM_PRESETS = {"MNLI-mm": "predict mnli/test_mismatched.tsv in a run of its own "
                               "(data.predict_file=mnli/test_mismatched.tsv) and copy its file",
                    "AX": "the diagnostic set: predict ax/test.tsv with an MNLI checkpoint"}


def submission(dirs: list[Path], out: Path) -> dict[str, str]:
    """Write ``<out>/<TASK>.tsv`` (``index<TAB>prediction``) from the ``predict=true`` files of the GLUE runs
    under ``dirs`` — per task the run with the best monitored dev score — and return what is missing (why)."""
    best: dict[str, tuple[float, Path]] = {}
    for run in find_runs(dirs):
        task = run.config.get("task")
        path = run.run_dir / "predictions" / "predict_predictions.tsv"
        if task not in SUBMISSION or not path.is_file():
            continue
        value = run.values.get(str(run.monitor.get("metric")), float("-inf"))
        value = -value if run.monitor.get("mode") == "min" else value
        if task not in best or value > best[task][0]:
            best[task] = (value, path)
    _refuse_bertlab_files(out, [f"{name}.tsv" for name, _ in SUBMISSION.values()])
    out.mkdir(parents=True, exist_ok=True)
    missing = {}
    for task, (name, allowed) in SUBMISSION.items():
        if task not in best:
            missing[name] = "no run with predict=true predictions"
            continue
        lines = best[task][1].read_text(encoding="utf-8").splitlines()
        if lines[0] != "index\tprediction":
            raise GlueError(f"{best[task][1]}: header {lines[0]!r}, expected 'index<TAB>prediction'")
        for i, line in enumerate(lines[1:], 2):
            value = line.split("\t")[1]
            if allowed is not None and value not in allowed:
                raise GlueError(f"{best[task][1]}:{i}: prediction {value!r} is not one of GLUE's {sorted(allowed)}")
        (out / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {**missing, **NOT_FROM_PRESETS}


# ---------------------------------------------------------------- running the tasks
def parse_tasks(spec: str | None) -> list[str]:
    if not spec:
        return list(TASKS)
    tasks = [t.strip() for t in spec.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise GlueError(f"--tasks: {', '.join(unknown)} is not a GLUE task; the tasks are {', '.join(TASKS)}")
    return tasks


def data_status(task: str, overrides: list[str], config_dir: Path) -> str | None:
    """None when the task's train and dev files can be found with these overrides, else the reason."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from bertlab.data.files import DataFiles
    from bertlab.data.readers import DataError
    from bertlab.runtime.config import ConfigError, DataConfig, TaskSpec

    # Only what decides where the data is; sweeps (seed=1,2,3) and the rest belong to the multirun itself.
    parser = OverridesParser.create()
    keep = [o for o in overrides if o.lstrip("+~").startswith(("data.", "paths."))
            and not parser.parse_overrides([o])[0].is_sweep_override()]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir.resolve()), version_base="1.3"):
        cfg = compose("train", overrides=[f"task={task}", "paths.root_dir=.", "paths.output_dir=.", *keep])
    GlobalHydra.instance().clear()
    try:
        data = DataConfig(**OmegaConf.to_container(cfg.data, resolve=True))
        files = DataFiles(TaskSpec(**OmegaConf.to_container(cfg.task, resolve=True)), data)
        for split in ("train", "val", *(data.val_extra_files or {})):
            files.split_file(split)
    except (DataError, ConfigError) as err:
        return str(err).splitlines()[0]
    return None


def run_glue(tasks: list[str], overrides: list[str], out: Path, train_script: Path) -> int:
    """Run the tasks whose data is found as one multirun into ``out``; returns the multirun's exit status."""
    try:  # a multirun folder of its own: its jobs are runs, never inside a run or an export folder
        refuse_folder_in_bertlab_folders(out, f"--out {out}", "Name a folder of its own with --out DIR (or leave "
                                         "it out: logs/glue/<time>)")
    except ConfigError as err:
        raise GlueError(str(err)) from None
    config_dir = train_script.parent / "conf"
    missing = {}
    for task in tasks:
        reason = data_status(task, overrides, config_dir)
        if reason is not None:
            missing[task] = f"data not found: {reason}"
            print(f"glue: {task}: {missing[task]}", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    not_asked = {t: "not asked for (--tasks)" for t in TASKS if t not in tasks}
    (out / MISSING_FILE).write_text(json.dumps({**not_asked, **missing}, indent=1) + "\n")
    available = [t for t in tasks if t not in missing]
    if not available:
        print("glue: no task has its data; nothing to run", file=sys.stderr)
        return 1
    command = [sys.executable, str(train_script), "-m", "experiment=glue", f"task={','.join(available)}",
               *overrides, f"hydra.sweep.dir={out}"]
    print("glue: " + " ".join(command), file=sys.stderr)
    return subprocess.run(command, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertlab.glue", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run the GLUE tasks (one multirun), then write the table")
    p_run.add_argument("--tasks", default=None, help=f"comma-separated subset of {','.join(TASKS)} (default: all)")
    p_run.add_argument("--out", type=Path, default=None, help="multirun folder (default: logs/glue/<time>)")
    p_run.add_argument("--train-script", type=Path, default=Path("train.py"), help="bertlab's train.py")
    p_run.add_argument("overrides", nargs="*", help="Hydra overrides for every task (e.g. seed=1,2,3 model=bert_tiny)")
    p_submit = sub.add_parser("submit", help="GLUE test-server files from runs made with predict=true")
    p_submit.add_argument("dirs", nargs="+", type=Path)
    p_submit.add_argument("--out", type=Path, required=True)
    p_table = sub.add_parser("table", help="write glue.md / glue.csv for finished runs")
    p_table.add_argument("dirs", nargs="+", type=Path)
    p_table.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        if args.command == "run":
            if not args.train_script.is_file():
                raise GlueError(missing_message(typed_path(args.train_script), "--train-script") + ": run from "
                                "bertlab's repository root or pass --train-script path/to/train.py")
            tasks = parse_tasks(args.tasks)
            import time

            out = args.out or Path("logs") / "glue" / time.strftime("%Y-%m-%d_%H-%M-%S")
            status = run_glue(tasks, list(args.overrides), out, args.train_script)
            if not any(out.rglob("metrics.json")):
                print(f"error: no GLUE task ran (see above); nothing to tabulate in {out}", file=sys.stderr)
                return 1
            if status != 0:
                print(f"glue: the multirun exited with status {status}; the table holds the runs that finished",
                      file=sys.stderr)
            dirs = [out]
        elif args.command == "submit":
            for folder in args.dirs:  # a misspelled folder is named as such, with the folders beside it
                existing_path(folder, "the folder", GlueError)
            with writing(args.out, "the submission files", "pass --out <a folder on a disk with room>"):
                missing = submission(args.dirs, args.out)
            for name in sorted(p.stem for p in args.out.glob("*.tsv")):
                print(f"wrote {args.out / name}.tsv")
            for name, why in missing.items():
                print(f"not written: {name}.tsv ({why})")
            return 0
        else:
            dirs, out = args.dirs, args.out
        with writing(out or dirs[0], "the GLUE table", "pass --out <a folder on a disk with room>"):
            table = glue_table(dirs, out)
    except (CompareError, OutputError, RecordError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print_table(table)
    print(f"wrote {table.md_path}\nwrote {table.csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
