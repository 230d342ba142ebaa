"""bertlab.compare on fake run directories: grouping, statistics, outputs, CLI exit codes."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import statistics
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import main_in_process

from bertlab.analysis.runs import CompareError, default_group_keys, find_runs
from bertlab.compare import compare_runs, read_curve

# (freeze, seed) -> (val/accuracy, val/loss)
VALUES = {
    ("none", 1): (0.80, 0.50),
    ("none", 2): (0.84, 0.46),
    ("encoder", 1): (0.70, 0.60),
    ("encoder", 2): (0.72, 0.58),
}


def make_run(
    run_dir: Path,
    freeze: str,
    seed: int,
    acc: float,
    loss: float,
    *,
    overrides: list[str] | None = None,
    config: dict | None = None,
    with_csv: bool = True,
    val: dict | None = None,
) -> Path:
    """A run dir as train.py leaves it: metrics.json, .hydra/{overrides,config}.yaml, csv/metrics.csv."""
    run_dir.mkdir(parents=True)
    metrics = {
        "task": "sst2", "model": "bert_tiny", "freeze": freeze, "seed": seed, "data_source": "sample",
        "params": {"total": 5000, "trainable": 5000 if freeze == "none" else 260},
        "val": val if val is not None else {"accuracy": acc, "loss": loss, "num_examples": 100},
        "train": {"steps": 20, "epochs": 2, "wall_s": 10.0 + seed, "samples_per_s": 50.0,
                  "tokens_per_s": 900.0, "resumed_from_step": None},
        "data": {"train_examples": 80, "val_examples": 100, "skipped_examples": 0},
        "best_checkpoint": str(run_dir / "checkpoints" / "epoch_001_step_000020.ckpt"),
        "monitor": {"metric": "val/accuracy", "mode": "max", "value": acc},
    }
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    (run_dir / ".hydra").mkdir()
    if overrides is not None:
        (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    if config is not None:
        (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    if with_csv:
        (run_dir / "csv").mkdir()
        with (run_dir / "csv" / "metrics.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["epoch", "step", "train/loss", "val/accuracy", "val/loss"])
            for step in (4, 9, 14, 19):
                writer.writerow([step // 10, step, 1.0 / (step + 1), "", ""])
                if step in (9, 19):  # validation rows: train cells empty, as CSVLogger writes them
                    writer.writerow([step // 10, step, "", acc - (0.1 if step == 9 else 0.0), loss])
    return run_dir


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """A Hydra multirun: freeze=none,encoder x seed=1,2 in dirs 0..3."""
    root = tmp_path / "multirun"
    for i, ((freeze, seed), (acc, loss)) in enumerate(VALUES.items()):
        make_run(root / str(i), freeze, seed, acc, loss,
                 overrides=["task=sst2", f"freeze={freeze}", f"seed={seed}"])
    return root


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m bertlab.compare <args>``, run in this process (conftest.main_in_process)."""
    return main_in_process(list(args), module="bertlab.compare", env={"MPLBACKEND": "Agg"})


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_groups_seeds_and_writes_outputs(sweep: Path) -> None:
    result = compare_runs([sweep])
    assert result.group_by == ["freeze"]
    assert result.metric == "val/accuracy" and result.mode == "max"
    assert [g.key for g in result.groups] == [{"freeze": "none"}, {"freeze": "encoder"}]
    assert [len(g.runs) for g in result.groups] == [2, 2]
    none, encoder = result.rows
    assert none["n"] == 2
    assert none["val/accuracy_mean"] == pytest.approx(0.82)
    assert none["val/accuracy_std"] == pytest.approx(math.sqrt(((0.80 - 0.82) ** 2 + (0.84 - 0.82) ** 2) / 1))
    assert encoder["val/loss_mean"] == pytest.approx(0.59)
    assert encoder["val/loss_std"] == pytest.approx(statistics.stdev([0.60, 0.58]))
    assert encoder["params/trainable_mean"] == 260 and encoder["params/trainable_std"] == 0.0
    assert none["train/wall_s_mean"] == pytest.approx(11.5)
    assert result.best == 0

    assert result.csv_path == sweep / "comparison.csv"
    rows = read_csv(result.csv_path)
    assert list(rows[0])[:2] == ["freeze", "n"]
    assert {"val/accuracy_mean", "val/accuracy_std", "val/loss_mean", "train/samples_per_s_std"} <= set(rows[0])
    assert [r["freeze"] for r in rows] == ["none", "encoder"] and rows[1]["n"] == "2"
    assert float(rows[1]["val/accuracy_mean"]) == pytest.approx(0.71)

    md = result.md_path.read_text()
    assert "| freeze | n | val/accuracy |" in md
    assert "**0.82 ± 0.02828**" in md  # best group bold on the monitored metric
    assert "0.71 ± 0.01414" in md and "**0.71" not in md
    assert "- freeze=none (n=2): `0`, `1`" in md
    assert result.png_path.stat().st_size > 1000


