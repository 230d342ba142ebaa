"""Lightning callbacks: ``SamplesPerSecond`` (optional, from ``conf/callbacks``; each entry there needs a
``_target_``), and three every run installs: ``Throughput`` (metrics.json's ``train`` timings),
``FreezeModeGuard`` (frozen modules stay in eval mode) and ``ReleaseFreedHeap`` (``release_heap``: freed C-heap
memory handed back after each step, by default when pre-training on the CPU); and ``OverfitCheck``
(``debug=overfit``: whether the training loss fell as it must on a few fixed batches)."""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from bertlab.runtime.config import RAW_TEXT_FAMILIES, auto_true_false
from bertlab.training.freeze import FreezePlan

log = logging.getLogger(__name__)


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


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc), None where the platform does not say."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, counted after the name
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return round(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


class Throughput(Callback):
    """Training throughput over the whole loop (data loading, host syncs, optimizer), validation excluded.

    Wall time runs from the start of the first training batch to the end of the last one, minus the
    validations that ran in between (a validation after the last batch is not inside that span).
    """

    def __init__(self) -> None:
        self.t0: float | None = None
        self.t_end: float | None = None
        self.validations: list[tuple[float, float]] = []
        self._val_t0: float | None = None
        self.samples = 0
        self.tokens = 0
        self.epochs: dict[int, list[float]] = {}  # epoch → [first batch start, last batch end]
        self.feature_extraction_s: float | None = None  # the frozen-feature cache's encoder pass, before training
        self.launch_to_first_step_s: float | None = None  # process start → first training batch (imports, data)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        now = time.perf_counter()
        if self.t0 is None:
            self.t0 = now
            self.launch_to_first_step_s = process_age_s()
        self.epochs.setdefault(trainer.current_epoch, [now, now])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.samples += len(batch["index"])
        self.tokens += int(batch.get("num_tokens", 0))
        self.t_end = time.perf_counter()
        self.epochs[trainer.current_epoch][1] = self.t_end

    def _without_validation(self, start: float, end: float) -> float:
        inside = sum(b - a for a, b in self.validations if a >= start and b <= end)
        return max(end - start - inside, 1e-9)

    def on_validation_start(self, trainer, pl_module):
        self._val_t0 = time.perf_counter()

    def on_validation_end(self, trainer, pl_module):
        if self._val_t0 is not None:
            self.validations.append((self._val_t0, time.perf_counter()))
        self._val_t0 = None

    def summary(self, world_size: int) -> dict[str, float]:
        if self.t0 is None or self.t_end is None:
            return {"wall_s": 0.0, "samples_per_s": 0.0, "tokens_per_s": 0.0}
        wall = self._without_validation(self.t0, self.t_end)
        # Counted on this rank; every rank processes the same number of batches, so scale by world size.
        return {"wall_s": round(wall, 3), "samples_per_s": round(self.samples * world_size / wall, 3),
                "tokens_per_s": round(self.tokens * world_size / wall, 3)}

    def timing(self) -> dict[str, Any]:
        """Each epoch's training wall time (validation excluded), the feature cache's pass, if any, and the
        time from the process's start to its first training batch (start-up: imports, data, model)."""
        return {"epoch_wall_s": [round(self._without_validation(a, b), 3) for _, (a, b) in sorted(self.epochs.items())],
                "feature_extraction_s": self.feature_extraction_s,
                "launch_to_first_step_s": self.launch_to_first_step_s}


class FreezeModeGuard(Callback):
    """Keeps ``pl_module.freeze_plan``'s frozen modules in eval mode and the rest in train mode.

    Lightning ≥ 2.2 does not call ``.train()`` when fit starts (a model built or loaded in eval mode would
    fine-tune with dropout off) and restores captured modes after validation, unless the module overrides
    ``on_validation_model_train`` (which usually calls ``.train()`` on everything). So: ``train()`` then
    ``set_modes()`` at train start and at each epoch start, and ``set_modes()`` before every training batch
    (cheap: one ``.eval()`` per frozen module) and at the end of validation.
    """

    @staticmethod
    def _plan(pl_module: L.LightningModule) -> FreezePlan | None:
        return getattr(pl_module, "freeze_plan", None)

    def _reset(self, pl_module: L.LightningModule) -> None:
        plan = self._plan(pl_module)
        if plan is not None:
            pl_module.train()
            plan.set_modes()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._reset(pl_module)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._reset(pl_module)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        plan = self._plan(pl_module)
        if plan is not None:
            plan.set_modes()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Harmless during validation (everything is in eval mode then); Lightning restores the modes it
        # captured before validation right after this hook.
        plan = self._plan(pl_module)
        if plan is not None:
            plan.set_modes()


class ReleaseFreedHeap(Callback):
    """After every optimizer step, hands the memory the C heap holds free back to the operating system
    (glibc's ``malloc_trim(0)``): ``release_heap`` in the root config.

    On the CPU a training step allocates and frees its activations, gradients and optimizer temporaries
    through the C allocator. glibc keeps freed blocks in its heap, and the heap fragments: what a step frees
    is not always reusable by the next step's requests, so the heap grows step after step. Measured on the
    pre-training preset (``task=mlm model=bert_mini``, batch 32 × 128, docs/pretraining.md) the process gained
    about 9 MB per step without a plateau (1.1 GB after the first step, 2.6 GB after 150); with this
    callback it stays at its first-step size. Releasing costs time (the next step faults its pages in again),
    which is why ``auto`` turns it on only for pre-training on the CPU: ``mlm``, where the growth was measured,
    and ``clm`` and ``rtd``, whose steps allocate alike (vocabulary-wide logits; not measured on their own).
    Fine-tuning grew far less (SST-2: 0.84 → 1.01 GB over 100 steps) and keeps the faster default.
    Elsewhere (macOS, musl, GPU memory) it does nothing.
    """

    PRETRAINING_FAMILIES = RAW_TEXT_FAMILIES

    def __init__(self, mode: str | bool, family: str) -> None:
        self.mode = auto_true_false(mode, "release_heap", "auto releases the freed heap after every step when "
                                    "pre-training on the CPU; true everywhere; false never")
        self.family = family
        self.enabled = False
        self._trim = None
        self._step = -1

    @staticmethod
    def _malloc_trim():
        import ctypes
        import ctypes.util

        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            return libc.malloc_trim  # glibc only: musl has no malloc_trim (AttributeError)
        except (OSError, AttributeError):
            return None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        from lightning.pytorch.accelerators import CPUAccelerator

        wanted = self.mode == "true" or (self.mode == "auto" and self.family in self.PRETRAINING_FAMILIES
                                          and isinstance(trainer.accelerator, CPUAccelerator))
        self._trim = self._malloc_trim() if wanted else None
        self.enabled = self._trim is not None
        self._step = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        if self.enabled and trainer.global_step != self._step:  # an optimizer step happened
            self._step = trainer.global_step
            self._trim(0)


class OverfitCheck(Callback):
    """``debug=overfit``: says at the end whether the training loss fell under ``ratio`` (a tenth) of where it
    started, epoch mean against epoch mean, on the same few batches every epoch (``trainer.overfit_batches``).

    A correct model, loss and labels fit a few fixed batches whatever the task: when the loss stays up, one
    of them is wrong, or the learning rate or the length of the run is. Validation scores batches the
    model never trained on, so it is no part of this check.
    """

    def __init__(self, ratio: float = 0.1) -> None:
        self.ratio = ratio
        self.losses: dict[int, list[float]] = {}

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is not None:
            self.losses.setdefault(trainer.current_epoch, []).append(float(loss))

    def verdict(self, overfit_batches: float) -> tuple[bool, str] | None:
        """(passed, what it tells), or None before two epochs have trained."""
        if len(self.losses) < 2:
            return None
        epochs = sorted(self.losses)
        first, last = (sum(self.losses[e]) / len(self.losses[e]) for e in (epochs[0], epochs[-1]))
        fell = f"train/loss {first:.3g} (epoch {epochs[0] + 1}) → {last:.3g} (epoch {epochs[-1] + 1})"
        batches = f"the same {overfit_batches:g} batches every epoch" if overfit_batches else "the training batches"
        if last <= self.ratio * first:
            return True, (f"overfit check passed: {fell} on {batches}, under {self.ratio:g} of where it started: "
                          "the model, the loss and the labels can fit data (val/* scores batches it did not "
                          "train on: not part of this check)")
        return False, (f"overfit check FAILED: {fell} on {batches}, not under {self.ratio:g} of where it "
                       "started: the model, the loss or the labels are wrong, or optim.lr does not suit the "
                       "model (about 1e-3 for a scratch model, 1e-4 for a pre-trained one), or the run is too "
                       "short (trainer.max_epochs)")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        result = self.verdict(trainer.overfit_batches) if trainer.is_global_zero else None
        if result is not None:
            (log.info if result[0] else log.warning)("%s", result[1])
