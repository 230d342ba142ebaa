"""A run directory belongs to one run, and a checkpoint to one tokenizer.

- :func:`claim_run_dir` records the run's configuration in ``<run_dir>/.bertlab-run.json`` and refuses to
  start a *different* configuration in a run dir that already holds a run: its checkpoints, tokenizer and
  logs would mix with the new run's. Allowed: the same configuration again (a resume: ``ckpt_path``,
  ``train``, ``test``, ``predict``, ``export``, the logger and other output-only choices do not count as
  differences, and a resume may change the training length, ``trainer.max_epochs``/``max_steps``), a re-run of a finished multirun job (its old outputs are removed first), and
  ``overwrite_run_dir=true`` (the old outputs are removed first).
- Nothing is written into a run dir before the run is accepted there: Hydra is told not to write its
  ``.hydra/`` records (``hydra.output_subdir: null`` in ``conf/hydra/default.yaml``) and the claim writes them
  once the run is accepted; the run's log file (``train.log``) holds its records until then
  (:func:`hold_log_files`) and drops them when the run is refused. A refused run leaves the folder's
  ``.hydra/config.yaml``, ``overrides.yaml``, ``train.log`` and ``metrics.json`` byte for byte as they were,
  so ``bertlab.compare`` files the earlier run's results under the earlier run's config.
- A run dir holds one live run at a time: the claim takes an exclusive lock on ``<run_dir>/.bertlab-run.lock``
  for the run's lifetime (:func:`release_run_dir` frees it), so two runs of one configuration started in one
  folder at once (which the configuration check lets through, as a resume) cannot mix their files.
- A run that fails before its first training step leaves no folder behind: when this process made the folder
  (it was not there, or empty and newer than the process) and the folder holds only what the run wrote, the
  run removes it, lock file included (:func:`release_run_dir`). A multirun keeps a failed job's folder: its
  metrics.json records the failure.
- :class:`TokenizerFingerprint` stores a fingerprint of the run's vocabulary in every checkpoint and, when a
  checkpoint is resumed or evaluated, checks that this run's tokenizer is the one it was trained with;
  :func:`check_checkpoint_tokenizer` does the same for ``model.init_from``. Both are
  :func:`bertlab.runtime.fingerprints.check_trusted`, the check every reader of a run or an export calls.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback

from bertlab.runtime.config import ConfigError
from bertlab.runtime.files import RUN_DIR_FIX, try_lock, write_text_atomic, writing
from bertlab.runtime.fingerprints import (
    FINGERPRINT_KEY,
    RUN_ID_KEY,
    RUN_RECORD,
    check_trusted,
    recorded_run_id,
    vocabulary_fingerprint,
)
from bertlab.runtime.outputs import RUN_LOCK, RUN_MARKER, refuse_folder_in_bertlab_folders
from bertlab.runtime.records import read_record

log = logging.getLogger(__name__)

# When this process started (this module is imported before Hydra makes a run's folder): a folder newer than
# this, empty when the run starts, was made for the run.
_PROCESS_START = time.time()

# runtime.outputs recognises a run folder by it (and protects what the run wrote); runtime.fingerprints reads
# the run id from it: one name.
MARKER = RUN_MARKER
assert MARKER == RUN_RECORD, "runtime.outputs and runtime.fingerprints must name the same run record"
LOCK = RUN_LOCK
OVERWRITE_KEY = "overwrite_run_dir"
# Choices that change what a run writes or reports, not what it trains: a resume may change them.
IGNORED_TOP = {"ckpt_path", "train", "test", "predict", "export", "export_quantize", "export_max_drop", "logger",
               "callbacks", "paths", "tags", "save_every_n_steps", "checkpoint", "allow_targets", OVERWRITE_KEY,
               "hydra",
               "release_heap"}  # host memory handling (training.callbacks.ReleaseFreedHeap): same training
IGNORED_DATA = {"data_dir", "cache_dir", "num_workers", "test_file", "predict_file", "eval_batch_size"}
IGNORED_TRAINER = {"enable_progress_bar", "log_every_n_steps", "enable_model_summary"}
# Kernel choices: how the encoder computes on a device, not what it trains.
IGNORED_MODEL = {"cpu_fast_dropout", "cpu_attention_slice_mb", "varlen_attention"}
# Keys bertlab no longer has (data.hub_dataset was never read): a run recorded with them is the same run.
RETIRED_KEYS = {"data.hub_dataset"}
# Values that changed with bertlab and mean the same training: per key, (recorded there, now) pairs. A run
# recorded before the change resumes under today's defaults. "<unset>": the key did not exist then.
# - task.mlm_probability: null now means the encoder family's rate, 0.15 for every family that existed then;
# - model.tokenizer_kind: added, every earlier scratch vocabulary was WordPiece;
# - data.stream_threshold_mb 64 → 0 (every corpus prepared): a pre-training run on a corpus under 64 MB that
#   started in memory continues on the prepared path when resumed without the old value (docs/pretraining.md);
# - model.window_pooling, data.max_windows_per_batch: added with long-text windows; their defaults (max pooling,
#   as many windows as the batch size) add no parameters and leave every batch of short texts as it was;
# - data.window_stride: added (null = a quarter of the window); data.long_text: added, every earlier run cut
#   long texts, so only "truncate" continues one exactly (a resume with today's "windows" is refused and says so);
# - model.init_head: added; it decides only the head a run starts with (a resume restores every weight from its
#   checkpoint), and before it a bertlab start's head was always new ("new") and a Hugging Face folder's fitting
#   head always kept ("auto"), so either value continues a run recorded without it;
# - model.model_type: added to the scratch BERT presets (the family a scratch encoder is built as), every earlier
#   scratch encoder was BERT;
# - data.max_windows_per_example: added (128); it changes only examples over 128 windows, which before it made
#   a step of minutes to hours: a run recorded without it continues under the cap (and says so if one is over).
SAME_TRAINING = {"task.mlm_probability": {(0.15, None)},
                 "model.tokenizer_kind": {("<unset>", "wordpiece")},
                 "data.stream_threshold_mb": {(64, 0)},
                 "model.window_pooling": {("<unset>", "max")},
                 "data.max_windows_per_batch": {("<unset>", None)},
                 "data.window_stride": {("<unset>", None)},
                 "data.long_text": {("<unset>", "truncate")},
                 "model.init_head": {("<unset>", "auto"), ("<unset>", "new")},
                 "model.model_type": {("<unset>", "bert")},
                 "data.max_windows_per_example": {("<unset>", 128)},
                 "data.distill_file": {("<unset>", None)}}
# Nodes of a feature that can be off: while it is off in both runs (or the run was recorded before the node
# existed), none of its settings changes what trains, so keys the node gained since are no difference either.
SAME_TRAINING_NODES = {"distill": lambda value: value == "<unset>" or isinstance(value, dict) and not value.get("teacher")}
# The run record's keys and their types (config: the training configuration the check compares).
RECORD_SHAPE = {"fingerprint": str, "status": str, "config": dict, "pid": int, "host": str, "started": str}
RECORD_FIX = ("bertlab cannot tell which configuration the run in {run_dir} had, so it cannot check that this run "
              "continues it. If this is that run with the same settings, delete the damaged record and resume with "
              "ckpt_path=last (a folder without a record is accepted for a resume); otherwise give this run its own "
              "folder (leave hydra.run.dir unset), or pass overwrite_run_dir=true to delete the old run's outputs")
RESUME_LENGTH_KEYS = {f"trainer.{k}" for k in ("max_epochs", "max_steps", "min_epochs", "min_steps", "max_time")}
# What a run writes into its folder (Hydra's own .hydra/ and train.log are Hydra's business).
OUTPUTS = ("checkpoints", "tokenizer", "metrics.json", "update_scope.json", "export", "onnx", "predictions", "csv",
           "tensorboard", "wandb", MARKER)
# What overwrite_run_dir=true deletes, as its advice says it.
DELETES = "checkpoints/, tokenizer/, metrics.json, update_scope.json, export/, onnx/, predictions/, the logs"


def _plain(cfg: Any) -> dict[str, Any]:
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    return dict(cfg)


def training_config(cfg: Any) -> dict[str, Any]:
    """The part of a run's configuration that decides what it trains (see :data:`IGNORED_TOP`)."""
    plain = {k: v for k, v in _plain(cfg).items() if k not in IGNORED_TOP}
    if isinstance(plain.get("data"), dict):
        plain["data"] = {k: v for k, v in plain["data"].items() if k not in IGNORED_DATA}
    if isinstance(plain.get("trainer"), dict):
        plain["trainer"] = {k: v for k, v in plain["trainer"].items() if k not in IGNORED_TRAINER}
    if isinstance(plain.get("model"), dict):
        plain["model"] = {k: v for k, v in plain["model"].items() if k not in IGNORED_MODEL}
    return plain


