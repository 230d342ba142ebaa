"""What a run prints: every line once, no advertisements or zero-information lines, wandb silent on the
console, a progress bar within 80 columns, rounded summary values; quiet and verbose modes; learning curves
for short runs."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURE_DATA, ROOT

from bertlab.runtime.config import ConfigError
from bertlab.runtime.console import AutoLogInterval, console_mode, format_value, short_metric_name

RUN = ("model=bert_tiny", "task=sst2", "data.batch_size=4", "trainer.max_epochs=2")  # 40 examples → 20 steps


def train_cli(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    """``python train.py`` as a user runs it, with its default logger and progress bar, in 80 columns."""
    env = {**os.environ, "BERTLAB_DATA_DIR": str(FIXTURE_DATA), "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "COLUMNS": "80"}
    tmp_path.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(ROOT / "train.py"), f"paths.cache_dir={tmp_path / 'cache'}",
           f"hydra.run.dir={tmp_path / 'run'}", *RUN, *overrides]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_normal_run_prints_each_line_once_and_nothing_empty(tmp_path):
    out = train_cli(tmp_path)  # logger=many: csv + wandb (offline)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    lines = [line for line in text.splitlines() if line.strip()]
    repeated = [line for line, n in Counter(lines).items() if n > 1]
    assert not repeated, repeated
    for noise in ("litlogger", "Tip:", "Total FLOPs", "GPU available", "TPU available", "wandb:", "v_num",
                  "Loading `train_dataloader`", "weights_only"):
        assert noise not in text, noise
    assert "task=sst2 (labels 0, 1; F1 of positive class '1')" in text
    bar = [line for line in out.stdout.splitlines() if line.startswith("Epoch")]
    assert bar and all(len(line.rstrip()) <= 80 for line in bar), bar
    monitor = next(line for line in out.stdout.splitlines() if line.startswith("val/accuracy:"))
    value = monitor.split(":")[1].split()[0]
    assert len(value.replace("0.", "").replace(".", "")) <= 4, monitor  # 4 significant digits at most
    # wandb's files are still written.
    assert any((tmp_path / "run" / "wandb").glob("offline-run-*"))
    # Learning curve: every run of >= 20 steps has >= 10 train-loss points.
    with open(tmp_path / "run" / "csv" / "metrics.csv", newline="") as f:
        points = [row for row in csv.DictReader(f) if row.get("train/loss")]
    assert len(points) >= 10, len(points)


@pytest.mark.slow
def test_quiet_prints_only_the_summary_and_verbose_prints_lightning(tmp_path):
    quiet = train_cli(tmp_path / "q", "quiet=true", "logger=csv")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    lines = [line for line in (quiet.stdout + quiet.stderr).splitlines() if line.strip()]
    assert lines[0].startswith("run dir:"), lines
    assert not [line for line in lines if "INFO" in line or line.startswith("Epoch")]
    verbose = train_cli(tmp_path / "v", "verbose=true", "logger=csv")
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert "GPU available" in verbose.stdout + verbose.stderr
    both = train_cli(tmp_path / "b", "quiet=true", "verbose=true", "logger=csv")
    assert both.returncode == 1 and "contradict" in both.stderr


def test_console_mode_and_names():
    assert console_mode(False, False) == "normal" and console_mode(True, None) == "quiet"
    assert console_mode(None, True) == "verbose"
    with pytest.raises(ConfigError):
        console_mode(True, True)
    assert short_metric_name("train/loss") == "loss"
    assert short_metric_name("val/accuracy") == "val_acc"
    assert short_metric_name("val/matthews_correlation") == "val_mcc"
    assert short_metric_name("train/samples_per_s") == "ex/s"
    assert format_value(0.47999998927116394) == "0.48" and format_value(1234.5678) == "1235"
    assert format_value(3) == "3"


def test_auto_log_interval_gives_short_runs_a_curve():
    auto = AutoLogInterval()
    assert auto.interval(20) == 1 and auto.interval(7) == 1
    assert auto.interval(400) == 20 and auto.interval(100_000) == 50
    assert auto.interval(float("inf")) == 50
    for steps in (20, 33, 199, 999, 1000, 5000):
        assert steps // auto.interval(steps) >= 10


def test_ranks_other_than_zero_print_warnings_only(monkeypatch):
    import logging

    from bertlab.runtime.console import configure_console

    handler = logging.StreamHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        monkeypatch.setenv("LOCAL_RANK", "1")
        configure_console("normal")
        assert handler.level == logging.WARNING
        monkeypatch.setenv("LOCAL_RANK", "0")
        configure_console("normal")
        assert handler.level == logging.NOTSET
    finally:
        root.removeHandler(handler)
