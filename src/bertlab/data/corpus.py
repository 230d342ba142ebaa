"""The pre-training corpus on disk: a cheap content fingerprint, the shard plan (byte ranges cut at document
boundaries), and reading one shard back as documents and blocks of documents — without the corpus in memory.
:mod:`bertlab.data.pretrain` prepares the shards into Arrow files.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from bertlab.data.tokenizer import content_hash
from bertlab.runtime.errors import DataError

# Bytes read at the head, the tail and at evenly spaced places of a corpus file for its fingerprint.
_SAMPLE_BYTES = 1 << 20
_SAMPLE_POINTS = 16
# Automatic shard size: about _SHARDS_TARGET shards (work for every core, fine-grained resume), each
# between 1 MiB and 64 MiB of text (a shard's memory is one block of documents, not the shard).
_SHARDS_TARGET = 128
_MIN_SHARD_BYTES = 1 << 20
_MAX_SHARD_BYTES = 64 << 20


def corpus_fingerprint(paths: Sequence[str | os.PathLike[str]]) -> str:
    """A cheap content key of corpus files: name, size and sha256 of sampled blocks of each file.

    Reading 16 GB to hash it would cost minutes at every start, so this hashes the first and last MiB and
    64 KiB at 16 evenly spaced places, plus the size. The modification time is left out on purpose: a copy
    of the corpus on another machine (``aws s3 sync``, ``rsync`` without ``-t``) keeps the key and reuses
    a preparation made elsewhere. An edit that keeps the size and misses every sampled block goes
    unnoticed: delete ``<cache_dir>/pretrain`` after such surgery.
    """
    parts: list[str | bytes] = []
    for path in paths:
        p = Path(path)
        try:
            stat = p.stat()
        except FileNotFoundError:
            raise DataError(f"corpus file not found: {p}") from None
        parts.append(f"{p.name}:{stat.st_size}")
        with open(p, "rb") as f:
            step = max(1, stat.st_size // _SAMPLE_POINTS)
            for offset in {0, max(0, stat.st_size - _SAMPLE_BYTES), *range(0, stat.st_size, step)}:
                f.seek(offset)
                parts.append(f.read(_SAMPLE_BYTES if offset in (0, max(0, stat.st_size - _SAMPLE_BYTES))
                                    else 1 << 16))
    return content_hash(*parts)


def auto_shard_bytes(total_bytes: int) -> int:
    """The default shard size for a corpus of ``total_bytes``: about 128 shards, 1 MiB to 64 MiB each."""
    return int(min(_MAX_SHARD_BYTES, max(_MIN_SHARD_BYTES, math.ceil(total_bytes / _SHARDS_TARGET))))


# ----------------------------------------------------------------------------------------------------
# Shard plan: byte ranges of the corpus files, cut at document boundaries

# A piece of a shard: (index of the file in the corpus, first byte, end byte).
Piece = tuple[int, int, int]


def _is_wikitext(path: Path, fmt: str) -> bool:
    return fmt == "wikitext" or (fmt == "auto" and path.suffix == ".tokens")


def _document_starts(f, offset: int, end: int, wikitext: bool) -> Iterator[int]:
    """Byte offsets in [offset, end) where a document surely starts, read line by line from ``offset``.

    Plain text: a line that follows a blank line (blank in ASCII terms; a line blank only in Unicode
    terms is then inside the gap between two documents, which is still a boundary). WikiText: a
    `` = Title = `` line. ``offset`` is rounded up to the next line start first.
    """
    from bertlab.data.rawtext import _heading_level

    f.seek(offset)
    pos = offset
    if offset > 0:
        f.seek(offset - 1)
        if f.read(1) != b"\n":
            pos += len(f.readline())  # the rest of a line cut in the middle
    prev_blank = False
    while pos < end:
        line = f.readline()
        if not line:
            return
        if wikitext:
            if line.lstrip(b" \t").startswith(b"=") and _heading_level(
                    line.decode("utf-8", "replace").strip()) == 1:
                yield pos
        else:
            blank = not line.strip()
            if prev_blank and not blank:
                yield pos
            prev_blank = blank
        pos += len(line)


def plan_shards(paths: Sequence[Path], fmt: str, shard_bytes: int) -> list[list[Piece]]:
    """Cut the corpus into shards of about ``shard_bytes`` bytes; see the module docstring.

    A cut inside a file goes at a document start past the target size, chosen so that the shard before it
    holds at least two documents and the file holds at least two more after it (a NotNext B needs another
    document of the same block); where there is no such start, the rest of the file joins the shard. A last
    shard smaller than a quarter of ``shard_bytes`` joins the one before.
    """
    shards: list[list[Piece]] = []
    current: list[Piece] = []
    current_bytes = 0
    for index, path in enumerate(paths):
        size = path.stat().st_size
        wikitext = _is_wikitext(path, fmt)
        pos = 0
        with open(path, "rb") as f:
            while pos < size:
                room = shard_bytes - current_bytes
                cut = None
                if size - pos > room:
                    starts = list(itertools.islice(_document_starts(f, max(pos + 1, pos + room), size, wikitext), 3))
                    # Alone in its shard, this piece needs a second document: skip the first start.
                    skip = 0 if current else 1
                    if len(starts) >= skip + 2:
                        cut = starts[skip]
                if cut is None:
                    current.append((index, pos, size))
                    current_bytes += size - pos
                    pos = size
                    if current_bytes >= shard_bytes:
                        shards.append(current)
                        current, current_bytes = [], 0
                else:
                    current.append((index, pos, cut))
                    shards.append(current)
                    current, current_bytes, pos = [], 0, cut
    if current:
        if shards and current_bytes < shard_bytes // 4:
            shards[-1].extend(current)
        else:
            shards.append(current)
    return shards


# ----------------------------------------------------------------------------------------------------
# Reading one shard: its lines, documents and blocks of documents


def _line_number(path: Path, offset: int) -> int:
    """The 1-based number of the line that starts at byte ``offset``, lines counted as :func:`_piece_lines` and
    ``rawtext`` break them (LF, CR LF and CR): the number an editor shows (read only to report an error)."""
    breaks, after_cr = 0, False
    with open(path, "rb") as f:
        while offset > 0:
            block = f.read(min(offset, 1 << 20))
            if not block:
                break
            breaks += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
            breaks -= after_cr and block.startswith(b"\n")  # a CR LF cut by the block boundary is one break
            after_cr = block.endswith(b"\r")
            offset -= len(block)
    return breaks + 1


def _piece_lines(path: Path, start: int, end: int) -> Iterator[str]:
    """The decoded lines of bytes [start, end) of ``path`` (a range of whole lines), as ``rawtext`` reads
    them: lines break at LF, CR LF and CR; a UTF-8 byte-order mark at the file start is not text."""
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        while pos < end:
            chunk = f.readline()
            if not chunk:
                return
            raw = chunk[3:] if pos == 0 and chunk.startswith(b"\xef\xbb\xbf") else chunk
            # A chunk ends at LF only: lines ended by a lone CR inside it are lines of their own (k counts them).
            for k, part in enumerate(raw.splitlines() or [b""]):
                try:
                    yield part.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise DataError(
                        f"{path}:{_line_number(path, pos) + k}: not valid UTF-8 ({err.reason} at byte {err.start} "
                        "of the line); re-encode the file as UTF-8") from None
            pos += len(chunk)


def _shard_documents(pieces: Sequence[Piece], paths: Sequence[Path], fmt: str) -> Iterator[list[str]]:
    """Documents (as their lines, not yet split into sentences) of one shard, exactly as
    :func:`bertlab.data.rawtext.iter_corpus` with ``sentences=False`` reads them from the whole files."""
    from bertlab.data.rawtext import wikitext_documents

    for index, start, end in pieces:
        path = paths[index]
        if _is_wikitext(path, fmt):
            yield from wikitext_documents(_piece_lines(path, start, end), split=lambda line: [line])
            continue
        current: list[str] = []
        for line in _piece_lines(path, start, end):
            if not line.strip():
                if current:
                    yield current
                    current = []
                continue
            current.append(line)
        if current:
            yield current


def _blocks(documents: Iterator[list[str]], size: int) -> Iterator[list[list[str]]]:
    """Consecutive documents in blocks of ``size``; a last block of one document joins the one before
    (alone it would have no other document to draw a NotNext B from)."""
    held: list[list[str]] | None = None
    current: list[list[str]] = []
    for doc in documents:
        current.append(doc)
        if len(current) == size:
            if held is not None:
                yield held
            held, current = current, []
    if held is not None and len(current) == 1:
        held, current = held + current, []
    for rows in (held, current):
        if rows:
            yield rows
