"""Which checkpoints a run writes, and what a checkpoint says about the run that wrote it.

A run keeps two kinds of file in ``<run_dir>/checkpoints/``:

- the best one so far (``epoch_EEE_step_SSSSSS.ckpt``), chosen by Lightning's ``ModelCheckpoint`` on the
  task's monitored validation metric;
- ``last.ckpt``, the state after the latest completed epoch and after every ``save_every_n_steps`` step,
  written by :class:`LastCheckpoint` whatever the metric did (and sharing one file with the best one when
  they hold the same step). (Lightning's ``save_last=True`` writes it only
  when a top-k file is written too, so a run whose metric stopped improving would resume from an old epoch.)

:class:`ValidateFinalStep` makes a run that stops between validations (``trainer.max_steps`` in the middle
of an epoch) validate its final weights inside ``fit``, so that they compete for "best" through Lightning's
own bookkeeping.

Reading them: :func:`read_checkpoint` (tensors and plain values only), :func:`run_dir_checkpoint` (the
checkpoint a run dir stands for), :func:`check_resume_checkpoint` (can this run load it). Writing them:
:class:`AtomicCheckpointIO` (a temporary file renamed into place, so a kill never leaves half a file).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from bertlab.runtime.errors import CheckpointError, ConfigError
from bertlab.runtime.files import RUN_DIR_FIX, atomic_path, write_failure_message, writing
from bertlab.training.checkpoint_files import (  # noqa: F401  (imported from here too)
    LAST,
    find_recorded,
    last_checkpoint,
    read_checkpoint,
    run_dir_checkpoint,
)

log = logging.getLogger(__name__)

# The LightningModule's state that trains beside the model but is no part of it (``Family.trainable_modules``):
# in training checkpoints only, never exported, left out when a run without it reads the checkpoint.
TRAINING_ONLY_PREFIX = "family_modules."



class LastCheckpoint(Checkpoint):
    """Write ``<dirpath>/last.ckpt`` at the end of every training epoch and every ``every_n_steps`` steps.

    A ``Checkpoint`` subclass, so Lightning runs it after the other callbacks' hooks of the same event: the
    file includes the best-checkpoint bookkeeping of the validation that just ran.

    Disk (``checkpoint.*`` in the root config):

    - when the best checkpoint (``best``, Lightning's ``ModelCheckpoint``) was written at the step last.ckpt
      is written at, they hold the same weights: the best file becomes a hard link to last.ckpt (one copy on
      disk; a resume from either restores everything). Neither is ever written in place (a new file is
      renamed over the name), so rewriting last.ckpt or removing an old best leaves the other whole. Where
      the file system has no hard links, the two files stay apart.
    - ``best_weights_only``: once last.ckpt moves on, a best file that shared it is rewritten without the
      optimizer state (ModelCheckpoint writes the others that way itself).
    - ``keep_last``: how many training states to keep: 1 is last.ckpt alone; N also keeps the N-1 before it
      as ``last_step_SSSSSS.ckpt``; 0 removes them when the run finishes (:meth:`finish`).
    """

    def __init__(self, dirpath: str | Path, every_n_steps: int | None = None, keep_last: int = 1,
                 best: Any = None, best_weights_only: bool = False) -> None:
        if every_n_steps is not None and every_n_steps < 1:
            raise ValueError(f"every_n_steps must be >= 1, got {every_n_steps}")
        if keep_last < 0:
            raise ValueError(f"keep_last must be >= 0, got {keep_last}")
        self.dirpath = Path(dirpath)
        self.every_n_steps = every_n_steps
        self.keep_last = keep_last
        self.best = best
        self.best_weights_only = best_weights_only
        self._written_step: int | None = None  # the step of the last.ckpt on disk
        self._best_steps: dict[str, int | None] = {}

    @property
    def path(self) -> Path:
        return self.dirpath / LAST

    def _skip(self, trainer: L.Trainer) -> bool:
        return bool(trainer.fast_dev_run) or trainer.sanity_checking

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._written_step = checkpoint_step(self.path) if self.path.is_file() else None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.every_n_steps and not self._skip(trainer) and trainer.global_step % self.every_n_steps == 0:
            self.save(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self._skip(trainer):
            self.save(trainer)

    def save(self, trainer: L.Trainer) -> None:
        step = trainer.global_step
        local = trainer.is_global_zero and "://" not in str(self.dirpath)
        if local and self.path.is_file() and self._written_step != step:
            self._before_replacing()
        trainer.save_checkpoint(self.path)
        self._written_step = step
        if local:
            self._share_with_best(step)

    def _best_file(self) -> Path | None:
        best = getattr(self.best, "best_model_path", None)
        return Path(best) if best and Path(best).is_file() else None

    def _before_replacing(self) -> None:
        """last.ckpt is about to hold a later step: keep what must outlive its current file."""
        best = self._best_file()
        if best is not None and self.best_weights_only and same_file(best, self.path):
            write_weights_only(self.path, best)
        if self.keep_last > 1 and self._written_step is not None:
            link_or_copy(self.path, self.dirpath / f"last_step_{self._written_step:06d}.ckpt")
            for old in self.kept_states()[: -(self.keep_last - 1)]:
                old.unlink(missing_ok=True)

    def _share_with_best(self, step: int) -> None:
        best = self._best_file()
        if best is None or same_file(best, self.path):
            return
        if str(best) not in self._best_steps:  # read once per best file (its pickle, not its tensors)
            self._best_steps = {str(best): checkpoint_step(best)}
        if self._best_steps[str(best)] != step:
            return
        try:
            with atomic_path(best) as tmp:
                os.link(self.path, tmp)
        except OSError as err:  # no hard links on this file system: two files, as before
            log.debug("could not link %s to %s (%s): both files kept", best, self.path, err)

    def kept_states(self) -> list[Path]:
        """The earlier states ``keep_last`` keeps, oldest first."""
        return sorted(self.dirpath.glob("last_step_*.ckpt"))

    def finish(self, evaluated: str | Path | None) -> None:
        """``keep_last=0``: the run finished, so its training states go (unless one is what it evaluated)."""
        if self.keep_last != 0:
            return
        keep = Path(evaluated).resolve() if evaluated else None
        best = self._best_file()
        if best is not None and self.best_weights_only and same_file(best, self.path) and best.resolve() != \
                self.path.resolve():
            write_weights_only(self.path, best)  # it outlives last.ckpt: without the training state
        for path in [self.path, *self.kept_states()]:
            if path.is_file() and path.resolve() != keep:
                path.unlink()


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def link_or_copy(src: Path, dst: Path) -> None:
    """``dst`` holds ``src``'s content: a hard link where the file system has them, else a copy."""
    with atomic_path(dst) as tmp:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)


