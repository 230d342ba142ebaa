"""Non-finite losses, safe loading, leak-free evaluation and determinism."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import lightning as L
import pytest
import torch
from conftest import FIXTURE_DATA, ROOT, run_train
from test_bad_input import cli_in_process, data_dir
from test_resume import _load, nan_loss_at

from bertlab.data.tokenizer import load_tokenizer
from bertlab.models.hf_weights import CheckpointError
from bertlab.runtime.config import ConfigError
from bertlab.runtime.errors import NonFiniteLossError
from bertlab.training.module import TaskModule

RUN = ("model=bert_tiny", "task=sst2", "trainer.max_epochs=2", "data.batch_size=8", "save_every_n_steps=2")
TIMINGS = ("wall_s", "samples_per_s", "tokens_per_s")


# ----------------------------------------------------------------------------------------------------------
# Non-finite losses


def test_nonfinite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    nan_loss_at(monkeypatch, {3})
    with pytest.raises(NonFiniteLossError) as err:
        run_train(list(RUN), tmp_path / "run")
    message = str(err.value)
    assert message.startswith("non-finite training loss (nan) at global step 3, epoch 1, batch 3 (example indices [")
    assert "set on_nonfinite_loss=skip to skip such batches" in message
    assert f"the last good checkpoint is kept in {tmp_path / 'run' / 'checkpoints' / 'last.ckpt'}" in message
    last = _load(tmp_path / "run" / "checkpoints" / "last.ckpt")  # whole, and loadable weights-only
    assert last["global_step"] == 2
    assert all(torch.isfinite(t).all() for t in last["state_dict"].values())
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_nonfinite_loss_reaches_the_terminal_with_exit_status_1(tmp_path, monkeypatch):
    from bertlab.tasks.families import SequenceFamily

    loss = SequenceFamily.loss
    monkeypatch.setattr(SequenceFamily, "loss", lambda self, out, batch: loss(self, out, batch) * float("inf"))
    # train.py in this process (the patch above reaches it); test_bad_input checks exit status 1 as a process
    out = cli_in_process(tmp_path, "model=bert_tiny", "task=sst2", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert "bertlab: error: non-finite training loss (inf) at global step 0, epoch 1, batch 0" in out.stderr
    # Nothing was saved before step 0: the message must not point to a checkpoint that does not exist.
    assert not (tmp_path / "run" / "checkpoints" / "last.ckpt").exists()
    assert "last.ckpt" not in out.stderr and "no checkpoint had been written before this step" in out.stderr


def test_nonfinite_loss_skip_counts_skipped_batches(tmp_path, monkeypatch):
    nan_loss_at(monkeypatch, {1, 6})
    metrics = run_train([*RUN, "on_nonfinite_loss=skip"], tmp_path / "run")
    assert metrics["train"]["skipped_nonfinite_batches"] == 2
    assert all(v is not None and math.isfinite(v) for v in metrics["val"].values())
    # Lightning still counts a step for a skipped batch, but no gradient exists, so nothing is updated.
    assert metrics["train"]["steps"] == 10


def test_skipped_batches_update_nothing(tmp_path, monkeypatch):
    nan_loss_at(monkeypatch, {0, 1})
    metrics = run_train([*RUN, "on_nonfinite_loss=skip", "trainer.max_epochs=1"], tmp_path / "run")
    assert metrics["train"]["skipped_nonfinite_batches"] == 2
    state = _load(tmp_path / "run" / "checkpoints" / "last.ckpt")["optimizer_states"][0]["state"]
    assert {int(s["step"]) for s in state.values()} == {3}  # 5 batches, 2 skipped: 3 optimizer steps


# A run that skipped most of its batches learned from almost nothing: its scores would mislead, so it stops
# (issue #33, item 11). Which batches: (0-based numbers of the 10 training batches of RUN, 2 epochs × 5).
@pytest.mark.parametrize("skipped", [set(range(10)) - {7}, set(range(15)) - {0}, {1, 2, 4, 5, 7, 8},
                                     set(range(4, 10))])
def test_skipping_most_batches_stops_the_run(tmp_path, monkeypatch, skipped):
    nan_loss_at(monkeypatch, skipped)
    with pytest.raises(NonFiniteLossError) as err:
        run_train([*RUN, "on_nonfinite_loss=skip"], tmp_path / "run")
    message = str(err.value)
    assert message.startswith("on_nonfinite_loss=skip skipped ") and "of the " in message
    assert "training batches" in message and "Lower optim.lr" in message
    assert not (tmp_path / "run" / "metrics.json").exists()  # no result that looks complete


@pytest.mark.parametrize("skipped", [{0, 1, 2}, {0, 2, 4, 6}])  # early, or spread: fewer than half
def test_skipping_fewer_than_half_of_the_batches_finishes(tmp_path, monkeypatch, skipped):
    nan_loss_at(monkeypatch, skipped)
    metrics = run_train([*RUN, "on_nonfinite_loss=skip"], tmp_path / "run")
    assert metrics["train"]["skipped_nonfinite_batches"] == len(skipped)


# ----------------------------------------------------------------------------------------------------------
# Safe loading: files from elsewhere cannot run code when bertlab reads them


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))  # would create the marker file when unpickled


def test_pickled_code_in_weights_is_never_run(train_run, tmp_path):
    marker = tmp_path / "code_ran"
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1,
                                                "num_attention_heads": 2, "intermediate_size": 64,
                                                "vocab_size": 300}))
    torch.save({"bert.embeddings.word_embeddings.weight": _Evil(marker)}, hf / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin could not be read as a weights-only torch file"):
        train_run("model=bert_tiny", "task=sst2", f"model.init_from={hf}")

    evil_ckpt = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {"x": _Evil(marker)}, "global_step": 1}, evil_ckpt)
    with pytest.raises(CheckpointError, match=r"evil\.ckpt: not a readable bertlab checkpoint"):
        train_run("model=bert_tiny", "task=sst2", f"model.init_from={evil_ckpt}")
    with pytest.raises(CheckpointError, match=r"ckpt_path=.*evil\.ckpt: not a readable bertlab checkpoint"):
        train_run("model=bert_tiny", "task=sst2", f"ckpt_path={evil_ckpt}")
    assert not marker.exists()


# ----------------------------------------------------------------------------------------------------------
# Leak-free evaluation


def test_scratch_vocabulary_is_fit_on_the_training_split_only(train_run, tmp_path):
    train = (FIXTURE_DATA / "sst2" / "train.tsv").read_text()
    train += "a zorblaxian film .\t1\nanother zorblaxian film .\t1\n"
    dev = (FIXTURE_DATA / "sst2" / "dev.tsv").read_text() + "a quuxberry film .\t0\n" * 3
    test = "sentence\tlabel\n" + "a flimwhistle film .\t1\n" * 3 + "a dull film .\t0\n"
    root = data_dir(tmp_path, "sst2", {"train.tsv": train, "dev.tsv": dev, "test.tsv": test})
    train_run("model=bert_tiny", "task=sst2", "trainer.max_epochs=1", "data.test_file=sst2/test.tsv",
              name="run", data_dir=root)
    vocab = load_tokenizer(tmp_path / "run" / "tokenizer").tokenizer.get_vocab()
    assert "zorblaxian" in vocab  # the training split's word is learned whole ...
    assert "quuxberry" not in vocab and "flimwhistle" not in vocab  # ... the dev and test words are not


def test_selection_reads_validation_only_and_test_runs_once_on_the_best_checkpoint(tmp_path, monkeypatch):
    from bertlab.data.datamodule import TaskDataModule

    events: list[tuple[str, object]] = []
    fit, test, test_loader = L.Trainer.fit, L.Trainer.test, TaskDataModule.test_dataloader
    monkeypatch.setattr(L.Trainer, "fit", lambda self, *a, **k: (events.append(("fit", None)), fit(self, *a, **k))[1])
    monkeypatch.setattr(L.Trainer, "test", lambda self, *a, **k: (events.append(("test", k.get("ckpt_path"))),
                                                                   test(self, *a, **k))[1])
    monkeypatch.setattr(TaskDataModule, "test_dataloader",
                        lambda self: (events.append(("test_dataloader", None)), test_loader(self))[1])
    scores = []
    end = TaskModule.on_test_epoch_end
    monkeypatch.setattr(TaskModule, "on_test_epoch_end", lambda self: (scores.append(1), end(self))[1])

    metrics = run_train(["model=bert_tiny", "task=sst2", "trainer.max_epochs=2", "data.test_file=sst2/dev.tsv",
                         "callbacks=early_stopping", "callbacks.early_stopping.patience=1"], tmp_path / "run")
    assert [e for e, _ in events] == ["fit", "test", "test_dataloader"]  # test data untouched during fit
    assert events[1][1] == metrics["best_checkpoint"] and len(scores) == 1
    assert metrics["monitor"]["metric"].startswith("val/")
    assert metrics["monitor"]["value"] == metrics["val"][metrics["monitor"]["metric"].split("/")[1]]
    assert "test" in metrics


def test_a_non_validation_monitor_is_refused(train_run):
    with pytest.raises(ConfigError, match=r"task\.monitor=test/accuracy: checkpoint selection and early stopping "
                                          r"must read a validation metric"):
        train_run("model=bert_tiny", "task=sst2", "task.monitor=test/accuracy")


@pytest.mark.parametrize("task", sorted(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml")))
def test_every_task_selects_and_stops_on_validation(task, tmp_path):
    from conftest import compose

    cfg = compose([f"task={task}", "callbacks=early_stopping"], tmp_path / "run")
    assert cfg.task.monitor.startswith("val/")
    assert cfg.callbacks.early_stopping.monitor == cfg.task.monitor


# ----------------------------------------------------------------------------------------------------------
# Determinism


def _without_timings(metrics: dict) -> dict:
    out = json.loads(json.dumps(metrics))
    for key in TIMINGS:
        out["train"].pop(key)
    out.pop("best_checkpoint")
    out.pop("timing")  # per-epoch wall times
    return out


def test_same_seed_same_metrics(tmp_path):
    shared = f"paths.cache_dir={tmp_path / 'cache'}"  # one scratch vocabulary (huggingface/tokenizers#1794)
    overrides = ["model=bert_tiny", "task=sst2", "trainer.max_epochs=2", "trainer.deterministic=true",
                 "data.batch_size=8", "seed=7", "trainer.log_every_n_steps=1", shared]
    first = run_train(overrides, tmp_path / "first")
    second = run_train(overrides, tmp_path / "second")
    assert _without_timings(first) == _without_timings(second)
    assert first["seed"] == 7

    def rows(run: str) -> list[dict[str, str]]:
        with open(tmp_path / run / "csv" / "metrics.csv", newline="") as f:
            return [{k: v for k, v in r.items() if not k.endswith(TIMINGS)} for r in csv.DictReader(f)]

    assert rows("first") == rows("second")
    other = run_train([*overrides, "seed=8"], tmp_path / "other")
    assert _load(tmp_path / "other" / "checkpoints" / "last.ckpt")["state_dict"]["model.head.classifier.bias"] \
        .ne(_load(tmp_path / "first" / "checkpoints" / "last.ckpt")["state_dict"]["model.head.classifier.bias"]) \
        .any()
    assert other["seed"] == 8

