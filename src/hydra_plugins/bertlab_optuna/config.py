"""The structured config of ``hydra/sweeper: bertlab_optuna``."""

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class BertlabOptunaSweeperConf:
    """``hydra.sweeper.*`` of ``hparams_search=optuna``.

    ``sampler`` / ``pruner``: a node with ``_target_`` (e.g. ``optuna.samplers.TPESampler``); ``pruner`` also
    takes ``median`` / ``successive_halving`` / ``hyperband`` / ``none`` (null = no pruning). ``direction``:
    ``maximize`` / ``minimize`` or a task's ``mode`` (``max`` / ``min``). ``storage``: a journal file path
    or an RDB URL (bertlab.sweeps.study). ``n_trials`` is the size of the whole study: trials already stored
    count, so running the same command again resumes. ``n_jobs``: trials this worker runs at once (through
    ``hydra/launcher``: joblib, submitit_local, submitit_slurm). ``params``: the search space, key → Hydra
    sweep syntax (``choice(...)``, ``range(...)``, ``interval(...)``, ``tag(log, interval(...))``).
    """

    _target_: str = "hydra_plugins.bertlab_optuna.optuna_sweeper.BertlabOptunaSweeper"
    # The sweeper builds the sampler and pruner itself (a GridSampler needs the parsed search space).
    _recursive_: bool = False
    sampler: Any = field(default_factory=lambda: {"_target_": "optuna.samplers.TPESampler"})
    pruner: Any = None
    direction: Any = "minimize"
    storage: Any = None
    study_name: Any = None
    n_trials: int = 20
    n_jobs: int = 1
    params: Any = None


# Hydra imports every module of the hydra_plugins namespace when it starts and reads the ConfigStore
# afterwards: registering here (an import-time side effect) is how a plugin publishes its config.
ConfigStore.instance().store(
    group="hydra/sweeper", name="bertlab_optuna", node=BertlabOptunaSweeperConf, provider="bertlab"
)
