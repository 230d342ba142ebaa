"""python -m bertlab.glue: GLUE's scoring on hand-made runs, and the one command on the fixtures."""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from pathlib import Path

import pytest
from conftest import FIXTURE_DATA, ROOT, main_in_process

from bertlab.glue import TASKS, GlueError, glue_table, parse_tasks


def fake_run(root: Path, name: str, task: str, seed: int, val: dict, extra: dict | None = None,
             overrides: tuple[str, ...] = ()) -> None:
    run = root / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(
        "".join(f"- {o}\n" for o in (f"task={task}", f"seed={seed}", *overrides)))
    metrics = {"task": task, "model": "bert_tiny", "freeze": "none", "seed": seed, "data_source": "sample",
               "val": {**val, "num_examples": 10}, "monitor": {"metric": "val/accuracy", "mode": "max"},
               **(extra or {})}
    (run / "metrics.json").write_text(json.dumps(metrics))


def test_glue_scores_as_glue_computes_them(tmp_path):
    fake_run(tmp_path, "0", "cola", 1, {"matthews_correlation": 0.30, "accuracy": 0.7})
    fake_run(tmp_path, "1", "cola", 2, {"matthews_correlation": 0.40, "accuracy": 0.7})
    fake_run(tmp_path, "2", "stsb", 1, {"pearson": 0.80, "spearmanr": 0.70, "combined_score": 0.75})
    fake_run(tmp_path, "3", "stsb", 2, {"pearson": 0.90, "spearmanr": 0.80, "combined_score": 0.85})
    fake_run(tmp_path, "4", "mnli", 1, {"accuracy": 0.60}, {"val_mismatched": {"accuracy": 0.50, "num_examples": 9}})
    fake_run(tmp_path, "5", "mnli", 2, {"accuracy": 0.70}, {"val_mismatched": {"accuracy": 0.64, "num_examples": 9}})
    table = glue_table([tmp_path])
    rows = {r.task: r for r in table.rows}
    assert list(rows) == ["cola", "stsb", "mnli"]  # GLUE's order
    assert rows["cola"].cell("MCC") == pytest.approx((35.0, statistics.stdev([30.0, 40.0])))
    assert rows["stsb"].per_run_scores == pytest.approx([75.0, 85.0])  # two metrics: their mean counts
    assert rows["mnli"].per_run_scores == pytest.approx([55.0, 67.0])  # matched and mismatched
    seeds = [statistics.fmean([30.0, 75.0, 55.0]), statistics.fmean([40.0, 85.0, 67.0])]
    assert table.score == pytest.approx((statistics.fmean(seeds), statistics.stdev(seeds)))
    assert table.score_without_wnli is None
    assert set(table.missing) == set(TASKS) - {"cola", "stsb", "mnli"}
    assert all(reason == "not run" for reason in table.missing.values())
    md = table.md_path.read_text()
    assert "| mnli | m acc / mm acc | 65.0 ± 7.1 / 57.0 ± 9.9 | 61.0 ± 8.5 | 2 |" in md
    assert "average over 3 of 9 tasks" in md and "- qqp: not run" in md
    with table.csv_path.open() as f:
        csv_rows = list(csv.DictReader(f))
    average = [r for r in csv_rows if r["task"] == "glue"][0]
    assert float(average["mean"]) == pytest.approx(statistics.fmean(seeds))
    assert {r["task"] for r in csv_rows if r["metric"] == "missing"} == set(table.missing)


def test_the_average_pairs_runs_by_seed(tmp_path):
    fake_run(tmp_path, "0", "rte", 1, {"accuracy": 0.60})
    fake_run(tmp_path, "1", "rte", 2, {"accuracy": 0.80})
    fake_run(tmp_path, "2", "qnli", 2, {"accuracy": 0.50})  # listed first for qnli, but it is seed 2
    fake_run(tmp_path, "3", "qnli", 1, {"accuracy": 0.90})
    table = glue_table([tmp_path])
    assert table.score == pytest.approx((70.0, statistics.stdev([75.0, 65.0])))
    fake_run(tmp_path, "4", "wnli", 3, {"accuracy": 0.40})  # another seed: no per-seed average any more
    table = glue_table([tmp_path])
    assert table.score == (pytest.approx(statistics.fmean([70.0, 70.0, 40.0])), None)


def test_wnli_is_averaged_and_also_left_out_as_in_the_bert_paper(tmp_path):
    fake_run(tmp_path, "0", "rte", 1, {"accuracy": 0.60})
    fake_run(tmp_path, "1", "wnli", 1, {"accuracy": 0.40})
    table = glue_table([tmp_path])
    assert table.score == (pytest.approx(50.0), None)
    assert table.score_without_wnli == (pytest.approx(60.0), None)


