"""Scale: precision checks, padding under mixed precision, strategies, batch-size bookkeeping, and Hydra + DDP.

Lightning launches every DDP process itself (``trainer=ddp`` / ``ddp_cpu``: the first process re-runs
``train.py`` once per extra device with ``hydra.run.dir`` pinned to its own run folder), or an outside
launcher does (torchrun, SLURM: ``LOCAL_RANK`` / ``SLURM_PROCID`` set before Python starts). bertlab adds no
launcher of its own; this module only makes the pieces fit:

- :func:`check_precision`: ``16-mixed`` needs a GPU (CPU autocast has no float16 path worth using), with a
  message that says what to use instead.
- :func:`resolve_pad_multiple`: ``data.pad_to_multiple_of=null`` means 8 under mixed precision on a GPU and
  no extra padding elsewhere (measured: extra pad tokens only cost time on CPU, experiments/pad_multiple).
- :func:`fsdp_strategy`: FSDP that shards per transformer layer (``trainer=fsdp``).
- :class:`BatchSizeReport`: logs what ``data.batch_size`` (per device) means for the optimizer steps.
- :class:`HydraDDPJob`: one run folder per job under Hydra multirun + DDP, and no rank left waiting in a
  collective when the launching process fails.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from bertlab.config import ConfigError

log = logging.getLogger(__name__)

MIXED = ("16-mixed", "bf16-mixed", "16", "bf16")
FLOAT16 = ("16-mixed", "16", "16-true")
GPU_ACCELERATORS = ("gpu", "cuda")
DDP_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")


@contextlib.contextmanager
def cache_lock(path: Path | None) -> Iterator[None]:
    """Hold an exclusive file lock on ``<path>.lock`` (nothing when ``path`` is None).

    Around "build a cache entry unless it exists": of the processes that start together (torchrun, SLURM,
    several ranks of one node) one builds, the others wait and then find the entry. Works across nodes
    only where the shared file system supports locks (most do; see the README for a local cache dir).
    """
    if path is None:
        yield
        return
    from filelock import FileLock  # a dependency of torch

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        yield


def _on_gpu(accelerator: str | None) -> bool:
    accelerator = str(accelerator or "auto").lower()
    if accelerator in GPU_ACCELERATORS:
        return True
    return accelerator == "auto" and torch.cuda.is_available()


def check_precision(precision: Any, accelerator: str | None) -> None:
    """Raise :class:`ConfigError` for a precision this accelerator cannot train in (16-bit float off a GPU)."""
    value = str(precision)
    if value in FLOAT16 and not _on_gpu(accelerator):
        raise ConfigError(
            f"trainer.precision={value} needs a GPU (float16 autocast and its loss scaling are CUDA features), "
            f"but this run uses trainer.accelerator={accelerator or 'auto'} "
            f"({'no CUDA device found' if not torch.cuda.is_available() else 'a CPU'}): "
            "use trainer.precision=bf16-mixed on CPU (or 32-true)"
        )


def resolve_pad_multiple(pad_to_multiple_of: int | None, precision: Any, accelerator: str | None) -> int | None:
    """``data.pad_to_multiple_of``: an explicit value wins; ``None`` → 8 under mixed precision on a GPU, else none.

    Tensor-core kernels want sequence lengths that are multiples of 8 in float16/bfloat16. On CPU the extra
    pad tokens only cost time (8-19 % per step in experiments/pad_multiple/results.md), so none are added.
    """
    if pad_to_multiple_of is not None:
        return int(pad_to_multiple_of) if int(pad_to_multiple_of) > 1 else None
    return 8 if str(precision) in MIXED and _on_gpu(accelerator) else None


def fsdp_strategy(sharding_strategy: str = "FULL_SHARD", cpu_offload: bool = False,
                  activation_checkpointing: bool = False, **kwargs: Any):
    """Lightning's FSDP, wrapping each encoder layer (``BertLayer``) as one shard unit (``trainer=fsdp``).

    ``use_orig_params=True`` keeps the parameters' names and ``requires_grad`` flags, which the freeze
    policies, LoRA and the optimizer's parameter groups rely on. Checkpoints are saved whole
    (``state_dict_type="full"``), so evaluation, ``init_from`` and export read them like any other.
    """
    from lightning.pytorch.strategies import FSDPStrategy

    from bertlab.encoder import BertLayer

    layers = {BertLayer}
    return FSDPStrategy(
        auto_wrap_policy=layers,
        activation_checkpointing_policy=layers if activation_checkpointing else None,
        sharding_strategy=sharding_strategy,
        cpu_offload=cpu_offload,
        use_orig_params=True,
        state_dict_type="full",
        **kwargs,
    )


def build_strategy(strategy: Any) -> Any:
    """``trainer.strategy``: a Lightning name ("ddp", "deepspeed_stage_2", ...) or a node with ``_target_``."""
    if isinstance(strategy, dict) and "_target_" in strategy:
        import hydra

        return hydra.utils.instantiate(strategy)
    return strategy


class BatchSizeReport(Callback):
    """Logs the batch-size arithmetic once training starts (it needs the world size and the loader length).

    ``data.batch_size`` is per device. One optimizer step sees ``batch_size × devices × num_nodes ×
    accumulate_grad_batches`` examples. bertlab's training sampler deals the epoch's batches out to the
    ranks, so a rank has ``ceil(batches / world_size)`` batches per epoch (the list is cycled to a multiple of
    the world size), and the learning-rate schedule spans Lightning's ``estimated_stepping_batches`` =
    ``ceil(batches per rank / accumulate_grad_batches) × max_epochs`` (or ``max_steps``).
    """

    def __init__(self, batch_size: int):
        self.batch_size = batch_size
        self.summary: dict[str, int] = {}

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        accumulate = int(trainer.accumulate_grad_batches)
        self.summary = {
            "per_device_batch_size": self.batch_size,
            "world_size": int(trainer.world_size),
            "accumulate_grad_batches": accumulate,
            "effective_batch_size": self.batch_size * int(trainer.world_size) * accumulate,
            "batches_per_rank_per_epoch": int(trainer.num_training_batches),
            "optimizer_steps": int(trainer.estimated_stepping_batches),
        }
        s = self.summary
        if not trainer.is_global_zero:
            return
        log.info("batch: %d per device × %d processes × %d accumulation = %d examples per optimizer step; "
                 "%d batches per process per epoch; the lr schedule spans %d optimizer steps",
                 s["per_device_batch_size"], s["world_size"], s["accumulate_grad_batches"],
                 s["effective_batch_size"], s["batches_per_rank_per_epoch"], s["optimizer_steps"])


class SameTokenizerOnEveryRank(Callback):
    """Fail fast when the ranks built different tokenizers (vocabularies differ → the same ids mean different
    words on different ranks, and training silently averages nonsense).

    A scratch WordPiece vocabulary is trained once and cached; the other ranks load it. Ranks that cannot see
    that cache (several nodes without a shared ``paths.cache_dir``) would each train their own, and the
    trainer breaks ties differently from process to process.
    """

    def __init__(self, fingerprint: str):
        self.fingerprint = fingerprint

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if trainer.world_size == 1 or not torch.distributed.is_initialized():
            return
        prints: list[str | None] = [None] * trainer.world_size
        torch.distributed.all_gather_object(prints, self.fingerprint)
        if len(set(prints)) > 1:
            raise ConfigError(
                f"the {trainer.world_size} processes built {len(set(prints))} different tokenizers: a scratch "
                "tokenizer is trained once and shared through paths.cache_dir, which must be on a file system "
                "every node sees (or pass model.tokenizer=<a saved tokenizer folder>, e.g. <run_dir>/tokenizer)"
            )


# ----------------------------------------------------------------------------------------------------------
# Hydra + DDP


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
        self.trainer: L.Trainer | None = None
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


__all__ = [
    "BatchSizeReport",
    "HydraDDPJob",
    "SameTokenizerOnEveryRank",
    "build_strategy",
    "cache_lock",
    "check_precision",
    "external_rank",
    "fsdp_strategy",
    "job_argv",
    "resolve_pad_multiple",
]