def test_min_mode_metric_picks_lowest(sweep: Path, tmp_path: Path) -> None:
    result = compare_runs([sweep], out=tmp_path / "out", metric="loss")  # bare name means val/loss
    assert result.metric == "val/loss" and result.mode == "min"
    assert result.best == 0  # freeze=none has the lower loss
    assert (tmp_path / "out" / "comparison.png").stat().st_size > 0


def test_cli_writes_into_out_and_prints_table(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = run_cli(str(sweep), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "val/accuracy" in proc.stdout and "encoder" in proc.stdout
    for name in ("comparison.csv", "comparison.md", "comparison.png"):
        assert (out / name).stat().st_size > 0
    assert not (sweep / "comparison.csv").exists()


def test_group_by_forces_keys(sweep: Path) -> None:
    by_seed = compare_runs([sweep], group_by=["seed"])
    assert [g.key for g in by_seed.groups] == [{"seed": 1}, {"seed": 2}]
    assert by_seed.rows[0]["val/accuracy_mean"] == pytest.approx(0.75)

    proc = run_cli(str(sweep), "--group-by", "task,freeze", "--metric", "val/loss")
    assert proc.returncode == 0, proc.stderr
    rows = read_csv(sweep / "comparison.csv")
    assert [(r["task"], r["freeze"], r["n"]) for r in rows] == [("sst2", "none", "2"), ("sst2", "encoder", "2")]


def test_no_runs_exits_2_naming_the_dir(tmp_path: Path) -> None:
    empty = tmp_path / "empty_sweep"
    empty.mkdir()
    proc = run_cli(str(empty))
    assert proc.returncode == 2
    assert "metrics.json" in proc.stderr and "empty_sweep" in proc.stderr
    with pytest.raises(CompareError, match="the folder does not exist: .*missing"):
        compare_runs([tmp_path / "missing"])
    # A misspelled sweep folder is named as missing, with the folder it was likely meant to be.
    with pytest.raises(CompareError, match=r"does not exist: .*empty_swep \(similar names in .*: empty_sweep\)"):
        compare_runs([tmp_path / "empty_swep"])
    (tmp_path / "a_file").write_text("")
    with pytest.raises(CompareError, match="not a directory: .*a_file"):
        compare_runs([tmp_path / "a_file"])


def test_missing_metric_is_an_empty_cell(sweep: Path) -> None:
    # A single freeze=lora run without loss, test block or learning curves.
    make_run(sweep / "4", "lora", 1, 0.9, 0.0, overrides=["task=sst2", "freeze=lora", "seed=1"],
             with_csv=False, val={"accuracy": 0.9, "num_examples": 100})
    result = compare_runs([sweep])
    lora = result.rows[2]
    assert lora["n"] == 1 and lora["val/loss_mean"] is None and lora["val/accuracy_std"] is None
    row = read_csv(result.csv_path)[2]
    assert row["freeze"] == "lora" and row["val/loss_mean"] == "" and row["val/accuracy_std"] == ""
    assert float(row["val/accuracy_mean"]) == 0.9
    assert "| lora | 1 | **0.9** |  |" in result.md_path.read_text()
    assert result.best == 2


def test_unreadable_metrics_json_is_skipped_with_warning(sweep: Path, caplog: pytest.LogCaptureFixture) -> None:
    broken = sweep / "9"
    broken.mkdir()
    (broken / "metrics.json").write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="bertlab.compare"):
        runs = find_runs([sweep])
    assert len(runs) == 4
    assert any(str(broken / "metrics.json") in r.getMessage() for r in caplog.records)


def test_without_overrides_or_csv_uses_config_and_single_panel(tmp_path: Path) -> None:
    # Separate single runs with no overrides.yaml: keys come from metrics.json fields + config.yaml.
    # freeze.policy follows freeze (adds no split), paths differ per run (excluded), optim.lr is a real choice.
    for i, (freeze, lr, seed) in enumerate([("none", 1e-4, 1), ("none", 1e-4, 2), ("encoder", 1e-3, 1),
                                            ("encoder", 1e-4, 1)]):
        config = {"seed": seed, "freeze": {"policy": freeze, "k": None}, "optim": {"lr": lr, "betas": [0.9, 0.999]},
                  "paths": {"output_dir": f"logs/run{i}"}, "trainer": {"default_root_dir": f"logs/run{i}"}}
        make_run(tmp_path / "runs" / f"r{i}", freeze, seed, 0.8 + i / 100, 0.5, config=config, with_csv=False)
    runs = find_runs([tmp_path / "runs"])
    assert default_group_keys(runs) == ["freeze", "optim.lr"]
    result = compare_runs([tmp_path / "runs"])
    assert [(g.key["freeze"], g.key["optim.lr"], len(g.runs)) for g in result.groups] == [
        ("none", 1e-4, 2), ("encoder", 1e-3, 1), ("encoder", 1e-4, 1)]
    assert result.png_path.stat().st_size > 0


def test_override_values_match_config_values(tmp_path: Path) -> None:
    # optim.lr=1e-4 on the command line and 0.0001 in another run's config.yaml are the same choice.
    make_run(tmp_path / "a", "none", 1, 0.8, 0.5, overrides=["optim.lr=1e-4", "seed=1"], with_csv=False)
    make_run(tmp_path / "b", "none", 2, 0.9, 0.5, overrides=["seed=2"], config={"optim": {"lr": 0.0001}},
             with_csv=False)
    make_run(tmp_path / "c", "none", 1, 0.7, 0.5, overrides=["optim.lr=3e-5", "seed=1"], with_csv=False)
    result = compare_runs([tmp_path])
    assert result.group_by == ["optim.lr"]
    assert [len(g.runs) for g in result.groups] == [2, 1]


def test_unknown_group_key_or_metric_is_a_clear_error(sweep: Path) -> None:
    with pytest.raises(CompareError, match="optim.lrr"):
        compare_runs([sweep], group_by=["optim.lrr"])
    proc = run_cli(str(sweep), "--metric", "val/f1")
    assert proc.returncode == 2 and "val/f1" in proc.stderr and "val/accuracy" in proc.stderr


@pytest.mark.filterwarnings("error")  # matplotlib warns on an empty legend; our plots must not
def test_curves_on_different_steps_and_step_suffixed_columns(tmp_path: Path) -> None:
    for i, steps in enumerate([(5, 10), (6, 12)]):
        run = make_run(tmp_path / str(i), "none", i, 0.8, 0.5, overrides=[f"seed={i}"], with_csv=False)
        (run / "csv" / "version_0").mkdir(parents=True)
        lines = ["step,train/loss_step,train/loss_epoch,val/accuracy"]
        lines += [row for s in steps for row in (f"{s},{1 / s},,", f"{s},,0.5,0.7")]
        (run / "csv" / "version_0" / "metrics.csv").write_text("\n".join(lines) + "\n")
    assert read_curve(tmp_path / "0", "train/loss") == {5: 0.2, 10: 0.1}
    assert read_curve(tmp_path / "1", "val/accuracy") == {6: 0.7, 12: 0.7}
    result = compare_runs([tmp_path])
    assert len(result.groups) == 1 and result.group_by == []
    assert result.png_path.stat().st_size > 0


# ---------------------------------------------------------------- terminal width, output folder, plots, summary
def test_terminal_table_fits_its_width_and_names_the_columns_left_out(sweep: Path, capsys) -> None:
    from bertlab.compare import print_table

    result = compare_runs([sweep], baseline="freeze=none")
    capsys.readouterr()
    for width in (80, 120):
        left_out = print_table(result, width=width)
        out = capsys.readouterr().out
        assert max(len(line) for line in out.splitlines()) <= width
        header = next(line for line in out.splitlines() if "freeze" in line)
        assert "val/accuracy" in header and "verdict" in header  # the ranked metric, then the verdict first
        assert left_out and all(f" {name} " not in header for name in left_out)
    assert print_table(result, width=80)[:2] == ["diff vs freeze=none (95% CI)", "p (sign-flip)"]
    assert print_table(result, width=1000) == []
    assert "val/loss" not in print_table(compare_runs([sweep]), width=80)  # no baseline: room for a metric


def test_output_goes_beside_the_runs_compared_and_the_cli_says_where(tmp_path: Path) -> None:
    sweeps = tmp_path / "multiruns"
    for name in ("a", "b"):
        make_run(sweeps / name / "0", "none", 1, 0.8, 0.5, overrides=["freeze=none", "seed=1"])
        make_run(sweeps / name / "1", "encoder", 1, 0.7, 0.6, overrides=["freeze=encoder", "seed=1"])
    # one folder: into it; several: the folder that holds them all, not the first one named
    assert compare_runs([sweeps / "b"]).md_path == (sweeps / "b" / "comparison.md").resolve()
    proc = run_cli(str(sweeps / "b"), str(sweeps / "a"))
    assert proc.returncode == 0, proc.stderr
    assert (sweeps / "comparison.md").is_file() and not (sweeps / "a" / "comparison.md").exists()
    assert f"to {sweeps.resolve()} (the folder holding every DIR named" in proc.stdout
    nested = compare_runs([sweeps / "a", sweeps / "a" / "0"])  # a folder inside another: the outer one
    assert nested.md_path.parent == (sweeps / "a").resolve()
    proc = run_cli(str(sweeps / "a"), "--out", str(tmp_path / "report"))
    assert f"to {tmp_path / 'report'} (--out)" in proc.stdout


def _panels(png: Path) -> int:
    """Panels of a comparison.png: the figure is 5.5 inches wide per panel at 120 dpi."""
    from matplotlib.image import imread

    return round(imread(png).shape[1] / (5.5 * 120))


def test_a_run_that_validated_once_has_no_validation_curve(tmp_path: Path) -> None:
    # One epoch: one validation row per run; train/loss logged at several steps.
    for i, (freeze, seed) in enumerate([("none", 1), ("none", 2), ("encoder", 1)]):
        run = make_run(tmp_path / str(i), freeze, seed, 0.8 - i / 10, 0.5, with_csv=False,
                       overrides=[f"freeze={freeze}", f"seed={seed}"])
        (run / "csv").mkdir()
        rows = ["step,train/loss,val/accuracy", *(f"{s},{1 / (s + 1)}," for s in range(12)), f"12,,{0.8 - i / 10}"]
        (run / "csv" / "metrics.csv").write_text("\n".join(rows) + "\n")
    result = compare_runs([tmp_path])
    assert _panels(result.png_path) == 2  # the seeds panel and train/loss, no one-point val/accuracy "curve"
    for i in range(3):  # a second validation makes it a curve
        with (tmp_path / str(i) / "csv" / "metrics.csv").open("a") as f:
            f.write("24,,0.9\n")
    assert _panels(compare_runs([tmp_path]).png_path) == 3


def test_multirun_summary_names_the_best_jobs_failures_and_the_comparison(sweep: Path, capsys) -> None:
    from omegaconf import OmegaConf

    from bertlab.compare import MultirunSummary

    failed = sweep / "4"
    failed.mkdir()
    (failed / "metrics.json").write_text(json.dumps({"state": "failed", "task": "sst2", "seed": 3,
                                                     "error": "ConfigError: data.batch_size must be positive"}))
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}})
    callback = MultirunSummary()
    callback.on_multirun_start(config)
    callback.on_multirun_end(config)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"multirun finished: 5 job(s) in {sweep} (4 complete, 1 failed)"
    assert out[1] == "  failed: 4/  ConfigError: data.batch_size must be positive"
    assert out[2] == "best job(s) of sst2 on val/accuracy (max):"
    assert [line.split()[:2] for line in out[3:6]] == [["0.84", "1/"], ["0.8", "0/"], ["0.72", "3/"]]
    assert out[3].endswith("freeze=none seed=2")
    assert out[6] == "best group on val/accuracy: freeze=none (0.82 ± 0.02828 over 2 run(s))"
    assert out[7].startswith(f"comparison: {sweep.resolve() / 'comparison.md'}")
    assert (sweep / "comparison.png").is_file()
    callback._summarise("stopped early")  # what the exit hook runs: nothing more once the end was told
    assert capsys.readouterr().out == ""


