"""What a config file may instantiate: every ``_target_`` bertlab hands to Hydra's ``instantiate`` (the
``callbacks``, ``logger`` and ``trainer.strategy`` nodes, and any node nested in them) must be on an
allow-list, so that an ``experiment=`` file from elsewhere cannot name ``torch.load``, ``os.system`` or
``subprocess.run`` and have it called.

Allowed without asking:

- classes of Lightning's plug-in packages (callbacks, loggers, strategies, plugins, accelerators, profilers,
  environments), of bertlab, and Optuna's samplers and pruners;
- the factory functions listed in :data:`ALLOWED_FACTORIES` (e.g. ``bertlab.training.distributed.fsdp_strategy``).

Anything else (a user's own callback class, say) needs an explicit opt-in given *outside* the config files:
``allow_targets=[mypkg.callbacks.MyCallback]`` (or a prefix ending in ``.``: ``mypkg.callbacks.``) on the
command line, or the environment variable ``BERTLAB_ALLOW_TARGETS`` (comma-separated). A config file that
sets ``allow_targets`` itself is refused: it would grant itself what the list exists to withhold.

:func:`check_targets` is reusable: the Optuna sweeper plugin can call it on its ``sampler``/``pruner`` nodes.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bertlab.runtime.config import ConfigError

ALLOW_ENV = "BERTLAB_ALLOW_TARGETS"
ALLOW_KEY = "allow_targets"

# Packages whose public classes may be instantiated from a config file.
ALLOWED_CLASS_PREFIXES = (
    "lightning.pytorch.callbacks.",
    "lightning.pytorch.loggers.",
    "lightning.pytorch.strategies.",
    "lightning.pytorch.plugins.",
    "lightning.pytorch.accelerators.",
    "lightning.pytorch.profilers.",
    "lightning.fabric.plugins.",
    "lightning.fabric.strategies.",
    "lightning.fabric.accelerators.",
    "pytorch_lightning.callbacks.",
    "pytorch_lightning.loggers.",
    "bertlab.",
    "optuna.samplers.",
    "optuna.pruners.",
)
# Functions that build one of the above.
ALLOWED_FACTORIES = frozenset({"bertlab.training.distributed.fsdp_strategy", "bertlab.distributed.fsdp_strategy"})


def _resolve(target: str) -> Any:
    """The object a dotted path names, or None. Imports only modules under the allowed prefixes (the
    caller checks the prefix first), so resolving cannot run a foreign module's import-time code."""
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for name in parts[i:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return obj
    return None


def _granted(target: str, extra: Iterable[str]) -> bool:
    return any(target == e or (e.endswith(".") and target.startswith(e)) for e in extra)


def refusal(target: str, extra: Sequence[str] = ()) -> str | None:
    """Why ``target`` may not be instantiated (None when it may)."""
    if not isinstance(target, str) or not target:
        return "it is not a dotted name"
    if _granted(target, extra):
        return None
    if target in ALLOWED_FACTORIES:
        return None
    if any(part.startswith("_") for part in target.split(".")):
        return "private names are never allowed"
    if not target.startswith(ALLOWED_CLASS_PREFIXES):
        return "it is not on bertlab's allow-list"
    obj = _resolve(target)
    if obj is None:
        return None  # Hydra's own error ("Error locating target") says it does not exist
    if not inspect.isclass(obj):
        return "only classes are allowed there, and this is a function or method"
    return None


def _walk(node: Any, where: str) -> Iterable[tuple[str, Any]]:
    if isinstance(node, Mapping):
        if "_target_" in node:
            yield where, node["_target_"]
        for key, value in node.items():
            yield from _walk(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, Sequence) and not isinstance(node, str | bytes):
        for i, value in enumerate(node):
            yield from _walk(value, f"{where}[{i}]")


def check_targets(node: Any, where: str, extra: Sequence[str] = ()) -> None:
    """Raise :class:`ConfigError` for the first ``_target_`` in ``node`` (nested ones included) that is not
    allowed; ``where`` is the node's config key (for the message), ``extra`` the user's opt-ins."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(node, DictConfig | ListConfig):
        node = OmegaConf.to_container(node, resolve=False)
    for key, target in _walk(node, where):
        why = refusal(target, extra)
        if why is not None:
            raise ConfigError(
                f"{key}._target_={target}: refused ({why}). Config nodes that bertlab instantiates (callbacks, "
                "logger, trainer.strategy, the sweeper's sampler and pruner) may only name Lightning, bertlab "
                "or Optuna classes, because a config file must not be able to run arbitrary code (e.g. "
                "torch.load of a pickle). If you trust this class, allow it on the command line: "
                f"allow_targets=[{target}] (or a package prefix ending in '.'), or set ${ALLOW_ENV}={target}"
            )


def env_allowed() -> list[str]:
    """The opt-ins of ``$BERTLAB_ALLOW_TARGETS`` (the only ones for nodes outside the job config, e.g. the
    sweeper's sampler and pruner)."""
    return [t.strip() for t in os.environ.get(ALLOW_ENV, "").split(",") if t.strip()]


def user_allowed(cfg: Any) -> list[str]:
    """The opt-ins: ``allow_targets`` given on the command line, plus ``$BERTLAB_ALLOW_TARGETS``.

    ``allow_targets`` set in a config file (not on the command line) is a :class:`ConfigError`."""
    extra = env_allowed()
    value = cfg.get(ALLOW_KEY) if hasattr(cfg, "get") else None
    if value:
        items = [str(value)] if isinstance(value, str) else [str(v) for v in value]
        if not _given_on_command_line():
            raise ConfigError(
                f"{ALLOW_KEY}={items} is set in a config file: the allow-list of classes a config may "
                f"instantiate can only be extended on the command line ({ALLOW_KEY}=[...]) or through "
                f"${ALLOW_ENV}, never by a config file itself; remove it from the file"
            )
        extra += items
    return extra


def _given_on_command_line() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return True  # library use: the caller built the config itself
        overrides = HydraConfig.get().overrides.task
    except Exception:
        return True
    return any(str(o).lstrip("+~").split("=", 1)[0] == ALLOW_KEY for o in overrides)


def check_run_config(cfg: Any) -> None:
    """Check every node of a run's config that bertlab instantiates (one call, before any of them is built)."""
    extra = user_allowed(cfg)
    for key in ("callbacks", "logger"):
        check_targets(cfg.get(key), key, extra)
    trainer = cfg.get("trainer")
    if trainer is not None:
        check_targets(trainer.get("strategy"), "trainer.strategy", extra)
        check_targets(trainer.get("plugins"), "trainer.plugins", extra)
