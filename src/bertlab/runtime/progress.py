"""How long a run will take: the planned optimizer steps before the first one, then an estimate of the time
left measured on the run's own steps (printed once, updated once) and shown by the progress bar.

The plan counts what Lightning will do: ``ceil(batches / accumulate_grad_batches)`` optimizer steps per epoch
(the last, shorter accumulation of an epoch steps too), ``trainer.max_epochs`` epochs unless
``trainer.max_steps`` stops earlier, over ``trainer.num_training_batches`` (after ``limit_train_batches`` and
``overfit_batches``); a resumed run plans the steps it has left. The estimate times optimizer steps after a
short warm-up (the first steps allocate and are slower), with the validations that run in between taken
out, and adds the validations still to come at the time one took (the sanity check's batches scaled to the
whole validation set until a real validation has run).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lightning.pytorch.callbacks import Callback

log = logging.getLogger(__name__)


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 20 s``, ``1 h 45 min``: what a person reads at a glance."""
    if seconds < 0.5:
        return "<1 s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        minutes, secs = divmod(seconds, 60)
        return f"{minutes} min {secs} s" if minutes < 10 and secs else f"{minutes} min"
    hours, rest = divmod(seconds, 3600)
    minutes = round(rest / 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "es" if noun.endswith("ch") else "s")