TRAINING_STATE = ("optimizer_states", "lr_schedulers", "callbacks")  # what only a resume needs


def write_weights_only(src: Path, dst: Path) -> None:
    """``dst``: the checkpoint ``src`` without its training state (optimizer, schedule, callbacks), as
    ModelCheckpoint's ``save_weights_only`` writes one. Evaluation, export, prediction and init_from read
    it as any other; a resume refuses it (:func:`check_resume_checkpoint`)."""
    ckpt = torch.load(src, map_location="cpu", weights_only=True, mmap=True)
    for key in TRAINING_STATE:
        ckpt.pop(key, None)
    AtomicCheckpointIO().save_checkpoint(ckpt, dst)


class ValidateFinalStep(L.Callback):
    """Validate the final weights when training would otherwise stop between two validations.

    ``trainer.max_steps`` reached in the middle of an epoch ends ``fit`` without a validation; asking the
    loop to stop at that step makes Lightning validate first (as it does for early stopping). Also records
    the step of the latest validation during ``fit``, so the recipe can tell whether the final weights were
    scored.
    """

    def __init__(self) -> None:
        self.validated_step: int | None = None
        self.scores: dict[str, Any] | None = None  # the validation scores of the weights at validated_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if trainer.max_steps is not None and 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.validated_step = trainer.global_step
            scores = getattr(pl_module, "last_metrics", {}).get("val")
            self.scores = dict(scores) if scores is not None else None

    def scores_of(self, trainer: L.Trainer, path: str | Path | None) -> dict[str, Any] | None:
        """The scores of ``path`` when they are already known: it holds the weights in memory now (written
        at this step) and fit's last validation scored exactly those. None when they must be evaluated."""
        if path is None or self.scores is None or self.validated_step != trainer.global_step:
            return None
        return self.scores if checkpoint_step(path) == trainer.global_step else None


