"""Helpers the studies' table.py scripts share: spreads over seeds, a run's overrides, the machine line."""

from __future__ import annotations

import platform
import statistics


def spread(values: list[float], fmt: str = ".4f") -> str:
    """``mean ± sample std`` over seeds; a single value as it is; ``–`` for none."""
    if not values:
        return "–"
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(statistics.mean(values), fmt)} ± {format(statistics.stdev(values), fmt)}"


def override(m: dict, key: str, default: str | None = None) -> str | None:
    """The value a recorded run (``experiments/record_runs.py``) was given for ``key`` on the command line."""
    for item in m.get("overrides", []):
        k, _, v = item.partition("=")
        if k == key:
            return v
    return default


def machine() -> str:
    import torch

    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"
