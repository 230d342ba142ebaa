"""bertlab's Optuna sweeper, on Optuna's public ask/tell API (no hydra-optuna-sweeper).

Hydra finds sweepers in the ``hydra_plugins`` namespace package; ``hparams_search=optuna`` selects this one
(``hydra/sweeper: bertlab_optuna``).
"""
