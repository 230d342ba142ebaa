"""Test hooks that stop a run the way a cluster does, enabled only by environment variables:
``BERTLAB_TEST_KILL_AT_STEP=k`` SIGKILLs the process after optimizer step ``k`` (a pre-empted or
out-of-memory-killed job), ``BERTLAB_TEST_SIGNAL_AT_STEP=k:TERM|INT|USR1`` sends it that signal (``scancel``)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

log = logging.getLogger(__name__)

KILL_AT_STEP_ENV = "BERTLAB_TEST_KILL_AT_STEP"
SIGNAL_AT_STEP_ENV = "BERTLAB_TEST_SIGNAL_AT_STEP"


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
