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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Checkpoint

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
        if not self.best_model_path:
            return None
        beside = self.path.parent / Path(self.best_model_path).name
        if beside.is_file():
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
