"""A run dir belongs to one run; a checkpoint to one tokenizer; copied run folders use their own files
(issue: reliability, round two, items 5 and 6)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from bertlab.data.readers import DataError
from bertlab.models.hf_weights import CheckpointError
from bertlab.runtime.config import ConfigError
from bertlab.runtime.run_dir import FINGERPRINT_KEY, MARKER, claim_run_dir
from bertlab.training.start import init_start

TINY = ("model=bert_tiny", "task=sst2", "trainer.max_epochs=1")


@pytest.fixture
def first_run(train_run, tmp_path):
    train_run(*TINY, name="run")
    return tmp_path / "run"


def test_a_different_configuration_in_a_used_run_dir_is_refused(train_run, first_run):
    with pytest.raises(ConfigError, match=r"hydra.run.dir=.*/run is used: it holds a run with another "
                                          r"configuration \(optim.lr: 5e-05 there, 0.001 now\)"):
        train_run(*TINY, "optim.lr=1e-3", name="run")
    with pytest.raises(ConfigError, match=r"task.name: 'sst2' there, 'mrpc' now"):
        train_run("model=bert_tiny", "task=mrpc", "trainer.max_epochs=1", name="run")
    # Nothing of the refused runs was written.
    assert json.loads((first_run / MARKER).read_text())["config"]["optim"]["lr"] == 5e-05


def test_resume_evaluate_and_output_choices_are_the_same_run(train_run, first_run):
    train_run(*TINY, "ckpt_path=last", "trainer.max_epochs=1", name="run")
    train_run(*TINY, "train=false", f"ckpt_path={first_run / 'checkpoints' / 'last.ckpt'}", "test=false",
              "export=true", "logger=tensorboard", "data.num_workers=0", "tags=[again]", name="run")
    assert json.loads((first_run / MARKER).read_text())["status"] == "finished"


def test_overwrite_flag_empties_the_run_dir_first(train_run, first_run):
    (first_run / "checkpoints" / "epoch_009_step_000099.ckpt").write_bytes(b"the first run's")
    metrics = train_run(*TINY, "seed=7", "overwrite_run_dir=true", name="run")
    assert metrics["seed"] == 7
    assert not (first_run / "checkpoints" / "epoch_009_step_000099.ckpt").exists()  # none of the first run's left
    assert json.loads((first_run / MARKER).read_text())["config"]["seed"] == 7


def test_run_dir_with_outputs_but_no_record_is_refused_unless_resumed(tmp_path):
    from conftest import compose

    run = tmp_path / "old"
    (run / "checkpoints").mkdir(parents=True)
    cfg = compose(list(TINY), run)
    with pytest.raises(ConfigError, match="already holds a run's outputs"):
        claim_run_dir(run, cfg)
    claim_run_dir(run, compose([*TINY, "ckpt_path=last"], run))  # a run from before run records: resumable


def test_a_finished_multirun_job_may_run_again(tmp_path, monkeypatch):
    from conftest import compose

    import bertlab.runtime.run_dir as rd

    run = tmp_path / "0"
    claim_run_dir(run, compose(list(TINY), run))
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "old.ckpt").write_bytes(b"x")
    rd.finish_run_dir(run)
    monkeypatch.setattr(rd, "_in_multirun", lambda: True)
    claim_run_dir(run, compose([*TINY, "optim.lr=1e-3"], run))  # e.g. a sweeper's new trial in that folder
    assert not (run / "checkpoints").exists()
    monkeypatch.setattr(rd, "_in_multirun", lambda: False)
    (run / "checkpoints").mkdir()
    with pytest.raises(ConfigError):  # outside a multirun, or a job not finished: refused
        claim_run_dir(run, compose([*TINY, "optim.lr=1e-2"], run))


def test_init_from_a_copied_run_dir_uses_the_copy(train_run, first_run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(first_run, copy)
    start = init_start(str(copy))
    assert start.kind == "checkpoint" and start.checkpoint.parent.parent == copy
    assert start.run_tokenizer == copy / "tokenizer"
    # metrics.json keeps the absolute path where the run ran (a contract)
    best = json.loads((copy / "metrics.json").read_text())["best_checkpoint"]
    assert best.startswith(str(first_run))
    shutil.rmtree(first_run)  # moved, not copied: still works
    metrics = train_run(*TINY, f"model.init_from={copy}", name="from_copy")
    assert metrics["val"]["num_examples"] > 0


def test_checkpoint_and_tokenizer_of_different_runs_are_refused(train_run, first_run, tmp_path):
    assert torch.load(first_run / "checkpoints" / "last.ckpt", weights_only=True)[FINGERPRINT_KEY]
    # Another run's tokenizer of the same size (two tokens' ids swapped): every shape still fits.
    tok_file = first_run / "tokenizer" / "tokenizer.json"
    tok = json.loads(tok_file.read_text())
    vocab = tok["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[100:102]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    tok_file.write_text(json.dumps(tok))
    # The file differs from the one the run's tokenizer/ recorded (bertlab_fingerprint.json) ...
    with pytest.raises(CheckpointError, match=r"run/tokenizer/tokenizer.json is not the file .*checkpoints/.*ckpt "
                                              r"was written with \(a file of its tokenizer"):
        train_run(*TINY, f"model.init_from={first_run}", name="mixed")
    # ... and, with the record gone too, the vocabulary differs from the one the checkpoint recorded.
    (first_run / "tokenizer" / "bertlab_fingerprint.json").unlink()
    with pytest.raises(CheckpointError, match=r"was trained with another tokenizer than the one loaded "
                                              r"from .*/run/tokenizer \(vocabulary fingerprint"):
        train_run(*TINY, f"model.init_from={first_run}", name="mixed")
    with pytest.raises(CheckpointError, match=r"was trained with another tokenizer"):
        train_run(*TINY, "ckpt_path=last", name="run")


def test_a_resume_may_extend_the_training_length(train_run, first_run):
    metrics = train_run(*TINY[:2], "trainer.max_epochs=2", "ckpt_path=last", name="run")
    assert metrics["train"]["epochs"] == 2
    with pytest.raises(ConfigError, match=r"optim.lr: 5e-05 there, 0.001 now"):  # but not change what it trains
        train_run(*TINY[:2], "trainer.max_epochs=3", "optim.lr=1e-3", "ckpt_path=last", name="run")


def test_a_run_that_failed_before_writing_anything_does_not_claim_the_dir(train_run, tmp_path):
    with pytest.raises(DataError):
        train_run(*TINY, "data.text_column=nope", name="run")
    assert not (tmp_path / "run").exists()  # nothing of the failed run is left (its folder was made for it)
    train_run(*TINY, "optim.lr=1e-3", name="run")  # nothing of the failed run can mix with this one


# ----------------------------------------------------------------------------------------------------------
# A refused run writes nothing into the run dir; a run dir holds one live run at a time (issue #33, item 8)


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


CLI_TINY = ("model=bert_tiny", "task=sst2", "trainer.max_epochs=1", "trainer.limit_train_batches=2")


def cli(tmp_path, *overrides: str):
    """``python train.py <overrides>`` as test_bad_input.cli runs it, in this process (conftest.main_in_process):
    these tests are about the files of the run dir; test_bad_input keeps the real process's exit status."""
    from conftest import FIXTURE_DATA, main_in_process

    env = {"BERTLAB_DATA_DIR": str(FIXTURE_DATA), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": None}
    return main_in_process(["logger=csv", "trainer.enable_progress_bar=false", f"paths.cache_dir={tmp_path / 'cache'}",
                            *overrides], env=env)


@pytest.fixture(scope="module")
def _cli_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_run")
    run = root / "run"
    out = cli(root, *CLI_TINY, f"hydra.run.dir={run}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert (run / ".hydra" / "config.yaml").is_file() and (run / ".hydra" / "overrides.yaml").is_file()
    assert "optim.lr" not in (run / ".hydra" / "overrides.yaml").read_text()
    assert "Seed set to" in (run / "train.log").read_text()
    return run


@pytest.fixture
def cli_first_run(_cli_run, tmp_path):
    """A finished run (train.py), copied byte for byte into this test's folder."""
    run = tmp_path / "run"
    shutil.copytree(_cli_run, run, symlinks=True)
    return run


@pytest.mark.parametrize("refused_by", [
    ("optim.lr=1e-3",),                                          # the run dir's claim: another configuration
    ("data.num_workers=-1",),                                    # a setting check before the claim
    ("+callbacks.x._target_=lightning.pytorch.accelerators.cuda.subprocess.Popen", "+callbacks.x.args=[true]"),
])
def test_a_refused_run_leaves_every_file_of_the_run_dir_as_it_was(cli_first_run, tmp_path, refused_by):
    """.hydra/config.yaml, overrides.yaml and train.log stay the first run's, byte for byte: compare filed
    the first run's results under the refused run's config when Hydra had rewritten them already."""
    before = _snapshot(cli_first_run)
    out = cli(tmp_path, *CLI_TINY, *refused_by, f"hydra.run.dir={cli_first_run}")
    assert out.returncode == 1 and "bertlab: error:" in out.stderr, out.stderr[-3000:]
    assert _snapshot(cli_first_run) == before


def test_a_refused_multirun_job_leaves_the_used_folder_as_it_was(cli_first_run, tmp_path):
    """In a multirun the refused job also writes no metrics.json of its own (state: failed) over the
    earlier run's. (A finished run's folder may take a new multirun job; a stopped one's may not.)"""
    record = json.loads((cli_first_run / MARKER).read_text())
    (cli_first_run / MARKER).write_text(json.dumps({**record, "status": "running"}))  # stopped mid-way
    before = _snapshot(cli_first_run)
    out = cli(tmp_path, "hydra.mode=MULTIRUN", *CLI_TINY, "optim.lr=1e-3", f"hydra.sweep.dir={tmp_path}",
              "hydra.sweep.subdir=run")
    assert "is used: it holds a run with another configuration" in out.stderr + out.stdout
    assert _snapshot(cli_first_run) == before


def test_a_run_dir_in_use_by_a_live_run_is_refused(tmp_path):
    """Two runs of one configuration in one folder at once would both pass the configuration check; the
    lock on the folder refuses the second while the first runs, and frees the folder when it ends."""
    import subprocess
    import sys

    from conftest import compose

    from bertlab.runtime.run_dir import LOCK, release_run_dir

    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from filelock import FileLock; "
                               f"lock = FileLock({str(run / LOCK)!r}); lock.acquire(); print('held', flush=True); "
                               "time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=r"hydra.run.dir=.*/run is in use: another run is running in it"):
            claim_run_dir(run, compose(list(TINY), run))
        assert not (run / MARKER).exists()
    finally:
        holder.kill()
        holder.wait()
    claim_run_dir(run, compose(list(TINY), run))  # the folder is free again
    probe = [sys.executable, "-c", f"from filelock import FileLock; FileLock({str(run / LOCK)!r}, timeout=0).acquire()"]
    try:
        assert subprocess.run(probe, capture_output=True).returncode != 0  # held by this run now
    finally:
        release_run_dir()
    assert subprocess.run(probe, capture_output=True).returncode == 0  # and freed at its end


# ----------------------------------------------------------------------------------------------------------
# A run that fails before training leaves no folder behind, and never a held lock


def _lock_is_free(run_dir) -> bool:
    from bertlab.runtime.files import try_lock
    from bertlab.runtime.run_dir import LOCK

    lock = try_lock(run_dir / LOCK)
    if lock is None:
        return False
    lock.release()
    return True


@pytest.mark.parametrize("bad", [
    "data.val_file=sst2/dve.tsv",  # a data file not there: fails while the splits are found
    "model.init_from=/nonexistent/run",  # a start that is not there: fails while the model is built
    "trainer.max_epochs=-3",  # a setting out of range: fails before the run dir is claimed
])
def test_a_run_failing_before_its_first_step_removes_the_folder_it_made(train_run, tmp_path, bad):
    with pytest.raises((DataError, ConfigError, CheckpointError)):
        train_run(*TINY, bad, name="fresh")
    assert not (tmp_path / "fresh").exists()
    train_run(*TINY, "trainer.max_steps=1", name="fresh")  # the same folder takes a run at once
    assert (tmp_path / "fresh" / "metrics.json").is_file()


def test_a_failed_run_keeps_a_folder_that_holds_something_else_and_frees_its_lock(train_run, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")
    with pytest.raises(DataError):
        train_run(*TINY, "data.val_file=sst2/dve.tsv", name="mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "the user's"
    assert _lock_is_free(tmp_path / "mine")


def test_a_failed_run_keeps_an_empty_folder_it_did_not_make(train_run, tmp_path, monkeypatch):
    from bertlab.runtime import run_dir

    (tmp_path / "made_before").mkdir()
    monkeypatch.setattr(run_dir, "_PROCESS_START", run_dir._PROCESS_START + 10 ** 6)  # the folder is older
    with pytest.raises(DataError):
        train_run(*TINY, "data.val_file=sst2/dve.tsv", name="made_before")
    assert (tmp_path / "made_before").is_dir() and _lock_is_free(tmp_path / "made_before")


def test_a_run_failing_after_training_steps_keeps_its_folder(train_run, tmp_path, monkeypatch):
    import bertlab.train as train_module

    def fail(*args, **kwargs):
        raise ConfigError("failed after training")

    monkeypatch.setattr(train_module, "_best_after_fit", fail)
    with pytest.raises(ConfigError, match="failed after training"):
        train_run(*TINY, "trainer.max_steps=2", name="trained")
    assert (tmp_path / "trained" / "checkpoints" / "last.ckpt").is_file()
    assert _lock_is_free(tmp_path / "trained")
