"""What a config file may instantiate: every ``_target_`` bertlab hands to Hydra's ``instantiate`` (the
``callbacks``, ``logger`` and ``trainer.strategy`` nodes, and any node nested in them) must be on an
allow-list, so that an ``experiment=`` file from elsewhere cannot name ``torch.load``, ``os.system`` or
``subprocess.run`` and have it called.

Allowed without asking:

- classes of Lightning's plug-in packages (callbacks, loggers, strategies, plugins, accelerators, profilers,
  environments), of bertlab, and Optuna's samplers and pruners;
- the factory functions listed in :data:`ALLOWED_FACTORIES` (e.g. ``bertlab.training.distributed.fsdp_strategy``).

A class is judged by where it is defined (``logging.FileHandler``), never by the path that reached it: a
path that starts in an allowed package can walk through a module that package imports
(``lightning.pytorch.callbacks.model_checkpoint.logging.FileHandler``) to any class at all.

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
ALLOWED_FACTORIES = frozenset({"bertlab.training.distributed.fsdp_strategy"})
# Targets whose home moved, as saved run configs still name them: rewritten to the new home before checking.
MOVED_TARGETS = {"bertlab.distributed.fsdp_strategy": "bertlab.training.distributed.fsdp_strategy"}


def _resolve(target: str) -> Any:
    """The object a dotted path names, found as Hydra's ``instantiate`` finds it (attribute first, then a
    submodule import), or None. The caller checks the path's prefix first, so only modules under an allowed
    (or granted) package are imported: resolving cannot run a foreign module's import-time code."""
    try:
        from hydra._internal.utils import _locate
    except ImportError:  # pragma: no cover - Hydra moved it: the same walk, by hand
        _locate = _walk_path
    try:
        return _locate(target)
    except Exception:
        return None


def _walk_path(target: str) -> Any:
    parts = target.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj


def identity(obj: Any) -> str | None:
    """Where ``obj`` is defined: ``<its module>.<its qualified name>`` (``logging.FileHandler`` however it was
    reached), or None when it has none (a local class, an instance)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    return f"{module}.{qualname}"


def _granted(target: str, extra: Iterable[str]) -> bool:
    return any(target == e or (e.endswith(".") and target.startswith(e)) for e in extra)


def _allowed_path(name: str, extra: Iterable[str]) -> bool:
    return name in ALLOWED_FACTORIES or name.startswith(ALLOWED_CLASS_PREFIXES) or _granted(name, extra)


def refusal(target: str, extra: Sequence[str] = ()) -> str | None:
    """Why ``target`` may not be instantiated (None when it may).

    The path decides only what may be imported to look at it; what is allowed is the object it leads to, by
    its real identity (defining module and qualified name). A path that starts in an allowed package can pass
    through a module that package imports (``lightning.pytorch.accelerators.cuda.subprocess.Popen``) and name
    any class at all. A user's exact opt-in (``allow_targets=[x.y.Z]``) grants that path as given.
    """
    if not isinstance(target, str) or not target:
        return "it is not a dotted name"
    if target in extra:
        return None
    if any(part.startswith("_") for part in target.split(".")):
        return "private names are never allowed"
    if not _allowed_path(target, extra):
        return "it is not on bertlab's allow-list"
    obj = _resolve(target)
    if obj is None:
        return None  # Hydra's own error ("Error locating target") says it does not exist
    real = identity(obj)
    prefixes = [e for e in extra if e.endswith(".")]
    # The home must be allowed too, and must lead back to this very object (a class that names another
    # module as its home is judged by neither name).
    home_allowed = real is not None and _allowed_path(real, prefixes) and _resolve(real) is obj
    if target in ALLOWED_FACTORIES and real in ALLOWED_FACTORIES and home_allowed:
        return None
    if not inspect.isclass(obj):
        return "only classes are allowed there, and this is a function or method"
    if not home_allowed:
        return (f"the path leads to {real or repr(obj)} (defined in {getattr(obj, '__module__', '?')}), which is "
                "not on bertlab's allow-list: the list holds classes by where they are defined, not by a path "
                "through another module's imports")
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


def migrate_moved(node: Any) -> None:
    """Rewrite, in place, every ``_target_`` of ``node`` that names a moved home (:data:`MOVED_TARGETS`): a
    config saved by an older bertlab keeps building the same object."""
    if isinstance(node, Mapping) or hasattr(node, "items"):
        for key, value in list(node.items()):
            if key == "_target_" and isinstance(value, str) and value in MOVED_TARGETS:
                node[key] = MOVED_TARGETS[value]
            elif not isinstance(value, str | bytes | int | float | bool | type(None)):
                migrate_moved(value)
    elif isinstance(node, Sequence) and not isinstance(node, str | bytes):
        for value in node:
            migrate_moved(value)


def check_run_config(cfg: Any) -> None:
    """Check every node of a run's config that bertlab instantiates (one call, before any of them is built);
    older homes of moved targets are rewritten first (:func:`migrate_moved`)."""
    migrate_moved(cfg)
    extra = user_allowed(cfg)
    for key in ("callbacks", "logger"):
        check_targets(cfg.get(key), key, extra)
    trainer = cfg.get("trainer")
    if trainer is not None:
        check_targets(trainer.get("strategy"), "trainer.strategy", extra)
        check_targets(trainer.get("plugins"), "trainer.plugins", extra)