def config_fingerprint(cfg: Any) -> str:
    return hashlib.sha256(json.dumps(training_config(cfg), sort_keys=True, default=str).encode()).hexdigest()[:16]


_FIRST = {"task": 0, "model": 1, "freeze": 2, "data": 3, "optim": 4}


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(old) | set(new), key=lambda k: (_FIRST.get(str(k), 9), str(k))):
        a, b = old.get(key, "<unset>"), new.get(key, "<unset>")
        name = f"{prefix}{key}"
        if name in RETIRED_KEYS or (name in SAME_TRAINING_NODES and SAME_TRAINING_NODES[name](a)
                                    and SAME_TRAINING_NODES[name](b)) \
                or (not isinstance(b, dict) and (a, b) in SAME_TRAINING.get(name, ())):
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, name + ".")
        elif a != b:
            out.append(f"{name}: {a!r} there, {b!r} now")
    return out


def _is_secondary_rank() -> bool:
    return any(int(os.environ.get(v, "0") or 0) > 0 for v in ("RANK", "LOCAL_RANK", "SLURM_PROCID"))


def _in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:
        return False


def _remove_outputs(run_dir: Path, why: str) -> None:
    removed = []
    for name in OUTPUTS:
        path = run_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
            removed.append(name + "/")
        elif path.exists() or path.is_symlink():
            path.unlink()
            removed.append(name)
    for handler, _ in _HELD:  # the previous run's train.log: this run's log starts empty
        path = Path(handler.baseFilename)
        if path.parent == run_dir and handler.stream is None and path.is_file():
            path.unlink()
            removed.append(path.name)
    if removed:
        log.warning("%s: removed the previous run's %s from %s", why, ", ".join(removed), run_dir)


