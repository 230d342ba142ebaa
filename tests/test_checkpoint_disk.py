"""Checkpoint disk use: last.ckpt and a best checkpoint of the same step are one file (hard links), a resume
from either still restores everything, rotating or deleting one leaves the other whole;
``checkpoint.best_weights_only`` and ``checkpoint.keep_last``; the summary's disk line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from conftest import run_train

from bertlab.runtime.errors import CheckpointError, ConfigError
from bertlab.training.checkpoints import checkpoint_settings, disk_use

# sst2 fixture: 40 examples, batch 20 → 2 steps per epoch.
RUN = ["model=bert_tiny", "task=sst2", "data.batch_size=20"]


def _load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def _ckpts(run_dir: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted((run_dir / "checkpoints").glob("*.ckpt"))}


@pytest.fixture
def accuracy_sequence(monkeypatch):
    """Validation accuracy follows the given values, one per validation (the sanity check's first)."""
    from bertlab.tasks.families import SequenceFamily

    original = SequenceFamily.score

    def use(values: list[float]) -> None:
        calls = {"n": 0}

        def score(self, *args, **kwargs):
            scores = original(self, *args, **kwargs)
            scores["accuracy"] = values[min(calls["n"], len(values) - 1)]
            calls["n"] += 1
            return scores

        monkeypatch.setattr(SequenceFamily, "score", score)

    return use


def test_best_and_last_of_the_same_step_are_one_file(tmp_path, accuracy_sequence):
    accuracy_sequence([0.1, 0.5, 0.6, 0.7])  # improves every epoch: the best is always the latest
    run_dir = tmp_path / "run"
    metrics = run_train([*RUN, "trainer.max_epochs=3"], run_dir)
    files = _ckpts(run_dir)
    assert sorted(files) == ["epoch_002_step_000006.ckpt", "last.ckpt"]  # the older bests were removed
    best, last = files["epoch_002_step_000006.ckpt"], files["last.ckpt"]
    assert os.path.samefile(best, last) and Path(metrics["best_checkpoint"]).name == best.name
    # The shared file is the full training state.
    state = _load(last)
    assert state["global_step"] == 6 and state["optimizer_states"] and state["lr_schedulers"]
    assert disk_use(run_dir).split("; ")[1] == (
        f"checkpoints/: last.ckpt {disk_use_size(last)}, epoch_002_step_000006.ckpt = last.ckpt (one file)")
    # Deleting the best leaves last.ckpt whole, and a resume from it trains further.
    best.unlink()
    assert _load(last)["global_step"] == 6
    accuracy_sequence([0.1, 0.8])
    metrics = run_train([*RUN, "trainer.max_epochs=4", "ckpt_path=last"], run_dir)
    assert metrics["train"]["resumed_from_step"] == 6 and metrics["train"]["steps"] == 8


def disk_use_size(path: Path) -> str:
    from bertlab.training.checkpoints import _size

    return _size(path.stat().st_size)


def test_an_earlier_best_keeps_its_own_file_and_weights_only_drops_the_optimizer(tmp_path, accuracy_sequence):
    accuracy_sequence([0.1, 0.9, 0.5, 0.4])  # the first epoch stays the best
    run_dir = tmp_path / "run"
    metrics = run_train([*RUN, "trainer.max_epochs=3", "checkpoint.best_weights_only=true"], run_dir)
    files = _ckpts(run_dir)
    best, last = files["epoch_000_step_000002.ckpt"], files["last.ckpt"]
    assert Path(metrics["best_checkpoint"]) == best.resolve()
    assert not os.path.samefile(best, last)  # shared while they were the same step, its own file since
    best_state, last_state = _load(best), _load(last)
    assert best_state["global_step"] == 2 and last_state["global_step"] == 6
    assert "optimizer_states" not in best_state and "callbacks" not in best_state
    assert last_state["optimizer_states"]
    assert best.stat().st_size < last.stat().st_size / 2
    # A weights-only file evaluates (train=false) but is refused as a resume, with what to do instead.
    evaluated = run_train([*RUN, "train=false", f"ckpt_path={best}"], tmp_path / "eval")
    assert evaluated["val"]["num_examples"] == 16
    with pytest.raises(CheckpointError, match=r"holds the weights only .* resume from the run's last.ckpt"):
        run_train([*RUN, "trainer.max_epochs=4", f"ckpt_path={best}"], tmp_path / "resume")


def test_keep_last_n_keeps_the_states_before_last(tmp_path):
    run_dir = tmp_path / "run"
    run_train([*RUN, "trainer.max_epochs=3", "save_every_n_steps=1", "checkpoint.keep_last=3"], run_dir)
    files = _ckpts(run_dir)
    kept = sorted(n for n in files if n.startswith("last_step_"))
    assert kept == ["last_step_000004.ckpt", "last_step_000005.ckpt"]
    assert [_load(files[n])["global_step"] for n in kept] == [4, 5]
    assert _load(files["last.ckpt"])["global_step"] == 6
    # Each kept state resumes: the one of step 5 (mid-epoch) trains the last step again.
    metrics = run_train([*RUN, "trainer.max_epochs=3", "save_every_n_steps=1",
                         f"ckpt_path={files['last_step_000005.ckpt']}"], run_dir)
    assert metrics["train"]["resumed_from_step"] == 5 and metrics["train"]["steps"] == 6


def test_keep_last_zero_removes_the_training_state_once_finished(tmp_path, accuracy_sequence):
    accuracy_sequence([0.1, 0.9, 0.5])
    run_dir = tmp_path / "run"
    metrics = run_train([*RUN, "trainer.max_epochs=2", "checkpoint.keep_last=0", "checkpoint.best_weights_only=true"],
                        run_dir)
    assert sorted(_ckpts(run_dir)) == ["epoch_000_step_000002.ckpt"]
    assert "optimizer_states" not in _load(Path(metrics["best_checkpoint"]))
    # Best = final step, shared with last.ckpt: the best outlives it, without the training state.
    accuracy_sequence([0.1, 0.5, 0.9])
    metrics = run_train([*RUN, "trainer.max_epochs=2", "checkpoint.keep_last=0", "checkpoint.best_weights_only=true"],
                        tmp_path / "other")
    assert sorted(_ckpts(tmp_path / "other")) == ["epoch_001_step_000004.ckpt"]
    assert "optimizer_states" not in _load(Path(metrics["best_checkpoint"]))


@pytest.mark.parametrize("node, message", [
    ({"keep_last": -1}, r"checkpoint.keep_last=-1: give a whole number >= 0"),
    ({"keep_last": "2"}, r"checkpoint.keep_last='2'"),
    ({"best_weights_only": "yes"}, r"checkpoint.best_weights_only='yes': give true or false"),
    ({"keep_best": 2}, r"checkpoint.keep_best is not a checkpoint setting"),
])
def test_checkpoint_settings_are_checked(node, message):
    with pytest.raises(ConfigError, match=message):
        checkpoint_settings(node)
    assert checkpoint_settings(None) == {"keep_last": 1, "best_weights_only": False}


def test_disk_use_counts_a_linked_file_once(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"x" * 2_500_000)
    os.link(tmp_path / "checkpoints" / "last.ckpt", tmp_path / "checkpoints" / "epoch_000_step_000002.ckpt")
    (tmp_path / "metrics.json").write_bytes(b"y" * 500)
    assert disk_use(tmp_path) == ("2.5 MB; checkpoints/: last.ckpt 2.5 MB, epoch_000_step_000002.ckpt = last.ckpt "
                                  "(one file)")
