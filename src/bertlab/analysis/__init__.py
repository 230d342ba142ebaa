"""Finished runs as data: reading and grouping runs (``runs``) and the statistics over seeds (``stats``) that
``python -m bertlab.compare`` and ``python -m bertlab.glue`` print."""
