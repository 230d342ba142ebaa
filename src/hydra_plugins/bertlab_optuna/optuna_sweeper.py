"""bertlab's Optuna sweeper: ask a trial, launch its job, tell the outcome (Optuna's public ask/tell API).

- Search space: ``hydra.sweeper.params`` plus sweep overrides on the command line (bertlab.sweeps.space);
  plain overrides are given to every trial.
- A job that raised, or returned None / NaN / inf / a non-number, is told ``TrialState.FAIL`` (the reason in
  the trial's ``fail_reason`` user attribute, and logged) and the sweep goes on. A job whose run the pruner
  stopped (bertlab.sweeps.trial) is told ``PRUNED``; Optuna records its last reported value.
- ``n_trials`` is the size of the study. With a persistent ``storage`` running the same command again
  resumes: finished trials count and are not run again; a trial a killed worker left RUNNING is run again
  under its own number and folder; new trials are numbered after the stored ones (job folder ``<n>`` =
  trial number ``n``).
- Several workers (the same command started several times, on one machine or on many) share the study:
  each asks for the next trial while fewer than ``n_trials`` are finished or running (bertlab.sweeps.study).
  ``n_jobs`` trials of one worker run at once through ``hydra/launcher``.
- DDP: the sweeper (one process) asks the study; a trial's ranks are started for its job with the job's
  overrides (Lightning re-runs the job's command line for ``trainer=ddp``, SLURM runs the pickled job on
  every task for ``submitit_slurm``), so every rank trains with the trial's parameters, and only rank 0
  reports to the trial (bertlab.sweeps.trial checks the ranks agree). A sweep started once per rank is refused.
- ``optimization_results.yaml`` in the sweep dir: ``best_params`` / ``best_value`` / ``best_trial`` plus every
  trial's state, value and parameters (written even when all trials failed; the sweep then exits with an
  error).
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig, OmegaConf
from optuna.trial import TrialState

from bertlab.runtime.config import ConfigError
from bertlab.runtime.targets import check_targets, env_allowed
from bertlab.sweeps import study as study_mod
from bertlab.sweeps.space import SearchSpace, params_to_overrides, parse_search_space, suggest_missing

log = logging.getLogger(__name__)

_DIRECTIONS = {"max": "maximize", "maximize": "maximize", "min": "minimize", "minimize": "minimize"}


def _trial():
    """:mod:`bertlab.sweeps.trial`, imported on first use: it loads Lightning (seconds), and Hydra imports this
    module at every start of train.py to discover its plugins, ``--help`` and mistyped keys included."""
    from bertlab.sweeps import trial

    return trial


_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
WORKER_ATTR = "worker"
_PRUNERS = {
    "median": "optuna.pruners.MedianPruner",
    "successive_halving": "optuna.pruners.SuccessiveHalvingPruner",
    "hyperband": "optuna.pruners.HyperbandPruner",
    "none": "optuna.pruners.NopPruner",
}


def normalize_direction(direction: str) -> str:
    """``max``/``maximize`` → ``maximize``, ``min``/``minimize`` → ``minimize`` (a task's ``mode`` works)."""
    try:
        return _DIRECTIONS[str(direction).lower()]
    except KeyError:
        raise ValueError(f"hydra.sweeper.direction must be one of {sorted(_DIRECTIONS)}, got {direction!r}") \
            from None


def trial_values(ret: JobReturn, n_objectives: int) -> tuple[list[float] | None, str | None]:
    """A finished job's objective values, or ``(None, why)`` when the trial has to be recorded as failed."""
    try:
        value = ret.return_value  # re-raises the job's exception
    except Exception as error:
        return None, f"the job raised {type(error).__name__}: {error}"
    raw = list(value) if n_objectives > 1 and isinstance(value, Sequence) else [value]
    if len(raw) != n_objectives:
        return None, f"the job returned {value!r}, expected {n_objectives} value(s)"
    try:
        values = [float(v) for v in raw]
    except (TypeError, ValueError):
        return None, f"the job returned {value!r}, not a number"
    if not all(math.isfinite(v) for v in values):
        return None, f"the job returned a non-finite value {value!r}"
    return values, None


def build_pruner(pruner: Any) -> optuna.pruners.BasePruner:
    """``hydra.sweeper.pruner``: null (no pruning), a name (median, successive_halving, hyperband, none) or a
    node with ``_target_``."""
    import hydra

    if pruner is None:
        return optuna.pruners.NopPruner()  # not Optuna's default (a MedianPruner): no pruning unless asked
    if isinstance(pruner, str):
        if pruner.lower() not in _PRUNERS:
            raise ConfigError(f"hydra.sweeper.pruner={pruner}: use one of {', '.join(_PRUNERS)}, null, or a node "
                              "with _target_ (e.g. optuna.pruners.MedianPruner)")
        pruner = {"_target_": _PRUNERS[pruner.lower()]}
    check_targets(pruner, "hydra.sweeper.pruner", env_allowed())  # a config file must not run arbitrary code
    return hydra.utils.instantiate(pruner)


def refuse_rank_launched_sweep() -> None:
    """A sweep started once per rank (torchrun / srun around the sweep command) would make every rank a
    worker asking the study for a trial of its own: the ranks of one DDP group would train with different
    parameters. The sweep runs in one process; the ranks are started per trial (module docstring)."""
    world = int(os.environ.get("WORLD_SIZE") or 1)
    slurm_tasks = int(os.environ.get("SLURM_NTASKS") or 1) if os.environ.get("SLURM_PROCID") else 1
    if world > 1 or slurm_tasks > 1:
        raise ConfigError(
            f"hparams_search=optuna was started as one of {max(world, slurm_tasks)} ranks (torchrun or srun "
            "around the sweep command): every rank would ask the study for a different trial. Start the sweep "
            "as one process and let each trial start its ranks: trainer=ddp / ddp_cpu (Lightning starts them "
            "on this machine), or hydra/launcher=submitit_slurm with hydra.launcher.tasks_per_node=<devices> "
            "(SLURM starts them per trial); see docs/sweeps.md"
        )


def _is_grid(sampler: Any) -> bool:
    target = sampler.get("_target_", "") if isinstance(sampler, dict | DictConfig) else ""
    return str(target).rsplit(".", 1)[-1] == "GridSampler"


class BertlabOptunaSweeper(Sweeper):
    """``hydra/sweeper: bertlab_optuna``; see the module docstring and ``BertlabOptunaSweeperConf``."""

    def __init__(self, sampler: Any = None, pruner: Any = None, direction: Any = "minimize", storage: Any = None,
                 study_name: Any = None, n_trials: int = 20, n_jobs: int = 1, params: Any = None) -> None:
        self.sampler_conf = sampler
        self.pruner_conf = pruner
        directions = list(direction) if isinstance(direction, ListConfig | list | tuple) else [direction]
        self.directions = [normalize_direction(d) for d in directions]
        self.storage = str(storage) if storage not in (None, "") else None
        self.study_name = str(study_name) if study_name is not None else None
        self.n_trials = int(n_trials)
        self.n_jobs = max(1, int(n_jobs))
        self.params = OmegaConf.to_container(params, resolve=True) if isinstance(params, DictConfig) else params
        self.config: DictConfig | None = None
        self.launcher: Any = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    # ------------------------------------------------------------------------------------------------
    def sweep(self, arguments: list[str]) -> None:
        """The sweep; a user error of the sweep itself (its storage, sampler or pruner; a damaged journal) is one
        paragraph and exit status 1, as a job's (``HYDRA_FULL_ERROR=1`` keeps the traceback)."""
        from bertlab.runtime.errors import user_error_types

        try:
            self._sweep(arguments)
        except user_error_types() as err:
            if os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            sys.stderr.write(f"\nbertlab: error: {err}\n")
            sys.stderr.flush()
            sys.exit(1)

    def _sweep(self, arguments: list[str]) -> None:
        assert self.config is not None and self.launcher is not None
        refuse_rank_launched_sweep()
        space = parse_search_space(params_to_overrides(self.params) + list(arguments))
        n_trials = self.n_trials
        grid = _is_grid(self.sampler_conf)
        if grid:
            n_trials = min(n_trials, space.size())
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if self.storage is not None and not study_mod.is_rdb_url(self.storage):
            self.storage = str(Path(self.storage).expanduser().resolve())  # the jobs may run elsewhere
        storage = study_mod.open_storage(self.storage) or optuna.storages.InMemoryStorage()

        with study_mod.Worker(sweep_dir) as worker:
            with worker.study_lock():
                others = worker.others()
                study_mod.check_storage_for_workers(self.storage, self.n_jobs, others)
                study = optuna.create_study(
                    study_name=self.study_name, storage=storage, sampler=self._sampler(space, grid),
                    pruner=build_pruner(self.pruner_conf), directions=self.directions, load_if_exists=True)
                stored = study.get_trials(deepcopy=False)
                if (stored or others) and not grid and hasattr(study.sampler, "reseed_rng"):
                    # A seeded sampler in a second process would replay the first one's random draws.
                    study.sampler.reseed_rng()
            _trial().register_in_process(study, storage)
            done = sum(t.state in _FINISHED for t in stored)
            log.info("Study %s (storage %s, sampler %s, pruner %s, %s): %d of %d trials finished; worker %s%s",
                     study.study_name, study_mod.describe(self.storage), type(study.sampler).__name__,
                     type(study.pruner).__name__, "/".join(self.directions), done, n_trials, worker.id,
                     f" (with {len(others)} other worker(s))" if others else "")
            while True:
                with worker.study_lock():
                    batch = self._claim(study, storage, worker, space, n_trials)
                if not batch:
                    break
                for trial, ret in zip(batch, self._launch(batch, space, study.study_name)):
                    self._tell(study, trial, ret)
            with worker.study_lock():
                self._write_results(study, sweep_dir, worker)

    def _sampler(self, space: SearchSpace, grid: bool) -> optuna.samplers.BaseSampler:
        import hydra

        conf = self.sampler_conf or {"_target_": "optuna.samplers.TPESampler"}
        check_targets(conf, "hydra.sweeper.sampler", env_allowed())
        return hydra.utils.instantiate(conf, search_space=space.grid()) if grid else hydra.utils.instantiate(conf)

    def _claim(self, study: optuna.Study, storage: Any, worker: study_mod.Worker, space: SearchSpace,
               n_trials: int) -> list[optuna.Trial]:
        """This worker's next trials: ones a killed worker left RUNNING first, then new ones while fewer than
        ``n_trials`` trials are finished or running (in any worker)."""
        trials = study.get_trials(deepcopy=False)
        batch = []
        for t in trials:
            if len(batch) < self.n_jobs and t.state == TrialState.RUNNING \
                    and not worker.alive(t.user_attrs.get(WORKER_ATTR)):
                log.warning("Trial %d was left running by a worker that stopped (%s): running it again, with "
                            "the same parameters, in the same folder", t.number, t.user_attrs.get(WORKER_ATTR))
                handle = study_mod.trial_handle(study, storage, t.number)
                handle.set_user_attr(WORKER_ATTR, worker.id)
                drawn = suggest_missing(handle, space.distributions)  # killed while asking
                if drawn:
                    log.warning("Trial %d had no value yet for %s: drawn now", t.number, ", ".join(drawn))
                batch.append(handle)
        counted = sum(t.state != TrialState.WAITING for t in trials)
        for _ in range(min(n_trials - counted, self.n_jobs - len(batch))):
            handle = study.ask(fixed_distributions=space.distributions)
            handle.set_user_attr(WORKER_ATTR, worker.id)
            batch.append(handle)
        return batch

    def _launch(self, batch: list[optuna.Trial], space: SearchSpace, study_name: str) -> list[JobReturn]:
        """Launch the trials' jobs; job folder ``<n>`` is trial ``n`` (a run of consecutive numbers per launch)."""
        runs: list[list[optuna.Trial]] = []
        for trial in sorted(batch, key=lambda t: t.number):
            if runs and runs[-1][-1].number + 1 == trial.number:
                runs[-1].append(trial)
            else:
                runs.append([trial])
        by_number: dict[int, JobReturn] = {}
        for run in runs:
            overrides = [space.overrides(t.params) + _trial().env_overrides(t.number, study_name, self.storage)
                         for t in run]
            for trial, ret in zip(run, self.launcher.launch(overrides, initial_job_idx=run[0].number)):
                by_number[trial.number] = ret
        return [by_number[t.number] for t in batch]

    def _tell(self, study: optuna.Study, trial: optuna.Trial, ret: JobReturn) -> None:
        frozen = next(t for t in study.get_trials(deepcopy=False) if t.number == trial.number)
        try:
            _ = ret.return_value
            error: BaseException | None = None
        except Exception as e:
            error = e
        if isinstance(error, optuna.TrialPruned) or _trial().PRUNED_ATTR in frozen.user_attrs:
            pruned = frozen.user_attrs.get(_trial().PRUNED_ATTR) or {}
            log.info("Trial %d pruned at step %s (value %s)", trial.number, pruned.get("step"), pruned.get("value"))
            study.tell(trial.number, state=TrialState.PRUNED)
            return
        values, reason = trial_values(ret, len(self.directions))
        if values is None:
            log.error("Trial %d (%s) failed: %s", trial.number, " ".join(ret.overrides or ()), reason,
                      exc_info=error)
            trial.set_user_attr("fail_reason", reason)
            study.tell(trial.number, state=TrialState.FAIL)
            return
        try:
            study.tell(trial.number, values=values)
        except RuntimeError as e:
            # GridSampler stops the study from inside tell once the grid is exhausted.
            if "`Study.stop` is supposed to be invoked" not in str(e):
                raise

    def _write_results(self, study: optuna.Study, sweep_dir: Path, worker: study_mod.Worker) -> None:
        trials = study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        results: dict[str, Any] = {"name": "optuna", "study_name": study.study_name,
                                   "storage": study_mod.describe(self.storage) if self.storage else None,
                                   "directions": self.directions}
        if len(self.directions) == 1:
            best = study.best_trial if complete else None
            results.update(best_params=best.params if best else None, best_value=best.value if best else None,
                           best_trial=best.number if best else None)
        else:
            results["solutions"] = [{"params": t.params, "values": t.values, "trial": t.number}
                                    for t in study.best_trials]
        states = (*_FINISHED, TrialState.RUNNING)
        results["n_trials"] = {state.name.lower(): sum(t.state == state for t in trials) for state in states}
        results["trials"] = [
            {"number": t.number, "state": t.state.name, "values": t.values, "params": t.params,
             **({"fail_reason": t.user_attrs["fail_reason"]} if "fail_reason" in t.user_attrs else {}),
             **({"pruned": t.user_attrs[_trial().PRUNED_ATTR]} if _trial().PRUNED_ATTR in t.user_attrs else {})}
            for t in trials
        ]
        path = sweep_dir / "optimization_results.yaml"
        tmp = path.with_name(path.name + ".tmp")
        OmegaConf.save(OmegaConf.create(results), tmp)
        tmp.replace(path)
        running = results["n_trials"]["running"]
        if not complete and not running:
            raise RuntimeError(f"All {len(trials)} trials of study {study.study_name!r} failed; see {path}")
        if len(self.directions) == 1 and complete:
            log.info("Best trial %d: value %s, params %s (%s)", results["best_trial"], results["best_value"],
                     results["best_params"], path)
        if running:
            log.info("%d trial(s) still run in other workers; %s is rewritten by the last worker", running, path)
