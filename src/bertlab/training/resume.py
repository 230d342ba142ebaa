"""Exact resume: what a checkpoint must hold beyond Lightning's own state so that a resumed run continues as
an uninterrupted one would (the global RNG states that draw dropout masks), and the loggers' files flushed at
each checkpoint so that the resumed run's logs continue without a gap."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback

from bertlab.training.distributed import gather_objects

log = logging.getLogger(__name__)


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
