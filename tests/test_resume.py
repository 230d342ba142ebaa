"""Resume: a run killed (SIGKILL) or crashed in the middle of an epoch and resumed from its last checkpoint
ends exactly where the same run uninterrupted ends — weights, optimizer, schedule, data order, dropout RNG,
metrics and the logger's metrics.csv — and records ``train.resumed_from_step``.

``BERTLAB_TEST_KILL_AT_STEP=k`` is a test hook (bertlab.training.debug_hooks.KillAtStep): the run SIGKILLs itself
after optimizer step k, as a pre-empted job dies (no cleanup, no final save).
"""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import signal
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_train
from lightning.fabric.utilities.data import _set_sampler_epoch
from test_bad_input import cli
from torch.utils.data import DataLoader

from bertlab.data.batching import Collator, FeatureDataset, TrainBatchSampler
from bertlab.models.hf_weights import CheckpointError
from bertlab.runtime.errors import JobStopped, NonFiniteLossError
from bertlab.runtime.files import remove_stale_temporaries
from bertlab.training.checkpoints import AtomicCheckpointIO
from bertlab.training.debug_hooks import KILL_AT_STEP_ENV, SIGNAL_AT_STEP_ENV
from bertlab.training.stopping import GracefulStop

# sst2 fixture: 40 examples, batch 8 → 5 steps per epoch; step checkpoints at 2, 4, 6, 8; epoch ends at 5, 10.
RUN = ("model=bert_tiny", "task=sst2", "trainer.max_epochs=2", "trainer.deterministic=true", "data.batch_size=8",
       "save_every_n_steps=2", "trainer.log_every_n_steps=1")
TIMINGS = ("wall_s", "samples_per_s", "tokens_per_s")


def _load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_training(a: Path, b: Path) -> None:
    """Two run dirs ended in the same state: metrics.json (timings aside) and last.ckpt tensors."""
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (a, b))
    assert ma["val"] == mb["val"]
    assert ma["monitor"] == mb["monitor"]
    assert {k: v for k, v in ma["train"].items() if k not in (*TIMINGS, "resumed_from_step")} == \
        {k: v for k, v in mb["train"].items() if k not in (*TIMINGS, "resumed_from_step")}
    assert Path(ma["best_checkpoint"]).name == Path(mb["best_checkpoint"]).name
    ca, cb = _load(a / "checkpoints" / "last.ckpt"), _load(b / "checkpoints" / "last.ckpt")
    assert ca["global_step"] == cb["global_step"]
    for name, tensor in ca["state_dict"].items():
        assert torch.equal(tensor, cb["state_dict"][name]), name
    for sa, sb in zip(ca["optimizer_states"][0]["state"].values(), cb["optimizer_states"][0]["state"].values()):
        assert torch.equal(sa["exp_avg"], sb["exp_avg"]) and torch.equal(sa["exp_avg_sq"], sb["exp_avg_sq"])
    assert ca["lr_schedulers"][0]["last_epoch"] == cb["lr_schedulers"][0]["last_epoch"]


def csv_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "csv" / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if not k.endswith(TIMINGS)} for row in csv.DictReader(f)]


