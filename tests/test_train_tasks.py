"""The real entry point for every preset task on fixtures: metrics.json follows DESIGN.md's contract."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

TINY = ("model=bert_tiny", "trainer.max_epochs=1", "data.batch_size=8", "data.eval_batch_size=5")

# task → (val split size in the fixture, monitored metric)
TASKS = {
    "sst2": (16, "accuracy"),
    "mrpc": (16, "f1"),
    "rte": (16, "accuracy"),
    "conll2003": (16, "f1"),
    "wnut17": (16, "f1"),
    "squad": (None, "f1"),
    "mlm": (None, "loss"),
}


def _check_contract(m: dict, run_dir: Path, task: str) -> None:
    for key in ("task", "model", "freeze", "seed", "data_source", "params", "val", "train", "data",
                "best_checkpoint", "monitor"):
        assert key in m, key
    assert m["task"] == task and m["model"] == "bert_tiny" and m["freeze"] == "none"
    assert "loss" in m["val"] and m["val"]["num_examples"] == m["data"]["val_examples"]
    for block in ("val", "train"):
        for k, v in m[block].items():
            assert v is None or isinstance(v, int | float) and math.isfinite(v), (block, k, v)
    assert m["train"]["samples_per_s"] > 0 and m["train"]["tokens_per_s"] > 0
    assert Path(m["best_checkpoint"]).is_file() and "=" not in Path(m["best_checkpoint"]).name
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    scope = json.loads((run_dir / "update_scope.json").read_text())
    assert scope["policy"] == "none" and scope["frozen_changed"] == []
    assert scope["totals"]["encoder"]["changed"] == scope["totals"]["encoder"]["tensors"]
    assert m["monitor"]["value"] == m["val"][m["monitor"]["metric"].split("/")[1]]


@pytest.mark.parametrize("task", list(TASKS))
def test_task_runs_end_to_end(train_run, tmp_path, task):
    m = train_run(*TINY, f"task={task}")
    size, metric = TASKS[task]
    _check_contract(m, tmp_path / "run", task)
    if size is not None:
        assert m["val"]["num_examples"] == size
    assert m["monitor"]["metric"] == f"val/{metric}"
    if task == "squad":
        preds = json.loads((tmp_path / "run" / "predictions" / "val_predictions.json").read_text())
        assert len(preds) == m["val"]["num_examples"] and 0 <= m["val"]["exact_match"] <= 100
    if task == "mlm":
        assert m["val"]["perplexity"] == pytest.approx(math.exp(m["val"]["loss"]), rel=1e-6)


def test_mlm_with_nsp_and_whole_word_masking(train_run):
    m = train_run(*TINY, "task=mlm", "task.nsp=true", "task.whole_word_masking=true")
    assert 0.0 <= m["val"]["nsp_accuracy"] <= 1.0
    assert m["val"]["loss"] == pytest.approx(m["val"]["mlm_loss"] + m["val"]["nsp_loss"], rel=1e-6)


def test_max_steps_mid_epoch_still_validates_and_keeps_a_best(train_run, tmp_path):
    m = train_run("model=bert_tiny", "task=sst2", "trainer.max_steps=3", "data.batch_size=4")
    assert m["train"]["steps"] == 3 and m["val"]["num_examples"] == 16
    assert "step_000003" in Path(m["best_checkpoint"]).name


def test_eval_only_from_a_checkpoint(train_run, tmp_path):
    first = train_run(*TINY, "task=sst2")
    again = train_run(*TINY, "task=sst2", "train=false", f"ckpt_path={first['best_checkpoint']}", name="eval")
    assert again["val"] == first["val"]


def test_eval_batch_size_does_not_change_metrics(train_run):
    a = train_run(*TINY, "task=conll2003", "data.eval_batch_size=1", name="a")
    b = train_run(*TINY, "task=conll2003", "data.eval_batch_size=7", name="b")
    for k in ("f1", "precision", "recall", "num_examples"):
        assert a["val"][k] == pytest.approx(b["val"][k], abs=1e-6)


def test_sample_source_is_marked(train_run):
    m = train_run("model=bert_tiny", "task=sst2", "data.source=sample", "trainer.max_steps=2")
    assert m["data_source"] == "sample" and "sample" in m["note"]


def test_a_run_without_validation_data_trains_and_says_there_is_none(train_run, capsys):
    """data.val_file=null: no validation (Lightning's empty list), the last checkpoint is the run's, and the
    summary says so instead of printing an empty score; every task family goes through the one loader."""
    for task in ("sst2", "conll2003"):
        metrics = train_run("model=bert_tiny", f"task={task}", "data.val_file=null", "trainer.max_steps=2", name=task)
        assert metrics["val"] == {}
        assert metrics["best_checkpoint"].endswith("last.ckpt") and Path(metrics["best_checkpoint"]).is_file()
        out = capsys.readouterr().out
        assert "val:              none (no validation data: data.val_file is not set)" in out
        assert "last checkpoint:" in out and "None" not in out
