"""Hydra + DDP: one run folder per job when a Hydra multirun job launches DDP ranks, each rank's own log file
under torchrun / srun, and no rank left waiting in a collective when the launching process fails.

Lightning launches every DDP process itself (``trainer=ddp`` / ``ddp_cpu``: the first process re-runs
``train.py`` once per extra device with ``hydra.run.dir`` pinned to its own run folder), or an outside
launcher does (torchrun, SLURM: ``LOCAL_RANK`` / ``SLURM_PROCID`` set before Python starts). bertlab adds no
launcher of its own; this module makes Hydra's command line and run folders fit those launchers.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

DDP_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")

_KEEP_FLAGS = ("--config-path", "--config-name", "--config-dir", "-cp", "-cn", "-cd")
# Hydra overrides that describe the sweep, not the job: a rank re-running one job must not get them.
_SWEEP_KEYS = ("hydra.mode", "hydra.run", "hydra.sweep", "hydra.sweeper", "hydra/sweeper", "hydra.launcher",
               "hydra/launcher", "hydra.output_subdir", "hydra.job.name", "hydra.job.num", "hydra.job.id")


def job_argv(argv: list[str], task_overrides: list[str], hydra_overrides: list[str]) -> list[str]:
    """The command line that re-creates one multirun job as a single run: the script, its config-path flags,
    the job's own overrides (the values this job drew from the sweep) and ``hydra.mode=RUN``."""
    out = [argv[0]]
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in _KEEP_FLAGS and i + 1 < len(argv):
            out += [arg, argv[i + 1]]
            i += 2
            continue
        if arg.startswith(tuple(f + "=" for f in _KEEP_FLAGS if f.startswith("--"))):
            out.append(arg)
        i += 1
    for override in hydra_overrides:
        key = override.lstrip("+~").split("=", 1)[0]
        if not any(key == k or key.startswith(k + ".") for k in _SWEEP_KEYS):
            out.append(override)
    return out + list(task_overrides) + ["hydra.mode=RUN"]


class HydraDDPJob:
    """Context for one ``train.run`` call: what Lightning's process launcher needs from Hydra and from us.

    Lightning's launcher starts ranks 1..N-1 by re-running ``sys.argv`` with ``hydra.run.dir=<this job's run
    dir>``. That is right for a single run, but in a multirun ``sys.argv`` is the whole sweep (``-m seed=1,2``)
    and ``hydra.run.dir`` is not the job's folder: every rank would run the whole sweep into folders of its
    own. Inside a multirun job (only in the process that launches the ranks) this context therefore

    - makes ``sys.argv`` the job's own command line (:func:`job_argv`) and ``hydra.run.dir`` the job's
      output folder, so the ranks re-create exactly this job, in this job's folder;
    - afterwards waits for the ranks and removes the launch variables (``LOCAL_RANK``, ``MASTER_PORT``, ...)
      so that the next job launches fresh ranks on a fresh port.

    In every process (the launcher, ranks Lightning started, ranks torchrun or srun started) a run that ended
    well destroys the process group before the interpreter shuts down; so does a multirun launcher whose job
    failed, once its ranks are stopped. In any mode, when the launching process fails, ranks it started that
    are still running are stopped (Lightning stops them only on Ctrl+C), instead of waiting in a collective
    until the timeout.
    """

    def __init__(self) -> None:
        self.trainer: Any = None  # the Lightning Trainer of this run (its launcher holds the rank processes)
        self._argv: list[str] | None = None
        self._env: dict[str, str | None] = {}
        self._multirun_launcher = False

    def __enter__(self) -> HydraDDPJob:
        hc = _hydra_config()
        if hc is not None and external_rank() > 0:
            _own_log_file(hc, external_rank())
        if hc is None or "LOCAL_RANK" in os.environ:
            return self  # not under Hydra, or a process someone else launched
        from hydra.types import RunMode
        from omegaconf import read_write

        if hc.mode != RunMode.MULTIRUN:
            return self
        self._multirun_launcher = True
        self._env = {k: os.environ.get(k) for k in DDP_ENV}
        self._argv = list(sys.argv)
        sys.argv = job_argv(sys.argv, list(hc.overrides.task), list(hc.overrides.hydra))
        with read_write(hc.run):
            hc.run.dir = hc.runtime.output_dir
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        procs = self._children()
        if exc_type is not None:
            for proc in procs:
                if proc.poll() is None:
                    log.error("stopping rank process %d: the launching process failed", proc.pid)
                    proc.kill()
        else:
            for proc in procs:
                try:
                    proc.wait(timeout=300)
                except subprocess.TimeoutExpired:
                    log.error("rank process %d did not exit after the run: stopping it", proc.pid)
                    proc.kill()
        ended_well_or_ranks_stopped = exc_type is None or self._multirun_launcher
        if ended_well_or_ranks_stopped and torch.distributed.is_available() and torch.distributed.is_initialized():
            # Every process, whoever launched it: a gloo group left to interpreter shutdown can abort the
            # process after a finished run ("terminate called without an active exception", exit -6). Not
            # after a failure in a rank whose peers may still be inside a collective; a multirun launcher
            # has stopped its ranks above, and the next job needs a fresh group.
            torch.distributed.destroy_process_group()
        if not self._multirun_launcher:
            return
        sys.argv = self._argv
        for key, value in self._env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def _children(self) -> list[subprocess.Popen]:
        launcher = getattr(getattr(self.trainer, "strategy", None), "launcher", None)
        return list(getattr(launcher, "procs", []) or [])


def external_rank() -> int:
    """This process's global rank as set by an outside launcher (torchrun: RANK, srun: SLURM_PROCID), else 0."""
    return int(os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or 0)


def _own_log_file(hc, rank: int) -> None:
    """Under torchrun / srun every rank is a Hydra run of its own with the same ``hydra.run.dir``; ranks > 0
    move their log from ``<job>.log`` (rank 0's) to ``<job>_rank<r>.log`` before logging anything."""
    target = Path(hc.runtime.output_dir) / f"{hc.job.name}.log"
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename) == target:
            handler.close()
            handler.baseFilename = str(target.with_name(f"{hc.job.name}_rank{rank}.log"))
            handler.stream = handler._open()


def _hydra_config():
    try:
        from hydra.core.hydra_config import HydraConfig
    except ImportError:  # pragma: no cover - hydra is a dependency
        return None
    return HydraConfig.get() if HydraConfig.initialized() else None