# ----------------------------------------------------------------------------------------------------------
# SIGKILL in the middle of an epoch, resumed from the command line


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_matches_the_uninterrupted_run(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    common = (*RUN, "trainer.accelerator=cpu")
    out = cli(tmp_path, *common, f"hydra.run.dir={a}")
    assert out.returncode == 0, out.stderr[-3000:]

    out = cli(tmp_path, *common, f"hydra.run.dir={b}", env={KILL_AT_STEP_ENV: "8"})
    assert out.returncode == -signal.SIGKILL
    assert not (b / "metrics.json").exists()
    last = _load(b / "checkpoints" / "last.ckpt")
    assert last["global_step"] == 6  # saved after the first batch of epoch 1: mid-epoch
    assert last["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["ready"] == 1
    assert last["TaskDataModule"]["train_sampler"] == {"seed": 42, "epoch": 1, "batches_done": 1}

    out = cli(tmp_path, *common, f"hydra.run.dir={b}", "ckpt_path=last")
    assert out.returncode == 0, out.stderr[-3000:]
    assert_same_training(a, b)
    assert json.loads((a / "metrics.json").read_text())["train"]["resumed_from_step"] is None
    assert json.loads((b / "metrics.json").read_text())["train"]["resumed_from_step"] == 6
    # The logger run continues: the killed run's rows up to the checkpoint, then the resumed run's.
    assert csv_rows(a) == csv_rows(b)


# ----------------------------------------------------------------------------------------------------------
# A crash (non-finite loss) mid-epoch, resumed in-process from last.ckpt and from a checkpoint file


def nan_loss_at(monkeypatch, calls: set[int]) -> None:
    """Make the training loss NaN at these training-batch numbers (0-based, counted across epochs)."""
    from bertlab.tasks.families import SequenceFamily

    original = SequenceFamily.loss
    seen = {"n": 0}

    def loss(self, logits, batch):
        value = original(self, logits, batch)
        n = seen["n"]
        seen["n"] += 1
        return value * float("nan") if n in calls else value

    monkeypatch.setattr(SequenceFamily, "loss", loss)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> str:
    # One scratch vocabulary for every run here: the tokenizers WordPiece trainer breaks ties in hash-map
    # order (huggingface/tokenizers#1794), so runs that each train their own vocabulary may differ.
    return f"paths.cache_dir={tmp_path_factory.mktemp('cache')}"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, shared_cache) -> Path:
    run_dir = tmp_path_factory.mktemp("resume") / "a"
    run_train([*RUN, shared_cache], run_dir)
    return run_dir


def test_crash_mid_epoch_then_resume_from_last(uninterrupted, shared_cache, tmp_path, monkeypatch):
    b = tmp_path / "b"
    with monkeypatch.context() as patch:
        nan_loss_at(patch, {7})
        with pytest.raises(NonFiniteLossError, match=r"at global step 7, epoch 2, batch 2"):
            run_train([*RUN, shared_cache], b)
    assert _load(b / "checkpoints" / "last.ckpt")["global_step"] == 6

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = run_train([*RUN, shared_cache, "ckpt_path=last"], b)
    assert metrics["train"]["resumed_from_step"] == 6
    assert_same_training(uninterrupted, b)
    # Lightning's warnings that contradict a resume (bertlab continues the CSV and the checkpoint folder).
    contradicting = [str(w.message) for w in caught
                     if "Previous log files" in str(w.message) or "exists and is not empty" in str(w.message)]
    assert not contradicting, contradicting


def test_crash_then_resume_from_an_epoch_end_checkpoint_file(uninterrupted, shared_cache, tmp_path, monkeypatch):
    c = tmp_path / "c"
    with monkeypatch.context() as patch:
        nan_loss_at(patch, {8})
        with pytest.raises(NonFiniteLossError, match=r"at global step 8, epoch 2, batch 3"):
            run_train([*RUN, shared_cache], c)
    epoch_end = c / "checkpoints" / "epoch_000_step_000005.ckpt"
    metrics = run_train([*RUN, shared_cache, f"ckpt_path={epoch_end}"], c)
    assert metrics["train"]["resumed_from_step"] == 5
    assert_same_training(uninterrupted, c)


def test_ckpt_path_last_without_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match=r"ckpt_path=last: .*/checkpoints/last\.ckpt does not exist; pass "
                                              r"hydra\.run\.dir=<the run dir to resume>"):
        run_train([*RUN, "ckpt_path=last"], tmp_path / "fresh")


def test_step_checkpoints_never_choose_best_on_stale_scores(uninterrupted):
    # Steps 2, 4, 6, 8 come between validations; only validated steps (5, 10) may become "best".
    best = json.loads((uninterrupted / "metrics.json").read_text())["best_checkpoint"]
    assert Path(best).name in ("epoch_000_step_000005.ckpt", "epoch_001_step_000010.ckpt")
    names = sorted(p.name for p in (uninterrupted / "checkpoints").iterdir())
    assert names == sorted({"last.ckpt", Path(best).name})


# ----------------------------------------------------------------------------------------------------------
# The pieces