def claim_run_dir(run_dir: Path, cfg: Any) -> None:
    """Refuse a different configuration in a used run dir, and any run in a folder another run is using
    (see the module docstring); record this one. Until it returns, nothing was written into ``run_dir``."""
    run_dir = Path(run_dir)
    if _is_secondary_rank():  # the other processes of one distributed run share its folder
        release_log_files(write=True)
        return
    try:
        # A run dir is a folder of its own: never inside another run's folder or an export (its checkpoints and
        # records would land among that run's files), and never an export folder itself.
        refuse_folder_in_bertlab_folders(
            run_dir, f"hydra.run.dir={run_dir}", "Give this run its own folder (leave hydra.run.dir unset for a "
            "fresh timestamped one)", may_be=("run",))
    except ConfigError:
        _STATE["refused"] = True
        raise
    run_dir.mkdir(parents=True, exist_ok=True)
    previous = _STATE.pop("lock", None)  # a claim of this process's earlier run (library use): that run is over
    if previous is not None:
        previous.release()
    lock = try_lock(run_dir / LOCK)
    if lock is None:
        _STATE["refused"] = True
        raise ConfigError(_in_use_message(run_dir))
    try:
        remove_why = _check_claim(run_dir, cfg)
    except BaseException:
        lock.release()
        _STATE["refused"] = True
        raise
    _STATE["lock"] = lock
    _STATE["claimed"] = run_dir
    # The run's id, kept while the folder holds the same run (a resume), new when its outputs go: every
    # checkpoint records it (TokenizerFingerprint), so another run's checkpoint in checkpoints/ is refused.
    run_id = None if remove_why else recorded_run_id(run_dir)
    if remove_why:
        _remove_outputs(run_dir, remove_why)
    record = {"fingerprint": config_fingerprint(cfg), "run_id": run_id or uuid.uuid4().hex[:16], "status": "running",
              "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "host": socket.gethostname(), "pid": os.getpid(),
              "config": training_config(cfg)}
    with writing(run_dir / MARKER, "the run's record", RUN_DIR_FIX):
        write_text_atomic(run_dir / MARKER, json.dumps(record, indent=1, default=str) + "\n")
        _record_hydra_config(run_dir, cfg)
    release_log_files(write=True)


