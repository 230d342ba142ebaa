"""Experiment loggers from ``conf/logger``: csv, tensorboard, wandb, or ``many`` (csv + wandb).

Every entry of the ``logger`` group that has a ``_target_`` becomes a Lightning logger. Weights & Biases
gets two things Lightning leaves to the caller:

- a run id fixed before the run starts and recorded in ``<run_dir>/wandb/bertlab_run_id``, so a resumed
  run (``ckpt_path=last`` in the same run dir, or ``ckpt_path=<run_dir>/checkpoints/<file>.ckpt``) re-attaches
  to the same wandb run instead of starting a new one;
- ``finish_wandb()``, which ``bertlab.train.run`` calls at the end of every run (also a failed one): under
  ``-m`` every job runs in the same process, and without ``wandb.finish()`` the next job logs into this run.

A resumed run continues its ``csv/metrics.csv`` (:func:`continue_csv_logs`) instead of starting it afresh.
"""

from __future__ import annotations

import logging
import secrets
import sys
import warnings
from pathlib import Path
from typing import Any

import hydra
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)

WANDB_ID_FILE = Path("wandb") / "bertlab_run_id"


def build_loggers(group: DictConfig | None, run_dir: Path, ckpt_path: str | None = None,
                  quiet_wandb: bool = False) -> list[Any]:
    """Instantiate the ``logger`` group's entries; ``ckpt_path`` (a resume) re-attaches wandb runs.

    ``quiet_wandb``: wandb prints nothing on the console (``wandb.Settings(silent=True)``) unless the entry
    sets its own ``settings``; its files and run folder are the same.
    """
    loggers = []
    for _, node in (group or {}).items():
        if not (isinstance(node, DictConfig) and "_target_" in node):
            continue
        is_wandb = str(node._target_).endswith("WandbLogger")
        extra: dict[str, Any] = {}
        if is_wandb:
            node = _with_wandb_id(node, Path(run_dir), ckpt_path)
            if quiet_wandb and node.get("settings") is None:
                import wandb

                extra["settings"] = wandb.Settings(silent=True)
        logger = hydra.utils.instantiate(node, **extra)
        if is_wandb and getattr(logger, "_wandb_init", {}).get("anonymous", "unset") is None:
            # Lightning always passes anonymous=None; wandb >= 0.19 warns about the (deprecated) setting.
            del logger._wandb_init["anonymous"]
        loggers.append(logger)
    return loggers


def wandb_run_id(run_dir: Path, ckpt_path: str | None) -> str:
    """The wandb id of the run in ``run_dir``: the recorded one when resuming, else a new one."""
    if ckpt_path is not None:
        candidates = [run_dir]
        if ckpt_path != "last":
            candidates.append(Path(ckpt_path).resolve().parent.parent)  # <run_dir>/checkpoints/<file>.ckpt
        for folder in candidates:
            recorded = folder / WANDB_ID_FILE
            if recorded.is_file() and recorded.read_text().strip():
                return recorded.read_text().strip()
    return secrets.token_hex(4)  # 8 characters of [0-9a-f], a valid wandb run id


def finish_wandb(failed: bool = False) -> None:
    """End the active wandb run, if any (marked failed when the job raised)."""
    wandb = sys.modules.get("wandb")  # never import wandb (slow) for runs that did not use it
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish(exit_code=1 if failed else 0)


def _with_wandb_id(node: DictConfig, run_dir: Path, ckpt_path: str | None) -> DictConfig:
    if node.get("id") or node.get("version"):  # chosen on the command line: logger.wandb.id=<id>
        return node
    run_id = wandb_run_id(run_dir, ckpt_path)
    _record_id(run_dir, run_id)
    node = OmegaConf.create(OmegaConf.to_container(node, resolve=True))
    with open_dict(node):
        node.id = run_id
    return node


@rank_zero_only
def _record_id(run_dir: Path, run_id: str) -> None:
    path = run_dir / WANDB_ID_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run_id + "\n")


def continue_csv_logs(loggers: list[Any], resumed_from_step: int) -> None:
    """Let each CSV logger of a resumed run continue its ``metrics.csv`` instead of starting it afresh.

    Lightning's CSV writer deletes an existing ``metrics.csv`` when it starts. Here the rows logged before
    the checkpoint (``step < resumed_from_step``) are kept and the writer appends to them; rows logged after
    the checkpoint by the killed run are dropped, since the resumed run logs those steps again. Call on
    global rank 0, before training.
    """
    import csv

    from lightning.pytorch.loggers import CSVLogger

    for logger in loggers:
        if not isinstance(logger, CSVLogger):
            continue
        path = Path(logger.log_dir) / "metrics.csv"
        if not path.is_file():
            continue
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            rows = [r for r in reader if r.get("step", "") != "" and float(r["step"]) < resumed_from_step]
        with warnings.catch_warnings():
            # Lightning warns that the folder's files "will be deleted": here they are continued.
            warnings.filterwarnings("ignore", message=r".*Previous log files in this directory will be deleted")
            writer = logger.experiment  # created now: this deletes the old file
        with open(path, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=header)
            out.writeheader()
            out.writerows(rows)
        writer.metrics_keys = sorted(header)  # later rows append (the header is rewritten if keys are new)


