"""Files that several processes, or a killed process, may leave half done: a lock around "build unless it
exists", writing through a temporary file renamed into place, and removing the temporaries a killed writer
left behind; the check that an output is never a file the command reads; and :func:`writing`, which turns a
write that failed for a reason the user can fix (a full disk, a quota, a read-only file system, a folder
they may not write) into one paragraph naming the file, the disk's free space and what to do."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bertlab.runtime.errors import ConfigError, OutputError, user_error_types

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


@contextlib.contextmanager
def replaced_folder(folder: str | Path) -> Iterator[Path]:
    """Yield a new empty folder beside ``folder`` (``<name>.tmp-<pid>``); when the block ends without error it
    takes ``folder``'s place whole (the old folder, if any, is removed); on an error it is removed and
    ``folder`` is as it was.

    So nothing of an earlier folder survives into the new one, and a process killed while writing leaves the
    old folder intact (and a temporary one that the next call removes). Between the two renames that swap
    them the folder is briefly absent; a process killed exactly there leaves ``<name>.old-<pid>``, which the
    next call puts back when ``folder`` is missing. ``folder`` is resolved through symbolic links first."""
    folder = Path(os.path.realpath(Path(folder).expanduser()))
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_folders(folder)
    tmp = temporary_path(folder)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
        if folder.exists() or folder.is_symlink():
            old = folder.with_name(f"{folder.name}.old-{os.getpid()}")
            os.replace(folder, old)
            os.replace(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, folder)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)


def _remove_stale_folders(folder: Path) -> None:
    """What a killed :func:`replaced_folder` of ``folder`` left: its temporary folders (removed) and an old
    folder moved aside just before the swap (put back when ``folder`` is missing, else removed)."""
    pattern = re.compile(re.escape(folder.name) + r"\.(tmp|old)-(\d+)$")
    for path in sorted(folder.parent.iterdir()) if folder.parent.is_dir() else []:
        match = pattern.match(path.name)
        if match is None or not path.is_dir() or _alive(int(match.group(2))):
            continue
        if match.group(1) == "old" and not folder.exists():
            os.replace(path, folder)
            log.warning("put back %s, which a process killed while replacing it had moved to %s", folder, path)
        else:
            shutil.rmtree(path, ignore_errors=True)
            log.warning("removed %s, a partial folder left by a process killed while writing it", path)


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


# ----------------------------------------------------------------------------------------------------------
# Writes that fail for a reason the user can fix

# errno → kind. ENOSPC, EDQUOT and EROFS only ever come from writing; EACCES / EPERM also from reading, so
# they count only where the caller knows it was writing (:func:`writing`).
_KINDS = {errno.ENOSPC: "full", errno.EDQUOT: "quota", errno.EROFS: "read-only", errno.EACCES: "permission",
          errno.EPERM: "permission"}
WRITE_ONLY_KINDS = ("full", "quota", "read-only")
# Libraries that wrap the OSError in an error of their own keep only its text: torch's zip writer
# ("PytorchStreamWriter failed writing file ...: file write failed", "unexpected pos"), safetensors
# (SafetensorError "... IoError(Os { code: 28, kind: StorageFull, message: \"No space left on device\" })"),
# tokenizers ("No space left on device (os error 28)").
_TEXTS = {"No space left on device": "full", "StorageFull": "full", "os error 28": "full",
          "file write failed": "full", "Disk quota exceeded": "quota", "QuotaExceeded": "quota",
          "os error 122": "quota", "Read-only file system": "read-only", "ReadOnlyFilesystem": "read-only",
          "os error 30": "read-only", "Permission denied": "permission", "PermissionDenied": "permission",
          "os error 13": "permission"}
_TEXTS.update({os.strerror(code): kind for code, kind in _KINDS.items()})  # the C library's own wording


def _chain(err: BaseException) -> Iterator[BaseException]:
    """``err`` and what it was raised from or during (``__cause__``, ``__context__``), each once."""
    seen: set[int] = set()
    todo = [err]
    while todo:
        exc = todo.pop(0)
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        todo += [exc.__cause__, exc.__context__]


def write_failure(err: BaseException, kinds: tuple[str, ...] = ("full", "quota", "read-only", "permission")
                  ) -> tuple[str, OSError | None] | None:
    """``(kind, the OSError if one is in the chain)`` when ``err`` or an error in its chain is a write that
    failed for one of ``kinds`` (see :data:`_KINDS`), else None."""
    for exc in _chain(err):
        if isinstance(exc, OSError) and _KINDS.get(exc.errno) in kinds:
            return _KINDS[exc.errno], exc
    for exc in _chain(err):
        text = str(exc)
        for needle, kind in _TEXTS.items():
            if kind in kinds and needle in text:
                return kind, None
    return None


def _mount_point(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() or (not os.path.ismount(path) and path.parent != path):
        path = path.parent
    return path


def write_failure_message(path: str | Path | None, what: str, kind: str, fix: str, note: str = "") -> str:
    """One paragraph: what could not be written where, why, the disk's free space, and what to do."""
    where = f"{what} {path}" if path is not None else what
    disk = _mount_point(Path(path).parent) if path is not None else None
    try:
        free = f"{shutil.disk_usage(disk).free / 2**20:.0f} MiB free" if disk is not None else ""
    except OSError:
        free = "free space unknown"
    on = f" (disk mounted at {disk}, {free})" if disk is not None else ""
    note = f"{note} " if note else ""
    if kind == "full":
        return f"the disk is full: could not write {where}{on}. {note}Free space on that disk, or {fix}"
    if kind == "quota":
        return (f"your disk quota is used up: could not write {where}{on}. {note}Free space under your quota "
                f"(`quota -s` shows it), or {fix}")
    if kind == "read-only":
        return f"the file system is read-only: could not write {where}{on}. {note}{fix[:1].upper()}{fix[1:]}"
    return (f"permission denied: could not write {where}{on}. {note}Make that folder writable for you "
            f"(`ls -ld {Path(path).parent if path is not None else '<folder>'}` shows its owner), or {fix}")


