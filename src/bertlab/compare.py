"""Compare finished runs: one row per group of runs that differ only in seed, with statistics over seeds.

    python -m bertlab.compare DIR... [--out DIR] [--group-by freeze,model] [--metric val/f1]
                              [--baseline freeze=none] [--alpha 0.05] [--expect expected.yaml]

Reads every ``metrics.json`` under the DIRs (plus ``.hydra/overrides.yaml``, ``.hydra/config.yaml`` and
``csv/metrics.csv`` when present) and writes ``comparison.csv``, ``comparison.md`` and ``comparison.png``
into ``--out`` (default: the DIR, or with several DIRs the deepest folder that holds them all). Several DIRs
(several sweeps) are compared together; when runs of different DIRs would otherwise fall into one group, the
DIR (key ``sweep``) splits them. The terminal shows the table cut to its width (the ranked metric first); the
files hold every column.

Conventions: a group's ``<metric>_mean`` / ``<metric>_std`` are taken over the runs of the group that report
that metric; ``_std`` is the sample standard deviation (ddof=1) and is left empty when fewer than two runs
report it, because one sample says nothing about seed variance (0.0 would claim it does). A metric no run
of a group reports is an empty cell. Runs whose ``metrics.json`` says ``state: failed`` or ``pruned`` (an
Optuna trial stopped early) are left out.

Statistics (bertlab.analysis.stats) on the ranked metric: ``_ci95_low`` / ``_ci95_high``, the Student t 95 %
confidence interval of the mean over seeds, from three seeds on (``_ci95_note`` says why two have none), cut at
the range of a bounded metric (accuracy, F1, ... in [0, 1], correlations in [-1, 1]; the note says so, the cell
has a ``†``): :func:`bertlab.analysis.stats.mean_interval`, for the baseline's differences too. ``--baseline KEY=VALUE`` compares every other group with the
baseline group on the seeds both ran: ``diff`` (mean paired difference), its Student t 95 % interval, and
``p_value`` from the exact paired sign-flip (permutation) test; ``verdict`` is ``better`` / ``worse`` when
p < ``--alpha``, else ``within noise`` (with n shared seeds no p is below 2/2^n: use 6 or more seeds).
``--expect FILE`` checks groups against expected ranges and exits with status 1 when one falls outside.
"""

from __future__ import annotations

import argparse
import atexit
import csv
import json
import logging
import os
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback as HydraCallback

from bertlab.analysis import stats
from bertlab.analysis.runs import (
    EXTRA_METRICS,
    CompareError,
    CompareResult,
    Run,
    _default_metric,
    _is_number,
    _mean_std,
    _mode,
    _natural,
    _num,
    _paired_with_baseline,
    _qualify,
    _show,
    check_expectations,
    default_group_keys,
    find_runs,
    group_runs,
    metric_bounds,
)
from bertlab.runtime.errors import ConfigError, OutputError
from bertlab.runtime.files import writing
from bertlab.runtime.outputs import refuse_replacing_bertlab_files

log = logging.getLogger(__name__)