def test_batch_sampler_resumes_the_rest_of_its_epoch():
    lengths = np.arange(3, 43)
    sampler = TrainBatchSampler(lengths, batch_size=4, seed=3)
    loader = DataLoader(FeatureDataset([{"i": i} for i in range(40)]), batch_sampler=sampler, collate_fn=list)
    _set_sampler_epoch(loader, 2)  # what Lightning calls at each epoch start
    assert sampler.epoch == 2
    epoch2 = [list(b) for b in sampler]
    _set_sampler_epoch(loader, 3)
    assert [list(b) for b in sampler] != epoch2  # each epoch its own order

    done = 4
    sampler.set_epoch(2)
    assert sampler.state_dict()["batches_done"] == 0  # a new epoch: nothing used yet
    next(iter(sampler))  # yielding (a loader prefetching) is not using: the count moves only with batch_used()
    for _ in range(done):
        sampler.batch_used()
    sampler.set_epoch(2)  # Lightning sets the same epoch again: the count stays
    state = sampler.state_dict()
    assert state == {"seed": 3, "epoch": 2, "batches_done": 4}
    resumed = TrainBatchSampler(lengths, batch_size=4, seed=3)
    resumed.load_state_dict(state)
    assert resumed.epoch == 2
    assert [list(b) for b in resumed] == epoch2[done:]
    assert [list(b) for b in resumed] == epoch2  # only the resumed epoch is shortened

    finished = TrainBatchSampler(lengths, batch_size=4, seed=3)
    finished.load_state_dict({"seed": 3, "epoch": 2, "batches_done": len(finished)})
    assert finished.epoch == 3 and len(list(finished)) == len(finished)


def test_mlm_masks_depend_on_seed_epoch_and_position_only():
    torch.manual_seed(0)
    features = [{"input_ids": [2, *torch.randint(10, 90, (20,)).tolist(), 3], "token_type_ids": [0] * 22,
                 "index": i} for i in range(16)]
    mlm = {"vocab_size": 100, "mask_id": 4, "special_ids": torch.tensor([0, 1, 2, 3, 4]), "probability": 0.3,
           "whole_word": False, "continuation": None, "generator": torch.Generator().manual_seed(0),
           "fixed_eval_masks": False, "seed": 0}
    sampler = TrainBatchSampler(np.full(16, 22), batch_size=4, seed=5)
    dataset = FeatureDataset(features)

    def epoch_masks(collator, skip=0):
        return [collator(dataset.__getitems__(b))["input_ids"] for b in list(sampler)[skip:]]

    first = epoch_masks(Collator(0, None, dict(mlm)))
    # A fresh collator (another worker, or a resumed run) draws the same masks for the same batches.
    again = epoch_masks(Collator(0, None, dict(mlm, generator=torch.Generator().manual_seed(99))), skip=2)
    assert all(torch.equal(x, y) for x, y in zip(first[2:], again))
    sampler.set_epoch(1)
    other_epoch = epoch_masks(Collator(0, None, dict(mlm)))
    assert not all(torch.equal(x, y) for x, y in zip(first, other_epoch))


