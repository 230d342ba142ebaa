"""Finished runs as data: read every ``metrics.json`` under some folders (with the run's Hydra overrides and
config), group runs that differ only in seed, and compute per-group statistics and paired comparisons with a
baseline (``compare_runs``); ``check_expectations`` checks groups against expected ranges. The tables and
plots of ``python -m bertlab.compare`` and ``python -m bertlab.glue`` are built from these."""

from __future__ import annotations

import json
import logging
import os
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bertlab.analysis import stats
from bertlab.runtime.paths import existing_path

log = logging.getLogger(__name__)

TOP_LEVEL_KEYS = ("task", "model", "freeze", "data_source")
EXTRA_METRICS = (("params", "trainable"), ("train", "wall_s"), ("train", "samples_per_s"))
LOWER_IS_BETTER = ("loss", "perplexity", "wall_s")
# Keys that differ between runs without being an experimental choice: seeds, output locations, Hydra's own.
_EXCLUDED = re.compile(r"(^|\.)seed$|^(hydra|paths)(\.|$)|(dir|dirpath|_path|best_checkpoint)$|^skip_finished$")


class CompareError(ValueError):
    """Nothing (usable) to compare; the CLI turns it into exit code 2."""


class SkippedRun(ValueError):
    """A run left out of comparisons on purpose (it failed or was pruned)."""


@dataclass
class Run:
    """One finished run: its config values (dotted keys) and its numeric metrics (``val/accuracy``, ...)."""

    run_dir: Path
    config: dict[str, Any]
    override_keys: list[str] | None  # None when the run has no .hydra/overrides.yaml
    values: dict[str, float]
    monitor: dict[str, Any]


@dataclass
class Group:
    key: dict[str, Any]
    runs: list[Run] = field(default_factory=list)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={_show(v)}" for k, v in self.key.items()) or "all runs"


@dataclass
class CompareResult:
    group_by: list[str]
    metric: str  # the metric that ranks groups and is plotted, e.g. "val/accuracy"
    mode: str  # "max" | "min"
    metric_names: list[str]
    groups: list[Group]
    rows: list[dict[str, Any]]  # one per group: key values, n, <metric>_mean, <metric>_std (None = empty)
    best: int | None  # index of the best group on `metric`
    csv_path: Path
    md_path: Path
    png_path: Path
    baseline: str | None = None  # "KEY=VALUE" of --baseline
    alpha: float = 0.05


# ---------------------------------------------------------------- reading runs
def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    # Lists become JSON text so that values stay hashable for grouping.
    return {prefix[:-1]: json.dumps(tree) if isinstance(tree, list) else tree}


def _parse_value(text: str) -> Any:
    """Override values are text; parse them like the config file so ``optim.lr=1e-4`` equals ``0.0001``."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str):
        try:
            return float(value)  # PyYAML reads "1e-4" (no dot) as a string
        except ValueError:
            return value
    return json.dumps(value) if isinstance(value, list | dict) else value


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text()) if path.is_file() else None
    except (OSError, yaml.YAMLError) as err:
        log.warning("ignoring unreadable %s: %s", path, err)
        return None


def load_run(metrics_path: Path) -> Run:
    """Read one run; raises ValueError/OSError when its metrics.json is unusable."""
    metrics = json.loads(metrics_path.read_text())
    if isinstance(metrics, dict) and metrics.get("state") in ("failed", "pruned"):
        raise SkippedRun(metrics["state"])
    if not isinstance(metrics, dict) or not isinstance(metrics.get("val"), dict):
        raise ValueError("no 'val' block")
    run_dir = metrics_path.parent
    overrides = _read_yaml(run_dir / ".hydra" / "overrides.yaml")
    override_values: dict[str, Any] = {}
    for item in overrides if isinstance(overrides, list) else []:
        key, sep, value = str(item).partition("=")
        if sep:
            override_values[key.lstrip("+~")] = _parse_value(value)
    # Precedence: metrics.json names what ran, config.yaml is the composed truth, overrides fill the rest
    # (group choices such as `trainer=gpu` that are not scalar config values).
    config = {**override_values, **_flatten(_read_yaml(run_dir / ".hydra" / "config.yaml") or {})}
    config.update({k: metrics[k] for k in (*TOP_LEVEL_KEYS, "seed") if k in metrics})
    values = {f"{split}/{name}": float(v) for split in ("val", "test")
              for name, v in (metrics.get(split) or {}).items()
              if name not in ("num_examples", "num_words") and _is_number(v)}  # counts, not scores
    values.update({f"{block}/{name}": float(v) for block, name in EXTRA_METRICS
                   if _is_number(v := (metrics.get(block) or {}).get(name))})
    keys = list(override_values) if isinstance(overrides, list) else None
    return Run(run_dir, config, keys, values, metrics.get("monitor") or {})


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _natural(path: Path) -> list[Any]:
    # Multirun dirs are 0, 1, ..., 10: sort them as numbers.
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(path))]


def find_runs(dirs: list[Path]) -> list[Run]:
    """Every readable metrics.json under `dirs`; unreadable ones are skipped with a warning, failed and pruned
    ones with a note. With several `dirs` each run's config gets ``sweep`` = the DIR it was found under."""
    runs = []
    roots = [Path(d).resolve() for d in dirs]
    skipped: Counter[str] = Counter()
    for d in dirs:  # a misspelled folder is named as such, not as a folder without runs
        existing_path(d, "the folder", CompareError)
    for path in sorted({p.resolve() for d in dirs for p in Path(d).rglob("metrics.json")}, key=_natural):
        try:
            run = load_run(path)
        except SkippedRun as why:
            skipped[str(why)] += 1
            continue
        except (OSError, ValueError) as err:
            log.warning("skipping unreadable %s: %s", path, err)
            continue
        if len(dirs) > 1:
            run.config["sweep"] = next(str(d) for d, r in zip(dirs, roots) if path.is_relative_to(r))
        runs.append(run)
    for state, count in skipped.items():
        log.warning("left out %d %s run(s) (metrics.json state: %s)", count, state, state)
    if not runs:
        missing = [str(d) for d in dirs if not Path(d).is_dir()]
        hint = f" (not a directory: {', '.join(missing)})" if missing else ""
        raise CompareError(f"no readable metrics.json found under {', '.join(map(str, dirs))}{hint}")
    return runs


