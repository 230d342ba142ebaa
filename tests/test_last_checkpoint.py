"""``last.ckpt`` is the last state of a run, whatever the monitored metric did, and ``ckpt_path=last`` on a
finished run trains nothing."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from conftest import run_train

# sst2 fixture: 40 examples, batch 20 → 2 steps per epoch, 3 epochs → 6 steps.
RUN = ("model=bert_tiny", "task=sst2", "trainer.max_epochs=3", "data.batch_size=20")


@pytest.fixture
def worsening_metric(monkeypatch):
    """Validation accuracy falls at every validation: only epoch 0 is ever the best."""
    from bertlab.tasks.families import SequenceFamily

    original = SequenceFamily.score
    calls = {"n": 0}

    def score(self, *args, **kwargs):
        scores = original(self, *args, **kwargs)
        scores["accuracy"] = 0.9 - 0.1 * calls["n"]
        calls["n"] += 1
        return scores

    monkeypatch.setattr(SequenceFamily, "score", score)


def _step(path: Path) -> int:
    return int(torch.load(path, map_location="cpu", weights_only=True)["global_step"])


def test_last_ckpt_is_the_final_state_when_the_metric_gets_worse(tmp_path, worsening_metric):
    run_dir = tmp_path / "run"
    m = run_train(list(RUN), run_dir)
    assert m["train"]["steps"] == 6
    assert "step_000002" in Path(m["best_checkpoint"]).name  # epoch 0 stays the best
    last = run_dir / "checkpoints" / "last.ckpt"
    assert _step(last) == 6

    before = last.stat().st_mtime_ns
    again = run_train([*RUN, "ckpt_path=last"], run_dir)
    assert last.stat().st_mtime_ns == before  # nothing trained, nothing rewritten
    assert again["train"]["steps"] == 6 and again["train"]["resumed_from_step"] == 6
    assert again["train"]["samples_per_s"] == m["train"]["samples_per_s"]  # the original run's train block
    assert again["val"]["num_examples"] == m["val"]["num_examples"]
    assert Path(again["best_checkpoint"]).name == Path(m["best_checkpoint"]).name


def test_last_ckpt_follows_save_every_n_steps(tmp_path, worsening_metric):
    run_dir = tmp_path / "run"
    run_train([*RUN, "trainer.max_epochs=2", "data.batch_size=8", "save_every_n_steps=3"], run_dir)
    assert _step(run_dir / "checkpoints" / "last.ckpt") == 10
    files = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert files == ["epoch_000_step_000005.ckpt", "last.ckpt"], files


def test_evaluation_only_summary_names_the_evaluated_checkpoint(tmp_path, capsys):
    first = run_train([*RUN, "trainer.max_epochs=1"], tmp_path / "a")
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_train([*RUN, "train=false", f"ckpt_path={first['best_checkpoint']}"], tmp_path / "b")
    assert not [w for w in caught if "dirpath has changed" in str(w.message)]
    out = capsys.readouterr().out
    assert "evaluated checkpoint:" in out and "best checkpoint" not in out
    assert "train:" not in out
    assert json.loads((tmp_path / "b" / "metrics.json").read_text())["train"]["steps"] == 0
