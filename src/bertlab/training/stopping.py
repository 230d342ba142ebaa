"""What keeps a run trustworthy when things go wrong: clean user errors, checks before training, atomic
checkpoints, exact resume (RNG included), and a test hook that kills a run mid-epoch.

- :func:`user_errors` turns the errors a user can fix (bad data, bad config, bad checkpoint, a non-finite
  loss) into one paragraph on stderr and exit status 1, instead of a 60-line traceback.
- :func:`preflight` checks what can be checked before any data is read or any step is taken.
- :func:`check_resume_checkpoint` refuses a checkpoint of another architecture with a message that says
  what differs, before Lightning's strict ``load_state_dict`` fails with a wall of tensor names.
- :class:`AtomicCheckpointIO` writes every checkpoint to a temporary file in the same folder and renames
  it over the old one, so a kill during a save never leaves ``last.ckpt`` half written.
- :class:`ResumeStateCallback` stores the global RNG states (dropout!) in checkpoints and restores them
  at the first training batch after a resume, so a resumed run draws the same dropout masks as an
  uninterrupted one; it also flushes the loggers at each checkpoint.
- :class:`KillAtStep` is a test hook (``BERTLAB_TEST_KILL_AT_STEP=k``): the process SIGKILLs itself after
  optimizer step ``k``, as a pre-empted job would die. Only enabled by that environment variable.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import re
import shutil
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.plugins.io import TorchCheckpointIO

from bertlab.checkpoints import CheckpointInfo, checkpoint_info
from bertlab.config import ConfigError, DataConfig, TaskSpec
from bertlab.data.readers import DataError
from bertlab.hf_weights import CheckpointError

log = logging.getLogger(__name__)

KILL_AT_STEP_ENV = "BERTLAB_TEST_KILL_AT_STEP"
SIGNAL_AT_STEP_ENV = "BERTLAB_TEST_SIGNAL_AT_STEP"


# ----------------------------------------------------------------------------------------------------------
# User errors on the command line


def user_error_types() -> tuple[type[BaseException], ...]:
    """Errors whose message is the whole story: the user fixes the data, the config or the checkpoint."""
    from bertlab.module import NonFiniteLossError
    from bertlab.tokenization import TokenizerError

    return (DataError, ConfigError, CheckpointError, NonFiniteLossError, TokenizerError)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Print a user error as one paragraph (``bertlab: error: <message>``) and exit with status 1.

    ``HYDRA_FULL_ERROR=1`` keeps the full traceback (for debugging bertlab itself); any other exception
    is a bug and keeps its traceback too. In a multirun the error is logged and re-raised, so that Hydra
    (or a sweeper) records the failed job instead of the whole sweep exiting.
    """
    try:
        yield
    except JobStopped as err:
        # Also in a multirun: a stopped sweep must not go on to its next job.
        log.error("%s", err)
        sys.stderr.write(f"\nbertlab: stopped: {err}\n")
        sys.stderr.flush()
        sys.exit(128 + err.signum)
    except user_error_types() as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        in_multirun = _in_multirun()
        # Into <run_dir>/train.log; on the console only in a multirun (a single run prints it below, once).
        log.error("%s: %s", type(err).__name__, err, extra={"console": in_multirun})
        if in_multirun:
            raise
        sys.stderr.write(f"\nbertlab: error: {err}\n")
        sys.stderr.flush()
        sys.exit(1)


def _in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # no Hydra context (library use): behave as a single run
        return False


# ----------------------------------------------------------------------------------------------------------
# Checks before training


def preflight(task: TaskSpec, data: DataConfig, max_position_embeddings: int) -> None:
    """Configuration mistakes that would otherwise surface late (mid-epoch) or never (a leaky monitor)."""
    if not task.monitor.startswith("val/"):
        raise ConfigError(
            f"task.monitor={task.monitor}: checkpoint selection and early stopping must read a validation "
            "metric (val/<name>); selecting on test or training metrics leaks them into the result"
        )
    if data.max_seq_length > max_position_embeddings:
        raise ConfigError(
            f"data.max_seq_length={data.max_seq_length} is larger than the model's position table "
            f"(max_position_embeddings={max_position_embeddings}): set data.max_seq_length to "
            f"{max_position_embeddings} or less"
        )