def clock_text(seconds: float | None) -> str:
    """The progress bar's compact clock (as tqdm's): ``1:05`` under an hour, ``1:45:00`` past one; ``?`` when
    unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = max(0, int(seconds))
    if seconds < 3600:
        return f"{seconds // 60}:{seconds % 60:02d}"
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass(frozen=True)
class Plan:
    """The optimizer steps a run will take (per process; every process takes the same steps)."""

    batches_per_epoch: int
    accumulation: int
    total_steps: int  # where training ends (trainer.max_steps, else epochs × steps per epoch)
    start_step: int  # a resumed run's global step; 0 otherwise
    limited_by_max_steps: bool
    validations: int  # validations during the remaining steps (the final one included)

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.batches_per_epoch / self.accumulation)

    @property
    def epochs(self) -> int:
        return math.ceil(self.total_steps / self.steps_per_epoch)

    @property
    def remaining_steps(self) -> int:
        return max(0, self.total_steps - self.start_step)

    def describe(self) -> str:
        epochs = f"{self.epochs} epoch{'s' if self.epochs != 1 else ''}"
        per_epoch = f"{self.batches_per_epoch} batches"
        if self.accumulation > 1:
            per_epoch += f" ÷ {self.accumulation} accumulated = {self.steps_per_epoch} steps"
        if self.limited_by_max_steps:
            how = f"trainer.max_steps; {self.total_steps / self.steps_per_epoch:.3g} epochs of {per_epoch}"
        else:
            how = f"{epochs} × {per_epoch}"
        text = f"planned: {self.total_steps} optimizer steps ({how})"
        if self.start_step:
            text += f"; resuming at step {self.start_step}: {self.remaining_steps} to go"
        return text


def plan_run(batches_per_epoch: float, accumulation: int, max_epochs: int | None, max_steps: int | None,
             start_step: int = 0, validations_per_epoch: float = 1.0) -> Plan | None:
    """The plan, or None when the run has no planned end (an endless stream with no ``max_steps``)."""
    limit = max_steps if max_steps is not None and max_steps > 0 else None
    if not batches_per_epoch or not math.isfinite(batches_per_epoch):
        return None  # a stream of unknown length
    batches = int(batches_per_epoch)
    per_epoch = math.ceil(batches / max(1, accumulation))
    by_epochs = per_epoch * max_epochs if max_epochs is not None and max_epochs >= 0 else None
    if by_epochs is None and limit is None:
        return None
    total = min(s for s in (by_epochs, limit) if s is not None)
    remaining = max(0, total - start_step)
    epoch_ends = max(0, total // per_epoch - start_step // per_epoch)  # each validates (check_val_every_n_epoch)
    validations = round(validations_per_epoch * epoch_ends)
    limited = limit is not None and (by_epochs is None or limit < by_epochs)
    if limited and remaining and total % per_epoch:  # stopped mid-epoch: the final weights are validated too
        validations += 1
    return Plan(batches_per_epoch=batches, accumulation=max(1, accumulation), total_steps=total,
                start_step=start_step, limited_by_max_steps=limited, validations=validations)


def validations_per_epoch(trainer: Any) -> float:
    """How many validations Lightning runs per training epoch (averaged over ``check_val_every_n_epoch``)."""
    limit_val = getattr(trainer, "limit_val_batches", 1.0)
    if not getattr(trainer, "enable_validation", True) or limit_val == 0:
        return 0.0
    every = trainer.check_val_every_n_epoch
    batches = trainer.num_training_batches
    check = getattr(trainer, "val_check_batch", None)
    per_epoch = 1.0
    if check and math.isfinite(check) and math.isfinite(batches):
        per_epoch = float(max(1, int(batches // check)))
    return per_epoch / every if every else per_epoch


class RunEstimate(Callback):
    """Logs the plan when training starts, the estimated time left after ``warmup + measure`` steps, and once
    more later (a quarter of the way, or after a validation if one ends first; at the earliest at twice the
    steps of the first estimate) when the first estimate was over a minute; :meth:`remaining_s` feeds the progress bar (``elapsed < remaining``)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter, warmup: int = 2, measure: int = 10,
                 update_after_s: float = 60.0, bounds: str | None = None) -> None:
        self.clock = clock
        self.bounds = bounds  # the plan's bound on one step's work (at most N windows an example), if any
        self.warmup = warmup
        self.measure = measure
        self.update_after_s = update_after_s
        self.plan: Plan | None = None
        self._t_start: float | None = None
        self._steps_seen = 0  # optimizer steps taken by this process since training started
        self._last_step = 0
        self._mark: tuple[float, int, float] | None = None  # (time, step count, validation seconds) after warm-up
        self._val_s = 0.0  # seconds of validation since training started
        self._val_t0: float | None = None
        self._val_last: float | None = None  # duration of the latest validation during training
        self._sanity: tuple[float, int] | None = None  # (seconds, batches) of the sanity check
        self._sanity_t0: float | None = None
        self._sanity_batches = 0
        self._val_batches = 0
        self._estimated_at: int | None = None
        self._first_estimate: float | None = None
        self._updated = False

    # ---- what the progress bar reads

    def elapsed_s(self) -> float | None:
        return None if self._t_start is None else self.clock() - self._t_start

    def seconds_per_step(self) -> float | None:
        if self._mark is None:
            return None
        t0, steps0, val0 = self._mark
        steps = self._steps_seen - steps0
        if steps < 1:
            return None
        return max(0.0, self.clock() - t0 - (self._val_s - val0) - self._current_validation()) / steps

    def validation_s(self) -> float | None:
        """One validation's duration: the latest one during training, else the sanity check scaled up."""
        if self._val_last is not None:
            return self._val_last
        if self._sanity is not None and self._sanity[1] and self._val_batches:
            return self._sanity[0] / self._sanity[1] * self._val_batches
        return None

    def remaining_s(self) -> float | None:
        """Seconds left: the remaining steps at the measured rate, plus the validations still to come."""
        per_step = self.seconds_per_step()
        if per_step is None or self.plan is None:
            return None
        steps_left = max(0, self.plan.remaining_steps - self._steps_seen)
        left = steps_left * per_step
        val = self.validation_s()
        if val and self.plan.remaining_steps:
            left += val * self.plan.validations * steps_left / self.plan.remaining_steps
        return left

    def _current_validation(self) -> float:
        return self.clock() - self._val_t0 if self._val_t0 is not None else 0.0

    # ---- Lightning hooks

    def on_sanity_check_start(self, trainer: Any, pl_module: Any) -> None:
        self._sanity_t0 = self.clock()
        self._sanity_batches = 0

    def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        if trainer.sanity_checking:
            self._sanity_batches += 1

    def on_sanity_check_end(self, trainer: Any, pl_module: Any) -> None:
        if self._sanity_t0 is not None:
            self._sanity = (self.clock() - self._sanity_t0, self._sanity_batches)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if trainer.fast_dev_run:
            return
        self._val_batches = int(sum(b for b in (getattr(trainer, "num_val_batches", None) or [])
                                    if math.isfinite(b)))
        self.plan = plan_run(trainer.num_training_batches, trainer.accumulate_grad_batches, trainer.max_epochs,
                             trainer.max_steps, trainer.global_step, validations_per_epoch(trainer))
        self._t_start = self.clock()
        self._last_step = trainer.global_step
        if self.plan is None:
            return
        if self._warmup() == 0:  # nothing to leave out: the measure starts with training
            self._mark = (self._t_start, 0, 0.0)
        text = self.plan.describe()
        if self.plan.validations and self._val_batches:
            text += f" · {_count(self.plan.validations, 'validation')} of {_count(self._val_batches, 'batch')}"
        if self.plan.remaining_steps > self._first_point():
            text += f" · time estimate after step {self.plan.start_step + self._first_point()}"
        if self.bounds:
            text += f" · {self.bounds}"
        log.info("%s", text)

    def _warmup(self) -> int:
        """Steps left out of the measure (the first ones allocate memory and are slower); fewer in a short run."""
        remaining = self.plan.remaining_steps if self.plan else 0
        return min(self.warmup, remaining // 4)

    def _first_point(self) -> int:
        """Steps taken before the first estimate: the warm-up plus the measured steps."""
        remaining = self.plan.remaining_steps if self.plan else 0
        return self._warmup() + max(1, min(self.measure, (remaining - self._warmup()) // 4))

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking and self._t_start is not None:
            self._val_t0 = self.clock()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self._val_t0 is None:
            return
        self._val_last = self.clock() - self._val_t0
        self._val_s += self._val_last
        self._val_t0 = None
        if self._first_estimate is not None and not self._updated and self._steps_seen >= 2 * self._estimated_at:
            self._maybe_update(trainer, validation=True)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.plan is None or trainer.global_step == self._last_step:
            return  # not an optimizer step (gradient accumulation), or no plan
        self._steps_seen += trainer.global_step - self._last_step
        self._last_step = trainer.global_step
        if self._mark is None and self._steps_seen >= self._warmup():
            self._mark = (self.clock(), self._steps_seen, self._val_s)
        if self._estimated_at is None and self._steps_seen >= self._first_point() \
                and self._steps_seen < self.plan.remaining_steps:
            self._estimated_at = self._steps_seen
            self._first_estimate = self.remaining_s()
            log.info("%s", self._estimate_line("estimated"))
        elif self._first_estimate is not None and not self._updated \
                and self._steps_seen >= max(2 * self._estimated_at, self.plan.remaining_steps // 4):
            self._maybe_update(trainer, validation=False)

    def _maybe_update(self, trainer: Any, validation: bool) -> None:
        if self.plan is None or self._steps_seen >= self.plan.remaining_steps:
            return
        self._updated = True  # once, whether printed or not
        if (self._first_estimate or 0.0) >= self.update_after_s:
            log.info("%s", self._estimate_line("updated" + (" after a validation" if validation else "")))

    def _estimate_line(self, what: str) -> str:
        assert self.plan is not None and self._mark is not None
        left = self.remaining_s() or 0.0
        step = self.plan.start_step + self._steps_seen
        per_step = self.seconds_per_step() or 0.0
        measured = self._steps_seen - self._mark[1]
        about = "" if left < 0.5 else "~"
        text = (f"{what}: {about}{format_duration(left)} to go at step {step} of {self.plan.total_steps} "
                f"({per_step:.3g} s/step over {measured} step{'s' if measured != 1 else ''}")
        val = self.validation_s()
        if self.plan.validations and val is not None:
            source = "measured" if self._val_last is not None else "from the sanity check"
            text += f"; validation {'' if val < 0.5 else '~'}{format_duration(val)} each, {source}"
        elif self.plan.validations:
            text += "; validation not timed yet"
        return text + f"; elapsed {format_duration(self.elapsed_s() or 0.0)})"
