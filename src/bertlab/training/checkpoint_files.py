"""Reading a run's checkpoint files: the checkpoint a run dir stands for, and a checkpoint's contents (tensors and
plain values only). No Lightning: prediction and export read checkpoints without importing it (seconds of
start-up); :mod:`bertlab.training.checkpoints` writes them and re-exports these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bertlab.models.keys import migrate_checkpoint
from bertlab.runtime.errors import CheckpointError
from bertlab.runtime.records import read_record

LAST = "last.ckpt"


def last_checkpoint(run_dir: str | Path) -> Path:
    """``<run_dir>/checkpoints/last.ckpt`` (it may not exist yet)."""
    return Path(run_dir) / "checkpoints" / LAST


def find_recorded(folder: Path, recorded: str | None) -> Path | None:
    """A checkpoint path recorded where a run ran (an absolute path), found by its place inside ``folder``:
    a copied or moved run folder uses its own file, never the original's. None when it is not there."""
    if not recorded:
        return None
    recorded_path = Path(recorded)
    candidates = [folder / recorded_path.parent.name / recorded_path.name, folder / recorded_path.name]
    if not recorded_path.is_absolute():
        candidates.append(folder / recorded_path)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


def run_dir_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint a run dir stands for: the best one its ``metrics.json`` names, else ``last.ckpt``; None
    when it has neither. ``model.init_from``, ``python -m bertlab.predict|export`` and ``Predictor`` all read
    a run dir this way."""
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.json"
    if metrics.is_file():
        record = read_record(metrics, "the run's metrics.json (it names the run's best checkpoint)",
                             f"Restore it from a copy, or pass the checkpoint itself ({run_dir / 'checkpoints'}/"
                             "<name>.ckpt) instead of the run dir", shape={"best_checkpoint": (str, type(None))},
                             error=CheckpointError)
        best = find_recorded(run_dir, record.get("best_checkpoint"))
        if best is not None:
            return best
    last = last_checkpoint(run_dir)
    return last if last.is_file() else None


def read_checkpoint(path: str | Path, setting: str | None = None) -> dict[str, Any]:
    """A bertlab Lightning checkpoint, read with ``weights_only=True``: tensors and plain values only, its tensors
    under today's names (``models.keys.migrate_checkpoint``: a run written before a rename reads as a new one).

    Lightning reloads bertlab's checkpoints the same way on resume, so even a checkpoint from someone else
    cannot run code when it is read; a file that needs full unpickling is refused, not trusted. ``setting``
    (``ckpt_path``, ``model.init_from``) names where the path came from in the error message.
    """
    path = Path(path)
    where = f"{setting}={path}" if setting else str(path)
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # truncated file, another program's pickle, not a zip archive, ...
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"{where}: not a readable bertlab checkpoint ({type(err).__name__}: {first}). Pass a .ckpt file "
            "written by bertlab (<run_dir>/checkpoints/last.ckpt or the best one) or its run dir; bertlab reads "
            "checkpoints that hold tensors and plain values only"
        ) from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise CheckpointError(f"{where}: no state_dict in it; it is not a Lightning checkpoint")
    return migrate_checkpoint(ckpt)  # an older run's tensor names → today's