def checkpoint_step(path: str | Path) -> int | None:
    """The global step a checkpoint file was written at (its pickle is read; its tensors are not), else None."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        return int(ckpt["global_step"])
    except Exception:  # a folder (DeepSpeed), an unreadable file: its scores are evaluated, not assumed
        return None


@dataclass(frozen=True)
class CheckpointInfo:
    """What a checkpoint file says about its run's progress and its best file."""

    path: Path
    global_step: int
    epochs_done: int  # training epochs completed when it was written
    best_model_path: str | None

    def finished(self, max_epochs: int | None, max_steps: int | None) -> bool:
        """Whether the run that wrote it had reached its end (``max_steps``, else ``max_epochs``)."""
        if max_steps is not None and max_steps > 0:
            return self.global_step >= max_steps
        return max_epochs is not None and max_epochs >= 0 and self.epochs_done >= max_epochs

    def best_file(self) -> Path | None:
        """The best checkpoint it recorded, found beside it (so a copied or moved run folder still works)."""
        beside = find_recorded(self.path.parent, self.best_model_path)
        if beside is not None or not self.best_model_path:
            return beside
        recorded = Path(self.best_model_path)
        return recorded if recorded.is_file() else None


def checkpoint_info(ckpt: dict[str, Any], path: str | Path) -> CheckpointInfo:
    """Progress and best-file record of a Lightning checkpoint already read from ``path``."""
    path = Path(path)
    progress = ckpt.get("loops", {}).get("fit_loop", {}).get("epoch_progress", {}).get("current", {})
    # Saved at an epoch's end, "processed" already counts that epoch while "completed" does not yet.
    epochs_done = int(progress.get("processed", progress.get("completed", 0)))
    best = None
    for name, state in (ckpt.get("callbacks") or {}).items():
        if str(name).startswith("ModelCheckpoint") and isinstance(state, dict) and state.get("best_model_path"):
            best = str(state["best_model_path"])
    return CheckpointInfo(path=path, global_step=int(ckpt.get("global_step", 0)), epochs_done=epochs_done,
                          best_model_path=best)


