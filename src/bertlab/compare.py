"""Compare finished runs: one row per group of runs that differ only in seed, with statistics over seeds.

    python -m bertlab.compare DIR... [--out DIR] [--group-by freeze,model] [--metric val/f1]
                              [--baseline freeze=none] [--alpha 0.05] [--expect expected.yaml]

Reads every ``metrics.json`` under the DIRs (plus ``.hydra/overrides.yaml``, ``.hydra/config.yaml`` and
``csv/metrics.csv`` when present) and writes ``comparison.csv``, ``comparison.md`` and ``comparison.png``
into ``--out`` (default: the first DIR). Several DIRs (several sweeps) are compared together; when runs of
different DIRs would otherwise fall into one group, the DIR (key ``sweep``) splits them.

Conventions: a group's ``<metric>_mean`` / ``<metric>_std`` are taken over the runs of the group that report
that metric; ``_std`` is the sample standard deviation (ddof=1) and is left empty when fewer than two runs
report it, because one sample says nothing about seed variance (0.0 would claim it does). A metric no run
of a group reports is an empty cell. Runs whose ``metrics.json`` says ``state: failed`` or ``pruned`` (an
Optuna trial stopped early) are left out.

Statistics (bertlab.stats) on the ranked metric: ``_ci95_low`` / ``_ci95_high``, the Student t 95 %
confidence interval of the mean over seeds. ``--baseline KEY=VALUE`` compares every other group with the
baseline group on the seeds both ran: ``diff`` (mean paired difference), its Student t 95 % interval, and
``p_value`` from the exact paired sign-flip (permutation) test; ``verdict`` is ``better`` / ``worse`` when
p < ``--alpha``, else ``within noise`` (with n shared seeds no p is below 2/2^n: use 6 or more seeds).
``--expect FILE`` checks groups against expected ranges and exits with status 1 when one falls outside.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import re
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bertlab import stats

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
              for name, v in (metrics.get(split) or {}).items() if name != "num_examples" and _is_number(v)}
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


def compare_runs(
    dirs: list[Path], out: Path | None = None, group_by: list[str] | None = None, metric: str | None = None,
    baseline: str | None = None, alpha: float = 0.05,
) -> CompareResult:
    """Group the runs under `dirs`, write comparison.{csv,md,png} into `out` (default: ``dirs[0]``).

    `group_by` forces the grouping keys (metrics.json fields or dotted config keys such as ``optim.lr``);
    `metric` (default: the runs' monitor metric) ranks the groups and is plotted; `baseline` (``KEY=VALUE``)
    adds the paired comparison with the baseline group (module docstring).
    """
    runs = find_runs(dirs)
    keys = list(group_by) if group_by is not None else default_group_keys(runs)
    unknown = [k for k in keys if all(k not in r.config for r in runs)]
    if unknown:
        known = sorted({k for r in runs for k in r.config if not k.startswith("hydra.")})
        raise CompareError(f"group-by key(s) {', '.join(unknown)} in no run; known keys: {', '.join(known)}")
    metric = _qualify(metric or _default_metric(runs))
    names = list(dict.fromkeys(n for split in ("val/", "test/") for r in runs for n in r.values
                               if n.startswith(split)))
    names += [f"{b}/{n}" for b, n in EXTRA_METRICS if any(f"{b}/{n}" in r.values for r in runs)]
    if metric not in names:
        raise CompareError(f"metric {metric!r} is in no run; available: {', '.join(names)}")
    groups = group_runs(runs, keys)
    rows = []
    for group in groups:
        row: dict[str, Any] = {**group.key, "n": len(group.runs)}
        for name in names:
            row[f"{name}_mean"], row[f"{name}_std"] = _mean_std(
                [r.values[name] for r in group.runs if name in r.values])
        interval = stats.t_interval([r.values[metric] for r in group.runs if metric in r.values])
        row[f"{metric}_ci95_low"], row[f"{metric}_ci95_high"] = interval or (None, None)
        rows.append(row)
    mode = _mode(runs, metric)
    if baseline is not None:
        _paired_with_baseline(groups, rows, keys, metric, mode, baseline, alpha)
    scored = [i for i, row in enumerate(rows) if row[f"{metric}_mean"] is not None]
    pick = max if mode == "max" else min
    best = pick(scored, key=lambda i: rows[i][f"{metric}_mean"]) if scored else None
    out = Path(out) if out is not None else Path(dirs[0])
    out.mkdir(parents=True, exist_ok=True)
    result = CompareResult(keys, metric, mode, names, groups, rows, best,
                           out / "comparison.csv", out / "comparison.md", out / "comparison.png", baseline, alpha)
    _write_csv(result)
    _write_md(result, out)
    _plot(result)
    return result


def _per_seed(group: Group, metric: str) -> dict[Any, float]:
    """seed → the group's value of `metric` (the mean when several runs of the group share a seed)."""
    by_seed: dict[Any, list[float]] = {}
    for r in group.runs:
        if metric in r.values:
            by_seed.setdefault(r.config.get("seed"), []).append(r.values[metric])
    return {seed: statistics.fmean(v) for seed, v in by_seed.items()}


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
                   diff_ci95_high=None, p_value=None, verdict=None)
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
        row["diff_ci95_low"], row["diff_ci95_high"] = stats.t_interval(diffs) or (None, None)
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


