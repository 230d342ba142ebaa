"""The machinery of tools/doc_figures.py (the command): figures, facts, records and jobs, how a job runs in a
scratch folder, and how the docs are checked against the records. The registry (``doc_figures_registry.py``,
``doc_figures_costs.py``) builds on these types; the command puts the registry and this module together, so
none of the three imports another that imports it back.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "docs" / "figures"
SCRATCH = Path(os.environ.get("TMPDIR", "/tmp")) / "bertlab-doc-figures"
FIXTURE_DATA = ROOT / "tests" / "fixtures" / "data"

# A marker is a line of its own (text that mentions one, in backticks, is not a marker).
_MARKER = re.compile(r"^<!-- (/?)figure:([\w.-]+) -->$", re.MULTILINE)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class FigureError(Exception):
    """Something the person running the script can fix; printed as one paragraph, exit status 1."""


# ---------------------------------------------------------------- the registry's building blocks
@dataclass
class Step:
    """One command of a job. ``argv`` is what follows ``python`` (``train.py ...``, ``-m bertlab.compare ...``)
    or a whole command when it starts with ``bash``; paths in it are the ones the docs show."""

    argv: list[str]
    stdin: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    columns: int | None = None          # the terminal width the command sees (COLUMNS)
    stop_at: str | None = None          # a regex: the first output line matching it ends the command (killed)
    ok_codes: tuple[int, ...] = (0,)    # exit statuses that are the documented outcome
    in_repo: bool = False               # run from the repository root (scripts that write their results there)
    folder: str | None = None           # run in this subfolder of the scratch folder (its own logs and caches)

    def shown(self) -> str:
        """The command as the docs write it."""
        words = self.argv if self.argv[0] == "bash" else ["python", *self.argv]
        return " ".join(shlex.quote(w) for w in words)


@dataclass
class Job:
    """Commands run together in one scratch folder; one record; one or more figures read it."""

    name: str
    steps: list[Step]
    cost: str                                   # what a run takes on a 2-core CPU, roughly, and why
    data: str = "none"                          # "real" (needs BERTLAB_DATA_DIR), "fixtures", or "none"
    paths: dict[str, str] = field(default_factory=dict)   # absolute path shown in the docs → scratch subfolder
    files: list[str] = field(default_factory=list)        # files (shown paths) the figures read, kept in the record
    inputs: dict[str, str] = field(default_factory=dict)  # files written into the scratch folder first
    kind: str = "run"                      # "run"; "cost": steps are probes (doc_figures_costs.py)
    # When it runs, the reason a step cannot run here (a GLUE task without data: left out), else None.
    skip: Callable[[Step], str | None] | None = None
    records: bool = True                   # False: the commands write committed files the figures read


@dataclass
class Figure:
    """The text between ``<!-- figure:NAME -->`` and ``<!-- /figure:NAME -->`` in ``doc``."""

    name: str
    doc: str
    job: str
    render: Callable[[Record], str]
    source: str | None = None   # a committed file the job's commands write: rendered from it, not a record

    def record(self, records: Path, root: Path = ROOT) -> Record | None:
        """What the figure is rendered from: its source file, or its job's record (None: not made yet)."""
        if self.source is not None:
            path = root / self.source
            if not path.is_file():
                raise FigureError(f"{self.name}: its source {self.source} does not exist")
            return Record(self.job, [], {self.source: path.read_text()}, {})
        path = record_path(records, self.job)
        return Record.load(path) if path.is_file() else None


@dataclass
class Fact:
    """A quantity the pages state in their text: ``value`` as the pages write it, ``claims`` the regular
    expressions (one group: the value stated) that find a statement of it in README.md and docs/*.md, and
    ``source`` the committed file it comes from, with ``read`` giving the value from that file's text (None:
    ``value`` is checked against the pages only). ``same`` compares a stated value with ``value`` (default:
    equal text; :func:`rounded` for floats written at several precisions)."""

    name: str
    value: str
    claims: list[str]
    source: str
    read: Callable[[str], str] | None = None
    same: Callable[[str, str], bool] = lambda stated, value: stated == value

    def statements(self, text: str) -> list[tuple[int, str]]:
        """(line number, value stated) of every statement of this fact in ``text``."""
        found = []
        for pattern in self.claims:
            for match in re.finditer(pattern, text):
                found.append((text.count("\n", 0, match.start(1)) + 1, match.group(1)))
        return found