def check_resume_checkpoint(path: str | Path, module: L.LightningModule) -> CheckpointInfo:
    """The progress of a checkpoint this run can resume from or evaluate; :class:`CheckpointError`
    (naming what differs) when it cannot be loaded into ``module``.

    Loaded with ``weights_only=True`` (as Lightning then loads it): tensors and plain values only.
    """
    path = Path(path)
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # truncated file, another program's pickle, not a zip archive, ...
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"ckpt_path={path}: not a readable bertlab checkpoint ({type(err).__name__}: {first}). "
            "Pass a .ckpt file written by bertlab (<run_dir>/checkpoints/last.ckpt or the best one)"
        ) from None
    state = ckpt.get("state_dict") if isinstance(ckpt, dict) else None
    if not isinstance(state, dict):
        raise CheckpointError(f"ckpt_path={path}: no state_dict in it; it is not a Lightning checkpoint")
    own = module.state_dict()
    # Slim checkpoints (LoRA: only what trained) leave the frozen tensors out on purpose.
    missing = sorted(own.keys() - state.keys()) if getattr(module, "strict_loading", True) else []
    if ckpt.get("bertlab_base_weights") is not None:
        # A LoRA checkpoint stores only what trained; the frozen base weights come from its reference.
        trained = {f"model.{n}" for n, p in module.model.named_parameters() if p.requires_grad}
        missing = [k for k in missing if k in trained]
    unexpected = sorted(state.keys() - own.keys())
    mismatched = [f"{k} {tuple(state[k].shape)} vs {tuple(own[k].shape)}" for k in own.keys() & state.keys()
                  if tuple(state[k].shape) != tuple(own[k].shape)]
    if missing or unexpected or mismatched:
        theirs = (ckpt.get("hyper_parameters") or {}).get("encoder_config") or {}
        ours = (getattr(module, "hparams", {}) or {}).get("encoder_config") or {}
        diffs = [f"{k}={theirs[k]} (checkpoint) vs {ours.get(k)} (this run)" for k in sorted(theirs)
                 if k in ours and theirs[k] != ours[k] and k not in ("hidden_dropout_prob",
                                                                      "attention_probs_dropout_prob")]
        parts = [f"{len(mismatched)} tensors differ in shape (e.g. {mismatched[0]})" if mismatched else "",
                 f"{len(missing)} missing (e.g. {missing[0]})" if missing else "",
                 f"{len(unexpected)} unexpected (e.g. {unexpected[0]})" if unexpected else ""]
        raise CheckpointError(
            f"ckpt_path={path} was saved from a different architecture than this run builds"
            + (f": {', '.join(diffs)}" if diffs else "")
            + f"; {'; '.join(p for p in parts if p)}. Resume or evaluate it with the model=/task=/freeze= "
            "settings it was trained with (its run dir's .hydra/config.yaml), or start a new run from its "
            "encoder weights with model.init_from=<that .ckpt>"
        )
    return checkpoint_info(ckpt, path)


def min_seq_length(family: str, pair: bool, nsp: bool) -> int:
    """The shortest ``max_seq_length`` that leaves one position of text per segment: [CLS] text [SEP], or
    [CLS] a [SEP] b [SEP] for pairs and next-sentence pairs."""
    if family in ("sequence", "token", "mlm"):
        return 5 if (pair or nsp) else 3
    if family == "qa":
        return 4  # [CLS] question [SEP] context [SEP], the window check then asks for more
    return 2


def check_settings(cfg: Any) -> None:
    """Values that Lightning, the tokenizer or the DataLoader would reject with a traceback, or worse accept:
    a ``max_seq_length`` below the special tokens turns truncation off (the tokenizer ignores a limit it
    cannot meet) and trains on full-length text."""
    data, task, trainer = cfg.get("data") or {}, cfg.get("task") or {}, cfg.get("trainer") or {}
    length = data.get("max_seq_length")
    family = task.get("family")
    if isinstance(length, int) and family:
        pair, nsp = bool(data.get("text_pair_column")) and family == "sequence", bool(task.get("nsp"))
        minimum = min_seq_length(family, pair, nsp)
        if 0 < length < minimum:
            raise ConfigError(
                f"data.max_seq_length={length} leaves no room for text: the special tokens of a "
                f"{'pair' if pair or nsp else family} input ([CLS]{' a [SEP] b' if pair or nsp else ' text'} [SEP]) "
                f"already take {minimum - (2 if pair or nsp else 1)} positions. Use at least {minimum} "
                "(BERT's fine-tuning default is 128)"
            )
    workers = data.get("num_workers")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 0):
        raise ConfigError(
            f"data.num_workers={workers!r}: the number of DataLoader worker processes must be 0 (load in the "
            f"training process) or a positive integer (e.g. data.num_workers={min(os.cpu_count() or 1, 4)})"
        )
    accumulate = trainer.get("accumulate_grad_batches")
    if accumulate is not None and (not isinstance(accumulate, int) or isinstance(accumulate, bool) or accumulate < 1):
        raise ConfigError(
            f"trainer.accumulate_grad_batches={accumulate!r}: the number of batches whose gradients are summed "
            "before each optimizer step must be a positive integer (1 = no accumulation)"
        )


