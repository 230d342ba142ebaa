"""The structured config of ``hydra/sweeper: bertlab_optuna`` (the fields of hydra-optuna-sweeper's own)."""

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_optuna_sweeper.config import OptunaSweeperConf


@dataclass
class BertlabOptunaSweeperConf(OptunaSweeperConf):
    """As ``hydra/sweeper: optuna``, with bertlab's sweeper and semantics.

    ``n_trials`` is the size of the whole study: trials already in ``storage`` (from an earlier or
    interrupted sweep) count, so running the same command again resumes. ``direction`` also takes a task's
    ``mode`` (``max`` / ``min``). ``n_jobs`` is how many trials are asked before any is told (1 = sequential).
    """

    _target_: str = "hydra_plugins.bertlab_optuna.optuna_sweeper.BertlabOptunaSweeper"
    n_jobs: int = 1


# Hydra imports every module of the hydra_plugins namespace when it starts and reads the ConfigStore
# afterwards: registering here (an import-time side effect) is how a plugin publishes its config.
ConfigStore.instance().store(
    group="hydra/sweeper", name="bertlab_optuna", node=BertlabOptunaSweeperConf, provider="bertlab"
)
