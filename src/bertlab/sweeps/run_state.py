"""Every multirun job's ``metrics.json`` says its state, and a re-run multirun skips finished jobs.

:class:`RunStateCallback` (a Hydra callback, ``conf/hydra/default.yaml``) adds to the ``metrics.json`` a run
wrote:

- ``state``: ``complete``, ``pruned`` (an Optuna trial stopped early; ``pruned`` holds the step and the
  monitored value at that validation) or ``failed`` (the job raised: ``error`` says what);
- ``overrides``: the job's own command-line overrides (what :func:`finished_result` compares);
- ``trial``: the Optuna trial number, in an ``hparams_search=optuna`` sweep.

A multirun job that fails writes a ``metrics.json`` of its own (``state: failed``, ``error``, and the task,
model, freeze policy and seed from its config), so every folder of a sweep says what happened to it.

:func:`finished_result`: when a multirun job starts in a folder whose ``metrics.json`` is ``complete`` (or
``pruned``) for exactly this job's overrides, the job is not run again and returns the recorded monitored
value (``skip_finished=false`` runs it anyway). Crashed jobs (no ``metrics.json``, or ``state: failed``) and
jobs whose overrides changed run again.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback as HydraCallback
from omegaconf import DictConfig

from bertlab.runtime.files import write_text_atomic
from bertlab.runtime.run_dir import claimed_run_dir, holds_a_run, release_log_files
from bertlab.sweeps import trial as trial_state

log = logging.getLogger(__name__)

FINISHED_STATES = ("complete", "pruned")
SKIP_KEY = "skip_finished"


def _hydra() -> Any | None:
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get() if HydraConfig.initialized() else None


def _multirun(hc: Any) -> bool:
    from hydra.types import RunMode

    return hc is not None and hc.mode == RunMode.MULTIRUN


def _rank_zero() -> bool:
    # A DDP rank Lightning started (LOCAL_RANK), or one torchrun/srun started (RANK / SLURM_PROCID).
    return all(int(os.environ.get(k) or 0) == 0 for k in ("LOCAL_RANK", "RANK", "SLURM_PROCID"))


def _own_overrides(overrides: list[str]) -> list[str]:
    return sorted(o for o in overrides if o.split("=", 1)[0].lstrip("+~") != SKIP_KEY)


def _write(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def finished_result(cfg: DictConfig) -> float | None | bool:
    """In a multirun job whose folder already holds its complete result: that result's monitored value
    (None when it had none); ``False`` when the job has to run."""
    hc = _hydra()
    if not _multirun(hc) or not cfg.get(SKIP_KEY, True):
        return False
    path = Path(hc.runtime.output_dir) / "metrics.json"
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, dict) or recorded.get("state") not in FINISHED_STATES:
        return False
    if recorded.get("overrides") != _own_overrides(list(hc.overrides.task)):
        log.info("%s was written for other overrides (%s): running this job", path, recorded.get("overrides"))
        return False
    trial_state.OUTCOME.skipped = True
    release_log_files(write=True)  # the job's own folder: its log notes the skip
    log.info("skipping this job: %s already holds its %s result (%s=false runs it again)", path,
             recorded["state"], SKIP_KEY)
    return (recorded.get("monitor") or {}).get("value")


class RunStateCallback(HydraCallback):
    """Writes the job's state into its ``metrics.json`` (see the module docstring)."""

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        trial_state.reset_outcome()

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        hc = _hydra()
        outcome = trial_state.OUTCOME
        if hc is None or not _rank_zero() or outcome.skipped:
            return
        path = Path(hc.runtime.output_dir) / "metrics.json"
        failed = job_return.status != JobStatus.COMPLETED
        if failed and not _multirun(hc):
            return  # a single run's error is on the terminal; its folder keeps what it had
        if failed and claimed_run_dir() is None and holds_a_run(path.parent):
            return  # refused in (or failed before claiming) a folder that holds another run: not this job's
        try:
            data = json.loads(path.read_text()) if path.is_file() else None
        except (OSError, ValueError):
            data = None
        if not failed and not isinstance(data, dict):
            return  # a job that wrote no metrics.json (not a training run)
        if failed:
            data = _identity(config)  # a metrics.json already there is an earlier run's
            data.update(state="failed", error=job_error(job_return))
        else:
            data["state"] = "pruned" if outcome.pruned else "complete"
        if outcome.pruned:
            data["pruned"] = outcome.pruned
        data["overrides"] = _own_overrides(list(hc.overrides.task))
        if outcome.trial is not None:
            data["trial"] = outcome.trial
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, data)


def job_error(job_return: JobReturn) -> str:
    """A failed job's exception as ``Type: message``."""
    try:
        _ = job_return.return_value  # re-raises the job's exception
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "unknown error"


def _identity(config: DictConfig) -> dict[str, Any]:
    """What a failed job's metrics.json says about the run, read from its config."""
    from omegaconf import OmegaConf

    def get(key: str) -> Any:
        try:
            return OmegaConf.select(config, key)
        except Exception:  # an interpolation that cannot resolve: the job failed anyway
            return None

    return {"task": get("task.name"), "model": get("model.name"), "freeze": get("freeze.policy"),
            "seed": get("seed"), "tags": list(get("tags") or [])}