# ----------------------------------------------------------------------------------------------------------
# Atomic checkpoints


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` to ``<name>.tmp-<pid>`` in the checkpoint's own folder, fsync, then ``os.replace``.

    Lightning's default goes through an fsspec transaction whose temporary file lives in the system temp
    folder: when that is another filesystem (a tmpfs ``/tmp``, a cluster's scratch disk) the final move is
    a copy, and a kill during the copy leaves a truncated ``last.ckpt`` — the only copy. A rename within one
    folder is atomic on POSIX filesystems: readers see the old file or the new one, never half of one.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} does not take storage_options, got {storage_options!r}")
        if "://" in str(path):  # remote filesystems (s3://, gs://): Lightning's fsspec writer
            return super().save_checkpoint(checkpoint, path, storage_options)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except (OSError, RuntimeError) as err:
            if _disk_full(err):
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise CheckpointError(disk_full_message(path)) from None
            raise
        finally:
            if tmp.exists():
                tmp.unlink()
        with contextlib.suppress(OSError):  # make the rename itself durable (not possible on every OS)
            fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _disk_full(err: BaseException) -> bool:
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    # torch's zip writer reports a failed write as a RuntimeError ("enforce fail at inline_container.cc")
    text = str(err)
    return isinstance(err, RuntimeError) and ("No space left" in text or "file write failed" in text
                                              or "Disk quota exceeded" in text)


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    while not path.exists() or (not os.path.ismount(path) and path.parent != path):
        path = path.parent
    return path


def disk_full_message(path: Path) -> str:
    disk = _mount_point(Path(path).parent)
    try:
        free = shutil.disk_usage(disk).free
        free_text = f"{free / 2**20:.0f} MiB free"
    except OSError:
        free_text = "free space unknown"
    return (f"the disk is full: could not write the checkpoint {path} (disk mounted at {disk}, {free_text}). "
            "The previous checkpoint there, if any, is unchanged. Free space on that disk, or give the run "
            "another disk with hydra.run.dir=<folder on it> (and resume with ckpt_path=<the last .ckpt>)")


_TMP_SUFFIX = re.compile(r"\.tmp-?(\d+)$")


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove ``<name>.tmp-<pid>`` files in ``folder`` left by a process killed while writing (a checkpoint,
    a cache file); files of processes still running are kept. Returns what was removed."""
    removed = []
    if not folder.is_dir():
        return removed
    for path in folder.iterdir():
        match = _TMP_SUFFIX.search(path.name)
        if match is None or not path.is_file():
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and _alive(pid):
            continue
        with contextlib.suppress(OSError):
            size = path.stat().st_size
            path.unlink()
            removed.append(path)
            log.warning("removed %s (%.1f MB), a partial file left by a process killed while writing it",
                        path, size / 1e6)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


# ----------------------------------------------------------------------------------------------------------
# Stopping on a signal (pre-emption, scancel, Ctrl-C)


class JobStopped(Exception):
    """The run was stopped by a signal; the message says what was saved and how to resume."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


def stop_signals() -> list[signal.Signals]:
    """SIGTERM (scancel, a cluster pre-empting the job) and SIGINT (Ctrl-C); under SLURM also SIGUSR1, the
    signal ``sbatch --signal=USR1@<seconds>`` sends before the time limit."""
    signals = [signal.SIGTERM, signal.SIGINT]
    if os.environ.get("SLURM_JOB_ID") and hasattr(signal, "SIGUSR1"):
        signals.append(signal.SIGUSR1)
    return signals


class GracefulStop(Callback):
    """On a stop signal: finish the current optimizer step, save ``last.ckpt`` there (atomically, through the
    trainer's checkpoint IO), and raise :class:`JobStopped` (exit status 128 + the signal's number).

    Outside training (reading data, the final validation and test) the signal stops the run at once; a
    second signal always does. The handlers replace Lightning's own for these signals while training runs:
    Lightning's SIGTERM handling ends the process with status 0 and saves nothing, and its SLURM requeue
    handler (SIGUSR1) writes ``hpc_ckpt_<n>.ckpt`` files that ``ckpt_path=last`` would not find.
    """

    def __init__(self, run_dir: Path, resume_hint: str):
        self.run_dir = Path(run_dir)
        self.resume_hint = resume_hint
        self.signum: int | None = None
        self.training = False
        self._saved: tuple[Path, int] | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in stop_signals():
            previous = signal.signal(sig, self._handle)
            self._previous.setdefault(sig, previous)

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.signum is not None or not self.training:
            self.signum = signum
            raise JobStopped(self._message(name, saved=None), signum)
        self.signum = signum
        log.warning("received %s: saving last.ckpt after the current step, then stopping", name)

    def _message(self, name: str, saved: tuple[Path, int] | None) -> str:
        last = self.run_dir / "checkpoints" / "last.ckpt"
        if saved is not None:
            where = f"saved {saved[0]} at global step {saved[1]}"
        elif last.is_file():
            where = f"the last checkpoint is {last}"
        else:
            where = "no checkpoint had been written yet, so nothing can be resumed: run the command again"
        return (f"received {name}: the run stopped before its end; {where}. "
                + (f"Resume with: {self.resume_hint}" if saved is not None or last.is_file() else ""))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.training = True
        self.install()  # again: Lightning installed its own SIGTERM handler when fit started

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.training = False

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.signum is None or self._saved is not None:
            return
        path = self.run_dir / "checkpoints" / "last.ckpt"
        trainer.save_checkpoint(path)  # the state a step checkpoint at this step holds: resumes exactly
        self._saved = (path, trainer.global_step)
        # Stopped at the next hook, once Lightning has logged this step's metrics (the loggers then write
        # them out as the run fails), so the resumed run's logs continue without a gap.

    def _stop_if_saved(self, *args: Any, **kwargs: Any) -> None:
        if self._saved is not None:
            self.training = False
            raise JobStopped(self._message(signal.Signals(self.signum).name, self._saved), self.signum)

    on_train_batch_start = _stop_if_saved
    on_validation_start = _stop_if_saved
    on_train_epoch_end = _stop_if_saved

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._stop_if_saved()
        self.training = False


_ACTIVE_STOP: list[GracefulStop] = []


def start_of_run(run_dir: Path, cfg: Any = None) -> GracefulStop:
    """What every run does first: check the settings that would otherwise fail late with a traceback,
    remove partial files a killed run left in its checkpoint folder, and install the stop-signal handlers
    (returned as the callback that saves ``last.ckpt`` on a signal)."""
    if cfg is not None:
        from bertlab.run_dir import claim_run_dir

        check_settings(cfg)
        claim_run_dir(run_dir, cfg)  # a run dir belongs to one run (bertlab.run_dir)
    remove_stale_temporaries(Path(run_dir) / "checkpoints")
    stop = GracefulStop(run_dir, resume_command(run_dir))
    stop.install()
    _ACTIVE_STOP.append(stop)
    return stop


def end_of_run(failed: bool = False) -> None:
    """Give the stop signals back to whoever handled them before the run (multirun jobs share a process),
    and record a run that ended without error as finished in its run dir."""
    from bertlab.run_dir import finish_run_dir

    while _ACTIVE_STOP:
        stop = _ACTIVE_STOP.pop()
        stop.uninstall()
        if not failed:
            finish_run_dir(stop.run_dir)


def resume_command(run_dir: Path) -> str:
    """``python train.py <this run's command-line overrides> hydra.run.dir=<run_dir> ckpt_path=last``."""
    overrides: list[str] = []
    with contextlib.suppress(Exception):
        from hydra.core.hydra_config import HydraConfig

        overrides = [str(o) for o in HydraConfig.get().overrides.task]
    keep = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in ("ckpt_path", "hydra.run.dir")]
    return " ".join(["python train.py", *keep, f"hydra.run.dir={run_dir}", "ckpt_path=last"])


# ----------------------------------------------------------------------------------------------------------
# RNG state in checkpoints


def _rng_state() -> dict[str, Any]:
    # Tensors and plain values only, so the checkpoint still loads with weights_only=True.
    np_state = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {"key": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "python": list(_flatten_python_state(random.getstate())),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()  # this process's device (one device per rank)
    return state


def _flatten_python_state(state: tuple) -> Iterator[Any]:
    version, internal, gauss = state
    yield version
    yield list(internal)
    yield gauss


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        cuda_state = state["cuda"]
        if isinstance(cuda_state, list | tuple):  # checkpoints written before one state per rank: all devices
            if len(cuda_state) == torch.cuda.device_count():
                torch.cuda.set_rng_state_all(cuda_state)
        else:
            torch.cuda.set_rng_state(cuda_state)


def _world_size() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1


class ResumeStateCallback(Callback):
    """What a resume needs beyond Lightning's own checkpoint state.

    - The global RNG states (dropout masks), saved with each checkpoint and applied at the first training
      batch after a resume — not when the checkpoint is read, so whatever Lightning does in between (sanity
      validation, building loaders) cannot shift them.
    - The loggers' files, flushed at each checkpoint: a run killed later has every logged row up to its
      last checkpoint on disk, and the resumed run appends the rest to the same files (the CSV logger
      otherwise writes every 100 steps, and a kill loses what was not written).
    """

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        for logger in trainer.loggers:
            logger.save()

    def state_dict(self) -> dict[str, Any]:
        # Every rank builds the checkpoint (rank 0 writes it): gather each rank's RNG states, since ranks
        # draw different amounts of randomness (their batches differ in length) and their streams diverge.
        from bertlab.module import gather_objects

        return {"per_rank": gather_objects(_rng_state())}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not state_dict:
            self._pending = None
            return
        per_rank = state_dict.get("per_rank")
        if per_rank is None:  # a checkpoint written before per-rank states: one state for every rank
            self._pending = state_dict
            return
        rank = torch.distributed.get_rank() if torch.distributed.is_available() and \
            torch.distributed.is_initialized() else 0
        if len(per_rank) != _world_size():
            log.warning("this checkpoint holds the RNG states of %d processes, this run has %d: every process "
                        "continues from process 0's (dropout masks differ from an uninterrupted run)",
                        len(per_rank), _world_size())
            rank = 0
        self._pending = per_rank[rank]

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if self._pending is not None:
            _set_rng_state(self._pending)
            self._pending = None


def continue_csv_logs(loggers: list[Any], resumed_from_step: int) -> None:
    """Let each CSV logger of a resumed run continue its ``metrics.csv`` instead of starting it afresh.

    Lightning's CSV writer deletes an existing ``metrics.csv`` when it starts. Here the rows logged before
    the checkpoint (``step < resumed_from_step``) are kept and the writer appends to them; rows logged after
    the checkpoint by the killed run are dropped, since the resumed run logs those steps again. Call on
    global rank 0, before training.
    """
    import csv

    from lightning.pytorch.loggers import CSVLogger

    for logger in loggers:
        if not isinstance(logger, CSVLogger):
            continue
        path = Path(logger.log_dir) / "metrics.csv"
        if not path.is_file():
            continue
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            rows = [r for r in reader if r.get("step", "") != "" and float(r["step"]) < resumed_from_step]
        with warnings.catch_warnings():
            # Lightning warns that the folder's files "will be deleted": here they are continued.
            warnings.filterwarnings("ignore", message=r".*Previous log files in this directory will be deleted")
            writer = logger.experiment  # created now: this deletes the old file
        with open(path, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=header)
            out.writeheader()
            out.writerows(rows)
        writer.metrics_keys = sorted(header)  # later rows append (the header is rewritten if keys are new)


# ----------------------------------------------------------------------------------------------------------
# Test hook


class KillAtStep(Callback):
    """Test hook: SIGKILL this process once ``global_step`` reaches ``step`` (no cleanup, no final save),
    as a pre-empted or out-of-memory-killed job dies. Enabled only by ``BERTLAB_TEST_KILL_AT_STEP``."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if trainer.global_step >= self.step:
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)


class SignalAtStep(Callback):
    """Test hook: send ``signum`` to this process once ``global_step`` reaches ``step``, as ``scancel`` or a
    pre-empting cluster does. Enabled only by ``BERTLAB_TEST_SIGNAL_AT_STEP=<step>:<TERM|INT|USR1>``."""

    def __init__(self, step: int, signum: int):
        self.step, self.signum, self.sent = step, signum, False

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if trainer.global_step >= self.step and not self.sent:
            self.sent = True
            os.kill(os.getpid(), self.signum)


def debug_hooks_from_env() -> list[Callback]:
    hooks: list[Callback] = []
    value = os.environ.get(SIGNAL_AT_STEP_ENV)
    if value:
        step, name = value.split(":")
        log.warning("%s=%s: this run sends itself SIG%s after step %s (a test hook)", SIGNAL_AT_STEP_ENV, value,
                    name, step)
        hooks.append(SignalAtStep(int(step), getattr(signal, f"SIG{name}")))
    value = os.environ.get(KILL_AT_STEP_ENV)
    if value:
        log.warning("%s=%s: this run kills itself after step %s (a test hook)", KILL_AT_STEP_ENV, value, value)
        hooks.append(KillAtStep(int(value)))
    return hooks
