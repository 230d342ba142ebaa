"""Loggers (csv, tensorboard, wandb offline, many), tags, the samples/s progress-bar callback and the debug
configs, each on a tiny run over the fixtures."""

from __future__ import annotations

import csv
import os
import re
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT

TINY = ("model=bert_tiny", "task=sst2", "trainer.max_epochs=1")


def _csv_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "csv" / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------- wandb (offline, never the network)


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    """wandb in offline mode with every folder it touches under tmp_path."""
    home = tmp_path / "wandb_home"
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_CONSOLE", "off")  # leave pytest's capture of stdout/stderr alone
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var, sub in (("WANDB_DIR", "dir"), ("WANDB_CACHE_DIR", "cache"), ("WANDB_CONFIG_DIR", "config"),
                     ("WANDB_DATA_DIR", "data"), ("WANDB_ARTIFACT_DIR", "artifacts")):
        monkeypatch.setenv(var, str(home / sub))
    yield
    import wandb

    assert wandb.run is None, "bertlab.train.run must call wandb.finish() at the end of a job"


def _offline_runs(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "wandb").glob("offline-run-*"))


def _run_record(offline: Path, run_id: str, expected: bytes, timeout_s: float = 30.0) -> bytes:
    """The offline run's record file, once wandb's writer (a separate process) has flushed it."""
    path = offline / f"run-{run_id}.wandb"
    deadline = time.monotonic() + timeout_s
    while True:
        data = path.read_bytes() if path.is_file() else b""
        if expected in data or time.monotonic() > deadline:
            return data
        time.sleep(0.2)


@pytest.mark.filterwarnings("ignore:Checkpoint directory .* exists and is not empty")  # resumes in place
def test_wandb_offline_run_is_named_grouped_tagged_and_resumed(train_run, tmp_path, wandb_offline):
    metrics = train_run(*TINY, "logger=wandb", "tags=[smoke,wandb]", "seed=3", name="run")
    run_dir = tmp_path / "run"
    [offline] = _offline_runs(run_dir)
    run_id = (run_dir / "wandb" / "bertlab_run_id").read_text().strip()
    assert offline.name.endswith(f"-{run_id}")
    # The run record (protobuf) holds the name, group and tags as plain strings.
    record = _run_record(offline, run_id, b"sst2-bert_tiny-none-seed3")
    assert b"sst2-bert_tiny-none-seed3" in record  # name: <task>-<model>-<freeze>-seed<seed>
    assert b"sst2-bert_tiny-none" in record  # group
    assert b"smoke" in record and b"wandb" in record
    assert metrics["tags"] == ["smoke", "wandb"]
    assert not (run_dir / "csv").exists()

    # Resuming in the same run dir re-attaches to the same wandb run id.
    resumed = train_run(*TINY[:2], "trainer.max_epochs=2", "logger=wandb", "seed=3", "ckpt_path=last", name="run")
    assert resumed["train"]["resumed_from_step"] == metrics["train"]["steps"]
    runs = _offline_runs(run_dir)
    # wandb names a run's folder offline-run-<date>_<time>-<id>, adding "-1" when the resumed run starts within
    # the same second as the first (a folder of that name exists): the id is the same either way.
    assert len(runs) == 2 and all(re.fullmatch(rf"offline-run-\d{{8}}_\d{{6}}-{run_id}(-\d+)?", r.name) for r in runs)


def test_wandb_finish_between_jobs(monkeypatch):
    """A failed job still finishes its wandb run (marked failed), so the next multirun job starts its own."""
    import sys
    import types

    calls = []
    fake = types.SimpleNamespace(run=object(), finish=lambda exit_code: calls.append(exit_code))
    monkeypatch.setitem(sys.modules, "wandb", fake)
    from bertlab import train

    def diverged(cfg, *args, **kwargs):
        raise RuntimeError("diverged")

    monkeypatch.setattr(train, "_run", diverged)
    with pytest.raises(RuntimeError):
        train.run(None)
    monkeypatch.setattr(train, "_run", lambda cfg, *args, **kwargs: 0.5)
    assert train.run(None) == 0.5
    assert calls == [1, 0]


def test_many_is_the_default_logger():
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="train")
        assert set(cfg.logger) == {"csv", "wandb"}
        assert cfg.logger.wandb.mode in ("offline", "online", "disabled", "dryrun", "run")
        assert set(compose(config_name="train", overrides=["logger=tensorboard"]).logger) == {"tensorboard"}


# ---------------------------------------------------------------- csv, tensorboard, tags, samples/s