def test_atomic_checkpoint_io_never_leaves_a_half_written_file(tmp_path, monkeypatch):
    io = AtomicCheckpointIO()
    path = tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"global_step": 1, "w": torch.ones(3)}, path)
    assert _load(path)["global_step"] == 1

    def dies_halfway(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt  # the process is interrupted in the middle of writing

    monkeypatch.setattr(torch, "save", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        io.save_checkpoint({"global_step": 2, "w": torch.zeros(3)}, path)
    assert _load(path)["global_step"] == 1  # the previous checkpoint, whole
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]  # no temporary file left


# ----------------------------------------------------------------------------------------------------------
# SIGTERM / SIGINT (scancel, pre-emption, Ctrl-C): last.ckpt at the current step, non-zero exit, a resume hint


@pytest.fixture(scope="module")
def uninterrupted_cli(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("signal")
    a = base / "a"
    out = cli(base, *RUN, "trainer.accelerator=cpu", f"hydra.run.dir={a}")
    assert out.returncode == 0, out.stderr[-3000:]
    return a


@pytest.mark.slow
@pytest.mark.parametrize("name,step", [("TERM", 7), ("INT", 3)])
def test_signal_saves_last_ckpt_at_the_current_step_and_resume_matches(uninterrupted_cli, tmp_path, name, step):
    b = tmp_path / "b"
    common = (*RUN, "trainer.accelerator=cpu")
    out = cli(uninterrupted_cli.parent, *common, f"hydra.run.dir={b}", env={SIGNAL_AT_STEP_ENV: f"{step}:{name}"})
    signum = getattr(signal, f"SIG{name}")
    assert out.returncode == 128 + signum, out.stderr[-3000:]
    last = b / "checkpoints" / "last.ckpt"
    assert f"bertlab: stopped: received SIG{name}" in out.stderr
    assert f"saved {last} at global step {step}" in out.stderr
    assert "Resume with: python train.py" in out.stderr and f"hydra.run.dir={b} ckpt_path=last" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (b / "metrics.json").exists()
    assert _load(last)["global_step"] == step
    # A partial file of a write killed earlier (its process is gone) is removed when the run starts again.
    stale = b / "checkpoints" / "last.ckpt.tmp-999999999"
    stale.write_bytes(b"PK\x03\x04 half a zip")

    out = cli(uninterrupted_cli.parent, *common, f"hydra.run.dir={b}", "ckpt_path=last")
    assert out.returncode == 0, out.stderr[-3000:]
    assert not stale.exists() and f"removed {stale}" in out.stdout + out.stderr
    assert_same_training(uninterrupted_cli, b)
    assert json.loads((b / "metrics.json").read_text())["train"]["resumed_from_step"] == step
    assert csv_rows(uninterrupted_cli) == csv_rows(b)


def test_a_signal_outside_training_stops_at_once_and_says_nothing_was_saved(tmp_path):
    stop = GracefulStop(tmp_path, "python train.py hydra.run.dir=x ckpt_path=last")
    stop.install()
    try:
        with pytest.raises(JobStopped, match=r"received SIGTERM: .*no checkpoint had been written yet") as info:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs here
        assert info.value.signum == signal.SIGTERM
    finally:
        stop.uninstall()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


def test_stale_temporaries_of_live_processes_are_kept(tmp_path):
    mine = tmp_path / f"last.ckpt.tmp-{os.getppid()}"  # a live process (the parent) may still be writing it
    dead = tmp_path / "epoch_001.ckpt.tmp-999999999"
    for p in (mine, dead):
        p.write_bytes(b"x")
    assert remove_stale_temporaries(tmp_path) == [dead]
    assert mine.exists()


def test_full_disk_is_one_message_naming_the_disk_and_the_path(tmp_path, monkeypatch):
    def full(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04")
        raise OSError(errno.ENOSPC, "No space left on device")

    io = AtomicCheckpointIO()
    path = tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"global_step": 1}, path)
    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(CheckpointError, match=r"the disk is full: could not write the checkpoint "
                       + re.escape(str(path)) + r" \(disk mounted at /.*MiB free\)") as info:
        io.save_checkpoint({"global_step": 2}, path)
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]  # the old one kept, no partial file
    # torch's own zip writer reports the same failure as a RuntimeError
    monkeypatch.setattr(torch, "save", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file "
                     "data/0: file write failed")))
    with pytest.raises(CheckpointError, match="the disk is full"):
        io.save_checkpoint({"global_step": 2}, path)


def test_full_disk_during_training_ends_the_run_with_that_message(tmp_path, monkeypatch):
    real_save = torch.save
    calls = {"n": 0}

    def full_after_two(obj, f, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_after_two)
    with pytest.raises(CheckpointError, match=r"the disk is full: could not write the checkpoint .*\.ckpt \(disk mounted at"):
        run_train(list(RUN), tmp_path / "run")


@pytest.mark.slow
def test_slurm_preemption_signal_saves_last_ckpt_instead_of_lightnings_requeue(tmp_path):
    """Under SLURM, Lightning's auto-requeue would answer SIGUSR1 (``sbatch --signal=USR1@<s>``) by writing
    ``<run_dir>/hpc_ckpt_<n>.ckpt`` and calling ``scontrol requeue``; bertlab handles the signal itself:
    last.ckpt at the current step, exit 128 + SIGUSR1, the resume command (docs/reliability.md)."""
    run = tmp_path / "run"
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "1", "SLURM_JOB_NAME": "train", "SLURM_PROCID": "0",
             "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NODELIST": "localhost",
             SIGNAL_AT_STEP_ENV: "3:USR1"}
    out = cli(tmp_path, *RUN, "trainer.accelerator=cpu", f"hydra.run.dir={run}", env=slurm)
    assert out.returncode == 128 + signal.SIGUSR1, out.stderr[-3000:]
    assert "bertlab: stopped: received SIGUSR1" in out.stderr
    assert _load(run / "checkpoints" / "last.ckpt")["global_step"] == 3
    assert not list(run.glob("hpc_ckpt_*.ckpt"))  # Lightning's requeue handler did not run
    assert "requeu" not in (out.stdout + out.stderr).lower().replace("auto-requeueing enabled", "")
