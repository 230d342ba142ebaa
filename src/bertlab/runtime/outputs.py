"""No output replaces what bertlab wrote in a run folder or an export folder.

Every command that writes where the user says (``predict --output``, ``export OUT``, ``compare --out``, the
GLUE tables and files, a multirun's folder, ``hydra.run.dir``) asks :func:`refuse_replacing_bertlab_files`
(one file) or :func:`refuse_folder_in_bertlab_folders` (a folder whose files the command decides) first. The
folders are recognised by what bertlab writes into them, not by where they are:

- a **run folder** holds its run record ``.bertlab-run.json`` (:mod:`bertlab.runtime.run_dir`), or, for a run
  from before run records, a ``checkpoints/`` folder beside ``metrics.json``, ``tokenizer/`` or ``.hydra/``;
- an **export folder** holds ``bertlab_export.json`` (every export writes it last), ``bertlab_onnx.json`` (an
  ONNX export), ``bertlab_fingerprint.json`` beside weights or a graph (the fingerprint record every export
  holds, :mod:`bertlab.runtime.fingerprints`; a run's ``tokenizer/`` holds one too, without weights), or
  ``config.json`` beside ``model.safetensors`` / ``pytorch_model.bin`` (an export from before the marker, or any
  Hugging Face model folder).

Inside a run folder, the run's own parts (:data:`RUN_PARTS`, its ``*.log`` files and the predictions it writes
itself, :data:`RUN_PREDICTIONS`) are never written, present or not yet (a run still going writes them later),
and no file already there is replaced, except the command's own earlier output of the same name (``compare``'s
``comparison.md``). New files elsewhere in the run folder (a comparison of that one run) and any file under
``<run>/predictions/`` but the run's own are allowed. Inside an export folder nothing is written: only an
export replaces an export, whole (:mod:`bertlab.inference.export`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from bertlab.runtime.errors import ConfigError
from bertlab.runtime.fingerprints import RECORD_NAME

RUN_MARKER = ".bertlab-run.json"  # the run record (runtime.run_dir.claim_run_dir)
RUN_LOCK = ".bertlab-run.lock"
EXPORT_MARKER = "bertlab_export.json"  # what an export wrote (inference.export.write_export_marker), written last
ONNX_INFO = "bertlab_onnx.json"  # an ONNX export's manifest (inference.onnx)
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
GRAPHS = ("model.onnx", "model.int8.onnx")  # an ONNX export's graphs (inference.onnx_session)
# A run's own parts: every path at or under these names belongs to the run, written yet or not.
RUN_PARTS = (RUN_MARKER, RUN_LOCK, ".hydra", "checkpoints", "tokenizer", "metrics.json", "update_scope.json",
             "csv", "tensorboard", "wandb", "export", "onnx", "predictions")
PREDICTIONS = "predictions"
# What a run writes into predictions/ itself: <split>_predictions.json (QA), predict_predictions.jsonl / .tsv.
RUN_PREDICTIONS = re.compile(r"^[^/]*_predictions\.(json|jsonl|tsv)$")


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a bertlab run folder (module docstring)."""
    if (folder / RUN_MARKER).is_file() or (folder / RUN_LOCK).is_file():
        return True
    return (folder / "checkpoints").is_dir() and any(
        (folder / name).exists() for name in ("metrics.json", "tokenizer", ".hydra"))


def is_export_folder(folder: Path) -> bool:
    """Whether ``folder`` is an export folder of bertlab or a Hugging Face model folder (module docstring)."""
    if (folder / EXPORT_MARKER).is_file() or (folder / ONNX_INFO).is_file():
        return True
    if (folder / RECORD_NAME).is_file() and any((folder / name).is_file() for name in (*HF_WEIGHTS, *GRAPHS)):
        return True  # an export's fingerprint record (bertlab_fingerprint.json) beside what it fingerprints
    return (folder / "config.json").is_file() and any((folder / name).is_file() for name in HF_WEIGHTS)