def compare_runs(
    dirs: list[Path], out: Path | None = None, group_by: list[str] | None = None, metric: str | None = None,
    baseline: str | None = None, alpha: float = 0.05,
) -> CompareResult:
    """Group the runs under `dirs`, write comparison.{csv,md,png} into `out` (default: :func:`beside`).

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
    bounds = metric_bounds(runs, metric)  # accuracy, F1, ...: an interval of their mean stays inside the range
    rows = []
    for group in groups:
        row: dict[str, Any] = {**group.key, "n": len(group.runs)}
        for name in names:
            row[f"{name}_mean"], row[f"{name}_std"] = _mean_std(
                [r.values[name] for r in group.runs if name in r.values])
        interval = stats.mean_interval([r.values[metric] for r in group.runs if metric in r.values], bounds)
        row[f"{metric}_ci95_low"], row[f"{metric}_ci95_high"] = interval.low, interval.high
        row[f"{metric}_ci95_note"] = interval.note
        rows.append(row)
    mode = _mode(runs, metric)
    if baseline is not None:
        _paired_with_baseline(groups, rows, keys, metric, mode, baseline, alpha)
    scored = [i for i, row in enumerate(rows) if row[f"{metric}_mean"] is not None]
    pick = max if mode == "max" else min
    best = pick(scored, key=lambda i: rows[i][f"{metric}_mean"]) if scored else None
    out = Path(out) if out is not None else beside(dirs)
    for name in OUTPUT_NAMES:  # never over a run's or an export's files (an earlier comparison: replaced)
        try:
            refuse_replacing_bertlab_files(out / name, f"the comparison's {out / name}",
                                           "Name another folder with --out DIR", replaces=OUTPUT_NAMES)
        except ConfigError as err:
            raise CompareError(str(err)) from None
    out.mkdir(parents=True, exist_ok=True)
    result = CompareResult(keys, metric, mode, names, groups, rows, best,
                           *(out / name for name in OUTPUT_NAMES), baseline, alpha)
    _write_csv(result)
    _write_md(result, out)
    _plot(result)
    return result


OUTPUT_NAMES = ("comparison.csv", "comparison.md", "comparison.png")


def beside(dirs: list[Path]) -> Path:
    """Where a comparison goes by default: the folder named, or the deepest folder holding all the folders
    named (the common parent of several sweeps), not the first one, which holds only some of the runs."""
    common = Path(os.path.commonpath([str(Path(d).resolve()) for d in dirs]))
    if common == Path(common.anchor):
        raise CompareError(f"{', '.join(map(str, dirs))} share no folder below {common}: name one with --out DIR")
    return common


# ---------------------------------------------------------------- outputs
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


def _interval(low: Any, high: Any, note: str | None = None) -> str:
    """An interval's cell: ``[low, high]``, ``†`` when cut at the metric's bounds; ``n=2: none`` without one."""
    if low is None:
        return note.split(":")[0] + ": none" if note else ""
    return f"[{_num(low)}, {_num(high)}]" + ("†" if note else "")


def interval_notes(result: CompareResult) -> list[str]:
    """What the marks in the interval cells mean (lines for the table's foot), each once."""
    notes = [row.get(k) for row in result.rows for k in (f"{result.metric}_ci95_note", "diff_ci95_note")]
    lines = []
    if any(n and n.startswith("cut") for n in notes):
        lines.append("† cut at the metric's bounds: Student t's interval over a few seeds assumes normal values "
                     "and spills past a range no mean can leave (accuracy, F1, ... lie in [0, 1]; correlations in "
                     "[-1, 1]).")
    if any(n and n.startswith("n=") for n in notes):
        lines.append(f"n=2: none: with two seeds Student t has one degree of freedom (±12.7 standard errors): "
                     f"no meaningful interval; use {stats.MIN_MEANINGFUL_N} or more seeds.")
    return lines


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
        cells.append(_interval(row[f"{m}_ci95_low"], row[f"{m}_ci95_high"], row.get(f"{m}_ci95_note")))
        if result.baseline:
            interval = _interval(row["diff_ci95_low"], row["diff_ci95_high"], row.get("diff_ci95_note"))
            diff = "" if row["diff"] is None else f"{row['diff']:+.4g} {interval}"
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
        "interval of the mean over seeds (from three seeds on).", "",
    ]
    if result.baseline:
        lines += [f"Against the baseline group `{result.baseline}`: the mean paired difference on the seeds both "
                  "ran (Student t 95% CI), and the two-sided p-value of the exact paired sign-flip "
                  f"(permutation) test; `better`/`worse` when p < {result.alpha:g}, else `within noise`.", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in _text_rows(result, bold="**")]
    notes = interval_notes(result)
    lines += ["", *notes] if notes else []
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


def _curves(result: CompareResult, column: str) -> list[list[dict[int, float]]]:
    """Per group, the curve of `column` of each run that logged it."""
    return [[c for c in (read_curve(r.run_dir, column) for r in group.runs) if c] for group in result.groups]