# ---------------------------------------------------------------- outputs
def _show(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _cell(row: dict[str, Any], name: str) -> str:
    mean, std = row[f"{name}_mean"], row[f"{name}_std"]
    if mean is None:
        return ""
    return _num(mean) if std is None else f"{_num(mean)} ± {_num(std)}"


def _header(result: CompareResult) -> list[str]:
    extra = [f"{result.metric} 95% CI"]
    if result.baseline:
        extra += [f"diff vs {result.baseline} (95% CI)", "p (sign-flip)", "verdict"]
    return [*result.group_by, "n", *result.metric_names, *extra]


def _interval(low: Any, high: Any) -> str:
    return "" if low is None else f"[{_num(low)}, {_num(high)}]"


def _text_rows(result: CompareResult, bold: str = "") -> list[list[str]]:
    """Display cells per group (key values, n, mean ± std, CI, baseline comparison); `bold` wraps the best
    group's ranked cell."""
    rows = []
    m = result.metric
    for i, (group, row) in enumerate(zip(result.groups, result.rows)):
        cells = [_show(v) for v in group.key.values()] + [str(row["n"])]
        for name in result.metric_names:
            text = _cell(row, name)
            cells.append(f"{bold}{text}{bold}" if i == result.best and name == result.metric and text else text)
        cells.append(_interval(row[f"{m}_ci95_low"], row[f"{m}_ci95_high"]))
        if result.baseline:
            diff = "" if row["diff"] is None else f"{row['diff']:+.4g} {_interval(row['diff_ci95_low'], row['diff_ci95_high'])}"
            cells += [diff.strip(), "" if row["p_value"] is None else f"{row['p_value']:.3g}", row["verdict"] or ""]
        rows.append(cells)
    return rows


def _write_csv(result: CompareResult) -> None:
    with result.csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(result.rows[0]))
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in result.rows)


def _write_md(result: CompareResult, out: Path) -> None:
    header = _header(result)
    lines = [
        "# Run comparison", "",
        f"Ranked on `{result.metric}` ({result.mode} is better; best group in bold). Cells are mean ± sample "
        "std (ddof=1) over seeds; no ± when only one run reports the metric. The 95% CI is Student t's "
        "interval of the mean over seeds.", "",
    ]
    if result.baseline:
        lines += [f"Against the baseline group `{result.baseline}`: the mean paired difference on the seeds both "
                  "ran (Student t 95% CI), and the two-sided p-value of the exact paired sign-flip "
                  f"(permutation) test; `better`/`worse` when p < {result.alpha:g}, else `within noise`.", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in _text_rows(result, bold="**")]
    lines += ["", "## Runs per group", ""]
    for group in result.groups:
        dirs = ", ".join(f"`{os.path.relpath(r.run_dir, out.resolve())}`" for r in group.runs)
        lines.append(f"- {group.label} (n={len(group.runs)}): {dirs}")
    result.md_path.write_text("\n".join(lines) + "\n")


def read_curve(run_dir: Path, column: str) -> dict[int, float]:
    """step -> value of one CSVLogger column (or its ``_step`` variant) from ``<run_dir>/csv/``; {} if none."""
    paths = [run_dir / "csv" / "metrics.csv"]
    if not paths[0].is_file():  # CSVLogger with a version folder, or several after a resume
        paths = sorted((run_dir / "csv").glob("**/metrics.csv"), key=_natural)
    curve: dict[int, float] = {}
    for path in paths:
        try:
            with path.open(newline="") as f:
                for row in csv.DictReader(f):
                    # Lightning writes one row per logging call; other columns' rows leave this cell empty.
                    text = row.get(column) or row.get(f"{column}_step")
                    if text and row.get("step"):
                        curve[int(float(row["step"]))] = float(text)
        except (OSError, ValueError, csv.Error) as err:
            log.warning("ignoring learning curve %s: %s", path, err)
    return curve