def rounded(digits: int) -> Callable[[str, str], bool]:
    """Stated and registered floats agree to ``digits`` decimals (a page may write fewer than the record)."""
    def same(stated: str, value: str) -> bool:
        shown = len(stated.split(".", 1)[1]) if "." in stated else 0
        return round(float(stated), min(digits, shown)) == round(float(value), min(digits, shown))

    return same


def fact_problems(facts: list[Fact], root: Path = ROOT) -> list[str]:
    """A page stating a fact with another value, a source that no longer gives the registered value, or a fact
    no page states (each a line for ``--check``)."""
    problems = []
    texts = {doc: doc.read_text() for doc in doc_files(root)}
    for fact in facts:
        if fact.read is not None:
            path = root / fact.source
            if not path.is_file():
                problems.append(f"fact {fact.name}: its source {fact.source} does not exist")
            elif (got := fact.read(path.read_text())) != fact.value:
                problems.append(f"fact {fact.name}: {fact.source} gives {got}, the registry says {fact.value}; "
                                "update the registry and the pages that state it")
        stated = 0
        for doc, text in texts.items():
            for line, value in fact.statements(text):
                stated += 1
                if not fact.same(value, fact.value):
                    problems.append(f"{doc.relative_to(root)}:{line}: states {fact.name} as {value}; it is "
                                    f"{fact.value} ({fact.source})")
        if not stated:
            problems.append(f"fact {fact.name}: no page states it (a phrasing of its claims changed?)")
    return problems


@dataclass
class Listed:
    """A figure of the docs made by another command (a study's table.py, a benchmark): listed, not run here."""

    name: str
    where: str
    command: str
    cost: str
    note: str = ""


@dataclass
class Record:
    """What a job's run left: per step its output (and, for cost probes, timings), the files, the conditions."""

    job: str
    steps: list[dict]
    files: dict[str, str]
    conditions: dict

    def output(self, i: int = 0) -> str:
        return self.steps[i]["output"]

    def lines(self, i: int = 0) -> list[str]:
        return self.output(i).splitlines()

    def line(self, pattern: str, i: int = 0) -> str:
        """The first output line of step ``i`` matching ``pattern``."""
        found = next((ln for ln in self.lines(i) if re.search(pattern, ln)), None)
        if found is None:
            raise FigureError(f"{self.job}: no line matching {pattern!r} in the output of step {i} "
                              f"({self.steps[i]['command']}); run --run {self.job} again")
        return found

    def file(self, path: str) -> str:
        if path not in self.files:
            raise FigureError(f"{self.job}: the record holds no file {path}; run --run {self.job} again")
        return self.files[path]

    def to_json(self) -> str:
        return json.dumps({"job": self.job, "conditions": self.conditions, "steps": self.steps,
                           "files": self.files}, indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def load(cls, path: Path) -> Record:
        data = json.loads(path.read_text())
        return cls(data["job"], data["steps"], data.get("files", {}), data["conditions"])


# ---------------------------------------------------------------- markers
@dataclass
class Region:
    name: str
    doc: Path
    line: int      # line of the opening marker
    start: int     # offsets of the body in the file's text
    end: int

    def body(self, text: str) -> str:
        return text[self.start:self.end]


def regions(doc: Path) -> list[Region]:
    """Every marked region of a Markdown file; unbalanced, nested or repeated markers are errors."""
    text = doc.read_text()
    found, open_ = [], None
    for m in _MARKER.finditer(text):
        closing, name = m[1] == "/", m[2]
        line = text.count("\n", 0, m.start()) + 1
        if not closing:
            if open_ is not None:
                raise FigureError(f"{doc}:{line}: figure:{name} opens inside figure:{open_[0]} "
                                  f"(opened at line {open_[2]}); close that one first")
            if any(r.name == name for r in found):
                raise FigureError(f"{doc}:{line}: figure:{name} is marked twice in this file; names are unique")
            open_ = (name, m.end() + (text[m.end():m.end() + 1] == "\n"), line)
        else:
            if open_ is None or open_[0] != name:
                raise FigureError(f"{doc}:{line}: <!-- /figure:{name} --> closes a figure that is not open")
            found.append(Region(name, doc, open_[2], open_[1], m.start()))
            open_ = None
    if open_ is not None:
        raise FigureError(f"{doc}:{open_[2]}: figure:{open_[0]} is never closed (<!-- /figure:{open_[0]} -->)")
    return found


def doc_files(root: Path) -> list[Path]:
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    return files + sorted((root / "docs").glob("*.md"))


def replace_body(doc: Path, name: str, body: str) -> bool:
    """Write ``body`` between the markers of ``name`` in ``doc``; True when the file changed."""
    text = doc.read_text()
    region = next((r for r in regions(doc) if r.name == name), None)
    if region is None:
        raise FigureError(f"{doc}: no <!-- figure:{name} --> ... <!-- /figure:{name} --> markers")
    if not body.endswith("\n"):
        body += "\n"
    if region.body(text) == body:
        return False
    tmp = doc.with_name(doc.name + ".tmp")
    tmp.write_text(text[:region.start] + body + text[region.end:])
    tmp.replace(doc)
    return True


# ---------------------------------------------------------------- the conditions a run states
def conditions(env: dict[str, str], threads: int) -> dict:
    """Machine, thread count and software of the children, as they see them, and the load when it starts."""
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__, torch.get_num_threads())"],
                           env=env, capture_output=True, text=True, check=False)
    torch_version, torch_threads = (probe.stdout.split() + ["?", "?"])[:2]
    cpu = platform.machine()
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"date": dt.date.today().isoformat(), "commit": _commit(), "cpu": cpu, "cores": cores,
            "omp_num_threads": threads, "torch_threads": torch_threads, "torch": torch_version,
            "python": platform.python_version(), "load_start": round(os.getloadavg()[0], 2)}


