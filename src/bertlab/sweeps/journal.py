"""The study's journal file read the way a crash leaves it.

Optuna's journal (``optuna.journal``) is a file of JSON records, one a line, that every worker appends to under
the journal's lock. A worker killed while appending leaves its last record half-written and without the line's
newline; Optuna's reader skips such a tail, but the next append glued its own record onto it, and from then on
every worker that read the file crashed with ``JSONDecodeError`` on that line.

:class:`CrashSafeJournal` is the one place the journal is read and appended:

- a torn final record (the bytes after the last newline: never a whole record, since every append ends with
  one) is dropped, with a warning that says how many bytes, and cut off the file under the journal's lock before
  this worker appends, so later records start on a line of their own; every finished trial is kept;
- a record in the middle of the file that is not JSON (damage no crash of a writer leaves) stops the sweep with
  one paragraph naming the file and the line (:class:`~bertlab.runtime.errors.ConfigError`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

from optuna.storages.journal import JournalFileBackend
from optuna.storages.journal._file import get_lock_file

from bertlab.runtime.errors import ConfigError

log = logging.getLogger(__name__)


def _torn_tail(path: str) -> tuple[int, int]:
    """``(size, end of the last whole line)`` of the file at ``path``: the bytes between are a torn record."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        end = size
        block = 1 << 16
        while end > 0:  # back to the last newline, a block at a time (a torn record is one record long)
            start = max(0, end - block)
            f.seek(start)
            chunk = f.read(end - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return size, start + newline + 1
            end = start
        return size, 0


def _bad_line(path: str) -> tuple[int, str] | None:
    """The first whole line of the journal that is not a JSON record: ``(line number, its start)``."""
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):
                return None  # the torn tail: dropped, not damage
            try:
                json.loads(line)
            except ValueError:
                return number, line[:60].decode("utf-8", "replace")
    return None


class CrashSafeJournal(JournalFileBackend):
    """Optuna's journal file backend that drops a torn last record and names a damaged middle one."""

    def __init__(self, file_path: str, lock_obj: Any = None) -> None:
        super().__init__(file_path, lock_obj)
        self.repair()

    def repair(self) -> int:
        """Cut a torn final record off the file (under the journal's lock: no worker is appending); the bytes
        dropped (0: the file ends with a whole record)."""
        size, end = _torn_tail(self._file_path)
        if end == size:
            return 0
        with get_lock_file(self._lock):
            size, end = _torn_tail(self._file_path)  # again under the lock: another worker may have repaired it
            if end == size:
                return 0
            with open(self._file_path, "r+b") as f:
                f.seek(end)
                torn = f.read(200)
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        log.warning("%s ended in a half-written record (%d bytes after its last whole line, left by a worker killed "
                    "while writing: %r…); dropped it, the finished trials before it are kept", self._file_path,
                    size - end, torn[:60].decode("utf-8", "replace"))
        return size - end

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self.repair()  # a worker killed since this one opened the journal: start this record on its own line
        super().append_logs(logs)

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        try:
            yield from super().read_logs(log_number_from)
        except ValueError as err:  # json.JSONDecodeError or Optuna's "Invalid log format."
            raise ConfigError(damaged_message(self._file_path)) from err


def damaged_message(path: str) -> str:
    bad = _bad_line(path)
    where = (f"line {bad[0]} is not a journal record ({bad[1]!r}…)" if bad is not None
             else "a record in the middle is not a journal record")
    return (f"{path}: {where}, and records follow it: the study's journal was damaged in the middle (a crash "
            "of a worker only ever tears the last record, which is dropped). Its trials cannot be read back "
            "reliably. Restore the file from a backup, or delete that line if you know it holds nothing needed "
            f"(the trials it wrote are lost), or move {Path(path).name} aside and start the study anew")
