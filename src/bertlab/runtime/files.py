"""Files that several processes, or a killed process, may leave half done: a lock around "build unless it
exists", writing through a temporary file renamed into place, and removing the temporaries a killed writer
left behind; and the check that an output is never a file the command reads."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bertlab.runtime.errors import ConfigError

log = logging.getLogger(__name__)


@contextlib.contextmanager
def cache_lock(path: Path | None) -> Iterator[None]:
    """Hold an exclusive file lock on ``<path>.lock`` (nothing when ``path`` is None).

    Around "build a cache entry unless it exists": of the processes that start together (torchrun, SLURM,
    several ranks of one node) one builds, the others wait and then find the entry. Works across nodes
    only where the shared file system supports locks (most do; a cache dir on a local disk avoids the question).
    """
    if path is None:
        yield
        return
    from filelock import FileLock  # a dependency of torch

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        yield


class _NoLock:
    """Stands in for a lock on a file system that has none (the run goes on unprotected, with a warning)."""

    def release(self) -> None:
        pass


def try_lock(path: Path) -> Any | None:
    """Take an exclusive lock on ``path`` without waiting: an object whose ``release()`` frees it, or None when
    another process holds it. The lock ends with the process that holds it (killed or not): no stale locks.
    The lock file stays (removing it would let a process that opened it just before lock a file no longer
    there while a third locks a new one)."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return None
    except (NotImplementedError, OSError) as err:  # a file system without locks (some network mounts)
        log.warning("%s: cannot be locked (%s): a second run started in this folder at the same time would not "
                    "be stopped", path, err)
        return _NoLock()
    return lock


def temporary_path(path: Path) -> Path:
    """``<name>.tmp-<pid>`` beside ``path``: the name :func:`remove_stale_temporaries` recognises."""
    return path.with_name(f"{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary file name beside ``path``; when the block ends without error, rename it over ``path``.

    A rename within one folder is atomic on POSIX file systems: a reader sees the old file or the new one,
    never half of one, and a process killed while writing leaves only the temporary file (removed by the next
    run, :func:`remove_stale_temporaries`). On an error the temporary file is removed and the error raised.
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            if tmp.is_file():
                tmp.unlink()


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_path`."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


_TMP_SUFFIX = re.compile(r"\.tmp-?(\d+)$")


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove ``<name>.tmp-<pid>`` files in ``folder`` left by a process killed while writing (a checkpoint,
    a cache file); files of processes still running are kept. Returns what was removed."""
    removed = []
    if not folder.is_dir():
        return removed
    for path in folder.iterdir():
        match = _TMP_SUFFIX.search(path.name)
        if match is None or not path.is_file():
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and _alive(pid):
            continue
        with contextlib.suppress(OSError):
            size = path.stat().st_size
            path.unlink()
            removed.append(path)
            log.warning("removed %s (%.1f MB), a partial file left by a process killed while writing it",
                        path, size / 1e6)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True



# ----------------------------------------------------------------------------------------------------------
# Outputs never replace inputs


def _file_ids(path: Path) -> set[tuple[int, int]]:
    """(device, inode) of ``path``, or of every file under it when it is a folder: the identity that every
    spelling of a file shares (``a/../a/./x``, a symbolic link, a hard link)."""
    try:
        if path.is_dir():
            return {(st.st_dev, st.st_ino) for st in (p.stat() for p in path.rglob("*") if p.is_file())}
        st = path.stat()
    except OSError:
        return set()
    return {(st.st_dev, st.st_ino)}


def refuse_writing_over(output: str | Path, reads: Iterable[tuple[str | Path, str]], what: str, fix: str) -> None:
    """Raise :class:`ConfigError` when ``output`` is one of the files a command reads.

    ``reads`` pairs a path (a file, or a folder: every file in it) with what it is ("the input file");
    ``what`` names the output as the user gave it ("--output in.txt"), ``fix`` says what to do. Opening an
    output for writing empties it at once: were it the input, the command would read nothing and replace the
    user's file with an empty result.
    """
    output = Path(output).expanduser()
    mine = _file_ids(output) if not output.is_dir() else set()
    if not mine:
        return  # a new file cannot be anything that is read
    for path, description in reads:
        path = Path(path).expanduser()
        if mine & _file_ids(path):
            raise ConfigError(f"{what} is {description} ({path}), which this command reads: writing there would "
                              f"destroy it. {fix}")
