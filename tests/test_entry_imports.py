"""The command lines answer ``--help`` and argument mistakes without importing torch, Lightning or transformers
(seconds each): those load only once a run, a prediction or an export starts.

Each case runs the real command in a fresh interpreter; an exit hook records which heavy modules were loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

HEAVY = ("torch", "lightning", "transformers", "datasets")

# Installed at interpreter start (python -c), before the entry point runs; it prints the heavy modules loaded
# when the command exits, whichever way it exits (argparse and Hydra end with SystemExit).
_PROBE = """
import atexit, runpy, sys
heavy = {heavy!r}
atexit.register(lambda: print("HEAVY:" + ",".join(m for m in heavy if m in sys.modules), file=sys.stderr))
args = {args!r}
if args[0] == "-m":
    sys.argv = [args[1], *args[2:]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = list(args)
    runpy.run_path(args[0], run_name="__main__")
"""

CASES = {
    "train --help": ["train.py", "--help"],
    "train, a mistyped key": ["train.py", "tsk=sst2"],
    "train, a mistyped value": ["train.py", "task=sst3"],
    "predict --help": ["-m", "bertlab.predict", "--help"],
    "predict, an unknown --format": ["-m", "bertlab.predict", "run_dir", "--format", "xml"],
    "export --help": ["-m", "bertlab.export", "--help"],
    "export, missing argument": ["-m", "bertlab.export", "only_one"],
    "compare --help": ["-m", "bertlab.compare", "--help"],
    "retrieve --help": ["-m", "bertlab.retrieve", "--help"],
    "retrieve, no --corpus": ["-m", "bertlab.retrieve", "run_dir", "--queries", "q.tsv"],
    "glue --help": ["-m", "bertlab.glue", "--help"],
}


def heavy_imports(args: list[str], heavy: tuple[str, ...] = HEAVY) -> tuple[list[str], subprocess.CompletedProcess]:
    """Run a command line (``["-m", module, ...]`` or ``[script, ...]``) in a fresh interpreter: the modules of
    ``heavy`` it had imported when it exited, and the finished process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    probe = _PROBE.format(heavy=heavy, args=args)
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.startswith("HEAVY:")]
    assert lines, f"the command did not exit through the probe:\n{done.stderr[-2000:]}"
    return [m for m in lines[-1][len("HEAVY:"):].split(",") if m], done


@pytest.mark.parametrize("args", CASES.values(), ids=CASES.keys())
def test_help_and_argument_errors_import_no_torch(args, tmp_path):
    heavy, done = heavy_imports(args)
    assert not heavy, f"{' '.join(args)} imported {heavy}:\n{done.stderr[-1000:]}"
    assert done.returncode in (0, 1, 2), done.stderr[-2000:]
    if args[-1] != "--help":
        assert done.returncode != 0, f"{' '.join(args)} should fail:\n{done.stdout[-500:]}{done.stderr[-500:]}"
