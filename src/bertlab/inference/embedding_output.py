"""``bertlab.predict`` on an embedding model: where its embeddings go, as JSONL records or as a ``.npy`` matrix.

The rule (``--output-format``, docs/embeddings.md "Prediction"):

- ``jsonl``: one ``{"text", "embedding"}`` record per input (every model's prediction format).
- ``npy``: ``OUT.npy``, a float32 (N, D) matrix whose row i is the i-th input's embedding, and ``OUT.ids.txt``,
  row i's id on line i: the input's ``id`` field (a JSONL object's) where it has one, else the input's line in
  its file (1-based; a table's data line, header counted). ``--output`` is needed (a matrix is not written to a
  terminal); ``OUT`` is ``--output`` without a ``.npy`` suffix.
- ``auto`` (the default): ``npy`` when ``--output`` ends in ``.npy``, or when the input holds more than
  :data:`LARGE_INPUT` texts and ``--output`` is given (then written beside it: ``--output emb.jsonl`` gives
  ``emb.npy`` and ``emb.ids.txt``, and a log line says so); else ``jsonl``. As JSON text an embedding takes
  about five times the bytes of its float32 row.

A file input is counted before it is read, and its matrix is written row by row into a memory-mapped file of that
many rows: memory stays that of one read-ahead chunk. Standard input, whose length is not known, is held in
memory until its end. Both files are written through temporary files: a failed prediction leaves no half matrix.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bertlab.runtime.errors import ConfigError
from bertlab.runtime.files import atomic_path

if TYPE_CHECKING:
    from bertlab.inference.predictor import Predictor

log = logging.getLogger(__name__)

OUTPUT_FORMATS = ("auto", "jsonl", "npy")
LARGE_INPUT = 10_000  # texts: above this, auto writes a .npy matrix (JSONL would be ~5x its size)


def output_kind(fmt: str, output: str | None, family: str, total: int | None) -> str:
    """``jsonl`` or ``npy`` for ``--output-format fmt`` (module docstring: the rule); refusals as errors."""
    if fmt not in OUTPUT_FORMATS:
        raise ConfigError(f"--output-format must be one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
    wants_npy = fmt == "npy" or (fmt == "auto" and output is not None and output.lower().endswith(".npy"))
    if family != "embedding":  # its records, whatever --output is named
        if fmt == "npy":
            raise ConfigError(f"--output-format npy writes an embedding matrix, and this is a {family} model: its "
                              "predictions are records. Drop --output-format (and give --output a .jsonl name)")
        return "jsonl"
    if fmt == "npy" and output is None:
        raise ConfigError("--output-format npy writes a matrix file: give --output OUT (OUT.npy and OUT.ids.txt are "
                          "written)")
    if wants_npy:
        return "npy"
    if fmt == "auto" and output is not None and total is not None and total > LARGE_INPUT:
        npy, ids = npy_paths(output)
        log.info("%d inputs (more than %d): embeddings written as a matrix, %s, with their ids in %s "
                 "(--output-format jsonl writes JSONL records instead)", total, LARGE_INPUT, npy, ids)
        return "npy"
    return "jsonl"


def npy_paths(output: str | Path) -> tuple[Path, Path]:
    """``OUT.npy`` and ``OUT.ids.txt`` for ``--output`` (its ``.npy`` or ``.jsonl`` suffix taken off)."""
    path = Path(output).expanduser()
    stem = path.with_suffix("") if path.suffix.lower() in (".npy", ".jsonl", ".json") else path
    return stem.with_name(stem.name + ".npy"), stem.with_name(stem.name + ".ids.txt")


def input_id(where: str, x: Any) -> str:
    """Row id of an input (module docstring): its ``id`` field, else its line number; one line of text."""
    value = x.get("id") if isinstance(x, dict) else None
    if value is None:
        value = where.rsplit(":", 1)[-1].removeprefix("input ")
    return " ".join(str(value).split())


def write_npy(predictor: Predictor, items: Iterator[tuple[str, Any]], total: int | None, output: str | Path,
              progress: bool = True, batch_size: int | None = None) -> tuple[int, Path]:
    """Embed ``items`` into ``OUT.npy`` + ``OUT.ids.txt`` (module docstring); returns the count and the .npy."""
    from tqdm import tqdm

    npy, ids_path = npy_paths(output)
    npy.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with atomic_path(npy) as tmp_npy, atomic_path(ids_path) as tmp_ids, \
            open(tmp_ids, "w", encoding="utf-8") as ids, \
            tqdm(total=total, unit=" texts", file=sys.stderr, disable=not progress, dynamic_ncols=True) as bar:
        matrix, held = None, []
        for chunk, vectors in predictor.embed_items(items, batch_size):
            if total is None:
                held.append(vectors)
            else:
                if matrix is None:
                    matrix = np.lib.format.open_memmap(tmp_npy, mode="w+", dtype=np.float32,
                                                       shape=(total, vectors.shape[1]))
                if count + len(vectors) > total:  # the count read ahead is the rule for every file format
                    raise RuntimeError(f"more inputs than the {total} counted before reading")
                matrix[count:count + len(vectors)] = vectors
            ids.writelines(input_id(where, x) + "\n" for where, x in chunk)
            count += len(vectors)
            bar.update(len(vectors))
        if total is not None and count != total:
            raise RuntimeError(f"{count} inputs embedded of the {total} counted before reading")
        if matrix is not None:
            matrix.flush()
            del matrix
        else:  # standard input (held), or no input at all: a (0, 0) matrix
            with open(tmp_npy, "wb") as f:  # a file object: np.save adds no .npy to the temporary name
                np.save(f, np.concatenate(held) if held else np.zeros((0, 0), dtype=np.float32), allow_pickle=False)
    return count, npy