def check_resume_checkpoint(path: str | Path, module: L.LightningModule, resume: bool = False) -> CheckpointInfo:
    """The progress of a checkpoint this run can resume from (``resume``) or evaluate; :class:`CheckpointError`
    (naming what differs) when it cannot be loaded into ``module``, or holds no training state to resume.

    Loaded with ``weights_only=True`` (as Lightning then loads it): tensors and plain values only.
    """
    path = Path(path)
    ckpt = read_checkpoint(path, "ckpt_path")
    if resume and "optimizer_states" not in ckpt:
        raise CheckpointError(
            f"ckpt_path={path} holds the weights only (a best checkpoint of checkpoint.best_weights_only=true), "
            "not the optimizer and schedule a resume continues: resume from the run's last.ckpt (ckpt_path=last "
            "with hydra.run.dir=<its run dir>), evaluate this file with train=false, or start a new run from "
            "its weights with model.init_from=<this file>"
        )
    state = ckpt["state_dict"]
    own = module.state_dict()
    # Slim checkpoints (LoRA: only what trained) leave the frozen tensors out on purpose.
    missing = sorted(own.keys() - state.keys()) if getattr(module, "strict_loading", True) else []
    if ckpt.get("bertlab_base_weights") is not None:
        # A LoRA checkpoint stores only what trained; the frozen base weights come from its reference.
        trained = {f"model.{n}" for n, p in module.model.named_parameters() if p.requires_grad}
        missing = [k for k in missing if k in trained]
    # What trained beside the model (distillation's projection) is no part of it: a run without it (an
    # evaluation) reads the checkpoint without it.
    unexpected = sorted(k for k in state.keys() - own.keys() if not k.startswith(TRAINING_ONLY_PREFIX))
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
        # torch's zip writer reports a full disk as a RuntimeError ("unexpected pos", "file write failed")
        # with the OSError in its context: writing() looks through the chain.
        with writing(path, "the checkpoint", RUN_DIR_FIX, error=CheckpointError, note=KEPT_NOTE), \
                atomic_path(path) as tmp, open(tmp, "wb") as f:
            torch.save(checkpoint, f)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(OSError):  # make the rename itself durable (not possible on every OS)
            fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


KEPT_NOTE = "The previous checkpoint there, if any, is unchanged."


def disk_full_message(path: Path) -> str:
    """The paragraph for a checkpoint a full disk could not take (see ``runtime.files.writing``)."""
    return write_failure_message(path, "the checkpoint", "full", RUN_DIR_FIX, KEPT_NOTE)


# ----------------------------------------------------------------------------------------------------------
# Disk


def checkpoint_settings(node: Any) -> dict[str, Any]:
    """The root config's ``checkpoint`` block, checked: ``keep_last`` (int >= 0), ``best_weights_only``."""
    node = dict(node or {})
    unknown = sorted(set(node) - {"keep_last", "best_weights_only"})
    if unknown:
        raise ConfigError(f"checkpoint.{unknown[0]} is not a checkpoint setting; the settings are "
                          "checkpoint.keep_last and checkpoint.best_weights_only (docs/running.md)")
    keep_last = node.get("keep_last", 1)
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
        raise ConfigError(f"checkpoint.keep_last={keep_last!r}: give a whole number >= 0 (1: last.ckpt; "
                          "N: last.ckpt and the N-1 states before it; 0: none once the run has finished)")
    weights_only = node.get("best_weights_only", False)
    if not isinstance(weights_only, bool):
        raise ConfigError(f"checkpoint.best_weights_only={weights_only!r}: give true or false")
    return {"keep_last": keep_last, "best_weights_only": weights_only}


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" or n >= 100 else f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} GB"


def disk_use(run_dir: str | Path) -> str:
    """What a run's folder holds on disk, a file with several names (hard links) counted once, and its
    checkpoints by name: ``272 MB; checkpoints/: last.ckpt 271 MB, epoch_000_step_000013.ckpt = last.ckpt``."""
    run_dir = Path(run_dir)
    seen: dict[tuple[int, int], str] = {}
    total = 0
    for root, _, files in os.walk(run_dir):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(root, name))
                key = (st.st_dev, st.st_ino)
                if key not in seen:
                    seen[key] = name
                    total += st.st_size
    parts = []
    folder = run_dir / "checkpoints"
    names: dict[tuple[int, int], str] = {}
    entries = sorted(folder.glob("*.ckpt"), key=lambda p: (p.name != LAST, p.name)) if folder.is_dir() else []
    for path in entries:
        with contextlib.suppress(OSError):
            st = path.stat()
            key = (st.st_dev, st.st_ino)
            if key in names:
                parts.append(f"{path.name} = {names[key]} (one file)")
                continue
            names[key] = path.name
            size = st.st_size if path.is_file() else sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            parts.append(f"{path.name} {_size(size)}")
    return f"{_size(total)}" + (f"; checkpoints/: {', '.join(parts)}" if parts else "")
