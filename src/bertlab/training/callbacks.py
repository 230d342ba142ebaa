"""Optional Lightning callbacks, enabled through ``conf/callbacks`` (each entry there needs a ``_target_``)."""

from __future__ import annotations

import time

import lightning as L
from lightning.pytorch.callbacks import Callback


class SamplesPerSecond(Callback):
    """Training samples/s in the progress bar (and the loggers) as ``train/samples_per_s``.

    Measured on the host from what the batch already carries (``len(batch["index"])`` examples; the
    collator's ``num_tokens``, a Python int, for ``train/tokens_per_s``), so it adds no device sync. The rate
    is over the last ``every_n_steps`` batches (across epoch ends, so short epochs get a rate too) without
    the time spent in validation; it is this rank's rate times the world size (every rank runs the same
    number of batches).
    ``metrics.json``'s ``train.samples_per_s`` is the whole-run figure (``bertlab.train.Throughput``).
    """

    def __init__(self, every_n_steps: int = 10, tokens: bool = False) -> None:
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be >= 1, got {every_n_steps}")
        self.every_n_steps = every_n_steps
        self.tokens = tokens
        self._restart()

    def _restart(self) -> None:
        self._t0: float | None = None
        self._excluded = 0.0  # seconds of validation inside the current window
        self._val_t0: float | None = None
        self._samples = 0
        self._tokens = 0
        self._batches = 0

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._t0 is not None:
            self._val_t0 = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._val_t0 is not None:
            self._excluded += time.perf_counter() - self._val_t0
            self._val_t0 = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if self._t0 is None:
            self._t0 = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        batch_size = len(batch["index"])
        self._samples += batch_size
        self._tokens += int(batch.get("num_tokens", 0))
        self._batches += 1
        if self._batches < self.every_n_steps or self._t0 is None:
            return
        elapsed = max(time.perf_counter() - self._t0 - self._excluded, 1e-9)
        scale = trainer.world_size / elapsed
        pl_module.log("train/samples_per_s", self._samples * scale, prog_bar=True, on_step=True, on_epoch=False,
                      batch_size=batch_size, sync_dist=False)
        if self.tokens:
            pl_module.log("train/tokens_per_s", self._tokens * scale, prog_bar=True, on_step=True,
                          on_epoch=False, batch_size=batch_size, sync_dist=False)
        self._restart()
