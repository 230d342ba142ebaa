"""bertlab's Optuna sweeper: the hydra-optuna-sweeper plugin, made to survive failed trials and to resume.

Hydra finds sweepers in the ``hydra_plugins`` namespace package; ``hparams_search=optuna`` selects this one
(``hydra/sweeper: bertlab_optuna``).
"""
