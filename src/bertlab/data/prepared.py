"""A prepared pre-training corpus (:mod:`bertlab.data.pretrain` writes it) read back by row.

Training reads the saved shards by row (:class:`ArrowExamples`): opening them keeps only each row's offset,
length and label, and a row is read with ``os.pread`` when a batch needs it, so resident memory does not
grow with the corpus or with the rows read; the file pages stay in the operating system's cache, shared by
every DataLoader worker and every rank of a node. Batches come from bertlab's own
:class:`~bertlab.data.batching.TrainBatchSampler` (random access by row), which splits batches
across ranks and, through the DataLoader, across workers, and whose state (seed, epoch, batches done) makes
a mid-epoch resume exact. Masks are drawn per batch by the collator, as on the in-memory path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertlab.data.readers import DataError
from bertlab.runtime.records import read_record


class ArrowExamples:
    """The saved examples as the feature list a :class:`FeatureDataset` indexes.

    ``examples[i]`` is a dict like the in-memory path's features (``input_ids``, ``token_type_ids``,
    ``index`` and, with NSP, ``next_sentence_label``); the two id sequences are numpy arrays the collator
    pads straight into the batch (no Python int per token).

    Opening reads each shard (an Arrow stream, as ``datasets``' ``ArrowWriter`` writes it) message by message
    with ``pyarrow`` and keeps, per record batch, only what finds a row: the list offsets, the labels and
    lengths, and where the two value buffers start in the file. ``examples[i]`` then reads exactly that
    row's bytes with ``os.pread``. The file is not memory-mapped on purpose: training reads rows in random
    order, and a mapping pages in, and counts in the process's resident memory, the neighbouring pages of
    every row read as well (about 76 KB per row, measured: docs/pretraining.md), so a mapped corpus grows
    every process's resident set towards the corpus size over an epoch. With ``pread`` the pages stay in the
    operating system's file cache, shared by every worker and rank and reclaimable, and the process holds
    about 10 bytes per example (a row's offset and its NSP label).
    Picklable by folder (DataLoader workers and spawned ranks read the same files).
    """

    _MAX_OPEN_FILES = 64  # shard files kept open per process (the others are reopened when read)

    def __init__(self, folder: str | os.PathLike[str], nsp: bool, limit: int | None = None):
        self.folder = Path(folder)
        self.nsp = nsp
        self.limit = limit
        self.meta = read_meta(self.folder)
        self._files = [self.folder / name for name in self.meta["shard_files"]]
        self._chunks = [c for k, path in enumerate(self._files) for c in _record_batches(k, path)]
        starts = np.cumsum([0] + [c.rows for c in self._chunks])
        self._starts = starts[:-1]
        self._len = int(starts[-1]) if limit is None else min(limit, int(starts[-1]))
        self._fds: dict[int, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fds": {}}  # descriptors are per process

    def __del__(self) -> None:
        for fd in getattr(self, "_fds", {}).values():
            try:
                os.close(fd)
            except OSError:
                pass

    def __len__(self) -> int:
        return self._len

    def lengths(self) -> np.ndarray:
        if not self._chunks:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.diff(c.offsets) for c in self._chunks])[: self._len]

    def _fd(self, k: int) -> int:
        fd = self._fds.get(k)
        if fd is None:
            if len(self._fds) >= self._MAX_OPEN_FILES:
                os.close(self._fds.pop(next(iter(self._fds))))
            fd = self._fds[k] = os.open(self._files[k], os.O_RDONLY)
        return fd

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = int(i)
        if not 0 <= i < self._len:
            raise IndexError(f"example {i} of {self._len}")
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        c, row = self._chunks[k], i - int(self._starts[k])
        lo, hi = int(c.offsets[row]), int(c.offsets[row + 1])
        n = hi - lo
        fd = self._fd(c.file)
        ids = np.frombuffer(os.pread(fd, 4 * n, c.ids_at + 4 * lo), dtype="<i4")
        types = np.frombuffer(os.pread(fd, n, c.types_at + lo), dtype=np.int8)
        if len(ids) != n or len(types) != n:
            raise _prepare_again(self._files[c.file], "is shorter than its own index (modified or truncated)")
        f = {"input_ids": ids, "token_type_ids": types, "index": i}
        if self.nsp:
            f["next_sentence_label"] = int(c.next_sentence_label[row])
        return f

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


@dataclass(frozen=True, slots=True)
class _Chunk:
    """One record batch of a shard file: its rows' list offsets and NSP labels (copied out of the batch; a
    row's length is the difference of two offsets), and the file positions of its ``input_ids`` (int32) and
    ``token_type_ids`` (int8) values."""

    file: int  # index into ArrowExamples._files
    offsets: np.ndarray  # (rows + 1,) int64
    next_sentence_label: np.ndarray  # (rows,) int16
    ids_at: int
    types_at: int

    @property
    def rows(self) -> int:
        return len(self.offsets) - 1


# A preparation's meta.json: the keys bertlab reads back, and their types.
META_SHAPE = {"shard_files": list, "examples": int, "documents": int, "settings": dict}


def read_meta(folder: Path) -> dict[str, Any]:
    """A preparation's ``meta.json``, every problem a :class:`DataError` naming the file and key (and saying to
    prepare the corpus anew); its shard files must be files of the folder."""
    path = Path(folder) / "meta.json"
    fix = f"Delete {folder} and run again to prepare the corpus anew"
    meta = read_record(path, "the prepared corpus's record", fix, shape=META_SHAPE, required=("shard_files",),
                       error=DataError)
    odd = [f for f in meta["shard_files"] if not isinstance(f, str) or ".." in Path(f).parts or Path(f).is_absolute()]
    missing = [f for f in meta["shard_files"] if f not in odd and not (Path(folder) / f).is_file()]
    if odd or missing:
        what = f"names {odd[0]!r}, not a file of the folder" if odd else f"names {missing[0]!r}, which is missing"
        raise DataError(f"{path}: key 'shard_files' {what}. {fix}")
    return meta


def _prepare_again(path: Path, problem: str) -> DataError:
    """The error for a prepared shard that cannot be read as bertlab wrote it (the folder is
    ``<split>-<key>/examples/NNNNN.arrow``: removing the whole ``<split>-<key>`` makes the next run prepare it)."""
    return DataError(f"{path} {problem}: delete {path.parent.parent} and run again to prepare it anew")


def _record_batches(file: int, path: Path) -> list[_Chunk]:
    import pyarrow as pa

    def next_message(source):
        try:
            return pa.ipc.read_message(source)
        except EOFError:
            return None
        except (OSError, pa.ArrowException) as err:
            raise _prepare_again(path, f"cannot be read as a prepared shard ({err})") from None

    try:
        source = pa.OSFile(str(path))
    except OSError as err:
        raise _prepare_again(path, f"cannot be read as a prepared shard ({err})") from None
    chunks = []
    with source:
        first = next_message(source)
        if first is None:
            raise _prepare_again(path, "is empty")
        schema = pa.ipc.read_schema(first)
        while (message := next_message(source)) is not None:
            body_at = source.tell() - message.body.size  # the message body ends where the reader stands
            batch = pa.ipc.read_record_batch(message, schema)
            if not batch.num_rows:
                continue
            positions = []
            for name in ("input_ids", "token_type_ids"):
                column = batch.column(name)
                values = column.values
                at = values.buffers()[1].address - message.body.address + values.offset * values.type.bit_width // 8
                if column.null_count or values.null_count or not 0 <= at <= message.body.size:
                    raise _prepare_again(path, f"holds a {name} column not laid out as bertlab writes it")
                positions.append(body_at + at)
            chunks.append(_Chunk(
                file=file, offsets=np.array(batch.column("input_ids").offsets.to_numpy(), dtype=np.int64),
                next_sentence_label=np.array(batch.column("next_sentence_label").to_numpy(), dtype=np.int16),
                ids_at=positions[0], types_at=positions[1]))
    return chunks