def read_run_record(run_dir: Path) -> dict[str, Any] | None:
    """The record of the run in ``run_dir`` (None: it has none); a record cut short, emptied, edited or replaced
    is a :class:`ConfigError` naming the file and the key at fault (``runtime.records.read_record``)."""
    marker = Path(run_dir) / MARKER
    if not marker.is_file():
        return None
    return read_record(marker, "the record of the run in this folder", RECORD_FIX.format(run_dir=run_dir),
                       shape=RECORD_SHAPE, required=("config",), error=ConfigError)


def _in_use_message(run_dir: Path) -> str:
    try:
        other = read_run_record(run_dir) or {}
        who = (f" (pid {other.get('pid')} on {other.get('host')}, started {other.get('started')})"
               if other.get("status") == "running" else "")
    except ConfigError:
        who = ""
    return (f"hydra.run.dir={run_dir} is in use: another run is running in it now{who}. Two runs in one folder "
            "would write the same checkpoints and mix their logs. Wait for that run to end (then resume with "
            "ckpt_path=last if this is the same run), or give this run its own folder (leave hydra.run.dir unset "
            "for a fresh timestamped one)")


def _check_claim(run_dir: Path, cfg: Any) -> str | None:
    """Raise :class:`ConfigError` when ``run_dir`` holds another run that ``cfg`` may not replace; else
    return why its outputs are to be removed first (None: kept)."""
    marker = run_dir / MARKER
    new = training_config(cfg)
    fingerprint = config_fingerprint(cfg)
    overwrite = bool(cfg.get(OVERWRITE_KEY)) if hasattr(cfg, "get") else False
    old: dict[str, Any] | None = None
    damaged = None
    if marker.is_file() or marker.is_symlink():
        old, damaged = _read_record(marker)
    # Used = it holds another run's outputs; a run that failed before writing any (bad data, a refused
    # setting) leaves nothing that could mix with this one.
    used = any((run_dir / n).exists() for n in ("checkpoints", "metrics.json", "tokenizer"))
    if used and damaged is not None and not overwrite:
        raise ConfigError(
            f"hydra.run.dir={run_dir} holds a run whose record {marker} is damaged ({damaged}): it no longer says "
            "which configuration that run trained, so this run cannot be checked against it. The run's "
            "checkpoints, tokenizer and metrics.json are not touched. If this is the same run, restore the record "
            f"(from a backup), or move the damaged one aside (mv {marker} {marker}.damaged) and resume with "
            "ckpt_path=last: a run dir without a record is accepted for a resume, without the configuration check. "
            "Otherwise give this run its own folder (leave hydra.run.dir unset for a fresh timestamped one). "
            f"{OVERWRITE_KEY}=true is no repair: it deletes {DELETES} and starts a new run")
    same = old is not None and (old.get("fingerprint") == fingerprint or not _differences(old.get("config", {}), new))
    if used and not same and old is not None and cfg.get("ckpt_path"):
        # A resume may extend (or shorten) the training budget: the run continues on the same path.
        same = all(d.split(":", 1)[0] in RESUME_LENGTH_KEYS for d in _differences(old.get("config", {}), new))
    if used and not same:
        if overwrite:
            return f"{OVERWRITE_KEY}=true"
        if old is not None and old.get("status") == "finished" and _in_multirun():
            return "a finished multirun job run again"
        if old is None and cfg.get("ckpt_path"):
            return None  # a run dir from before run records existed, resumed: nothing to compare with
        diffs = _differences(old.get("config", {}), new) if old is not None else []
        what = (f"it holds a run with another configuration ({'; '.join(diffs[:4])}"
                f"{'; …' if len(diffs) > 4 else ''})" if diffs else
                "it already holds a run's outputs (checkpoints, tokenizer or metrics.json) and no record of "
                "that run's configuration")
        raise ConfigError(
            f"hydra.run.dir={run_dir} is used: {what}. A run dir belongs to one run: its checkpoints, "
            "tokenizer and logs would mix with this run's. Give this run its own folder (leave hydra.run.dir "
            f"unset for a fresh timestamped one), resume the run there with its own settings and "
            f"ckpt_path=last, or pass {OVERWRITE_KEY}=true to delete its outputs ({DELETES}) and start over"
        )
    return None