def _plot_curves(ax: Any, result: CompareResult, column: str, per_group: list[list[dict[int, float]]],
                 colors: list[str]) -> None:
    from matplotlib.ticker import MaxNLocator

    for group, curves, color in zip(result.groups, per_group, colors):
        common = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
        for j, curve in enumerate(curves):  # the legend names the mean line, or the first seed without one
            steps = sorted(curve)
            # A marker on each logged point of a short curve: two validations are two points, not a segment
            # that reads as a measured trend.
            ax.plot(steps, [curve[s] for s in steps], color=color, alpha=0.35, lw=0.8,
                    marker="o" if len(steps) <= 20 else None, ms=3,
                    label=group.label if j == 0 and not common else None)
        if common:  # mean over seeds at the steps every seed logged
            ax.plot(common, [statistics.fmean(c[s] for c in curves) for s in common], color=color, lw=2,
                    marker="o" if len(common) <= 20 else None, ms=4, label=group.label)
    # Whole steps from 0: a curve over the last steps of a short run stays at its place in the run, not
    # stretched over a fraction of a step.
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(left=0)
    ax.set(xlabel="step", ylabel=column, title=f"{column} (thin: each seed, thick: mean)")
    ax.legend(fontsize="small")


def _plot(result: CompareResult) -> None:
    # Figure + Agg canvas directly, not pyplot: no global backend switch, no GUI, safe in notebooks.
    from matplotlib.figure import Figure

    # A learning curve needs two logged points in some run: a run that validated once (one epoch) has no
    # curve of its validation metric; the first panel shows that value per seed.
    panels = [(c, _curves(result, c)) for c in (result.metric, "train/loss")]
    panels = [(c, per_group) for c, per_group in panels if any(len(x) >= 2 for runs in per_group for x in runs)]
    fig = Figure(figsize=(5.5 * (1 + len(panels)), 4.5), layout="constrained")
    axes = fig.subplots(1, 1 + len(panels), squeeze=False)[0]
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
    for ax, (column, per_group) in zip(axes[1:], panels):
        _plot_curves(ax, result, column, per_group, colors)
    fig.savefig(result.png_path, dpi=120)


def print_table(result: CompareResult, width: int | None = None) -> list[str]:
    """The comparison table in the terminal, at most `width` columns wide (default: the terminal's); returns the
    columns left out to fit, which the files hold.

    The group keys, n and the ranked metric always show; then, while the table fits, the baseline verdict,
    difference and p-value, the ranked metric's interval, and the other metrics in order. A squeezed table
    would cut names and numbers, and a wider one wraps every line in a narrow terminal: whole columns are
    left out instead (a cell still too wide is wrapped, never cut)."""
    from rich.console import Console
    from rich.table import Table

    header = _header(result)
    rows = _text_rows(result)
    first = len(result.group_by) + 1 + len(result.metric_names)
    always = [c for c, name in enumerate(header) if c < len(result.group_by) + 1 or name == result.metric]
    tail = list(range(first, len(header)))  # interval[, diff, p, verdict]
    priority = [*tail[3:], *tail[1:3], *tail[:1], *(c for c in range(first) if c not in always)]
    console = Console(width=width) if width else Console()

    def table_of(columns: list[int]) -> Table:
        table = Table(title=f"{len(result.groups)} group(s), ranked on {result.metric} ({result.mode})")
        for c in columns:
            table.add_column(header[c], justify="left" if header[c] in result.group_by else "right",
                             overflow="fold")
        for i, cells in enumerate(rows):
            table.add_row(*(cells[c] for c in columns), style="bold green" if i == result.best else None)
        return table

    def fits(columns: list[int]) -> bool:
        wide = console.options.update_width(10_000)
        return console.measure(table_of(columns), options=wide).maximum <= console.width

    shown, left_out = always, []
    for c in priority:
        if fits(sorted([*shown, c])):
            shown = sorted([*shown, c])
        else:
            left_out.append(header[c])
    console.print(table_of(shown))
    return left_out


