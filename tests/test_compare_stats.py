"""bertlab.compare's statistics over seeds, checked against scipy.stats on constructed cases: Student t
intervals, the exact paired sign-flip test against a baseline (flags a real difference, not noise), several
sweep folders together, and --expect ranges."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import yaml

from bertlab.analysis import stats
from bertlab.analysis.runs import CompareError
from bertlab.compare import compare_runs, main, print_table

scipy_stats = pytest.importorskip("scipy.stats")


def run(run_dir: Path, seed: int, acc: float, **overrides) -> None:
    """A finished run folder: metrics.json + .hydra/overrides.yaml (what a multirun job leaves)."""
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.json").write_text(json.dumps({
        "task": "sst2", "model": "bert_tiny", "freeze": overrides.get("freeze", "none"), "seed": seed,
        "state": "complete", "val": {"accuracy": acc, "num_examples": 100},
        "monitor": {"metric": "val/accuracy", "mode": "max", "value": acc}}))
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "overrides.yaml").write_text(
        yaml.safe_dump([f"{k}={v}" for k, v in overrides.items()] + [f"seed={seed}"]))


def sweep(root: Path, groups: dict[str, list[float]], key: str = "optim.lr", start: int = 0) -> Path:
    """One folder per (group, seed): seeds 1..n in each group, jobs numbered from `start`."""
    job = start
    for value, accs in groups.items():
        for seed, acc in enumerate(accs, 1):
            run(root / str(job), seed, acc, **{key: value})
            job += 1
    return root


def rows(result) -> dict[str, dict]:
    return {str(r[result.group_by[0]]): r for r in result.rows}


# ---------------------------------------------------------------- the statistics themselves


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 30])
@pytest.mark.parametrize("q", [0.6, 0.9, 0.975, 0.995])
def test_t_quantiles_match_scipy(df, q):
    assert stats.t_ppf(q, df) == pytest.approx(scipy_stats.t.ppf(q, df), rel=1e-9)
    assert stats.t_cdf(-1.3, df) == pytest.approx(scipy_stats.t.cdf(-1.3, df), rel=1e-9)


@pytest.mark.parametrize("values", [[0.81, 0.84], [0.80, 0.83, 0.79], [0.70, 0.74, 0.71, 0.69, 0.75]])
def test_confidence_interval_matches_scipy(values):
    low, high = stats.t_interval(values)
    expected = scipy_stats.t.interval(0.95, len(values) - 1, loc=sum(values) / len(values),
                                      scale=scipy_stats.sem(values))
    assert (low, high) == pytest.approx(expected, rel=1e-9)
    assert stats.t_interval([0.8]) is None


@pytest.mark.parametrize("diffs", [[0.02, 0.03, -0.01], [0.01, 0.02, 0.015, 0.03, 0.025, 0.02],
                                   [0.5, -0.4, 0.3, -0.2, 0.1, 0.05, -0.02], [0.0, 0.0, 0.1]])
def test_sign_flip_p_value_matches_scipy_exact_paired_permutation_test(diffs):
    baseline = [0.8 + 0.01 * i for i in range(len(diffs))]
    treated = [b + d for b, d in zip(baseline, diffs)]
    expected = scipy_stats.permutation_test(
        (treated, baseline), lambda x, y: sum(x) / len(x) - sum(y) / len(y), permutation_type="samples",
        alternative="two-sided", n_resamples=math.inf).pvalue
    assert stats.sign_flip_test(diffs) == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- compare: CI columns, baseline verdicts


def test_groups_get_mean_std_and_a_student_t_interval(tmp_path):
    result = compare_runs([sweep(tmp_path / "s", {"1e-3": [0.80, 0.83, 0.79], "3e-3": [0.70, 0.72, 0.71]})])
    r = rows(result)["0.001"]
    values = [0.80, 0.83, 0.79]
    assert r["val/accuracy_mean"] == pytest.approx(sum(values) / 3)
    assert r["val/accuracy_std"] == pytest.approx(scipy_stats.tstd(values))
    expected = scipy_stats.t.interval(0.95, 2, loc=sum(values) / 3, scale=scipy_stats.sem(values))
    assert (r["val/accuracy_ci95_low"], r["val/accuracy_ci95_high"]) == pytest.approx(expected)
    with open(result.csv_path, newline="") as f:
        assert "val/accuracy_ci95_low" in next(csv.DictReader(f))
    assert "Student t" in result.md_path.read_text()


# Six seeds per group: the exact test can reach p = 2/64 = 0.031 < 0.05.
BASE = [0.80, 0.82, 0.79, 0.81, 0.83, 0.80]
REAL = [b + d for b, d in zip(BASE, [0.04, 0.05, 0.03, 0.06, 0.04, 0.05])]  # better on every seed
NOISE = [b + d for b, d in zip(BASE, [0.02, -0.01, 0.01, -0.02, -0.01, 0.015])]  # signs mixed


def test_baseline_flags_a_real_difference_and_not_noise(tmp_path):
    result = compare_runs([sweep(tmp_path / "s", {"base": BASE, "real": REAL, "noise": NOISE}, key="head.pooling")],
                          baseline="head.pooling=base")
    r = rows(result)
    assert r["base"]["verdict"] == "baseline"
    assert r["real"]["verdict"] == "better" and r["real"]["n_paired"] == 6
    assert r["real"]["p_value"] == pytest.approx(scipy_stats.permutation_test(
        (REAL, BASE), lambda x, y: sum(x) / len(x) - sum(y) / len(y), permutation_type="samples",
        n_resamples=math.inf).pvalue)
    assert r["real"]["diff"] == pytest.approx(0.045)
    diffs = [a - b for a, b in zip(REAL, BASE)]
    expected = scipy_stats.t.interval(0.95, 5, loc=sum(diffs) / 6, scale=scipy_stats.sem(diffs))
    assert (r["real"]["diff_ci95_low"], r["real"]["diff_ci95_high"]) == pytest.approx(expected)
    assert r["noise"]["verdict"] == "within noise" and r["noise"]["p_value"] > 0.05
    assert "sign-flip" in result.md_path.read_text()


def test_a_few_seeds_cannot_be_flagged_and_say_so(tmp_path):
    result = compare_runs([sweep(tmp_path / "s", {"base": BASE[:3], "real": REAL[:3]}, key="head.pooling")],
                          baseline="head.pooling=base")
    assert rows(result)["real"]["p_value"] == pytest.approx(0.25)  # 2 of the 8 sign patterns
    assert rows(result)["real"]["verdict"].startswith("within noise (n=3 seeds cannot reach p<0.05)")


def test_baseline_pairs_only_shared_seeds(tmp_path):
    root = sweep(tmp_path / "s", {"base": BASE[:4], "other": REAL})  # seeds 1-4 vs 1-6
    r = rows(compare_runs([root], baseline="optim.lr=base"))["other"]
    assert r["n_paired"] == 4 and r["diff"] == pytest.approx(sum(REAL[:4]) / 4 - sum(BASE[:4]) / 4)


def test_unknown_baseline_is_a_clear_error(tmp_path):
    root = sweep(tmp_path / "s", {"a": BASE[:2], "b": REAL[:2]})
    with pytest.raises(CompareError, match="no group has optim.lr=c; present: a, b"):
        compare_runs([root], baseline="optim.lr=c")
    with pytest.raises(CompareError, match="KEY one of the grouping keys"):
        compare_runs([root], baseline="freeze=none")


# ---------------------------------------------------------------- several sweeps, skipped states


def test_two_sweep_folders_of_the_same_config_are_told_apart(tmp_path):
    old = sweep(tmp_path / "old", {"1e-3": BASE})
    new = sweep(tmp_path / "new", {"1e-3": REAL})
    result = compare_runs([old, new], out=tmp_path / "cmp", baseline=f"sweep={old}")
    assert result.group_by == ["sweep"]
    r = {row["sweep"]: row for row in result.rows}
    assert r[str(new)]["verdict"] == "better" and r[str(old)]["verdict"] == "baseline"


def test_failed_and_pruned_runs_are_left_out(tmp_path, caplog):
    root = sweep(tmp_path / "s", {"a": BASE[:2], "b": REAL[:2]})
    (root / "9").mkdir()
    (root / "9" / "metrics.json").write_text(json.dumps({"state": "failed", "error": "boom", "seed": 3}))
    m = json.loads((root / "0" / "metrics.json").read_text()) | {"state": "pruned"}
    (root / "0" / "metrics.json").write_text(json.dumps(m))
    result = compare_runs([root])
    assert sorted(r["n"] for r in result.rows) == [1, 2]
    assert "left out 1 failed run(s)" in caplog.text and "left out 1 pruned run(s)" in caplog.text


# ---------------------------------------------------------------- --expect


def test_expect_exits_nonzero_when_a_group_falls_outside(tmp_path, capsys):
    root = sweep(tmp_path / "s", {"a": BASE, "b": REAL})
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump([{"where": {"optim.lr": "a"}, "min": 0.79, "max": 0.83},
                                    {"where": {"optim.lr": "b"}, "metric": "val/accuracy", "min": 0.84}]))
    assert main([str(root), "--expect", str(good)]) == 0
    assert capsys.readouterr().out.count("ok   check") == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump([{"where": {"optim.lr": "a"}, "min": 0.85}, {"where": {"optim.lr": "zzz"}}]))
    assert main([str(root), "--expect", str(bad)]) == 1
    out = capsys.readouterr()
    assert "FAIL check 1 (optim.lr=a): val/accuracy mean 0.8083 over 6 run(s), expected [0.85, ]" in out.out
    assert "FAIL check 2 (optim.lr=zzz): no run reports val/accuracy" in out.out
    assert "2 of 2 expectation(s)" in out.err


# ---------------------------------------------------------------- bounded metrics: bounded intervals


def scored_run(run_dir: Path, seed: int, val: dict[str, float], lr: str = "1e-3") -> None:
    """A finished run with the given val scores (first one monitored)."""
    run_dir.mkdir(parents=True)
    name, value = next(iter(val.items()))
    (run_dir / "metrics.json").write_text(json.dumps({
        "task": "t", "model": "bert_tiny", "seed": seed, "state": "complete", "val": val,
        "monitor": {"metric": f"val/{name}", "mode": "min" if "loss" in name else "max", "value": value}}))
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"optim.lr={lr}", f"seed={seed}"]))


def test_two_seeds_of_an_accuracy_get_no_interval_and_a_note_saying_why(tmp_path, capsys):
    # The case: two seeds far apart gave [-0.447, 1.753] for an accuracy.
    result = compare_runs([sweep(tmp_path / "s", {"1e-3": [0.2, 0.99], "3e-3": [0.8, 0.82, 0.81]})])
    r = rows(result)["0.001"]
    assert r["val/accuracy_ci95_low"] is None and r["val/accuracy_ci95_high"] is None
    assert r["val/accuracy_ci95_note"].startswith("n=2: no interval")
    md = result.md_path.read_text()
    assert "n=2: none" in md and "one degree of freedom" in md
    print_table(result, width=200)
    assert "n=2: none" in capsys.readouterr().out


@pytest.mark.parametrize("metric, values, bounds", [
    ("accuracy", [0.2, 0.99, 0.95], (0.0, 1.0)),
    ("f1", [0.05, 0.9, 0.1], (0.0, 1.0)),
    ("matthews_correlation", [-0.9, 0.95, 0.9], (-1.0, 1.0)),
    ("disc_accuracy", [0.999, 0.5, 0.99], (0.0, 1.0)),
])
def test_bounded_metrics_get_intervals_inside_their_range(tmp_path, metric, values, bounds):
    for seed, value in enumerate(values, 1):
        scored_run(tmp_path / "s" / str(seed), seed, {metric: value})
    result = compare_runs([tmp_path / "s"])
    row = result.rows[0]
    low, high = row[f"val/{metric}_ci95_low"], row[f"val/{metric}_ci95_high"]
    raw_low, raw_high = stats.t_interval(values)
    assert raw_low < bounds[0] or raw_high > bounds[1]  # Student t alone spills over
    assert bounds[0] <= low < high <= bounds[1]
    assert row[f"val/{metric}_ci95_note"].startswith("cut at the metric's bounds")
    assert "†" in result.md_path.read_text()


def test_squad_scores_are_bounded_in_percent_and_losses_are_not_cut(tmp_path):
    for seed, (em, f1) in enumerate([(40.0, 99.5), (60.0, 70.0), (50.0, 99.9)], 1):
        scored_run(tmp_path / "qa" / str(seed), seed, {"f1": f1, "exact_match": em})
    row = compare_runs([tmp_path / "qa"]).rows[0]
    assert row["val/f1_ci95_high"] == 100.0 and row["val/f1_ci95_low"] > 1.0  # percent, not [0, 1]
    for seed, loss in enumerate([0.1, 2.5, 0.2], 1):
        scored_run(tmp_path / "loss" / str(seed), seed, {"loss": loss})
    row = compare_runs([tmp_path / "loss"]).rows[0]
    assert row["val/loss_ci95_low"] < 0 and row["val/loss_ci95_note"] is None  # no declared range: as computed


def test_baseline_differences_are_bounded_and_say_so_at_two_seeds(tmp_path):
    result = compare_runs([sweep(tmp_path / "two", {"base": [0.5, 0.6], "b": [0.9, 0.55]}, key="head.pooling")],
                          baseline="head.pooling=base")
    assert rows(result)["b"]["diff_ci95_low"] is None
    assert rows(result)["b"]["diff_ci95_note"].startswith("n=2")
    result = compare_runs([sweep(tmp_path / "three", {"base": [0.05, 0.9, 0.1], "b": [0.95, 0.0, 0.99]},
                                 key="head.pooling")], baseline="head.pooling=base")
    r = rows(result)["b"]
    assert -1.0 <= r["diff_ci95_low"] and r["diff_ci95_high"] <= 1.0 and r["diff_ci95_note"].startswith("cut")