RUN_DIR_FIX = "give the run another disk with hydra.run.dir=<folder on it> (and resume with ckpt_path=<the last .ckpt>)"
CACHE_FIX = "point paths.cache_dir at a disk with room"


@contextlib.contextmanager
def writing(path: str | Path, what: str, fix: str, error: type[Exception] = OutputError,
            note: str = "") -> Iterator[None]:
    """Around code that writes ``path``: a write that fails for a reason the user can fix (full disk, quota,
    read-only file system, permission; also when a library wrapped the OSError, see :func:`write_failure`)
    becomes ``error`` with :func:`write_failure_message`. ``what`` names the file ("the checkpoint"),
    ``fix`` says what else to do ("give the run another disk with hydra.run.dir=<folder on it>")."""
    try:
        yield
    except user_error_types():
        raise
    except Exception as err:
        failure = write_failure(err)
        if failure is None:
            raise
        raise error(write_failure_message(path, what, failure[0], fix, note)) from err


def unwritable_output(err: BaseException) -> OutputError | None:
    """The entry points' last resort (:func:`bertlab.runtime.exits.user_errors`): a write that failed for a
    reason that only writing has (full disk, quota, read-only file system) anywhere no :func:`writing` named
    the file (a logger's file, a lock file), as one paragraph with the file the error names."""
    failure = write_failure(err, WRITE_ONLY_KINDS)
    if failure is None:
        return None
    kind, oserror = failure
    path = getattr(oserror, "filename", None)
    return OutputError(write_failure_message(
        path, "a file" if path is None else "the file", kind,
        "point the run's outputs (hydra.run.dir) and caches (paths.cache_dir) at a disk with room"))
