"""Unknown configuration keys, caught with a suggestion instead of a traceback.

- On the command line (``data.max_train_sample=10``): :func:`check_command_line` composes the config the
  way ``train.py`` will, before Hydra starts, and turns Hydra's "Could not override ... not in struct" into
  one paragraph naming the key, the nearest valid one and how to list them all.
- Added with ``+`` (``+data.max_train_sample=10``) or from a config file: :func:`build_typed` refuses keys
  the typed config does not have, with the same suggestion, instead of a ``TypeError`` traceback.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from bertlab.runtime.config import ConfigError

T = TypeVar("T")

# Hydra's own flags that take a value or change what is composed: with these the check steps aside.
_HYDRA_FLAGS_WITH_VALUES = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd", "--cfg", "-c",
                            "--package", "-p", "--info", "-i", "--experimental-rerun", "--shell-completion", "-sc",
                            "--help", "-h", "--hydra-help", "--version", "--run", "-r")
_PREFIX = {"ADD": "+", "FORCE_ADD": "++", "DEL": "~"}


def list_keys_hint(section: str | None = None) -> str:
    if section:
        return f"`python train.py --cfg job --package {section}` lists the keys of {section}"
    return "`python train.py --cfg job` lists every key"


def nearest(name: str, candidates: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_key_message(key: str, known: Iterable[str], where: str) -> str:
    """One paragraph: ``key`` (given ``where``) is not a configuration key; the nearest one; how to list."""
    known = sorted(set(known))
    section, _, name = key.rpartition(".")
    siblings = [k for k in known if k.rpartition(".")[0] == section] if section else known
    guess = nearest(key, siblings) or nearest(key, known)
    if guess is None and section:  # a short name may be close to a sibling's last part
        by_name = {k.rpartition(".")[2]: k for k in siblings}
        close = nearest(name, by_name)
        guess = by_name[close] if close else None
    suggestion = f" Did you mean {guess}?" if guess else ""
    return (f"unknown configuration key {key} ({where}).{suggestion} {list_keys_hint(section or None)}; "
            "a new key can be added with +key=value only when your own code (a callback, a logger) reads it")


def flat_keys(node: Any, prefix: str = "") -> list[str]:
    """Every dotted key of a config tree (mappings only; list items are values)."""
    keys = []
    for k, v in (node.items() if isinstance(node, Mapping) else []):
        path = f"{prefix}{k}"
        keys.append(path)
        if isinstance(v, Mapping):
            keys.extend(flat_keys(v, path + "."))
    return keys


def build_typed(cls: type[T], values: Mapping[str, Any], section: str, extra: Iterable[str] = ()) -> T:
    """``cls(**values)`` for a config dataclass, refusing keys it does not have (``section``: e.g. ``data``).
    ``extra``: more keys the section accepts, passed together as the dataclass's ``extra`` field (``model``: the
    other fields of a family's config, known only to ``bertlab.models``)."""
    extra = set(extra)
    names = {f.name for f in dataclasses.fields(cls)} - ({"extra"} if extra else set())  # type: ignore[arg-type]
    for key in values:
        if key not in names and key not in extra:
            raise ConfigError(unknown_key_message(f"{section}.{key}", (f"{section}.{n}" for n in names | extra),
                                                  "added with + or set in a config file"))
    if not extra:
        return cls(**values)
    return cls(**{k: v for k, v in values.items() if k in names},  # type: ignore[call-arg]
               extra={k: v for k, v in values.items() if k not in names})


