"""Sweeps that scale out and resume.

- :mod:`bertlab.sweeps.space`: Hydra override syntax (``choice``, ``range``, ``interval``, ``tag(log, ...)``)
  to Optuna distributions, the search space of ``hparams_search=optuna``.
- :mod:`bertlab.sweeps.study`: the study's storage (a journal file, an RDB URL) and the workers that share
  it: who runs which trial, which trials a killed worker left behind.
- :mod:`bertlab.sweeps.journal`: the journal file read the way a crash leaves it (a torn last record dropped).
- :mod:`bertlab.sweeps.trial`: the trial as seen from inside its job: reporting the monitored validation
  value, pruning, every rank training with the trial's parameters.
- :mod:`bertlab.sweeps.run_state`: every multirun job leaves a ``metrics.json`` saying its state, and a
  re-run multirun skips the jobs whose folder already holds their complete result.

The sweeper itself is the Hydra plugin ``hydra_plugins.bertlab_optuna`` (``hydra/sweeper: bertlab_optuna``).
"""
