"""What a path a user typed means, and what bertlab says when nothing is there.

One rule for every path a user gives (``data.*_file``, ``paths.data_dir``, ``model.pretrained``,
``model.init_from``, ``model.tokenizer``, ``ckpt_path``, the folders of ``predict`` / ``export`` /
``compare``): ``~`` is the home folder, and a relative path is relative to the directory the command was
typed in (runs never change directory: ``hydra.job.chdir`` stays false). Data files alone have a second place:
a relative ``data.*_file`` that is not there is looked for under the data folder (``paths.data_dir``, or the
bundled samples with ``data.source=sample``), which is how a task's own files (``sst2/train.tsv``) are named
(:meth:`bertlab.data.files.DataFiles.resolve`). docs/running.md, "Paths", says the rule.

A path that is not there is an error saying so ("... does not exist"), with the names beside it that look
like it (:func:`missing_message`), never a message about what the path should have held.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path


def typed_path(value: str | os.PathLike) -> Path:
    """``value`` as the shell user means it: ``~`` expanded; relative → under the directory the command was
    typed in. Absolute, without resolving links (a message shows the path as it was meant)."""
    path = Path(os.path.expanduser(str(value)))
    return path if path.is_absolute() else Path(os.getcwd()) / path


def exists(path: Path) -> bool:
    """Something is at ``path`` (a broken link counts: its error is about the link, not a missing name)."""
    return path.exists() or path.is_symlink()


def similar_names(path: Path, n: int = 3) -> tuple[Path, list[str]]:
    """The deepest folder above ``path`` that exists, and the names in it closest to the missing part of
    ``path`` below it (``difflib``; at most ``n``): ``/d/trian.tsv`` → (``/d``, [``train.tsv``]),
    ``/d/sst3/train.tsv`` → (``/d``, [``sst2``])."""
    path = Path(os.path.abspath(path))
    missing = path
    folder = path.parent
    while not folder.is_dir() and folder != folder.parent:
        missing, folder = folder, folder.parent
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return folder, []
    return folder, difflib.get_close_matches(missing.name, names, n=n, cutoff=0.6)


def missing_message(path: Path, what: str) -> str:
    """``<what> does not exist: <path>`` and the names beside it that look like it (or that there are none)."""
    folder, close = similar_names(path)
    if close:
        hint = "similar names in " + str(folder) + ": " + ", ".join(close)
    elif folder != Path(os.path.abspath(path)).parent:
        hint = f"the deepest folder of that path that exists is {folder}"
    else:
        hint = f"nothing with a similar name in {folder}"
    return f"{what} does not exist: {path} ({hint})"


def existing_path(value: str | os.PathLike, what: str, error: type[Exception]) -> Path:
    """:func:`typed_path` of ``value``, or ``error`` with :func:`missing_message` when nothing is there."""
    path = typed_path(value)
    if not exists(path):
        raise error(missing_message(path, what))
    return path


def refuse_chdir() -> None:
    """Refuse ``hydra.job.chdir=true``: a job that changes into its run folder would read every relative path
    (data files, checkpoints, the data folder) from there instead of where the command was typed."""
    try:
        from hydra.core.hydra_config import HydraConfig

        chdir = HydraConfig.initialized() and bool(HydraConfig.get().job.chdir)
    except Exception:  # no Hydra job (library use): nothing changed directory
        return
    if chdir:
        from bertlab.runtime.errors import ConfigError

        raise ConfigError("hydra.job.chdir=true: bertlab reads relative paths from the directory the command was "
                          "typed in, and a job that changes into its run folder would read them from there. Drop "
                          "hydra.job.chdir=true; the run's outputs go to hydra.run.dir either way")
