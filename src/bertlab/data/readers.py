"""Readers for the file formats users bring: TSV/CSV/JSONL tables, CoNLL column files, SQuAD JSON.

Every example keeps where it came from (``file:line`` or an id) so a bad example ends in an error that says
where it is and what to change, or, with ``on_bad_example=skip``, is skipped and counted — never dropped
silently.
"""

from __future__ import annotations

import csv
import errno
import functools
import io
import json
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertlab.runtime.errors import DataError

log = logging.getLogger(__name__)



@dataclass
class BadExamplePolicy:
    """``error`` raises at the first bad example; ``skip`` counts and warns."""

    mode: str = "error"
    skipped: int = 0
    reasons: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in ("error", "skip"):
            raise DataError(f"data.on_bad_example must be 'error' or 'skip', got {self.mode!r}")

    def bad(self, message: str) -> None:
        if self.mode == "error":
            raise DataError(message + " (set data.on_bad_example=skip to skip such examples and count them)")
        self.skipped += 1
        if len(self.reasons) < 20:
            self.reasons.append(message)
        if self.skipped <= 5:
            log.warning("skipping bad example: %s", message)


def check_readable(path: Path) -> None:
    """A :class:`DataError` saying what is wrong when ``path`` is not a readable regular file: a folder, a
    symbolic link that loops or points nowhere, a missing file, or a file this user may not read."""
    path = Path(path)
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (RuntimeError, OSError) as err:  # a loop (ELOOP / "Symlink loop") or a dangling link
            loop = isinstance(err, RuntimeError) or getattr(err, "errno", None) == errno.ELOOP
            raise DataError(
                f"{path}: a symbolic link that {'loops back on itself' if loop else 'points to nothing'} "
                f"({os.readlink(path)!r}); point it (or the data.*_file setting) at the real data file"
            ) from None
        path = target
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.is_file())[:6]
        raise DataError(
            f"{path}: a folder, not a data file; set the data.*_file setting to a file"
            + (f" (this folder holds {', '.join(inside)})" if inside else " (this folder holds no files)")
        )
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if not os.access(path, os.R_OK):
        raise DataError(
            f"{path}: permission denied, this user cannot read the file; fix its permissions "
            f"(e.g. chmod a+r {path}) or copy it somewhere readable"
        )


def read_text(path: Path) -> str:
    """The text of a UTF-8 file (a BOM is ignored); non-UTF-8 bytes are an error naming the line."""
    check_readable(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err}); check the file and its permissions") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line}: bytes that are not UTF-8 ({raw[err.start:err.start + 4]!r}); "
            "re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None
    if not text.strip():
        raise DataError(f"{path}: the file is empty; point the data.*_file setting at a file with examples")
    return text


