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
from bertlab.training.build import _init_source, init_dir_for_tokenizer

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
    kind, path = _init_source(str(copy))
    assert kind == "ckpt" and path.parent.parent == copy
    assert init_dir_for_tokenizer(str(copy)) == copy / "tokenizer"
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
    with pytest.raises(CheckpointError, match=r"was trained with another tokenizer than the one this run loaded "
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
    assert (tmp_path / "run" / MARKER).is_file()
    train_run(*TINY, "optim.lr=1e-3", name="run")  # nothing of the failed run can mix with this one
