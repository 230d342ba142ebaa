"""From files to batches: readers, tokenizer loading and training, per-family features (``Split``), the
feature cache format, collate and samplers, pre-training data, and the ``TaskDataModule``. Imports only
:mod:`bertlab.runtime` besides itself: nothing here knows models, tasks' losses or training."""