# ---------------------------------------------------------------- the end of a multirun
def multirun_summary(sweep_dir: Path, top: int = 3, how: str = "finished") -> list[str]:
    """What a multirun prints at its end: its jobs' states (with the error of each failed job), the best `top`
    jobs of each task on its monitored metric, and the comparison written into the sweep folder (or why there
    is none)."""
    sweep_dir = Path(sweep_dir)
    states: Counter[str] = Counter()
    failed = []
    for path in sorted(sweep_dir.rglob("metrics.json"), key=_natural):
        try:
            data = json.loads(path.read_text())
            state = data.get("state", "complete")
        except (OSError, ValueError, AttributeError):
            data, state = {}, "unreadable"
        states[state] += 1
        if state == "failed":
            failed.append(f"  failed: {os.path.relpath(path.parent, sweep_dir)}/  {data.get('error', '')}")
    told = ", ".join(f"{n} {state}" for state, n in states.most_common())
    lines = [f"multirun {how}: {states.total()} job(s) in {sweep_dir} ({told or 'no metrics.json'})", *failed]
    try:
        result = compare_runs([sweep_dir], out=sweep_dir)
    except CompareError as err:
        return [*lines, f"no comparison: {err}"]
    runs = [r for group in result.groups for r in group.runs]
    differ = [*result.group_by, "seed"]  # what tells the jobs apart
    by_task: dict[tuple[Any, str, str], list[Run]] = {}
    for r in runs:
        if _is_number(r.monitor.get("value")) and r.monitor.get("metric"):
            key = (r.config.get("task"), _qualify(r.monitor["metric"]), r.monitor.get("mode") or "max")
            by_task.setdefault(key, []).append(r)
    for (task, metric, mode), ranked in by_task.items():
        ranked.sort(key=lambda r: r.monitor["value"], reverse=mode == "max")
        lines.append(f"best job(s) of {task} on {metric} ({mode}):")
        for r in ranked[:top]:
            shown = " ".join(f"{k}={_show(r.config[k])}" for k in differ if k in r.config)
            lines.append(f"  {_num(r.monitor['value']):>8}  {os.path.relpath(r.run_dir, sweep_dir)}/  {shown}")
    if result.best is not None and len(result.groups) > 1:
        row = result.rows[result.best]
        lines.append(f"best group on {result.metric}: {result.groups[result.best].label} "
                     f"({_cell(row, result.metric)} over {row['n']} run(s))")
    lines.append(f"comparison: {result.md_path} (and .csv, .png); python -m bertlab.compare {sweep_dir} "
                 "remakes it")
    return lines


class MultirunSummary(HydraCallback):
    """At the end of a multirun (``conf/hydra/default.yaml``), print :func:`multirun_summary` and write the
    comparison into the sweep folder. Hydra's own sweeper stops with the error of a failed job before its
    end-of-multirun hook: the summary then prints at exit, after that error. A summary that fails says so and
    leaves the multirun's result alone."""

    def __init__(self) -> None:
        self.sweep_dir: Path | None = None

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        atexit.register(self._summarise, "stopped early (a job failed, or it was interrupted)")

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        self.sweep_dir = self.sweep_dir or Path(str(config.hydra.sweep.dir))
        self._summarise("finished")

    def _summarise(self, how: str) -> None:
        sweep_dir, self.sweep_dir = self.sweep_dir, None  # once: at the end, or at exit when no end came
        if sweep_dir is None or not sweep_dir.is_dir():
            return
        try:
            lines = multirun_summary(sweep_dir, how=how)
        except Exception as err:  # the jobs are done; a summary must not turn that into a failure
            lines = [f"no multirun summary: {type(err).__name__}: {err}"]
        print("\n".join(lines), flush=True)


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
        with writing(args.out or args.dirs[0], "the comparison's tables", "pass --out <a folder on a disk with room>"):
            result = compare_runs(args.dirs, args.out, group_by, args.metric, args.baseline, args.alpha)
        checks = check_expectations(result, args.expect) if args.expect else []
    except (CompareError, OutputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    left_out = print_table(result)
    for line in interval_notes(result):
        print(line)
    if left_out:
        print(f"{len(left_out)} more column(s) in comparison.md and .csv: {', '.join(left_out)}")
    where = "--out" if args.out is not None else (
        "the folder named" if len(args.dirs) == 1 else "the folder holding every DIR named; --out DIR to choose")
    print(f"wrote comparison.md, comparison.csv and comparison.png to {result.md_path.parent} ({where})")
    for line in checks:
        print(line)
    failed = sum(line.startswith("FAIL") for line in checks)
    if failed:
        print(f"error: {failed} of {len(checks)} expectation(s) of {args.expect} not met", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
