"""Which checkpoints a run writes, and what a checkpoint says about the run that wrote it.

A run keeps two kinds of file in ``<run_dir>/checkpoints/``:

- the best one so far (``epoch_EEE_step_SSSSSS.ckpt``), chosen by Lightning's ``ModelCheckpoint`` on the
  task's monitored validation metric;
- ``last.ckpt``, the state after the latest completed epoch and after every ``save_every_n_steps`` step,
  written by :class:`LastCheckpoint` whatever the metric did. (Lightning's ``save_last=True`` writes it only
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
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from bertlab.runtime.errors import CheckpointError
from bertlab.runtime.files import RUN_DIR_FIX, atomic_path, write_failure_message, writing

log = logging.getLogger(__name__)

LAST = "last.ckpt"


class LastCheckpoint(Checkpoint):
    """Write ``<dirpath>/last.ckpt`` at the end of every training epoch and every ``every_n_steps`` steps.

    A ``Checkpoint`` subclass, so Lightning runs it after the other callbacks' hooks of the same event: the
    file includes the best-checkpoint bookkeeping of the validation that just ran.
    """

    def __init__(self, dirpath: str | Path, every_n_steps: int | None = None) -> None:
        if every_n_steps is not None and every_n_steps < 1:
            raise ValueError(f"every_n_steps must be >= 1, got {every_n_steps}")
        self.dirpath = Path(dirpath)
        self.every_n_steps = every_n_steps

    @property
    def path(self) -> Path:
        return self.dirpath / LAST

    def _skip(self, trainer: L.Trainer) -> bool:
        return bool(trainer.fast_dev_run) or trainer.sanity_checking

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.every_n_steps and not self._skip(trainer) and trainer.global_step % self.every_n_steps == 0:
            trainer.save_checkpoint(self.path)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self._skip(trainer):
            trainer.save_checkpoint(self.path)


class ValidateFinalStep(L.Callback):
    """Validate the final weights when training would otherwise stop between two validations.

    ``trainer.max_steps`` reached in the middle of an epoch ends ``fit`` without a validation; asking the
    loop to stop at that step makes Lightning validate first (as it does for early stopping). Also records
    the step of the latest validation during ``fit``, so the recipe can tell whether the final weights were
    scored.
    """

    def __init__(self) -> None:
        self.validated_step: int | None = None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if trainer.max_steps is not None and 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.validated_step = trainer.global_step


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


def last_checkpoint(run_dir: str | Path) -> Path:
    """``<run_dir>/checkpoints/last.ckpt`` (it may not exist yet)."""
    return Path(run_dir) / "checkpoints" / LAST


def find_recorded(folder: Path, recorded: str | None) -> Path | None:
    """A checkpoint path recorded where a run ran (an absolute path), found by its place inside ``folder``:
    a copied or moved run folder uses its own file, never the original's. None when it is not there."""
    if not recorded:
        return None
    recorded_path = Path(recorded)
    candidates = [folder / recorded_path.parent.name / recorded_path.name, folder / recorded_path.name]
    if not recorded_path.is_absolute():
        candidates.append(folder / recorded_path)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


def run_dir_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint a run dir stands for: the best one its ``metrics.json`` names, else ``last.ckpt``; None
    when it has neither. ``model.init_from``, ``python -m bertlab.predict|export`` and ``Predictor`` all read
    a run dir this way."""
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.json"
    if metrics.is_file():
        best = find_recorded(run_dir, json.loads(metrics.read_text()).get("best_checkpoint"))
        if best is not None:
            return best
    last = last_checkpoint(run_dir)
    return last if last.is_file() else None


def read_checkpoint(path: str | Path, setting: str | None = None) -> dict[str, Any]:
    """A bertlab Lightning checkpoint, read with ``weights_only=True``: tensors and plain values only.

    Lightning reloads bertlab's checkpoints the same way on resume, so even a checkpoint from someone else
    cannot run code when it is read; a file that needs full unpickling is refused, not trusted. ``setting``
    (``ckpt_path``, ``model.init_from``) names where the path came from in the error message.
    """
    path = Path(path)
    where = f"{setting}={path}" if setting else str(path)
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # truncated file, another program's pickle, not a zip archive, ...
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"{where}: not a readable bertlab checkpoint ({type(err).__name__}: {first}). Pass a .ckpt file "
            "written by bertlab (<run_dir>/checkpoints/last.ckpt or the best one) or its run dir; bertlab reads "
            "checkpoints that hold tensors and plain values only"
        ) from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise CheckpointError(f"{where}: no state_dict in it; it is not a Lightning checkpoint")
    return ckpt


def check_resume_checkpoint(path: str | Path, module: L.LightningModule) -> CheckpointInfo:
    """The progress of a checkpoint this run can resume from or evaluate; :class:`CheckpointError`
    (naming what differs) when it cannot be loaded into ``module``.

    Loaded with ``weights_only=True`` (as Lightning then loads it): tensors and plain values only.
    """
    path = Path(path)
    ckpt = read_checkpoint(path, "ckpt_path")
    state = ckpt["state_dict"]
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
