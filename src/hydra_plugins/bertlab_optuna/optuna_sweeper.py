"""An Optuna sweeper that records crashed and NaN trials as failed, carries on, and resumes a stored study.

hydra-optuna-sweeper 1.2.0 (the last release for optuna 2.x) ends the whole sweep on the first trial whose
job raised (a diverged run: ``NonFiniteLossError``) or returned NaN — for NaN it even fails while recording
the failure (``Values were told ... when state is FAIL``, ../shared/docs/PITFALLS.md). This sweeper reuses the
plugin's search-space parsing and trial configuration and replaces its loop:

- a job that raised, or returned None / NaN / inf / a non-number, is told ``TrialState.FAIL`` (the reason is
  kept in the trial's ``fail_reason`` user attribute and logged) and the sweep goes on;
- ``n_trials`` is the size of the study, so with a persistent ``storage`` (``hparams_search=optuna`` puts an
  sqlite file in the sweep dir) running the same command again resumes: finished trials count, trials a
  killed sweep left RUNNING are marked failed, and new jobs are numbered after the stored trials
  (job folder ``<n>`` = trial number ``n``);
- ``optimization_results.yaml`` in the sweep dir has the plugin's ``best_params`` / ``best_value`` plus every
  trial's state, value and parameters (written even when all trials failed; the sweep then exits with an
  error).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_optuna_sweeper._impl import OptunaSweeperImpl, create_params_from_overrides
from omegaconf import OmegaConf
from optuna.trial import TrialState

log = logging.getLogger(__name__)

_DIRECTIONS = {"max": "maximize", "maximize": "maximize", "min": "minimize", "minimize": "minimize"}
_FINISHED = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)


def normalize_direction(direction: str) -> str:
    """``max``/``maximize`` → ``maximize``, ``min``/``minimize`` → ``minimize`` (a task's ``mode`` works)."""
    try:
        return _DIRECTIONS[str(direction).lower()]
    except KeyError:
        raise ValueError(f"hydra.sweeper.direction must be one of {sorted(_DIRECTIONS)}, got {direction!r}") \
            from None


def trial_values(ret: JobReturn, n_objectives: int) -> tuple[list[float] | None, str | None]:
    """A finished job's objective values, or ``(None, why)`` when the trial has to be recorded as failed."""
    if ret.status != JobStatus.COMPLETED:
        error = ret._return_value  # the job's exception (``ret.return_value`` would re-raise it)
        return None, f"the job raised {type(error).__name__}: {error}"
    value = ret.return_value
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


def _sqlite_parent(storage: Any) -> Path | None:
    """The folder of an ``sqlite:///<path>`` storage (it must exist before optuna opens the file)."""
    url = str(storage) if storage is not None else ""
    if not url.startswith("sqlite:///") or url.endswith(":memory:"):
        return None
    return Path(url[len("sqlite:///"):]).parent


class BertlabOptunaSweeper(OptunaSweeperImpl):
    """``hydra/sweeper: bertlab_optuna``; same constructor (and config fields) as hydra-optuna-sweeper's."""

    def sweep(self, arguments: list[str]) -> None:
        assert self.config is not None and self.launcher is not None
        self._process_searchspace_config()
        params_conf = self._parse_sweeper_params_config() + list(arguments)
        distributions, fixed_params = create_params_from_overrides(params_conf)
        for name in fixed_params:
            distributions.pop(name, None)
        self._grid = getattr(self.sampler, "func", None) is optuna.samplers.GridSampler
        if self._grid:
            grid = {name: self._to_grid_sampler_choices(d) for name, d in distributions.items()}
            self.sampler = self.sampler(grid)
            self.n_trials = min(self.n_trials, math.prod(len(v) for v in grid.values()))
        directions = [normalize_direction(d) for d in self._get_directions()]

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        db_dir = _sqlite_parent(self.storage)
        if db_dir is not None:
            db_dir.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # optuna 2.x's RDB models use SQLAlchemy 1.4 APIs that 2.0 removed; sqlalchemy<2 is pinned.
            warnings.filterwarnings("ignore", message="Deprecated API features detected")
            study = optuna.create_study(study_name=self.study_name, storage=self.storage, sampler=self.sampler,
                                        directions=directions, load_if_exists=True)
        done = self._prepare_resume(study)
        # Job folders continue after the stored trials, so job number n is trial number n.
        self.job_idx = len(study.trials)
        log.info("Study %s (storage %s, sampler %s, %s): %d of %d trials done", study.study_name, self.storage,
                 type(study.sampler).__name__, "/".join(directions), done, self.n_trials)

        while done < self.n_trials:
            batch = min(self.n_trials - done, max(1, self.n_jobs))
            trials = [study.ask() for _ in range(batch)]
            overrides = self._configure_trials(trials, distributions, fixed_params)
            returns = self.launcher.launch(overrides, initial_job_idx=self.job_idx)
            self.job_idx += len(returns)
            for trial, ret in zip(trials, returns):
                self._tell(study, trial, ret, len(directions))
            done += batch

        self._write_results(study, sweep_dir, directions)

    def _prepare_resume(self, study: optuna.Study) -> int:
        """Fail the trials a killed sweep left RUNNING; return how many trials are finished."""
        trials = study.get_trials(deepcopy=False)
        for t in trials:
            if t.state == TrialState.RUNNING:
                log.warning("Trial %d was left running by an earlier sweep: recording it as failed", t.number)
                study._storage.set_trial_user_attr(t._trial_id, "fail_reason", "interrupted")
                study.tell(t.number, state=TrialState.FAIL)
        if trials and not self._grid and hasattr(study.sampler, "reseed_rng"):
            # A seeded sampler in a new process would replay the first trials' random draws.
            study.sampler.reseed_rng()
        return sum(t.state in _FINISHED for t in study.get_trials(deepcopy=False))

    def _tell(self, study: optuna.Study, trial: optuna.Trial, ret: JobReturn, n_objectives: int) -> None:
        values, reason = trial_values(ret, n_objectives)
        if values is None:
            error = ret._return_value if ret.status != JobStatus.COMPLETED else None
            log.error("Trial %d (%s) failed: %s", trial.number, " ".join(ret.overrides or ()), reason,
                      exc_info=error if isinstance(error, BaseException) else None)
            trial.set_user_attr("fail_reason", reason)
            study.tell(trial, state=TrialState.FAIL)
            return
        try:
            study.tell(trial, values=values)
        except RuntimeError as e:
            # GridSampler stops the study from inside tell once the grid is exhausted.
            if "`Study.stop` is supposed to be invoked" not in str(e):
                raise

    def _write_results(self, study: optuna.Study, sweep_dir: Path, directions: list[str]) -> None:
        trials = study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        results: dict[str, Any] = {"name": "optuna", "study_name": study.study_name,
                                   "storage": str(self.storage) if self.storage else None,
                                   "directions": directions}
        if len(directions) == 1:
            best = study.best_trial if complete else None
            results.update(best_params=best.params if best else None, best_value=best.value if best else None,
                           best_trial=best.number if best else None)
        else:
            results["solutions"] = [{"params": t.params, "values": t.values, "trial": t.number}
                                    for t in study.best_trials]
        results["n_trials"] = {state.name.lower(): sum(t.state == state for t in trials) for state in _FINISHED}
        results["trials"] = [
            {"number": t.number, "state": t.state.name, "values": t.values, "params": t.params,
             **({"fail_reason": t.user_attrs["fail_reason"]} if "fail_reason" in t.user_attrs else {})}
            for t in trials
        ]
        path = sweep_dir / "optimization_results.yaml"
        OmegaConf.save(OmegaConf.create(results), path)
        if not complete:
            raise RuntimeError(f"All {len(trials)} trials of study {study.study_name!r} failed; see {path}")
        if len(directions) == 1:
            log.info("Best trial %d: value %s, params %s (%s)", results["best_trial"], results["best_value"],
                     results["best_params"], path)