def _first_values(argv: list[str]) -> list[str] | None:
    """The overrides with each sweep replaced by its first value (None when they cannot be read here)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(argv)
    except Exception:  # Hydra reports its own syntax errors
        return None
    out = []
    for o in parsed:
        key = o.get_key_element()
        if o.key_or_group.startswith("hydra"):  # Hydra's own settings (launcher, sweeper, run dir)
            continue
        if o.type.name == "DEL":
            out.append(key)
            continue
        if o.is_sweep_override():
            try:
                value = next(iter(o.sweep_string_iterator()))
            except Exception:  # interval() and other sweeps without a first value: the key is checked as is
                continue
        else:
            value = o.get_value_element_as_str()
        out.append(f"{key}={value}")
    return out


def _check_group_options(argv: list[str], config_dir: Path) -> None:
    """``group=option`` (every value of a sweep) must name a file ``<config_dir>/group/option.yaml``: Hydra
    silently applies nothing for a misspelled option of an optional group (``experiment=``, ``debug=``,
    ``hparams_search=``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(argv)
    except Exception:  # Hydra reports its own syntax errors
        return
    if any("searchpath" in f.read_text(errors="replace") for f in [*config_dir.glob("*.yaml"),
                                                                    *config_dir.glob("hydra/*.yaml")]):
        return  # a config file adds search paths: Hydra alone knows every option
    search = [config_dir]
    for o in parsed:  # hydra.searchpath=[file://DIR, ...] adds config folders whose options count too
        if o.key_or_group == "hydra.searchpath":
            value = o.value()
            for entry in value if isinstance(value, list) else [value]:
                if not str(entry).startswith("file://"):
                    return  # pkg:// and other sources: Hydra resolves them, this check steps aside
                search.append(Path(str(entry)[len("file://"):]))
    for o in parsed:
        group = o.key_or_group
        if o.type.name == "DEL" or o.package or not (config_dir / group).is_dir():
            continue
        try:
            values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
        except Exception:  # a sweep without listed values (interval): nothing to check
            continue
        options = sorted({p.stem for d in search for p in (d / group).glob("*.yaml")})
        for value in values:
            if value in ("null", "None") or any((d / group / f"{value}.yaml").is_file() for d in search):
                continue
            guess = nearest(value, options)
            where = " or ".join(str(d) for d in search)
            sys.stderr.write(
                f"\nbertlab: error: {group}={value} on the command line: there is no {group} option {value!r} "
                f"(no file {group}/{value}.yaml in {where}).{f' Did you mean {group}={guess}?' if guess else ''}"
                f" The {group} options: {', '.join(options)}.\n")
            sys.exit(1)


def check_command_line(argv: list[str], config_dir: str | Path, config_name: str = "train") -> None:
    """Compose ``config_name`` with the command line's overrides; an unknown key ends the program with one
    paragraph on stderr (exit status 1). Anything else is left for Hydra to report as it does."""
    try:
        _check(argv, config_dir, config_name)
    except Exception:  # this check must never stop a command that Hydra would run
        pass
    try:
        _check_output_dir(argv, Path(config_dir), config_name)
    except Exception:  # as above: Hydra reports what this check cannot read
        return


def _check_output_dir(argv: list[str], config_dir: Path, config_name: str) -> None:
    """The run folder (``hydra.run.dir``, or ``hydra.sweep.dir`` in a multirun) must be creatable: Hydra makes
    it before any bertlab code runs and fails with a traceback on a file in the way or a folder this user may
    not write into."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from bertlab.runtime.schema import writable_dir_problem

    if any(a.split("=", 1)[0] in _HYDRA_FLAGS_WITH_VALUES for a in argv):
        return
    overrides = _first_values([a for a in argv if not a.startswith("-")]) or []
    overrides += [a for a in argv if a.startswith("hydra.run.dir=") or a.startswith("hydra.sweep.dir=")]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir.resolve()), version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()
    multirun = "-m" in argv or "--multirun" in argv or str(OmegaConf.select(cfg, "hydra.mode")) == "RunMode.MULTIRUN"
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    folder = OmegaConf.select(cfg, key)
    problem = writable_dir_problem(folder) if folder else None
    if problem:
        sys.stderr.write(f"\nbertlab: error: {key}={folder}: the run folder cannot be created there ({problem}). "
                         f"Choose another {key}, or leave it unset for a fresh timestamped folder under "
                         "paths.log_dir\n")
        sys.exit(1)


def _check(argv: list[str], config_dir: str | Path, config_name: str) -> None:
    if any(a.split("=", 1)[0] in _HYDRA_FLAGS_WITH_VALUES for a in argv):
        return
    _check_group_options([a for a in argv if not a.startswith("-")], Path(config_dir))
    overrides = _first_values([a for a in argv if not a.startswith("-")])
    if not overrides:
        return
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    def composed(items: list[str]):
        GlobalHydra.instance().clear()
        try:
            with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
                return compose(config_name=config_name, overrides=items)
        finally:
            GlobalHydra.instance().clear()

    try:
        composed(overrides)
        return
    except Exception as err:
        text = str(err)
        bad = next((o for o in overrides if f"Could not override '{o.split('=', 1)[0].lstrip('+~')}'" in text),
                   None)
        if bad is None:
            return  # not an unknown key: Hydra's own message says what is wrong
    key = bad.split("=", 1)[0].lstrip("+~")
    try:
        from omegaconf import OmegaConf

        known = flat_keys(OmegaConf.to_container(composed([o for o in overrides if o != bad]), resolve=False))
    except Exception:  # the rest does not compose either: Hydra's message will say why
        return
    if "." not in key:  # perhaps a config group (task=, model=): suggest those too
        known += [p.name for p in Path(config_dir).iterdir() if p.is_dir()]
    sys.stderr.write(f"\nbertlab: error: {unknown_key_message(key, known, f'{bad!r} on the command line')}\n")
    sys.exit(1)


def command_line_keys() -> set[str]:
    """The keys set on the command line of this job (Hydra's task overrides, sweeps' per-job values too)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return set()
        overrides = list(HydraConfig.get().overrides.task)
    except Exception:  # no Hydra context (library use): nothing was set on a command line
        return set()
    return {o.split("=", 1)[0].lstrip("+~") for o in overrides}


def apply_policy_defaults(cfg: Any) -> list[str]:
    """Apply ``freeze.recommended`` (a freeze policy's own learning rate, pooling, …) to ``cfg`` in place for
    every key the command line does not set, and drop the block; returns ``key=value`` for what was applied.

    A policy's defaults win over a task preset's (a task's lr is tuned for full fine-tuning) but never over
    what the user asked for.
    """
    from omegaconf import OmegaConf, open_dict

    recommended = cfg.freeze.get("recommended") if "freeze" in cfg else None
    applied: list[str] = []
    user = command_line_keys()
    for key, value in (OmegaConf.to_container(recommended) if recommended else {}).items():
        if OmegaConf.select(cfg, key, default="__missing__") == "__missing__":
            raise ConfigError(f"freeze.recommended.{key}: {key} is not a configuration key (conf/freeze/"
                              f"{cfg.freeze.policy}.yaml)")
        if key in user:
            continue
        OmegaConf.update(cfg, key, value, merge=False)
        applied.append(f"{key}={value}")
    if "freeze" in cfg and "recommended" in cfg.freeze:
        with open_dict(cfg.freeze):
            del cfg.freeze["recommended"]
    return applied
