"""Files that several processes, or a killed process, may leave half done: a lock around "build unless it
exists", writing through a temporary file renamed into place, and removing the temporaries a killed writer
left behind."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

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