def read_text_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file, split at ``\\n`` (and ``\\r\\n``) only: Unicode line separators (U+2028,
    U+0085), form feeds and lone carriage returns inside a line are text, not line ends, so line numbers
    match what ``wc -l`` and editors count."""
    lines = read_text(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


# ----------------------------------------------------------------------------------------------------------
# Tables (GLUE TSV, CSV, JSONL)


@dataclass
class TextExample:
    text: str
    text_pair: str | None
    label: str | None
    where: str  # "file:line"


def json_object(line: str, where: str) -> dict[str, Any]:
    """One JSON Lines record: a JSON object, else a :class:`DataError` naming ``where`` (file:line)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise DataError(f"{where}: not a JSON object per line ({err.msg})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


@functools.cache
def _allow_long_cells() -> None:
    """Let the csv module read cells of any length (its default limit is 128 KiB; a long document is one
    cell). The limit is process-wide, so it is raised once, on the first table read."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def _table_rows(path: Path, has_header: bool = True) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(header, [(line number, {column: cell})]); ``has_header=False`` names the columns "0", "1", ... (CoLA)."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        rows = []
        # JSON Lines: one object per "\n"-ended line; U+2028 and friends are valid inside JSON strings.
        for i, line in enumerate(read_text_lines(path), 1):
            if not line.strip():
                continue
            obj = json_object(line, f"{path}:{i}")
            rows.append((i, {k: (None if v is None else str(v)) for k, v in obj.items()}))
        header = sorted({k for _, r in rows for k in r})
        return header, rows
    # GLUE TSVs are not quoted (SST-2 sentences hold bare quote marks): read them with QUOTE_NONE.
    delimiter = "," if suffix == ".csv" else "\t"
    quoting = csv.QUOTE_MINIMAL if suffix == ".csv" else csv.QUOTE_NONE
    _allow_long_cells()
    # The csv module reads the text itself (newline=""): a quoted CSV cell keeps its newlines, and only
    # \n, \r\n and \r end a record (never U+2028, U+0085 or a form feed).
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter=delimiter, quoting=quoting)
    try:
        first = next(reader, [])
        header = [h.strip() for h in first] if has_header else [str(i) for i in range(len(first))]
        records = [] if has_header else [(1, first)]
        line = reader.line_num
        for cells in reader:
            records.append((line + 1, cells))  # a record may span lines (a quoted newline): its first line
            line = reader.line_num
    except csv.Error as err:
        raise DataError(f"{path}:{reader.line_num}: not valid {'CSV' if suffix == '.csv' else 'TSV'} ({err})") from None
    rows = []
    for start_line, cells in records:
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            rows.append((start_line, {"__bad__": f"{len(cells)} columns where the header has {len(header)}"}))
            continue
        rows.append((start_line, dict(zip(header, cells))))
    return header, rows


def read_table(
    path: Path,
    text_column: str,
    text_pair_column: str | None,
    label_column: str | None,
    policy: BadExamplePolicy,
) -> list[TextExample]:
    """Rows of a TSV/CSV/JSONL file as examples; ``label_column=None`` reads unlabelled (predict) files.

    Columns given as integers are positions (0-based) in a TSV/CSV file without a header line (GLUE's CoLA).
    """
    named = [c for c in (text_column, text_pair_column, label_column) if c is not None]
    positional = bool(named) and all(isinstance(c, int) and not isinstance(c, bool) for c in named)
    if positional and path.suffix.lower() in (".jsonl", ".json"):
        raise DataError(f"{path}: JSON lines name their fields: give data.text_column etc. as names, not positions")
    header, rows = _table_rows(path, has_header=not positional)
    if positional:
        text_column, text_pair_column, label_column = (None if c is None else str(c) for c in
                                                       (text_column, text_pair_column, label_column))
    for key, column in (("text_column", text_column), ("text_pair_column", text_pair_column),
                        ("label_column", label_column)):
        if column is not None and column not in header and positional:
            raise DataError(f"{path}: no column {column} (data.{key}); the first line has {len(header)} "
                            f"columns, numbered from 0. Set data.{key} to one of 0..{len(header) - 1}")
        if column is not None and column not in header:
            raise DataError(
                f"{path}: no column {column!r} (data.{key}); the header has {header}. "
                f"Set data.{key} to one of them"
            )
    examples = []
    for line, row in rows:
        where = f"{path}:{line}"
        if "__bad__" in row:
            policy.bad(f"{where}: {row['__bad__']}")
            continue
        text = (row.get(text_column) or "").strip()
        pair = (row.get(text_pair_column) or "").strip() if text_pair_column else None
        label = (row.get(label_column) or "").strip() if label_column else None
        if not text or (text_pair_column and not pair):
            policy.bad(f"{where}: empty text in column {text_column if not text else text_pair_column!r}")
            continue
        if label_column and not label:
            policy.bad(f"{where}: empty label in column {label_column!r}")
            continue
        examples.append(TextExample(text, pair, label, where))
    return examples


# ----------------------------------------------------------------------------------------------------------
# CoNLL column files


@dataclass
class TaggedSentence:
    words: list[str]
    tags: list[str]
    where: str  # "file:line" of the first word


_CONLL_SEPARATORS = re.compile(r"[ \t]+")


def read_conll(path: Path, tag_column: int | None, policy: BadExamplePolicy) -> list[TaggedSentence]:
    """Sentences of a CoNLL column file. Blank or whitespace-only lines end a sentence (WNUT-17 uses
    tab-only lines); ``-DOCSTART-`` lines mark documents and are not sentences. ``tag_column=None`` reads
    the words only (a file to predict: one token a line, tags ignored when present)."""
    lines = read_text_lines(path)
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0
    bad: str | None = None

    def flush() -> None:
        nonlocal words, tags, bad
        if bad is not None:
            policy.bad(bad)
        elif words:
            sentences.append(TaggedSentence(words, tags, f"{path}:{start}"))
        words, tags, bad = [], [], None

    for i, line in enumerate(lines, 1):
        # Columns are separated by spaces or tabs only: other Unicode whitespace (U+0085, U+2028, a form
        # feed) belongs to a token.
        cells = _CONLL_SEPARATORS.split(line.strip(" \t"))
        if cells == [""]:
            flush()
            continue
        if cells[0] == "-DOCSTART-":
            flush()
            continue
        if not words and bad is None:
            start = i
        if tag_column is None:
            words.append(cells[0])
            continue
        needed = tag_column + 1 if tag_column >= 0 else -tag_column + 1
        if len(cells) < max(2, needed):
            bad = bad or (
                f"{path}:{i}: {len(cells)} column(s) where word and tag (column {tag_column}) are needed: {line!r}"
            )
            continue
        words.append(cells[0])
        tags.append(cells[tag_column])
    flush()
    return sentences


# ----------------------------------------------------------------------------------------------------------
# SQuAD JSON


def read_squad(path: Path, train: bool, policy: BadExamplePolicy):
    """Questions of a SQuAD v1.1/v2.0 file as ``QAExample`` s, each checked (answer text at answer_start)."""
    from bertlab.data.qa import QADataError, QAExample, validate_example

    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(data, dict) or "data" not in data:
        raise DataError(f"{path}: not SQuAD format (no top-level 'data' list)")
    examples = []
    seen: dict[str, str] = {}  # question id -> where it first appeared
    for a, article in enumerate(data["data"]):
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            context = paragraph.get("context")
            for q, qa in enumerate(paragraph.get("qas", [])):
                where = f"{path}: data[{a}].paragraphs[{p}].qas[{q}]"
                try:
                    qid, question = qa["id"], qa["question"]
                    answers = [{"text": x["text"], "answer_start": int(x["answer_start"])}
                               for x in qa.get("answers", [])]
                except (KeyError, TypeError, ValueError) as err:
                    policy.bad(f"{where}: missing or malformed key {err}")
                    continue
                if str(qid) in seen:
                    # Scoring and predictions are keyed by id: a second question under the same id would be
                    # scored as one and lose its prediction.
                    policy.bad(f"{where}: duplicate question id {str(qid)!r}, first used at {seen[str(qid)]}; "
                               "every question needs its own id")
                    continue
                seen[str(qid)] = where[len(f"{path}: "):]
                example = QAExample(id=str(qid), question=question, context=context or "", answers=answers,
                                    is_impossible=bool(qa.get("is_impossible", False)))
                try:
                    validate_example(example, train=train)
                except QADataError as err:
                    policy.bad(f"{path}: {err}")
                    continue
                examples.append(example)
    return examples


def read_text_lines_joined(path: Path) -> str:
    return read_text(path)
