"""The Optuna trial as seen from inside its job (any launcher, any rank).

The sweeper tells each job which trial it is through three environment variables, set with the job's Hydra
overrides ``hydra.job.env_set.*`` (so they reach a joblib worker, a submitit job and DDP ranks alike, and the
job's ``.hydra/overrides.yaml`` keeps only the trial's parameters):

- ``BERTLAB_OPTUNA_TRIAL``: the trial number;
- ``BERTLAB_OPTUNA_STUDY``: the study name;
- ``BERTLAB_OPTUNA_STORAGE``: the storage (a journal file or an RDB URL; empty for an in-memory study, which
  only a job running in the sweeper's own process can reach).

:class:`OptunaTrialCallback` (added to ``callbacks`` by ``hparams_search=optuna``) then

- at setup: rank 0 reads the trial's parameters from the study and broadcasts them; every rank logs them next
  to the values it trains with and refuses to train with others (``ConfigError``);
- after every validation during fit: rank 0 reports the monitored value to the trial and asks the pruner;
  the decision is broadcast, and a pruned trial stops training on every rank (its run still ends as usual:
  best checkpoint, ``metrics.json``). Only rank 0 writes to the study; the sweeper tells the outcome.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from bertlab.runtime.config import ConfigError

log = logging.getLogger(__name__)

TRIAL_ENV = "BERTLAB_OPTUNA_TRIAL"
STUDY_ENV = "BERTLAB_OPTUNA_STUDY"
STORAGE_ENV = "BERTLAB_OPTUNA_STORAGE"
PRUNED_ATTR = "pruned"  # trial user attribute {"step": ..., "value": ...}, written by the job's rank 0


@dataclass
class JobOutcome:
    """What this process's current job did, for the ``metrics.json`` state (bertlab.sweeps.run_state)."""

    trial: int | None = None
    pruned: dict[str, Any] | None = None
    skipped: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


OUTCOME = JobOutcome()
# Studies opened by a sweeper in this process: a job the basic launcher runs here uses the same objects.
_IN_PROCESS: dict[str, tuple[Any, Any]] = {}


def reset_outcome() -> None:
    global OUTCOME
    OUTCOME = JobOutcome(trial=trial_number())


def trial_number() -> int | None:
    value = os.environ.get(TRIAL_ENV)
    return int(value) if value not in (None, "") else None


def env_overrides(trial: int, study_name: str, storage: str | None) -> list[str]:
    """The Hydra overrides that hand the trial to its job (see the module docstring)."""
    return [f"++hydra.job.env_set.{TRIAL_ENV}={trial}", f"++hydra.job.env_set.{STUDY_ENV}={_quote(study_name)}",
            f"++hydra.job.env_set.{STORAGE_ENV}={_quote(storage or '')}"]


def register_in_process(study: Any, storage: Any) -> None:
    _IN_PROCESS[study.study_name] = (study, storage)


def open_trial() -> Any | None:
    """The running trial of this job (an :class:`optuna.Trial`), or None outside an Optuna sweep."""
    number = trial_number()
    if number is None:
        return None
    import optuna

    from bertlab.sweeps.study import open_storage, trial_handle

    name = os.environ.get(STUDY_ENV, "")
    if name in _IN_PROCESS:
        study, storage = _IN_PROCESS[name]
    else:
        text = os.environ.get(STORAGE_ENV) or None
        if text is None:
            log.warning("trial %d: the study is in memory in another process; no pruning (give the sweep a "
                        "storage: hydra.sweeper.storage=<file>)", number)
            return None
        storage = open_storage(text)
        study = optuna.load_study(study_name=name, storage=storage)
    return trial_handle(study, storage, number)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _select(tree: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def _same(a: Any, b: Any) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    except (TypeError, ValueError):
        return str(a) == str(b)


class OptunaTrialCallback(Callback):
    """Report the monitored validation metric to the job's Optuna trial and stop the run when it is pruned.

    Does nothing outside an Optuna sweep (no ``BERTLAB_OPTUNA_TRIAL``), so ``callbacks`` may keep it.
    """

    def __init__(self, monitor: str):
        self.monitor = monitor
        self.trial: Any | None = None
        self.number: int | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.number = trial_number()
        if self.number is None or stage != "fit":
            return
        params = None
        if trainer.is_global_zero:
            self.trial = open_trial()
            params = self.trial.params if self.trial is not None else None
        params = trainer.strategy.broadcast(params, src=0)
        if params is None:
            return
        config = (pl_module.hparams or {}).get("config") or {}
        own = {k: _select(config, k) for k in params}
        log.info("optuna trial %d, rank %d: hyper-parameters %s", self.number, trainer.global_rank,
                 ", ".join(f"{k}={v}" for k, v in own.items()))
        wrong = [k for k, v in own.items() if not isinstance(v, dict | list | type(None)) and not _same(v, params[k])]
        if wrong:
            raise ConfigError(
                f"optuna trial {self.number}: rank {trainer.global_rank} trains with "
                + ", ".join(f"{k}={own[k]}" for k in wrong) + " but the study asked for "
                + ", ".join(f"{k}={params[k]}" for k in wrong)
                + "; every rank of a trial must run the job's own overrides (launch the sweep from one "
                "process: trainer=ddp / ddp_cpu, or hydra/launcher=submitit_slurm with tasks_per_node)"
            )

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        from lightning.pytorch.trainer.states import TrainerFn

        if self.number is None or trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        prune, value = False, None
        if trainer.is_global_zero and self.trial is not None:
            metric = trainer.callback_metrics.get(self.monitor)
            value = float(metric) if metric is not None else None
            if value is not None and math.isfinite(value):
                self.trial.report(value, step=trainer.global_step)
                prune = self.trial.should_prune()
        prune = trainer.strategy.broadcast(prune, src=0)
        if not prune:
            return
        trainer.should_stop = True
        OUTCOME.pruned = {"step": trainer.global_step, "value": value}
        if trainer.is_global_zero:
            self.trial.set_user_attr(PRUNED_ATTR, OUTCOME.pruned)
            log.info("optuna trial %d pruned at step %d (%s=%s): training stops here", self.number,
                     trainer.global_step, self.monitor, value)