# ---------------------------------------------------------------- grouping and statistics
def _partition(runs: list[Run], keys: list[str]) -> int:
    return len({tuple(r.config.get(k) for k in keys) for r in runs})


def default_group_keys(runs: list[Run]) -> list[str]:
    """Config keys whose values differ between runs, seed and run locations excluded.

    Override keys and the metrics.json fields come first. Flattened config.yaml keys are only looked at
    when some run has no overrides.yaml, and only kept when they split the groups further: `freeze.policy`
    adds nothing once `freeze` is a column.
    """
    primary = list(dict.fromkeys([k for r in runs for k in r.override_keys or []] + list(TOP_LEVEL_KEYS)))
    primary = [k for k in primary if k != "sweep"]
    secondary = []
    if any(r.override_keys is None for r in runs):
        secondary = list(dict.fromkeys(k for r in runs if r.override_keys is None for k in r.config))
    chosen: list[str] = []
    for key in primary + [k for k in secondary if k not in primary]:
        if key == "sweep" or _EXCLUDED.search(key) or _partition(runs, [key]) < 2:
            continue
        if key in primary or _partition(runs, chosen + [key]) > _partition(runs, chosen):
            chosen.append(key)
    if any("sweep" in r.config for r in runs) and _partition(runs, chosen + ["sweep"]) > _partition(runs, chosen):
        chosen.append("sweep")  # several DIRs whose runs the config keys do not tell apart
    return chosen


def group_runs(runs: list[Run], keys: list[str]) -> list[Group]:
    groups: dict[tuple, Group] = {}
    for run in runs:
        key = tuple(run.config.get(k) for k in keys)
        groups.setdefault(key, Group(dict(zip(keys, key)))).runs.append(run)
    return list(groups.values())


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    return stats.mean_std(values)


def _default_metric(runs: list[Run]) -> str:
    monitored = Counter(_qualify(r.monitor["metric"]) for r in runs if r.monitor.get("metric"))
    return monitored.most_common(1)[0][0] if monitored else "val/loss"


def _qualify(metric: str) -> str:
    return metric if "/" in metric else f"val/{metric}"


def _mode(runs: list[Run], metric: str) -> str:
    modes = [r.monitor.get("mode") for r in runs if _qualify(r.monitor.get("metric") or "?") == metric]
    if modes and modes[0] in ("max", "min"):
        return modes[0]
    return "min" if metric.split("/")[-1].endswith(LOWER_IS_BETTER) else "max"


def _per_seed(group: Group, metric: str) -> dict[Any, float]:
    """seed → the group's value of `metric` (the mean when several runs of the group share a seed)."""
    by_seed: dict[Any, list[float]] = {}
    for r in group.runs:
        if metric in r.values:
            by_seed.setdefault(r.config.get("seed"), []).append(r.values[metric])
    return {seed: statistics.fmean(v) for seed, v in by_seed.items()}


def metric_bounds(runs: list[Run], metric: str) -> tuple[float, float] | None:
    """The range ``metric``'s values lie in (:func:`bertlab.analysis.stats.metric_bounds`), on the runs' scale:
    runs that report SQuAD's ``exact_match`` give their shares in percent."""
    percent = any(f"{split}/exact_match" in r.values for r in runs for split in ("val", "test"))
    return stats.metric_bounds(metric, percent)