def bertlab_folders(path: str | Path, include_self: bool = True) -> list[tuple[str, Path]]:
    """("run" | "export", folder) for every run and export folder that holds ``path`` (by its real location,
    through symbolic links), innermost first; ``include_self``: ``path`` itself counts when it is a folder."""
    real = _real(path)
    found = []
    for folder in ([real] if include_self else []) + list(real.parents):
        if not folder.is_dir():
            continue
        if is_export_folder(folder):
            found.append(("export", folder))
        elif is_run_folder(folder):
            found.append(("run", folder))
    return found


def _run_part(rel: Path) -> str | None:
    """What of the run ``rel`` (a path inside a run folder) is, when it is one of the run's own parts."""
    parts = rel.parts
    if not parts:
        return "the run folder itself"
    if parts[0] == PREDICTIONS:
        if len(parts) == 1:
            return "the run's predictions/ folder"
        if RUN_PREDICTIONS.match(parts[1]):
            return f"the predictions the run writes ({PREDICTIONS}/{parts[1]})"
        return None
    if parts[0] in RUN_PARTS:
        return f"the run's {parts[0]}" + ("" if len(parts) == 1 else f" ({rel})")
    if parts[0].endswith(".log"):
        return f"the run's log {parts[0]}"
    return None


_WHY = {"run": "a run folder holds what its run wrote (checkpoints, tokenizer, run record, logs, metrics), which "
               "resume, predict, export and compare read",
        "export": "an export folder holds only the export, which predict and transformers read; only an export "
                  "replaces it, whole (python -m bertlab.export RUN OUT --overwrite)"}


def refuse_replacing_bertlab_files(output: str | Path, what: str, fix: str, replaces: Iterable[str] = ()) -> None:
    """Raise :class:`ConfigError` when writing the file ``output`` would write into an export folder, or over
    (or as) one of a run's own files (module docstring). ``replaces``: file names this command writes itself
    and may replace where it finds them (an earlier ``comparison.md``). ``what`` names the output as the user
    gave it ("--output x.jsonl"); ``fix`` says what to do instead."""
    real = _real(output)
    replaces = set(replaces)
    for kind, folder in bertlab_folders(real, include_self=True):
        if kind == "export":
            where = "is" if folder == real else "is inside"
            raise ConfigError(f"{what} {where} the export folder {folder}: writing there would replace or add to "
                              f"what the export holds; {_WHY['export']}. {fix}")
        rel = real.relative_to(folder)
        part = _run_part(rel)
        if part is None and rel.parts and rel.parts[0] == PREDICTIONS:
            continue  # a file of the user's among the run's predictions: theirs to replace
        if part is None and (os.path.lexists(real) and real.name not in replaces):
            part = f"a file already in the run folder ({rel})"
        for above in list(rel.parents)[:-1] if part is None else ():  # a file where the output needs a folder
            if (folder / above).is_file():
                part = f"a file already in the run folder ({above})"
        if part is not None:
            raise ConfigError(f"{what} would write {part} in the run folder {folder}: {_WHY['run']}, and writing "
                              f"there would damage that run. {fix}")


def refuse_folder_in_bertlab_folders(folder: str | Path, what: str, fix: str, allow: Iterable[str | Path] = (),
                                     may_be: tuple[str, ...] = ()) -> None:
    """Raise :class:`ConfigError` when ``folder``, a folder whose files the command decides (an export, a
    multirun, a run dir), is inside a run or export folder, or is one itself unless its kind is in ``may_be``
    ("export": an export replaces an export; "run": a run dir claims a run folder). ``allow``: folders where
    it may be all the same (``<run>/export``, what ``export=true`` writes)."""
    real = _real(folder)
    if any(real == _real(a) for a in allow):
        return
    for kind, found in bertlab_folders(real, include_self=True):
        if found == real and kind in may_be:
            continue
        where = "is" if found == real else "is inside"
        raise ConfigError(f"{what} {where} the {kind} folder {found}: {_WHY[kind]}, and writing there would "
                          f"damage it. {fix}")