def _read_record(marker: Path) -> tuple[dict[str, Any], str | None]:
    """A run record, and what is wrong with it (None: a record): not JSON, not an object, or without the
    configuration and fingerprint every record holds (another file written over it)."""
    try:
        text = marker.read_text()
        record = json.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        return {"fingerprint": "<unreadable>", "config": {}}, f"unreadable: {err}"
    except ValueError:
        first = text.strip().splitlines()[0][:60] if text.strip() else ""
        return {"fingerprint": "<unreadable>", "config": {}}, \
            f"not JSON: it starts {first!r}" if first else "it is empty"
    if not isinstance(record, dict) or not isinstance(record.get("config"), dict) or "fingerprint" not in record:
        return {"fingerprint": "<unreadable>", "config": {}}, "JSON, but not a run record (no fingerprint and config)"
    return record, None


def _record_hydra_config(run_dir: Path, cfg: Any) -> None:
    """``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml`` as Hydra writes them, written once the
    run is accepted (Hydra would write them before the job starts, over a used folder's records). Nothing
    when Hydra writes them itself (``hydra.output_subdir`` set on the command line) or runs no job."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from omegaconf import OmegaConf
    except ImportError:  # pragma: no cover - hydra is a dependency
        return
    if not HydraConfig.initialized():
        return
    hydra_cfg = HydraConfig.instance().cfg
    if hydra_cfg.hydra.get("output_subdir") is not None:
        return
    folder = run_dir / ".hydra"
    folder.mkdir(exist_ok=True)
    for name, node in (("config.yaml", cfg), ("hydra.yaml", hydra_cfg),
                       ("overrides.yaml", hydra_cfg.hydra.overrides.task)):
        write_text_atomic(folder / name, OmegaConf.to_yaml(node))


# What this process's current run holds: the run-dir lock, whether its claim was refused or accepted.
_STATE: dict[str, Any] = {}


class _Hold(logging.Filter):
    """On a log-file handler: keeps records back (``discard``: drops them) until :func:`_release_log_files`."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.discard = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.discard:
            self.records.append(record)
        return False


_HELD: list[tuple[logging.FileHandler, _Hold]] = []


def hold_log_files(cfg: Any) -> None:
    """Start of a job: the root logger's files inside its run dir (``cfg.paths.output_dir``: Hydra's
    ``train.log``, opened only on its first record, ``delay: true``) keep this run's records back until the
    run dir is claimed. A run refused there leaves the folder's log as it was; a run that fails earlier in a
    fresh folder still logs there. Called again in the same job, it changes nothing."""
    try:
        run_dir = Path(os.path.abspath(str(cfg.paths.output_dir)))
    except Exception:  # an interpolation that cannot resolve: the run reports it; nothing to hold
        return
    if any(handler in logging.getLogger().handlers for handler, _ in _HELD):
        return  # held already in this job
    _HELD.clear()  # handlers of an earlier job (a multirun reconfigures logging for each)
    lock = _STATE.pop("lock", None)  # an earlier run of this process that was never released
    if lock is not None:
        lock.release()
    _STATE.clear()
    _STATE["folder"] = run_dir
    _STATE["made_here"] = _made_here(run_dir)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent == run_dir:
            hold = _Hold()
            handler.addFilter(hold)
            _HELD.append((handler, hold))


def release_log_files(write: bool) -> None:
    """Write the held records (``write``) and log on as usual; or drop them and every later record of
    this run (a refused run writes nothing into a folder that is not its own)."""
    while _HELD:
        handler, hold = _HELD.pop()
        if not write:
            hold.discard = True
            continue
        handler.removeFilter(hold)
        for record in hold.records:
            handler.handle(record)


def holds_a_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run's record or outputs (an earlier run's, or this one's)."""
    return any((Path(run_dir) / n).exists() for n in (MARKER, "checkpoints", "metrics.json", "tokenizer"))


def claimed_run_dir() -> Path | None:
    """The run dir this process's current run was accepted in (None before, or when it was refused)."""
    return _STATE.get("claimed")


