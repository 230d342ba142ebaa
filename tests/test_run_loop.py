"""The run loop as a person sees it: the final validation runs once when the best weights are the final
ones, a resumed run says where it resumed, and a stopped multirun says how to finish the sweep."""

from __future__ import annotations

import logging
import signal
from types import SimpleNamespace

import pytest
from conftest import run_train
from hydra.types import RunMode

from bertlab.training.stopping import GracefulStop, sweep_command

# sst2 fixture: 40 training examples (batch 8 → 5 steps an epoch), 16 validation ones (batch 4 → 4 batches).
RUN = ["model=bert_tiny", "task=sst2", "data.batch_size=8", "data.eval_batch_size=4"]


@pytest.fixture
def validation_batches(monkeypatch):
    """How many validation batches a run computes (the sanity check's 2 included)."""
    from bertlab.training.module import TaskModule

    count = {"n": 0}
    step = TaskModule.validation_step

    def counted(self, batch, batch_idx):
        count["n"] += 1
        return step(self, batch, batch_idx)

    monkeypatch.setattr(TaskModule, "validation_step", counted)
    return count


@pytest.mark.parametrize("stop", ["trainer.max_epochs=1", "trainer.max_steps=3"])
def test_the_final_weights_are_validated_once(tmp_path, validation_batches, stop):
    # One epoch, or max_steps mid-epoch: the best checkpoint holds the final weights, which fit's last
    # validation scored; the recipe reuses those scores instead of running the 4 batches again.
    metrics = run_train([*RUN, stop], tmp_path / "run")
    assert validation_batches["n"] == 2 + 4  # sanity check + one validation
    assert metrics["val"]["num_examples"] == 16 and metrics["monitor"]["value"] == metrics["val"]["accuracy"]


def test_an_earlier_best_checkpoint_is_validated_again(tmp_path, validation_batches, monkeypatch):
    # The best weights are not in memory any more: they are loaded and scored (their predictions, the
    # model the summary uses and the test split all need them).
    from bertlab.tasks.families import SequenceFamily

    original = SequenceFamily.score
    calls = {"n": 0}

    def worsening(self, *args, **kwargs):
        scores = original(self, *args, **kwargs)
        scores["accuracy"] = 0.9 - 0.1 * calls["n"]
        calls["n"] += 1
        return scores

    monkeypatch.setattr(SequenceFamily, "score", worsening)
    metrics = run_train([*RUN, "trainer.max_epochs=2"], tmp_path / "run")
    assert validation_batches["n"] == 2 + 4 + 4 + 4
    assert "step_000005" in metrics["best_checkpoint"]


def test_a_resumed_run_says_where_it_resumed(tmp_path, caplog):
    run_train([*RUN, "trainer.max_epochs=1"], tmp_path / "run")
    with caplog.at_level(logging.INFO):
        metrics = run_train([*RUN, "trainer.max_epochs=2", "ckpt_path=last"], tmp_path / "run")
    lines = [r.getMessage() for r in caplog.records]
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert f"resuming from {last}: global step 5, 1 epoch done" in lines
    assert any(line.startswith("planned: 10 optimizer steps (2 epochs × 5 batches); resuming at step 5: 5 to go")
               for line in lines), lines
    assert metrics["train"]["resumed_from_step"] == 5


def test_a_stopped_multirun_says_how_to_finish_the_sweep(tmp_path):
    sweep = tmp_path / "multiruns" / "2026-01-01_00-00-00"
    (sweep / "0" / "checkpoints").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text(
        "hydra:\n  overrides:\n    task:\n    - model=bert_tiny\n    - seed=1,2,3\n    - optim.lr=interval(1e-5, 1e-4)\n")
    hc = SimpleNamespace(mode=RunMode.MULTIRUN, sweep=SimpleNamespace(dir=str(sweep)))
    command = sweep_command(hc)
    assert command == (f"python train.py -m model=bert_tiny seed=1,2,3 'optim.lr=interval(1e-5, 1e-4)' "
                       f"hydra.sweep.dir={sweep}")
    assert sweep_command(SimpleNamespace(mode=RunMode.RUN, sweep=hc.sweep)) is None
    assert sweep_command(SimpleNamespace(mode=RunMode.MULTIRUN, sweep=SimpleNamespace(dir=str(tmp_path)))) is None

    job = sweep / "0"
    resume = f"python train.py model=bert_tiny seed=1 hydra.run.dir={job} ckpt_path=last"
    saved = (job / "checkpoints" / "last.ckpt", 3)
    message = GracefulStop(job, resume, command)._message("SIGINT", saved)
    # The sweep first: re-running it skips the finished jobs; resuming this job alone is the alternative.
    assert message.index(command) < message.index(resume)
    assert "jobs that finished are skipped" in message
    # Nothing saved yet: no resume of this job is offered, the sweep still is.
    message = GracefulStop(job, resume, command)._message("SIGINT", None)
    assert command in message and resume not in message
    # A single run: only the resume command, as before.
    single = GracefulStop(job, resume)._message(signal.Signals.SIGTERM.name, saved)
    assert single.endswith(f"Resume with: {resume}")