def test_a_multirun_that_stops_early_still_summarises(tmp_path: Path, capsys) -> None:
    from omegaconf import OmegaConf

    from bertlab.compare import MultirunSummary

    callback = MultirunSummary()
    callback.on_multirun_start(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    make_run(tmp_path / "0", "none", 1, 0.8, 0.5, overrides=["seed=1"])
    callback._summarise("stopped early (a job failed, or it was interrupted)")  # the exit hook
    out = capsys.readouterr().out
    assert out.startswith(f"multirun stopped early (a job failed, or it was interrupted): 1 job(s) in {tmp_path}")
    assert "comparison: " in out


def test_absolute_paths_under_the_working_folder_print_relative(tmp_path: Path, monkeypatch) -> None:
    # Runs started with model.init_from=<absolute path>: the table, labels and baseline name it relative to the
    # working folder (no machine path in a comparison written into a repository); a path outside stays whole.
    inside, outside = tmp_path / "work" / "logs" / "pre", "/elsewhere/pre"
    (tmp_path / "work").mkdir()
    for i, (init, seed) in enumerate([(str(inside), 1), (str(inside), 2), (None, 1), (None, 2),
                                      (outside, 1), (outside, 2)]):
        make_run(tmp_path / "runs" / f"r{i}", "none", seed, 0.8 + i / 100, 0.5, with_csv=False,
                 overrides=[f"model.init_from={init if init else 'null'}", f"seed={seed}"])
    monkeypatch.chdir(tmp_path / "work")
    result = compare_runs([tmp_path / "runs"], out=tmp_path / "out", baseline="model.init_from=null")
    labels = [g.label for g in result.groups]
    assert labels == [f"model.init_from={os.path.join('logs', 'pre')}", "model.init_from=", "model.init_from=/elsewhere/pre"]
    md = result.md_path.read_text()
    assert str(inside) not in md and "| logs/pre |" in md
    assert result.groups[0].key["model.init_from"] == str(inside)  # the value itself is kept
