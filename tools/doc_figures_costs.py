"""The "cost" figures: what a headline command takes, from the run's own estimate.

Every run prints ``planned: N optimizer steps ...`` before its first step and, after a dozen measured steps,
``estimated: ~X to go at step S of N (...)`` (``bertlab.runtime.progress``). A probe runs the command (one job
of a sweep, one task of GLUE) in a cold scratch folder, stops it as soon as that line is out, and counts
``time to the estimate line`` (start-up: reading and tokenizing the data, building the model, the sanity check;
then the measured steps) ``+ the time it says is left``. A run too short to print an estimate runs to its end
and counts its wall time. Neither counts the work after training: the test split, or evaluating an earlier
epoch's best checkpoint again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from doc_figures_lib import FigureError, Record, Step, conditions_line

_LEFT = re.compile(r"estimated: ~?(.+?) to go at step (\d+) of (\d+)")


@dataclass
class Probe:
    """One command measured, counted ``times`` (a sweep's seeds); ``label`` names it in the table."""

    overrides: list[str]
    times: int = 1
    label: str = ""

    def step(self) -> Step:
        # The first ``estimated:`` line ends the probe: the rest of the run is what it estimates. Each probe
        # runs in a folder of its own, so every one starts with cold caches (data, tokenizer) as a first run.
        folder = "probe-" + re.sub(r"[^\w.=-]+", "_", "_".join(self.overrides))[:150]
        return Step(["train.py", *self.overrides], stop_at=r"\bestimated: ", folder=folder)


@dataclass
class Command:
    shown: str                                   # as the README writes it
    probes: list[Probe]
    # When it runs: why a probe cannot run here (GLUE: the task's data is missing), else None.
    skip: Callable[[Probe], str | None] | None = None


@dataclass
class CostRow:
    command: Command
    fast: Command


def seconds(text: str) -> float:
    """The seconds of ``format_duration``'s text: ``<1 s``, ``42 s``, ``3 min 20 s``, ``1 h 45 min``."""
    if text.strip() == "<1 s":
        return 0.5
    parts = re.findall(r"(\d+) (h|min|s)\b", text)
    if not parts:
        raise FigureError(f"cannot read a duration in {text!r}")
    return float(sum(int(n) * {"h": 3600, "min": 60, "s": 1}[unit] for n, unit in parts))


def probe_seconds(step: dict) -> dict:
    """From a probe's record: ``total`` (start to the end of training), ``startup`` (to the plan line), and
    whether the run was estimated or ran to its end."""
    seen = step.get("seen_s", {})
    startup = seen.get("planned:")
    if not step.get("stopped"):
        return {"total": step["wall_s"], "startup": startup, "estimated": False}
    line = next((ln for ln in step["output"].splitlines() if _LEFT.search(ln)), None)
    if line is None or "estimated:" not in seen:
        raise FigureError(f"{step['command']}: stopped without an estimate line in its record")
    left = seconds(_LEFT.search(line)[1])
    return {"total": seen["estimated:"] + left, "startup": startup, "estimated": True}


def steps_of(rows: list[CostRow]) -> list[Step]:
    """Every probe of every row, each command once (rows may share one)."""
    steps, seen = [], set()
    for row in rows:
        for command in (row.command, row.fast):
            for probe in command.probes:
                step = probe.step()
                if step.shown() not in seen:
                    seen.add(step.shown())
                    steps.append(step)
    return steps


def skip_of(rows: list[CostRow]) -> Callable[[Step], str | None]:
    """The job's ``skip``: a probe's command's ``skip``, asked when the job runs."""
    checks = {p.step().shown(): (c.skip, p) for row in rows for c in (row.command, row.fast) if c.skip
              for p in c.probes}

    def skip(step: Step) -> str | None:
        check, probe = checks.get(step.shown(), (None, None))
        return check(probe) if check else None

    return skip


def _duration(s: float) -> str:
    from bertlab.runtime.progress import format_duration

    return "~" + format_duration(s)


def _cell(command: Command, by_command: dict[str, dict]) -> str:
    """``~1 h 45 min`` for one probe; the sum and its parts for several (and the probes that did not run)."""
    probes = _probes_in(command, by_command)
    left_out = [p.label for p in command.probes if p not in probes]
    missing = f"{', '.join(left_out)}: not run (no data when measured)" if left_out else ""
    if not probes:
        return "not measured: " + missing
    parts = [(p, probe_seconds(by_command[p.step().shown()])) for p in probes]
    total = sum(p.times * s["total"] for p, s in parts)
    if len(command.probes) == 1:
        startup = parts[0][1]["startup"]
        return _duration(total) + (f" (start-up {_duration(startup)})" if startup is not None else "")
    each = " + ".join(f"{p.label} {_duration(s['total'])[1:]}" for p, s in parts)
    times = {p.times for p, _ in parts}
    text = f"{_duration(total)}: " + (f"{times.pop()} × ({each})" if len(times) == 1 and max(times) > 1 else each)
    return text + (f"; {missing}" if missing else "")


def _probes_in(command: Command, by_command: dict[str, dict]) -> list[Probe]:
    """The command's probes that ran (a probe skipped when it ran is not in the record)."""
    return [p for p in command.probes if p.step().shown() in by_command]


_HEADER = ["| command | takes | fast variant | takes |", "|---|---|---|---|"]


def _fast_shown(row: CostRow) -> str:
    """The fast variant as what it adds to the command, when it only adds overrides."""
    head = row.command.shown + " "
    if row.fast.shown.startswith(head):
        return f"the same + `{row.fast.shown[len(head):]}`"
    return f"`{row.fast.shown}`"


def render_table(rows: list[CostRow], job: str) -> Callable[[Record], str]:
    def render(record: Record) -> str:
        by_command = {s["command"]: s for s in record.steps}
        lines = list(_HEADER)
        for row in rows:
            lines.append(f"| `{row.command.shown}` | {_cell(row.command, by_command)} | {_fast_shown(row)} | "
                         f"{_cell(row.fast, by_command)} |")
        return "\n".join(lines) + "\n\n" + conditions_line(record, job)

    return render


def pending_table(rows: list[CostRow], job: str) -> str:
    """The table before its first run: the commands, and how to fill in the times."""
    tbd = f'TBD (run: make doc-figures ARGS="--run {job}")'
    lines = _HEADER + [f"| `{r.command.shown}` | {tbd} | {_fast_shown(r)} | {tbd} |" for r in rows]
    return "\n".join(lines) + "\n"
