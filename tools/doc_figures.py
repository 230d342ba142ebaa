"""The figures the docs quote, regenerated from their commands so they cannot drift.

    python tools/doc_figures.py --check              # the docs hold what the recorded outputs give (no training)
    python tools/doc_figures.py --list               # every figure: where, its commands, what it costs
    python tools/doc_figures.py --run NAME... | all  # run the commands, record their outputs, rewrite the docs
    python tools/doc_figures.py --write [NAME...]    # rewrite the docs from the records (no training)

In README.md and docs/*.md every generated figure sits between ``<!-- figure:NAME -->`` and
``<!-- /figure:NAME -->``. The registry (``doc_figures_registry.py``) says, per NAME, which job makes it (the
commands, as the docs show them) and how its text is made from the job's outputs. ``--run`` runs a job in a
scratch folder of its own (cold caches, the commands' relative paths inside it, absolute paths shown in the
docs mapped into it), with a fixed thread count, and writes ``docs/figures/<job>.json``: the outputs (paths
shown as the docs show them), the files the figures read, and the conditions of the run (machine, thread
count, torch, load average, commit). A figure's text is a function of that record alone, so ``--check``
re-renders every recorded figure and fails where the docs differ, where a marker has no registry entry (or the
reverse), or where a job's commands changed since its record. Figures whose job has no record yet are listed
as pending (``--strict`` fails on them).

A number quoted in running text (not a whole figure) is a **fact** of the registry (:class:`Fact`): its value,
read from the committed file that records it, and the phrasings pages use to state it. ``--check`` fails where
a page states a registered fact with another value (two pages can then never disagree about it), where the
file no longer gives the registered value, and where no page states the fact any more (its phrasings rotted).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the registry and the machinery beside this file

from doc_figures_lib import (  # noqa: E402
    SCRATCH,
    FigureError,
    Registry,
    _refuse_scratch_in_bertlab_folders,
    check,
    listing,
    run,
    write,
)


def default_threads() -> int:
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return int(os.environ["OMP_NUM_THREADS"])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def main(argv: list[str] | None = None, reg: Registry | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/doc_figures.py", description=__doc__.split("\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--check", action="store_true", help="the docs hold what the records give (no training)")
    what.add_argument("--list", action="store_true", help="every figure, its commands and cost")
    what.add_argument("--run", nargs="+", metavar="NAME", help="run these jobs or figures' jobs ('all': every one)")
    what.add_argument("--write", nargs="*", metavar="NAME", help="rewrite figures from their records")
    parser.add_argument("--strict", action="store_true", help="--check: a figure without a record fails too")
    parser.add_argument("--threads", type=int, default=default_threads(),
                        help="OMP_NUM_THREADS of the commands (default: $OMP_NUM_THREADS, else the usable cores)")
    parser.add_argument("--scratch", type=Path, default=SCRATCH, help=f"scratch folder (default {SCRATCH})")
    parser.add_argument("--timeout", type=float, default=None, help="seconds a command may run (default: none)")
    args = parser.parse_args(argv)
    if reg is None:
        from doc_figures_registry import REGISTRY as reg
    try:
        if args.list:
            print(listing(reg))
            return 0
        if args.write is not None:
            write(reg, args.write)
        elif args.run:
            _refuse_scratch_in_bertlab_folders(args.scratch)
            # SIGTERM unwinds like Ctrl-C, so the running command's process group ends too (run_step's finally).
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
            run(reg, args.run, args.threads, args.scratch, timeout=args.timeout)
        problems, pending = check(reg)
        for item in pending:
            print(f"pending: {item}")
        for item in problems:
            print(f"FAIL: {item}")
        if problems or (args.strict and pending):
            print(f"doc figures: {len(problems)} problem(s), {len(pending)} pending", file=sys.stderr)
            return 1
        if args.check:
            print(f"doc figures: {len(reg.figures) - len(pending)} figure(s) match their records, "
                  f"{len(pending)} pending")
    except FigureError as err:
        print(f"doc_figures: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