def test_a_run_without_the_official_metric_is_not_scored(tmp_path):
    fake_run(tmp_path, "0", "mnli", 1, {"accuracy": 0.6})  # no val_mismatched block
    fake_run(tmp_path, "1", "rte", 1, {"accuracy": 0.6})
    table = glue_table([tmp_path])
    assert [r.task for r in table.rows] == ["rte"] and "official metrics" in table.missing["mnli"]


def test_runs_of_several_configurations_are_refused(tmp_path):
    fake_run(tmp_path, "0", "rte", 1, {"accuracy": 0.6}, overrides=("optim.lr=1e-05",))
    fake_run(tmp_path, "1", "rte", 1, {"accuracy": 0.5}, overrides=("optim.lr=2e-05",))
    with pytest.raises(GlueError, match="differ in optim.lr"):
        glue_table([tmp_path])


def test_unknown_task_is_an_error():
    with pytest.raises(GlueError, match="not a GLUE task"):
        parse_tasks("cola,squad")
    assert parse_tasks(None) == list(TASKS)


def test_one_command_runs_the_tasks_with_data_and_lists_the_others(tmp_path):
    data = tmp_path / "data"
    for task in ("cola", "mnli"):
        shutil.copytree(FIXTURE_DATA / task, data / task)
    out = tmp_path / "glue"
    env = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    # python -m bertlab.glue run ... in this process (conftest.main_in_process); it launches train.py's multirun
    proc = main_in_process(
        ["run", "--tasks", "cola,mnli,qqp", "--out", str(out), "model=bert_tiny", "trainer.max_steps=2",
         "data.batch_size=8", "logger=csv", "trainer.accelerator=cpu", "trainer.enable_progress_bar=false",
         f"paths.data_dir={data}", f"paths.cache_dir={tmp_path / 'cache'}"], module="bertlab.glue", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "qqp: data not found" in proc.stderr
    md = (out / "glue.md").read_text()
    assert "| cola | MCC |" in md and "| mnli | m acc / mm acc |" in md and "average over 2 of 9 tasks" in md
    assert "- qqp: data not found" in md and "- sst2: not asked for (--tasks)" in md
    tasks = sorted(json.loads(p.read_text())["task"] for p in out.glob("*/metrics.json"))
    assert tasks == ["cola", "mnli"]
    assert "tags" in json.loads(next(out.glob("*/metrics.json")).read_text())


def test_nothing_to_run_is_an_error_that_lists_the_missing_tasks(tmp_path, monkeypatch, capsys):
    from bertlab.glue import main

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.chdir(ROOT)
    out = tmp_path / "glue"
    status = main(["run", "--tasks", "qqp,qnli", "--out", str(out), f"paths.data_dir={tmp_path / 'empty'}",
                   f"paths.cache_dir={tmp_path / 'cache'}"])
    assert status == 1
    err = capsys.readouterr().err
    assert "qqp: data not found" in err and "qnli: data not found" in err and "no GLUE task ran" in err
    missing = json.loads((out / "glue_missing.json").read_text())
    assert missing["qqp"].startswith("data not found") and missing["cola"] == "not asked for (--tasks)"


def test_submission_files_take_each_tasks_best_run_and_list_the_rest(tmp_path):
    from bertlab.glue import submission

    runs = tmp_path / "runs"
    for name, task, seed, acc, preds in (("0", "rte", 1, 0.6, ["entailment", "not_entailment"]),
                                         ("1", "rte", 2, 0.7, ["not_entailment", "not_entailment"]),
                                         ("2", "stsb", 1, 0.8, ["3.25", "0.5"])):
        fake_run(runs, name, task, seed, {"accuracy": acc, "pearson": acc, "spearmanr": acc})
        (runs / name / "predictions").mkdir()
        (runs / name / "predictions" / "predict_predictions.tsv").write_text(
            "index\tprediction\n" + "".join(f"{i}\t{p}\n" for i, p in enumerate(preds)))
    missing = submission([runs], tmp_path / "out")
    assert (tmp_path / "out" / "RTE.tsv").read_text() == "index\tprediction\n0\tnot_entailment\n1\tnot_entailment\n"
    assert (tmp_path / "out" / "STS-B.tsv").is_file() and "CoLA" in missing and "MNLI-mm" in missing
    bad = runs / "1" / "predictions" / "predict_predictions.tsv"
    bad.write_text("index\tprediction\n0\tyes\n")
    with pytest.raises(GlueError, match="not one of GLUE's"):
        submission([runs], tmp_path / "out2")