def _commit() -> str:
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)

    head = git("rev-parse", "--short", "HEAD").stdout.strip() or "unknown"
    dirty = git("diff", "--quiet", "HEAD", "--", "src", "conf", "train.py").returncode != 0
    return head + (" + uncommitted changes" if dirty else "")


def conditions_line(record: Record, names: str | None = None) -> str:
    """The line beside a figure that says how and where it was made."""
    c = record.conditions
    load = f"load average {c['load_start']} at the start"
    if "load_end" in c:
        load += f", {c['load_end']} at the end"
    threads = f"{c['torch_threads']} torch thread" + ("" if str(c["torch_threads"]) == "1" else "s")
    return (f"<sub>Made by `make doc-figures ARGS=\"--run {names or record.job}\"` on {c['date']} (commit "
            f"{c['commit']}): {c['cpu']}, {c['cores']} cores, {threads}, torch {c['torch']}; {load}. The same "
            "machine and thread count give the same scores; times and speeds depend on the load.</sub>\n")


# ---------------------------------------------------------------- running a job
class Paths:
    """Shown paths ↔ the scratch folder: commands get scratch paths, records keep the shown ones."""

    def __init__(self, scratch: Path, mapping: dict[str, str]) -> None:
        self.scratch = scratch
        self.pairs = sorted(((shown, str(scratch / sub)) for shown, sub in mapping.items()),
                            key=lambda p: -len(p[0]))

    @staticmethod
    def _sub(text: str, old: str, new: str) -> str:
        return re.sub(r"(?<![\w./-])" + re.escape(old) + r"(?![\w.-])", lambda _: new, text)

    def to_scratch(self, word: str) -> str:
        for shown, real in self.pairs:
            word = self._sub(word, shown, real)
        return word

    def to_shown(self, text: str) -> str:
        for shown, real in sorted(self.pairs, key=lambda p: -len(p[1])):
            text = self._sub(text, real, shown)
        # What is left of the scratch folder is the commands' working directory: relative paths.
        text = text.replace(str(self.scratch) + "/", "").replace(str(self.scratch), ".")
        return text.replace(str(ROOT) + "/", "")