def _made_here(folder: Path) -> bool:
    """Whether ``folder`` is this run's to remove should it fail before training: not there yet, or an empty
    folder made after this process started (Hydra makes a run's folder just before the run)."""
    try:
        made = folder.stat().st_ctime
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        return folder.is_dir() and made >= _PROCESS_START - 1 and not any(folder.iterdir())
    except OSError:
        return False


# What a run writes into its folder (and Hydra's and the ranks' *.log files): a folder made for a run that failed
# before training is removed only when it holds nothing else.
_RUN_WRITES = (*OUTPUTS, LOCK, ".hydra", "lightning_logs")


def _remove_unused_run_dir(folder: Path) -> bool:
    """Remove what a run that failed before training wrote into ``folder``, and the folder when nothing else is
    in it. Whether the folder is gone."""
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return False
    if any(n not in _RUN_WRITES and not n.endswith(".log") for n in names):  # <job>.log, <job>_rank<n>.log
        return False  # something this run did not write: the folder is not only this run's
    for name in names:
        path = folder / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as err:
            log.debug("could not remove %s: %s", path, err)
    try:
        folder.rmdir()
    except OSError:
        return False
    return True


def release_run_dir(before_training: bool = False) -> None:
    """End of a run: free the run dir's lock; a run never accepted in its folder writes its held log records
    only into a folder that holds no other run. A run that failed ``before_training`` in a folder made for it
    removes the folder (the error is on the terminal; nothing in the folder could be used)."""
    lock = _STATE.pop("lock", None)
    folder = _STATE.get("folder")
    if (before_training and _STATE.get("made_here") and folder is not None and not _is_secondary_rank()
            and not _in_multirun()):
        release_log_files(write=False)  # a later record (the error's) is dropped, not written into a new folder
        if lock is not None:
            lock.release()
        _STATE.pop("claimed", None)
        if _remove_unused_run_dir(folder):
            log.debug("removed %s: the run failed before training", folder)
        return
    if lock is not None:
        lock.release()
    if _HELD:
        folder = Path(_HELD[0][0].baseFilename).parent
        release_log_files(write=not _STATE.get("refused") and not holds_a_run(folder))


def finish_run_dir(run_dir: Path) -> None:
    """Mark the run recorded in ``run_dir`` as finished (called after a run that ended without error)."""
    if _is_secondary_rank():
        return
    marker = Path(run_dir) / MARKER
    try:
        record = read_run_record(run_dir)
    except ConfigError:  # replaced while the run ran: the run's results stand, the record says nothing more
        return
    if record is None:
        return
    record["status"] = "finished"
    write_text_atomic(marker, json.dumps(record, indent=1, default=str) + "\n")


# ----------------------------------------------------------------------------------------------------------
# Tokenizer fingerprints in checkpoints


def check_checkpoint_tokenizer(checkpoint: dict[str, Any], tokenizer: Any, ckpt_path: Any,
                               tokenizer_dir: Any = None) -> None:
    """The checkpoint's recorded vocabulary against ``tokenizer`` (and, when given, the files of
    ``tokenizer_dir`` against their record): :func:`bertlab.runtime.fingerprints.check_trusted`."""
    check_trusted(ckpt_path, tokenizer, recorded=checkpoint.get(FINGERPRINT_KEY), folder=tokenizer_dir,
                  run_id=checkpoint.get(RUN_ID_KEY))


class TokenizerFingerprint(Callback):
    """Records the run's vocabulary fingerprint and run id in every checkpoint; checks them when one is loaded."""

    def __init__(self, tokenizer: Any, tokenizer_dir: Any = None):
        self.tokenizer = tokenizer
        self.tokenizer_dir = tokenizer_dir
        self.fingerprint = vocabulary_fingerprint(tokenizer)
        self.run_id = recorded_run_id(claimed_run_dir())

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        checkpoint[FINGERPRINT_KEY] = self.fingerprint
        if self.run_id is not None:
            checkpoint[RUN_ID_KEY] = self.run_id

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        check_checkpoint_tokenizer(checkpoint, self.tokenizer, trainer.ckpt_path or "the checkpoint",
                                   self.tokenizer_dir)


