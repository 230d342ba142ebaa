"""The search space of an Optuna sweep, written in Hydra's override syntax.

``hydra.sweeper.params`` (and sweep overrides on the command line) become Optuna distributions:

- ``choice(a, b, c)`` → categorical;
- ``range(start, stop[, step])`` → integers (or floats when any bound or the step is a float) from
  ``start`` to ``stop`` *inclusive*, every ``step`` (as hydra-optuna-sweeper read it, so existing search
  spaces keep their meaning; ``range(...)`` with ``shuffle`` becomes a categorical);
- ``interval(low, high)`` → uniform float (integers when both bounds are integers); ``tag(log, interval(...))``
  → log-uniform;
- anything else (``key=value``) is a fixed value given to every trial.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from bertlab.runtime.config import ConfigError


@dataclass
class SearchSpace:
    distributions: dict[str, BaseDistribution] = field(default_factory=dict)
    fixed: dict[str, str] = field(default_factory=dict)  # key → the override's value text

    def overrides(self, params: dict[str, Any]) -> list[str]:
        """One trial's job overrides: its sampled values, then the fixed ones."""
        return [f"{k}={_override_value(v)}" for k, v in params.items()] + [f"{k}={v}" for k, v in self.fixed.items()]

    def grid(self) -> dict[str, list[Any]]:
        """Every value of every parameter (``sampler: GridSampler``); a continuous interval has none."""
        out = {}
        for name, dist in self.distributions.items():
            if isinstance(dist, CategoricalDistribution):
                out[name] = list(dist.choices)
            elif isinstance(dist, IntDistribution | FloatDistribution) and dist.step is not None:
                n = int(round((dist.high - dist.low) / dist.step)) + 1
                out[name] = [dist.low + i * dist.step for i in range(n)]
            else:
                raise ConfigError(
                    f"hydra.sweeper.params: {name} is a continuous interval, which a GridSampler cannot enumerate; "
                    "use choice(...) or range(start, stop, step) for grid searches"
                )
        return out

    def size(self) -> int:
        return math.prod(len(v) for v in self.grid().values())


def params_to_overrides(params: Any) -> list[str]:
    """``hydra.sweeper.params`` (a mapping key → override value text) as ``key=value`` strings."""
    if not params:
        return []
    return [f"{k}={v}" for k, v in dict(params).items()]


def parse_search_space(overrides: list[str]) -> SearchSpace:
    """Search space from ``key=<sweep>`` strings; a later override of a key replaces an earlier one."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    space = SearchSpace()
    parser = OverridesParser.create()
    for override in parser.parse_overrides(overrides):
        key = override.get_key_element()
        space.distributions.pop(key, None)
        space.fixed.pop(key, None)
        if not override.is_sweep_override():
            space.fixed[key] = override.get_value_element_as_str()
            continue
        space.distributions[key] = _distribution(override)
    return space


def _distribution(override: Any) -> BaseDistribution:
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep, Transformer

    key, value = override.get_key_element(), override.value()
    if override.is_choice_sweep() or (override.is_range_sweep() and value.shuffle):
        assert isinstance(value, ChoiceSweep | RangeSweep)
        return CategoricalDistribution(list(override.sweep_iterator(transformer=Transformer.encode)))
    if override.is_range_sweep():
        assert isinstance(value, RangeSweep)
        step = value.step if value.step is not None else 1
        if any(isinstance(x, float) for x in (value.start, value.stop, step)):
            return FloatDistribution(float(value.start), float(value.stop), step=float(step))
        return IntDistribution(int(value.start), int(value.stop), step=int(step))
    if override.is_interval_sweep():
        assert isinstance(value, IntervalSweep)
        log = "log" in value.tags
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(int(value.start), int(value.end), log=log)
        if log and value.start <= 0:
            raise ConfigError(f"{key}=tag(log, interval({value.start}, {value.end})): a log scale needs low > 0")
        return FloatDistribution(float(value.start), float(value.end), log=log)
    raise ConfigError(f"{key}: the sweep {override.input_line!r} is not a choice, range or interval")


def _override_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def suggest_missing(trial: Any, distributions: dict[str, BaseDistribution]) -> list[str]:
    """Draw the parameters ``trial`` lacks (a worker killed while asking leaves a trial with only some of
    them); returns their names."""
    missing = [name for name in distributions if name not in trial.params]
    for name in missing:
        dist = distributions[name]
        if isinstance(dist, FloatDistribution):
            trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)
        elif isinstance(dist, IntDistribution):
            trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
        else:
            trial.suggest_categorical(name, list(dist.choices))
    return missing