def clean_output(raw: str) -> str:
    """Terminal output as a reader sees it: no colour codes, a carriage-return redraw keeps its last state."""
    lines = []
    for line in _ANSI.sub("", raw).split("\n"):
        lines.append(line.rstrip("\r").split("\r")[-1].rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def run_step(step: Step, paths: Paths, env: dict[str, str], cwd: Path, timeout: float | None) -> dict:
    """Run one command; returns its cleaned output (shown paths), exit status, wall time, and for a command
    with ``stop_at`` when each line of interest appeared."""
    words = [paths.to_scratch(w) for w in step.argv]
    if words[0] == "bash":
        argv = words
    else:
        argv = [sys.executable, *(str(ROOT / w) if i == 0 and w.endswith(".py") and not Path(w).is_absolute()
                                  else w for i, w in enumerate(words))]
    env = {**env, **step.env}
    if step.columns:
        env["COLUMNS"] = str(step.columns)
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE if step.stdin is not None else None,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True)
    out, seen, stopped, read_all = [], {}, False, False
    try:
        if step.stdin is not None:
            proc.stdin.write(step.stdin)
            proc.stdin.close()
        for line in proc.stdout:
            out.append(line)
            elapsed = round(time.monotonic() - start, 2)
            for key in ("planned:", "estimated:"):
                if key in line and key not in seen:
                    seen[key] = elapsed
            if step.stop_at and re.search(step.stop_at, line):
                stopped = True
                break
            if timeout and elapsed > timeout:
                raise FigureError(f"{step.shown()}: still running after {timeout:.0f} s (--timeout); stopped")
        rest = proc.stdout.read() if not stopped else ""
        read_all = not stopped
    finally:
        # Stopped on purpose, timed out, or this script interrupted: the command's whole group ends with it
        # (it runs in a session of its own, so nothing else would end it).
        if not read_all:
            _kill(proc)
    code = proc.wait()
    output = paths.to_shown(clean_output("".join(out) + rest))
    result = {"command": step.shown(), "returncode": None if stopped else code,
              "wall_s": round(time.monotonic() - start, 2), "output": output}
    if step.stop_at is not None:
        result["stopped"] = stopped
        result["seen_s"] = seen
    if not stopped and code not in step.ok_codes:
        tail = "\n".join(output.splitlines()[-15:])
        raise FigureError(f"{step.shown()} exited with status {code}; its last lines:\n{tail}")
    return result