def test_csv_logger_tags_and_samples_per_second(train_run, tmp_path):
    metrics = train_run(*TINY, "tags=[baseline]", "callbacks.samples_per_s.every_n_steps=1",
                        "trainer.log_every_n_steps=1", name="run")
    assert metrics["tags"] == ["baseline"]
    rates = [float(r["train/samples_per_s"]) for r in _csv_rows(tmp_path / "run") if r.get("train/samples_per_s")]
    assert rates and all(r > 0 for r in rates)
    assert metrics["timing"]["launch_to_first_step_s"] > 0  # this test process's age at the first batch


def test_process_age_counts_from_the_start_of_the_process():
    import subprocess
    import sys

    code = "import time; time.sleep(0.5); from bertlab.training.callbacks import process_age_s; print(process_age_s())"
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 0.5 <= age < 60


def test_tensorboard_logger(train_run, tmp_path):
    train_run(*TINY, "logger=tensorboard", name="run")
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))


class _TinyModule:
    """A LightningModule over dict batches shaped like bertlab's (``index`` tensor, ``num_tokens`` int)."""

    @staticmethod
    def build():
        import lightning as L

        class Module(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.layer = torch.nn.Linear(4, 1)

            def training_step(self, batch, batch_idx):
                return self.layer(batch["x"]).pow(2).mean()

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.01)

            def train_dataloader(self):
                batches = [{"x": torch.randn(3, 4), "index": torch.arange(3), "num_tokens": 17} for _ in range(6)]
                return torch.utils.data.DataLoader(batches, batch_size=None)

        return Module()


def test_samples_per_second_goes_to_the_progress_bar(tmp_path):
    import lightning as L

    from bertlab.training.callbacks import SamplesPerSecond

    trainer = L.Trainer(max_steps=6, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                        callbacks=[SamplesPerSecond(every_n_steps=2, tokens=True)])
    trainer.fit(_TinyModule.build())
    shown = trainer.progress_bar_metrics
    assert shown["train/samples_per_s"] > 0 and shown["train/tokens_per_s"] > shown["train/samples_per_s"]
    with pytest.raises(ValueError, match="every_n_steps"):
        SamplesPerSecond(every_n_steps=0)


@pytest.mark.parametrize("mode, family, accumulate, trims", [
    ("auto", "mlm", 1, 6),        # pre-training on the CPU: after every optimizer step
    ("auto", "clm", 2, 3),        # with accumulation: per optimizer step, not per batch
    ("auto", "sequence", 1, 0),   # fine-tuning: off unless asked
    (True, "sequence", 1, 6),     # YAML's true
    ("false", "mlm", 1, 0),
])
def test_release_heap_trims_once_per_optimizer_step(tmp_path, monkeypatch, mode, family, accumulate, trims):
    import lightning as L

    from bertlab.training.callbacks import ReleaseFreedHeap

    calls = []
    monkeypatch.setattr(ReleaseFreedHeap, "_malloc_trim", staticmethod(lambda: calls.append))
    callback = ReleaseFreedHeap(mode, family)
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                        accumulate_grad_batches=accumulate, callbacks=[callback])
    trainer.fit(_TinyModule.build())
    assert len(calls) == trims and set(calls) <= {0}
    assert callback.enabled == (trims > 0)


def test_release_heap_finds_glibc_and_rejects_other_values():
    import sys

    from bertlab.training.callbacks import ReleaseFreedHeap

    if sys.platform.startswith("linux") and os.path.exists("/lib/x86_64-linux-gnu/libc.so.6"):
        trim = ReleaseFreedHeap._malloc_trim()
        assert trim is not None and trim(0) in (0, 1)  # 1: memory was released
    with pytest.raises(ValueError, match="release_heap must be auto, true or false"):
        ReleaseFreedHeap("sometimes", "mlm")


# ---------------------------------------------------------------- debug configs


@pytest.mark.parametrize("debug, extra, steps", [
    ("default", [], 2),
    ("fdr", [], 1),
    ("limit", [], 6),  # 3 epochs of min(5, 2) batches
    ("overfit", ["trainer.max_epochs=2"], 4),  # overfit_batches=3, but the fixture has only 2 batches
    ("profiler", [], 2),
])
def test_debug_config_runs(train_run, debug, extra, steps):
    metrics = train_run("model=bert_tiny", "task=sst2", f"debug={debug}", *extra, name=debug)
    assert metrics["train"]["steps"] == steps  # fixtures: 40 examples = 2 batches of 32 per epoch
    assert "debug" in metrics["tags"]
    assert metrics["monitor"]["value"] is not None