def _plot_curves(ax: Any, result: CompareResult, column: str, colors: list[str]) -> None:
    for group, color in zip(result.groups, colors):
        curves = [c for c in (read_curve(r.run_dir, column) for r in group.runs) if c]
        common = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
        for j, curve in enumerate(curves):  # the legend names the mean line, or the first seed without one
            ax.plot(sorted(curve), [curve[s] for s in sorted(curve)], color=color, alpha=0.35, lw=0.8,
                    label=group.label if j == 0 and not common else None)
        if common:  # mean over seeds at the steps every seed logged
            ax.plot(common, [statistics.fmean(c[s] for c in curves) for s in common], color=color, lw=2,
                    label=group.label)
    ax.set(xlabel="step", ylabel=column, title=f"{column} (thin: each seed, thick: mean)")
    ax.legend(fontsize="small")


def _plot(result: CompareResult) -> None:
    # Figure + Agg canvas directly, not pyplot: no global backend switch, no GUI, safe in notebooks.
    from matplotlib.figure import Figure

    curve_columns = [c for c in (result.metric, "train/loss")
                     if any(read_curve(r.run_dir, c) for g in result.groups for r in g.runs)]
    fig = Figure(figsize=(5.5 * (1 + len(curve_columns)), 4.5), layout="constrained")
    axes = fig.subplots(1, 1 + len(curve_columns), squeeze=False)[0]
    colors = [f"C{i % 10}" for i in range(len(result.groups))]
    ax = axes[0]
    m = result.metric
    xs = range(len(result.groups))
    for x, group, row, color in zip(xs, result.groups, result.rows, colors):
        seeds = [r.values[m] for r in group.runs if m in r.values]
        offsets = [0.0] if len(seeds) == 1 else [-0.2 + 0.4 * i / (len(seeds) - 1) for i in range(len(seeds))]
        ax.scatter([x + o for o in offsets], seeds, color=color, s=18, alpha=0.8, zorder=3)
        mean, low, high = row[f"{m}_mean"], row[f"{m}_ci95_low"], row[f"{m}_ci95_high"]
        if mean is None:
            continue
        yerr = [[mean - low], [high - mean]] if low is not None else None
        ax.errorbar([x + 0.3], [mean], yerr=yerr, fmt="D", color="black", ms=6 if x == result.best else 4,
                    capsize=4, zorder=4)
    ax.set_xticks(list(xs), [g.label for g in result.groups], rotation=20, ha="right", fontsize="small")
    ax.set(ylabel=m, title=f"{m} ({result.mode} is better)\ndots: seeds; diamond: mean, 95% CI (Student t)")
    for ax, column in zip(axes[1:], curve_columns):
        _plot_curves(ax, result, column, colors)
    fig.savefig(result.png_path, dpi=120)


def print_table(result: CompareResult) -> None:
    """The CLI's summary: the comparison table in the terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(result.groups)} group(s), ranked on {result.metric} ({result.mode})")
    for name in _header(result):
        table.add_column(name, justify="left" if name in result.group_by else "right")
    for i, cells in enumerate(_text_rows(result)):
        table.add_row(*cells, style="bold green" if i == result.best else None)
    # Print at the table's natural width: a wide table scrolls, a squeezed one truncates names and numbers.
    probe = Console()
    natural = probe.measure(table, options=probe.options.update_width(1000)).maximum
    Console(width=max(probe.width, natural)).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertlab.compare", description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="directories searched for metrics.json")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: first DIR)")
    parser.add_argument("--group-by", default=None, help="comma-separated keys, e.g. freeze,optim.lr")
    parser.add_argument("--metric", default=None, help="metric to rank and plot (default: monitor metric)")
    parser.add_argument("--baseline", default=None, metavar="KEY=VALUE",
                        help="compare every group with this one on shared seeds (e.g. freeze=none)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level of --baseline (0.05)")
    parser.add_argument("--expect", type=Path, default=None, metavar="FILE",
                        help="YAML list of expected ranges; exit status 1 when a group falls outside")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    group_by = [k.strip() for k in args.group_by.split(",") if k.strip()] if args.group_by else None
    try:
        result = compare_runs(args.dirs, args.out, group_by, args.metric, args.baseline, args.alpha)
        checks = check_expectations(result, args.expect) if args.expect else []
    except CompareError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print_table(result)
    for path in (result.csv_path, result.md_path, result.png_path):
        print(f"wrote {path}")
    for line in checks:
        print(line)
    failed = sum(line.startswith("FAIL") for line in checks)
    if failed:
        print(f"error: {failed} of {len(checks)} expectation(s) of {args.expect} not met", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
