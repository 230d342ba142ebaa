"""The study's storage and the workers that share it.

``hydra.sweeper.storage`` is one of

- a file path (``${hydra.sweep.dir}/optuna.journal``, the default of ``hparams_search=optuna``): Optuna's
  journal file storage. Safe for several processes at once, on one machine or on a shared file system
  (NFS, Lustre) seen by many; no server needed. It is read the way a crash leaves it
  (:mod:`bertlab.sweeps.journal`): a half-written last record is dropped, damage in the middle is named.
- an RDB URL: ``postgresql://user:pw@host/db`` or ``mysql+pymysql://...`` for a database server that
  workers on many machines reach over the network; ``sqlite:///<file>`` only for a study that one process
  at a time runs (sqlite's file locking does not hold up under concurrent writers, and not at all on NFS).
- null: in memory (nothing to resume).

A *worker* is one sweeper process (one ``python train.py hparams_search=optuna ...`` command). Each worker
holds a lock file ``<sweep dir>/.workers/<id>.lock`` while it lives and writes its id into the trials it
runs (user attribute ``worker``); a RUNNING trial whose worker's lock is free was left behind by a killed
worker, and the next worker that starts runs it again, under the same trial number and in the same folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
from filelock import FileLock, Timeout

from bertlab.runtime.config import ConfigError
from bertlab.runtime.outputs import refuse_replacing_bertlab_files

log = logging.getLogger(__name__)

WORKERS_DIR = ".workers"
STUDY_LOCK = ".study.lock"


def is_rdb_url(storage: str) -> bool:
    return "://" in storage


def is_sqlite(storage: Any) -> bool:
    return storage is not None and str(storage).startswith("sqlite:")


def open_storage(storage: Any) -> optuna.storages.BaseStorage | None:
    """The Optuna storage ``hydra.sweeper.storage`` names (None: in memory)."""
    if storage is None or str(storage).strip() in ("", "null", "None"):
        return None
    text = str(storage)
    if is_rdb_url(text):
        if text.startswith("sqlite:///") and not text.endswith(":memory:"):
            _refuse_bertlab_file(Path(text[len("sqlite:///"):]), text)
            Path(text[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(text)
    path = Path(text).expanduser().resolve()
    _refuse_bertlab_file(path, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    from bertlab.sweeps.journal import CrashSafeJournal

    # A torn last record (a worker killed while writing) is dropped, a damaged middle one named (journal.py).
    return optuna.storages.JournalStorage(CrashSafeJournal(str(path)))


def _refuse_bertlab_file(path: Path, storage: str) -> None:
    """The study's file is never a file of a run or an export folder (bertlab.runtime.outputs)."""
    refuse_replacing_bertlab_files(path, f"hydra.sweeper.storage={storage}", "Keep the study's file outside run "
                                   "and export folders (the default: <sweep dir>/optuna.journal)")


def describe(storage: Any) -> str:
    """The storage for logs, without an RDB URL's password."""
    text = str(storage)
    if is_rdb_url(text) and "@" in text:
        scheme, rest = text.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return text


def trial_handle(study: optuna.Study, storage: optuna.storages.BaseStorage, number: int) -> optuna.Trial:
    """A :class:`optuna.Trial` for the existing trial ``number`` of ``study`` (opened on ``storage``): to
    report to it and ask whether to prune it from the job's process, or to run it again."""
    study_id = storage.get_study_id_from_name(study.study_name)
    return optuna.trial.Trial(study, storage.get_trial_id_from_study_id_trial_number(study_id, number))


class Worker:
    """This sweeper process, registered in ``<sweep dir>/.workers/`` for as long as it runs."""

    def __init__(self, sweep_dir: Path):
        self.sweep_dir = Path(sweep_dir)
        self.id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._lock: FileLock | None = None

    def __enter__(self) -> Worker:
        folder = self.sweep_dir / WORKERS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(folder / f"{self.id}.lock"))
        self._lock.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._lock is not None:
            self._lock.release()
            Path(self._lock.lock_file).unlink(missing_ok=True)

    @contextlib.contextmanager
    def study_lock(self) -> Iterator[None]:
        """Held while a worker counts the study's trials and asks for new ones (no two workers overshoot
        ``n_trials`` or both take over the same abandoned trial)."""
        with FileLock(str(self.sweep_dir / WORKERS_DIR / STUDY_LOCK)):
            yield

    def alive(self, worker_id: Any) -> bool:
        """Whether the worker ``worker_id`` still runs (its lock file is held)."""
        if worker_id == self.id:
            return True
        if not worker_id:
            return False
        path = self.sweep_dir / WORKERS_DIR / f"{worker_id}.lock"
        if not path.exists():
            return False
        probe = FileLock(str(path))
        try:
            probe.acquire(timeout=0)
        except Timeout:
            return True
        probe.release()
        path.unlink(missing_ok=True)
        return False

    def others(self) -> list[str]:
        """The other live workers of this sweep."""
        folder = self.sweep_dir / WORKERS_DIR
        ids = [p.stem for p in folder.glob("*.lock") if p.name != STUDY_LOCK and p.stem != self.id]
        return [w for w in ids if self.alive(w)]


def check_storage_for_workers(storage: Any, n_jobs: int, other_workers: list[str]) -> None:
    """sqlite is for one process: refuse it when trials run in parallel."""
    if not is_sqlite(storage):
        return
    if n_jobs > 1 or other_workers:
        why = f"hydra.sweeper.n_jobs={n_jobs}" if n_jobs > 1 else f"{len(other_workers)} other worker(s) run"
        raise ConfigError(
            f"hydra.sweeper.storage={storage}: an sqlite file is for one process at a time, but {why} on this "
            "study. Use a journal file (hydra.sweeper.storage=<sweep dir>/optuna.journal, the default of "
            "hparams_search=optuna) or a database server URL (postgresql://..., mysql+pymysql://...)"
        )