def _kill(proc: subprocess.Popen) -> None:
    """End the command and everything it started (the run is thrown away: nothing to save)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def child_env(threads: int, data: str) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    env.setdefault("WANDB_MODE", "offline")
    if data == "fixtures":
        env["BERTLAB_DATA_DIR"] = str(FIXTURE_DATA)
    elif data == "real":
        folder = os.environ.get("BERTLAB_DATA_DIR")
        if not folder or not Path(folder).is_dir():
            raise FigureError("this job trains on the real datasets: set BERTLAB_DATA_DIR to the data folder "
                              "(the layout of docs/tasks.md, 'Data') and run it again")
    return env


def _refuse_scratch_in_bertlab_folders(scratch: Path) -> None:
    """--scratch is emptied job by job: never a run or export folder, nor inside one (bertlab.runtime.outputs)."""
    from bertlab.runtime.errors import ConfigError
    from bertlab.runtime.outputs import refuse_folder_in_bertlab_folders

    try:
        refuse_folder_in_bertlab_folders(scratch, f"--scratch {scratch}", "Name a scratch folder of its own")
    except ConfigError as err:
        raise FigureError(str(err)) from None


def run_job(job: Job, scratch_root: Path, threads: int, timeout: float | None = None,
            log: Callable[[str], None] = print) -> Record:
    env = child_env(threads, job.data)   # first: a missing data folder is said before anything is touched
    scratch = scratch_root / job.name
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for name, text in job.inputs.items():
        (scratch / name).write_text(text)
    paths = Paths(scratch, job.paths)
    cond = conditions(env, threads)
    steps = []
    for step in job.steps:
        reason = job.skip(step) if job.skip else None
        if reason:
            log(f"  skipped: {step.shown()} ({reason})")
            continue
        log(f"  $ {step.shown()}")
        cwd = ROOT if step.in_repo else scratch / (step.folder or "")
        cwd.mkdir(parents=True, exist_ok=True)
        steps.append(run_step(step, paths, env, cwd, timeout))
        log(f"    {steps[-1]['wall_s']:.0f} s")
    cond["load_end"] = round(os.getloadavg()[0], 2)
    files = {}
    for shown in job.files:
        real = Path(paths.to_scratch(shown))
        real = real if real.is_absolute() else scratch / real
        if not real.is_file():
            raise FigureError(f"{job.name}: its commands did not write {shown}; see their output above")
        files[shown] = paths.to_shown(real.read_text())
    return Record(job.name, steps, files, cond)


# ---------------------------------------------------------------- check, write, list
@dataclass
class Registry:
    jobs: dict[str, Job]
    figures: list[Figure]
    listed: list[Listed] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)

    def figures_of(self, job: str) -> list[Figure]:
        return [f for f in self.figures if f.job == job]

    def jobs_for(self, names: Iterable[str]) -> list[Job]:
        """Jobs named, or making the figures named (``all``: every job), each once, in registry order."""
        names = list(names)
        wanted = set()
        for name in names:
            if name == "all":
                wanted |= set(self.jobs)
            elif name in self.jobs:
                wanted.add(name)
            elif any(f.name == name for f in self.figures):
                wanted.add(next(f.job for f in self.figures if f.name == name))
            else:
                known = sorted({*self.jobs, *(f.name for f in self.figures)})
                close = difflib.get_close_matches(name, known, n=1)
                raise FigureError(f"no figure or job named {name!r}"
                                  + (f"; did you mean {close[0]}?" if close else "")
                                  + " (--list lists them)")
        return [job for name, job in self.jobs.items() if name in wanted]


def record_path(records: Path, job: str) -> Path:
    return records / f"{job}.json"


def _made_by(record: Record, job: Job) -> bool:
    """The record's commands are the job's (a job that skips steps: some of them, in order)."""
    made = [s["command"] for s in record.steps]
    commands = [s.shown() for s in job.steps]
    if job.skip is None:
        return made == commands
    it = iter(commands)
    return all(c in it for c in made)


def render(figure: Figure, record: Record) -> str:
    body = figure.render(record)
    return body if body.endswith("\n") else body + "\n"


def check(reg: Registry, root: Path = ROOT, records: Path = RECORDS) -> tuple[list[str], list[str]]:
    """(problems, pending figures). A problem: a marker without a registry entry or the reverse, a record made
    by other commands than the job's, a figure whose text differs from what its record renders, a fact a page
    states otherwise (:func:`fact_problems`)."""
    problems, pending = fact_problems(reg.facts, root), []
    marked: dict[str, Region] = {}
    for doc in doc_files(root):
        for region in regions(doc):
            if region.name in marked:
                problems.append(f"{doc.relative_to(root)}:{region.line}: figure:{region.name} is also marked in "
                                f"{marked[region.name].doc.relative_to(root)}")
            marked[region.name] = region
    by_name = {f.name: f for f in reg.figures}
    for name, region in marked.items():
        if name not in by_name:
            problems.append(f"{region.doc.relative_to(root)}:{region.line}: figure:{name} has no entry in the "
                            "registry (tools/doc_figures_registry.py)")
    for figure in reg.figures:
        region = marked.get(figure.name)
        if region is None or region.doc.resolve() != (root / figure.doc).resolve():
            problems.append(f"{figure.doc}: no <!-- figure:{figure.name} --> markers (the registry places the "
                            "figure there)")
            continue
        record = figure.record(records, root)
        if record is None:
            pending.append(f"{figure.name} ({figure.doc}:{region.line}): no record yet; "
                           f"make doc-figures ARGS=\"--run {figure.job}\"")
            continue
        job = reg.jobs[figure.job]
        if figure.source is None and not _made_by(record, job):
            problems.append(f"{figure.name}: the commands of job {job.name} changed since its record "
                            f"{record_path(records, job.name).name}; run --run {job.name}")
            continue
        text = region.doc.read_text()
        try:
            want = render(figure, record)
        except FigureError as err:
            problems.append(f"{figure.name}: {err}")
            continue
        have = region.body(text)
        if have != want:
            diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                                f"{figure.doc} (now)", f"{figure.name} (from its record)", n=1))
            problems.append(f"{figure.doc}:{region.line}: figure:{figure.name} differs from what its record "
                            f"gives (--write {figure.name} rewrites it):\n{diff}")
    return problems, pending


def write(reg: Registry, names: list[str], root: Path = ROOT, records: Path = RECORDS,
          log: Callable[[str], None] = print) -> None:
    """Rewrite the figures of these jobs (or figures) from their records."""
    for job in reg.jobs_for(names or ["all"]):
        for figure in reg.figures_of(job.name):
            record = figure.record(records, root)
            if record is None:
                log(f"{figure.name}: no record yet (--run {job.name}); left as it is")
                continue
            changed = replace_body(root / figure.doc, figure.name, render(figure, record))
            log(f"{figure.doc}: figure:{figure.name} {'rewritten' if changed else 'unchanged'}")


def run(reg: Registry, names: list[str], threads: int, scratch: Path = SCRATCH, root: Path = ROOT,
        records: Path = RECORDS, timeout: float | None = None, log: Callable[[str], None] = print) -> None:
    for job in reg.jobs_for(names):
        log(f"{job.name}: running in {scratch / job.name} ({job.cost})")
        record = run_job(job, scratch, threads, timeout, log)
        figures = reg.figures_of(job.name)
        # Every figure is rendered before anything is written: a renderer that fails leaves the docs as they are.
        rendered = [(f, render(f, f.record(records, root) if f.source else record)) for f in figures]
        if job.records:
            records.mkdir(parents=True, exist_ok=True)
            record_path(records, job.name).write_text(record.to_json())
        for figure, body in rendered:
            changed = replace_body(root / figure.doc, figure.name, body)
            log(f"{figure.doc}: figure:{figure.name} {'rewritten' if changed else 'unchanged'}")


def listing(reg: Registry, root: Path = ROOT, records: Path = RECORDS) -> str:
    where = {r.name: f"{r.doc.relative_to(root)}:{r.line}" for d in doc_files(root) for r in regions(d)}
    out = ["Figures made here (make doc-figures ARGS=\"--run NAME\"; a job's figures are made together):", ""]
    for job in reg.jobs.values():
        path = record_path(records, job.name)
        if not job.records:
            status = "writes committed files"
        elif path.is_file():
            rec = Record.load(path)
            took = sum(s["wall_s"] for s in rec.steps)
            status = f"recorded {rec.conditions['date']}, took {took / 60:.1f} min"
        else:
            status = "no record yet"
        out.append(f"{job.name}  [{job.kind}; data: {job.data}; {status}]")
        out.append(f"  cost: {job.cost}")
        for figure in reg.figures_of(job.name):
            out.append(f"  figure {figure.name}: {where.get(figure.name, figure.doc + ' (markers missing)')}")
        out.extend(f"  $ {s.shown()}" for s in job.steps)
        if job.skip:
            out.append("  (a command whose data is missing is left out when it runs)")
        out.append("")
    out += ["Figures made by other commands (listed here so one place knows them all):", ""]
    for item in reg.listed:
        out.append(f"{item.name}  [{item.where}]")
        out.append(f"  cost: {item.cost}")
        out.append(f"  $ {item.command}")
        if item.note:
            out.append(f"  note: {item.note}")
        out.append("")
    if reg.facts:
        out += ["Facts (numbers stated in running text; --check holds every page to these values):", ""]
        texts = {doc: doc.read_text() for doc in doc_files(root)}
        for fact in reg.facts:
            places = [f"{doc.relative_to(root)}:{line}" for doc, text in texts.items()
                      for line, _ in fact.statements(text)]
            out.append(f"{fact.name} = {fact.value}  [{fact.source}]")
            out.append(f"  stated at: {', '.join(places) or 'nowhere'}")
        out.append("")
    return "\n".join(out)
