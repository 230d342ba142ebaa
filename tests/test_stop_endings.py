"""A stop signal is never silent, and the exit status agrees with metrics.json (issue #33, item 11).

A SIGTERM just after the final summary used to end the run with "the run stopped before its end" (143) while
metrics.json was complete, and one a moment later (after the run returned, while the process tidied up)
killed it silently with 143. Now a signal that arrives once the results are complete lets the run finish
what remains and exit 0, saying so; a second one stops at once (128 + its number), saying what may be
missing. The signals are sent by the process itself from a wrapper around train.py, at the moment named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT
from test_bad_input import cli

# whole command lines: train.py processes that signal themselves (make test-slow; CI runs it)
pytestmark = pytest.mark.slow

WRAPPER = """import os, runpy, signal, sys
import bertlab.train as t
original = t.{hook}
def patched(*args, **kwargs):
    result = original(*args, **kwargs)
    for _ in range({times}):
        os.kill(os.getpid(), signal.{signal})
    return result
t.{hook} = patched
sys.argv = [{train!r}, *sys.argv[1:]]
runpy.run_path({train!r}, run_name="__main__")
"""
TINY = ("model=bert_tiny", "task=sst2", "trainer.max_epochs=1", "trainer.limit_train_batches=2")


def _run(tmp_path: Path, hook: str, sig: str, times: int = 1, *extra: str):
    script = tmp_path / "wrapper.py"
    script.write_text(WRAPPER.format(hook=hook, signal=sig, times=times, train=str(ROOT / "train.py")))
    run = tmp_path / "run"
    return cli(tmp_path, *TINY, f"hydra.run.dir={run}", *extra, script=script), run


@pytest.mark.parametrize("hook, sig", [("_print_summary", "SIGTERM"),   # just after the final summary
                                       ("finish_wandb", "SIGTERM"),     # after the run returned
                                       ("finish_wandb", "SIGINT")])
def test_a_signal_after_the_results_are_complete_ends_the_run_normally_and_says_so(tmp_path, hook, sig):
    out, run = _run(tmp_path, hook, sig)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert f"received {sig} after the run" in out.stderr + out.stdout
    assert "results are complete" in out.stderr + out.stdout
    assert json.loads((run / "metrics.json").read_text())["state"] == "complete"
    assert json.loads((run / ".bertlab-run.json").read_text())["status"] == "finished"


def test_a_second_signal_after_the_results_stops_at_once_and_says_what_may_be_missing(tmp_path):
    out, run = _run(tmp_path, "_print_summary", "SIGTERM", 2, "export=true")
    assert out.returncode == 143, out.stderr[-3000:]
    line = [x for x in out.stderr.splitlines() if x.startswith("bertlab: stopped:")]
    assert line and "results are complete in" in line[0] and "export" in line[0], out.stderr[-2000:]
    assert (run / "metrics.json").is_file()
