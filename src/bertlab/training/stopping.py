"""Stopping on a signal (pre-emption, ``scancel``, Ctrl-C): finish the current step, save ``last.ckpt``, exit
with 128 + the signal's number and say how to resume; and what every run does first and last
(:func:`start_of_run`, :func:`end_of_run`)."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from bertlab.runtime.checks import check_settings
from bertlab.runtime.errors import JobStopped
from bertlab.runtime.files import remove_stale_temporaries
from bertlab.training.checkpoints import last_checkpoint

log = logging.getLogger(__name__)

# How long the current step may run on after a stop signal before the run stops inside it: a step normally
# ends in seconds, and one that does not (a huge example; data.max_windows_per_example bounds those) must not
# hold off a scheduler's SIGTERM until its SIGKILL. The run then stops without saving: last.ckpt stays.
STEP_GRACE_S = 30.0


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

    def __init__(self, run_dir: Path, resume_hint: str, sweep_hint: str | None = None):
        self.run_dir = Path(run_dir)
        self.resume_hint = resume_hint
        self.sweep_hint = sweep_hint  # a multirun job: the command that re-runs its sweep
        self.signum: int | None = None
        self.training = False
        self._saved: tuple[Path, int] | None = None
        self._previous: dict[int, Any] = {}
        self.results: Path | None = None  # metrics.json, once the run's results are written

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in stop_signals():
            previous = signal.signal(sig, self._handle)
            self._previous.setdefault(sig, previous)

    def uninstall(self) -> None:
        self._disarm()
        for sig, previous in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def results_complete(self, metrics: Path) -> None:
        """The run's results are in ``metrics``: a stop signal from now on no longer stops the run (what
        remains is the export and the records), it is noted and the run ends normally."""
        self.results = Path(metrics)

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.results is not None:
            if self.signum is not None:
                raise JobStopped(f"received {name} again: stopped at once. The run's results are complete in "
                                 f"{self.results}; what comes after them (the export=true folder, the run's "
                                 "final records) may be missing: run the command again to write them", signum)
            self.signum = signum
            log.warning("received %s after the run wrote its results: the results are complete in %s; finishing "
                        "the run (export, records) and ending normally; send it again to stop at once", name,
                        self.results)
            return
        if self.signum is not None or not self.training:
            self.signum = signum
            raise JobStopped(self._message(name, saved=None), signum)
        self.signum = signum
        log.warning("received %s: saving last.ckpt after the current step, then stopping (within %g s; a step "
                    "that runs longer is stopped inside it)", name, STEP_GRACE_S)
        self._arm()

    def _arm(self) -> None:
        """Stop inside the current step if it has not ended :data:`STEP_GRACE_S` seconds from now (SIGALRM; the
        handler raises between two Python operations: between windows and chunks of the forward)."""
        if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
            return
        self._previous.setdefault(signal.SIGALRM, signal.signal(signal.SIGALRM, self._step_overran))
        signal.setitimer(signal.ITIMER_REAL, STEP_GRACE_S)

    def _disarm(self) -> None:
        if hasattr(signal, "setitimer") and signal.SIGALRM in self._previous:
            with contextlib.suppress(ValueError):
                signal.setitimer(signal.ITIMER_REAL, 0)

    def _step_overran(self, signum: int, frame: Any) -> None:
        if self._saved is not None or self.signum is None or not self.training:
            return
        self.training = False
        name = signal.Signals(self.signum).name
        raise JobStopped(f"the current training step did not end within {STEP_GRACE_S:g} s of {name}, so the run "
                         f"stopped inside it, without saving that step. {self._message(name, saved=None)}",
                         self.signum)

    def _message(self, name: str, saved: tuple[Path, int] | None) -> str:
        last = last_checkpoint(self.run_dir)
        if saved is not None:
            where = f"saved {saved[0]} at global step {saved[1]}"
        elif last.is_file():
            where = f"the last checkpoint is {last}"
        else:
            where = "no checkpoint had been written yet, so nothing can be resumed: run the command again"
        resumable = saved is not None or last.is_file()
        if self.sweep_hint:
            # Ctrl-C stops the whole multirun: the jobs after this one never started.
            return (f"received {name}: the multirun stopped in the job of {self.run_dir}; {where}. Finish the "
                    f"sweep by running it again in the same folder: {self.sweep_hint} (jobs that finished are "
                    "skipped; this one and those after it run from their start)"
                    + (f"; or resume this job alone from its last step: {self.resume_hint}" if resumable else ""))
        return (f"received {name}: the run stopped before its end; {where}. "
                + (f"Resume with: {self.resume_hint}" if resumable else ""))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.training = True
        self.install()  # again: Lightning installed its own SIGTERM handler when fit started

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.training = False

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.signum is None or self._saved is not None:
            return
        self._disarm()  # the step ended in time: saved as usual
        path = last_checkpoint(self.run_dir)
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
        from bertlab.models.families import scratch_families
        from bertlab.runtime.run_dir import claim_run_dir
        from bertlab.tasks.families import logged_metrics

        # every setting by its kind (model.model_type: a family of the registry), and what they make a run do
        check_settings(cfg, logged_metrics, names={"model.model_type": scratch_families()})
        claim_run_dir(run_dir, cfg)  # a run dir belongs to one run (bertlab.runtime.run_dir)
    remove_stale_temporaries(Path(run_dir) / "checkpoints")
    stop = GracefulStop(run_dir, resume_command(run_dir), sweep_command())
    stop.install()
    _ACTIVE_STOP.append(stop)
    return stop


def end_of_run(failed: bool = False, trained: bool = True) -> None:
    """Give the stop signals back to whoever handled them before the run (multirun jobs share a process),
    and record a run that ended without error as finished in its run dir; then free the run dir (removing a
    folder made for a run that ``failed`` before any training step, not ``trained``:
    :func:`bertlab.runtime.run_dir.release_run_dir`)."""
    from bertlab.runtime.run_dir import finish_run_dir, release_run_dir

    while _ACTIVE_STOP:
        stop = _ACTIVE_STOP.pop()
        stop.uninstall()
        if not failed:
            finish_run_dir(stop.run_dir)
            if _ANSWER_LATE_SIGNALS:
                _after_the_run(stop.run_dir)
    release_run_dir(before_training=failed and not trained)


_ANSWER_LATE_SIGNALS = False


def answer_late_signals() -> None:
    """The command line's process (train.py) ends with the run: after a run that ended well, a stop signal is
    answered by :func:`_after_the_run` until the process exits. A library caller (a notebook, the tests) keeps
    its own signal handling."""
    global _ANSWER_LATE_SIGNALS
    _ANSWER_LATE_SIGNALS = True


def _after_the_run(run_dir: Path) -> None:
    """Until the process exits (a few seconds of tidying up: loggers, Hydra's callbacks) a stop signal would
    otherwise kill it silently with 128 + its number, or print a KeyboardInterrupt traceback, though the run
    is complete. It is answered by a line saying the results are complete, and the process ends normally; a
    second one ends it at once. In a multirun, a signal between two jobs stops the sweep (saying so)."""
    if threading.current_thread() is not threading.main_thread():
        return
    multirun = _in_multirun()
    metrics = Path(run_dir) / "metrics.json"
    received: list[int] = []

    def handle(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if multirun:
            sys.stderr.write(f"\nbertlab: stopped: received {name} between two jobs of the multirun: the jobs "
                             "that ended are complete; the next ones did not start\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        if received:
            sys.stderr.write(f"\nbertlab: stopped: received {name} again while tidying up after the run; its "
                             f"results are complete in {metrics}\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        received.append(signum)
        sys.stderr.write(f"\nbertlab: received {name} after the run had ended; its results are complete in "
                         f"{metrics}: nothing to resume\n")
        sys.stderr.flush()

    for sig in stop_signals():
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(sig, handle)


def _in_multirun() -> bool:
    with contextlib.suppress(Exception):
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    return False


def sweep_command(hydra_config: Any = None) -> str | None:
    """In a multirun job: the command that runs its sweep again in the same folder (``python train.py -m
    <the sweep's own overrides> hydra.sweep.dir=<its folder>``), else None.

    The sweep's overrides (``seed=1,2,3``, not this job's ``seed=1``) come from ``<sweep dir>/multirun.yaml``,
    which Hydra writes when the sweep starts, whatever the launcher."""
    hc = hydra_config
    with contextlib.suppress(Exception):
        if hc is None:
            from hydra.core.hydra_config import HydraConfig

            hc = HydraConfig.get()
        from hydra.types import RunMode
        from omegaconf import OmegaConf

        if hc.mode != RunMode.MULTIRUN:
            return None
        sweep_dir = Path(str(hc.sweep.dir)).absolute()
        overrides = [str(o) for o in OmegaConf.load(sweep_dir / "multirun.yaml").hydra.overrides.task]
        keep = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != "hydra.sweep.dir"]
        return " ".join(["python train.py -m", *map(shlex.quote, keep), f"hydra.sweep.dir={sweep_dir}"])
    return None


def resume_command(run_dir: Path) -> str:
    """``python train.py <this run's command-line overrides> hydra.run.dir=<run_dir> ckpt_path=last``."""
    overrides: list[str] = []
    with contextlib.suppress(Exception):
        from hydra.core.hydra_config import HydraConfig

        overrides = [str(o) for o in HydraConfig.get().overrides.task]
    keep = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in ("ckpt_path", "hydra.run.dir")]
    return " ".join(["python train.py", *keep, f"hydra.run.dir={run_dir}", "ckpt_path=last"])