def _paired_with_baseline(groups: list[Group], rows: list[dict[str, Any]], keys: list[str], metric: str,
                          mode: str, baseline: str, alpha: float) -> None:
    """Fill the baseline columns of `rows` (see the module docstring)."""
    key, sep, text = baseline.partition("=")
    key = key.strip()
    if not sep or key not in keys:
        raise CompareError(f"--baseline {baseline}: give KEY=VALUE with KEY one of the grouping keys "
                           f"({', '.join(keys) or 'none: pass --group-by'})")
    value = _parse_value(text.strip())

    def matches(g: Group) -> bool:
        return g.key[key] == value or _show(g.key[key]) == text.strip()

    if not any(matches(g) for g in groups):
        present = sorted({_show(g.key[key]) for g in groups})
        raise CompareError(f"--baseline {baseline}: no group has {key}={text.strip()}; present: {', '.join(present)}")
    others = [k for k in keys if k != key]
    for group, row in zip(groups, rows):
        base = next((g for g in groups if matches(g) and all(g.key[k] == group.key[k] for k in others)), None)
        row.update(baseline=base.label if base else None, n_paired=None, diff=None, diff_ci95_low=None,
                   diff_ci95_high=None, diff_ci95_note=None, p_value=None, verdict=None)
        if base is None:
            row["verdict"] = "no baseline group"
            continue
        if base is group:
            row["verdict"] = "baseline"
            continue
        mine, theirs = _per_seed(group, metric), _per_seed(base, metric)
        seeds = [s for s in mine if s in theirs]
        diffs = [mine[s] - theirs[s] for s in seeds]
        row["n_paired"] = len(diffs)
        if not diffs:
            row["verdict"] = "no shared seeds"
            continue
        row["diff"] = statistics.fmean(diffs)
        bounds = metric_bounds([r for g in groups for r in g.runs], metric)
        span = None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0])  # a difference's range
        interval = stats.mean_interval(diffs, span)
        row["diff_ci95_low"], row["diff_ci95_high"], row["diff_ci95_note"] = \
            interval.low, interval.high, interval.note
        row["p_value"] = stats.sign_flip_test(diffs)
        if row["p_value"] < alpha:
            row["verdict"] = "better" if (row["diff"] > 0) == (mode == "max") else "worse"
        elif stats.smallest_p(len(diffs)) >= alpha:
            row["verdict"] = f"within noise (n={len(diffs)} seeds cannot reach p<{alpha:g})"
        else:
            row["verdict"] = "within noise"


# ---------------------------------------------------------------- expected ranges (--expect)


def check_expectations(result: CompareResult, path: Path) -> list[str]:
    """Check the groups against ``path`` (YAML); returns one line per check, failures starting "FAIL".

    The file is a list of checks::

        - where: {freeze: none, model: bert_tiny}   # the runs whose config has these values
          metric: val/accuracy                       # default: the ranked metric
          min: 0.85                                  # the mean over those runs must lie in [min, max]
          max: 0.95                                  # (either bound may be left out)
    """
    try:
        checks = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise CompareError(f"--expect {path}: cannot read it ({err})") from None
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise CompareError(f"--expect {path}: expected a YAML list of checks (where, metric, min, max)")
    runs = [r for g in result.groups for r in g.runs]
    lines = []
    for i, check in enumerate(checks):
        where = {k: _parse_value(str(v)) for k, v in (check.get("where") or {}).items()}
        metric = _qualify(str(check.get("metric") or result.metric))
        lo, hi = check.get("min"), check.get("max")
        label = ", ".join(f"{k}={_show(v)}" for k, v in where.items()) or "all runs"
        chosen = [r for r in runs if all(r.config.get(k) == v or _show(r.config.get(k)) == _show(v)
                                         for k, v in where.items())]
        values = [r.values[metric] for r in chosen if metric in r.values]
        if not values:
            lines.append(f"FAIL check {i + 1} ({label}): no run reports {metric}")
            continue
        mean = statistics.fmean(values)
        ok = (lo is None or mean >= float(lo)) and (hi is None or mean <= float(hi))
        lines.append(f"{'ok  ' if ok else 'FAIL'} check {i + 1} ({label}): {metric} mean {_num(mean)} over "
                     f"{len(values)} run(s), expected [{'' if lo is None else lo}, {'' if hi is None else hi}]")
    return lines



def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _show(value: Any) -> str:
    """A config value as tables, plots and labels print it. An absolute path under the working folder prints
    relative to it (``model.init_from=/home/me/proj/logs/x`` as ``logs/x``), so a comparison written into a
    repository names no machine's folders; other paths and values print as they are."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    if isinstance(value, str) and os.path.isabs(text):
        relative = os.path.relpath(text)
        if relative != ".." and not relative.startswith(".." + os.sep):
            return relative
    return text

