"""Readers for the file formats users bring: TSV/CSV/JSONL tables, CoNLL column files, SQuAD JSON.

Every example keeps where it came from (``file:line`` or an id) so a bad example ends in an error that says
where it is and what to change, or, with ``on_bad_example=skip``, is skipped and counted — never dropped
silently.
"""

from __future__ import annotations

import collections
import csv
import functools
import io
import json
import logging
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertlab.data.validate import (
    TSV_QUOTING_ADVICE,
    BadValue,
    check_header,
    check_readable,
    csv_style_quoted,
    expect,
    json_type,
    label_value,
    missing_column,
    text_value,
    unique_keys,
    wrong_type,
)
from bertlab.runtime.errors import DataError

__all__ = ["BadExamplePolicy", "DataError", "TaggedSentence", "TextExample", "check_readable", "json_object",
           "read_conll", "read_squad", "read_table", "read_text", "read_text_lines"]

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


def read_text(path: Path, cr_ends_lines: bool = False) -> str:
    """The text of a UTF-8 file (a BOM is ignored); non-UTF-8 bytes are an error naming the line, counted as the
    file's reader counts them: at ``\n`` (JSON Lines, CoNLL), or also at a lone ``\r`` (``cr_ends_lines``: CSV
    and TSV, which the csv module splits there too)."""
    check_readable(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err}); check the file and its permissions") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        before = raw[: err.start]
        line = before.count(b"\n") + 1 + (before.count(b"\r") - before.count(b"\r\n") if cr_ends_lines else 0)
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
    """One JSON Lines record: a JSON object naming each field once, else a :class:`DataError` naming
    ``where`` (file:line)."""
    try:
        obj = json.loads(line, object_pairs_hook=lambda pairs: unique_keys(pairs, where))
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


def _csv_error(path: Path, line: int, err: csv.Error) -> DataError:
    text = str(err)
    if "end of data" in text:
        what = (f"a quoted cell that starts on line {line} is never closed, so it swallows every row after it "
                "into one cell. Close the quote")
    elif "expected after" in text:
        what = (f"a quoted cell on line {line} is followed by more text before the next comma (the quote "
                "closes early or the cell only begins with a quote mark)")
    else:
        what = f"line {line} is not valid CSV"
    return DataError(f"{path}:{line}: {what} ({text}). Inside a quoted cell a quote mark is written twice (\"\"); "
                     "a cell that only starts with a quote mark must be quoted as a whole")


def _delimited_records(path: Path, suffix: str) -> tuple[list[tuple[int, list[str]]], bool]:
    """(first line, cells) of every record of a CSV/TSV file, and whether the file holds a quote mark. CSV is
    read strictly (a quote left open or a quoted cell followed by text is an error naming its line: never rows
    swallowed into one cell); TSV is read unquoted, as GLUE's files are."""
    tsv = suffix != ".csv"
    _allow_long_cells()
    text = read_text(path, cr_ends_lines=True)
    # The csv module reads the text itself (newline=""): a quoted CSV cell keeps its newlines, and only
    # \n, \r\n and \r end a record (never U+2028, U+0085 or a form feed).
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if tsv else ",",
                        quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL, strict=not tsv)
    records = []
    line = 0
    try:
        for cells in reader:
            records.append((line + 1, cells))  # a record may span lines (a quoted newline): its first line
            line = reader.line_num
    except csv.Error as err:
        raise _csv_error(path, line + 1, err) from None
    return records, '"' in text


def _tsv_quoting(path: Path, header: list[str], records: list[tuple[int, list[str]]]) -> list[tuple[int, Any]]:
    """TSV records with CSV-style quoting found: a cell wrapped in quotes with doubled quotes inside is an
    error for the whole file; lines that are one record only when read as CSV (a quoted cell holding a line
    break, as pandas writes it) become one bad record, so ``on_bad_example=skip`` drops the whole example,
    not half of it."""
    out: list[tuple[int, Any]] = []
    odd = [sum(c.count('"') for c in cells) % 2 == 1 if any('"' in c for c in cells) else False
           for _, cells in records]
    i = 0
    while i < len(records):
        line, cells = records[i]
        for cell in cells:
            if cell[:1] == '"' and cell[-1:] == '"' and csv_style_quoted(cell):
                raise DataError(f"{path}:{line}: the cell {cell[:60]!r} is quoted CSV-style (wrapped in quote "
                                f"marks, with doubled quote marks inside); {TSV_QUOTING_ADVICE}")
        if odd[i]:
            j = next((k for k in range(i + 1, min(i + 50, len(records))) if odd[k]), None)
            if j is not None and any(len(records[k][1]) != len(header) for k in range(i, j + 1)):
                joined = "\n".join("\t".join(c) for _, c in records[i:j + 1])
                try:
                    parsed = list(csv.reader(io.StringIO(joined), delimiter="\t", strict=True))
                except csv.Error:
                    parsed = []
                if len(parsed) == 1 and len(parsed[0]) == len(header):
                    out.append((line, {"__bad__": f"lines {line}-{records[j][0]} are one record only when read "
                                                  "as CSV: a quoted cell holds a line break; " + TSV_QUOTING_ADVICE}))
                    i = j + 1
                    continue
        out.append((line, cells))
        i += 1
    return out


def _table_rows(path: Path, has_header: bool = True) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    """(header, [(line number, {column: cell})]); ``has_header=False`` names the columns "0", "1", ... (CoLA).

    JSON Lines cells keep their JSON values (the reader checks each field's type); CSV/TSV cells are text. The
    header is checked by :func:`bertlab.data.validate.check_header` (JSON Lines: the fields of all records).
    A record with another number of cells than the header is ``{"__bad__": reason}``.
    """
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        rows = []
        # JSON Lines: one object per "\n"-ended line; U+2028 and friends are valid inside JSON strings.
        for i, line in enumerate(read_text_lines(path), 1):
            if not line.strip():
                continue
            rows.append((i, json_object(line, f"{path}:{i}")))
        header = sorted({k for _, r in rows for k in r})
        check_header(path, header, what="the records together")
        return header, rows
    records, quotes = _delimited_records(path, suffix)
    first = records[0][1] if records else []
    if has_header:
        check_header(path, first)
        header = [h.strip() for h in first]
        records = records[1:]
    else:
        header = [str(i) for i in range(len(first))]
    if suffix != ".csv" and quotes:
        records = _tsv_quoting(path, header, records)
    rows = []
    for start_line, cells in records:
        if isinstance(cells, dict):
            rows.append((start_line, cells))
            continue
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
    Texts are stripped; a label is the stripped cell, or a JSON label's text (see
    :func:`bertlab.data.validate.label_value`); the family's reader spells class labels one way.
    """
    from bertlab.data.validate import check_column_roles

    check_column_roles({"text_column": text_column, "text_pair_column": text_pair_column,
                        "label_column": label_column})
    named = [c for c in (text_column, text_pair_column, label_column) if c is not None]
    positional = bool(named) and all(isinstance(c, int) and not isinstance(c, bool) for c in named)
    json_lines = path.suffix.lower() in (".jsonl", ".json")
    if positional and json_lines:
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
            raise missing_column(path, key, column, header)
    examples = []
    for line, row in rows:
        where = f"{path}:{line}"
        if "__bad__" in row:
            policy.bad(f"{where}: {row['__bad__']}")
            continue
        try:
            text, pair, label = _row_values(row, where, text_column, text_pair_column, label_column, json_lines)
        except BadValue as err:
            policy.bad(str(err))
            continue
        if not text or (text_pair_column and not pair):
            policy.bad(f"{where}: empty text in column {text_column if not text else text_pair_column!r}")
            continue
        if label_column and not label:
            policy.bad(f"{where}: empty label in column {label_column!r}")
            continue
        examples.append(TextExample(text, pair, label, where))
    return examples


def _row_values(row: dict[str, Any], where: str, text_column: str, pair_column: str | None,
                label_column: str | None, json_lines: bool) -> tuple[str, str | None, str | None]:
    """(text, pair, label) of one row, stripped; a JSON record's fields must hold text (a label may be a
    number or a boolean): :class:`BadValue` naming the field otherwise."""
    if json_lines:
        for column in (text_column, pair_column, label_column):
            if column is not None and column not in row:
                raise BadValue(f"{where}: no field {column!r}; the record has {sorted(row)}")
        text = text_value(row[text_column], where, text_column)
        pair = text_value(row[pair_column], where, pair_column) if pair_column else None
        label = label_value(row[label_column], where, label_column) if label_column else None
    else:
        text = row.get(text_column) or ""
        pair = (row.get(pair_column) or "") if pair_column else None
        label = (row.get(label_column) or "") if label_column else None
    return (text.strip(), None if pair is None else pair.strip(), None if label is None else label.strip())


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
    the words only (a file to predict: one token a line, tags ignored when present).

    Every token line has as many columns as most of the file's token lines: a line with more (``New York
    B-LOC``, a word holding a space) or fewer (a missing tag) is a bad example naming the line, never a word
    dropped."""
    # Columns are separated by spaces or tabs only: other Unicode whitespace (U+0085, U+2028, a form feed)
    # belongs to a token.
    split = [_CONLL_SEPARATORS.split(line.strip(" \t")) for line in read_text_lines(path)]
    widths = collections.Counter(len(c) for c in split if c != [""] and c[0] != "-DOCSTART-")
    # The most common width; a tie (a tiny file) goes to the narrowest that still has a tag column.
    width = max(widths, key=lambda w: (widths[w], w >= 2, -w)) if widths else 0
    example_line = next((i for i, c in enumerate(split, 1) if len(c) == width and c != [""]), 0)
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

    for i, cells in enumerate(split, 1):
        if cells == [""]:
            flush()
            continue
        if cells[0] == "-DOCSTART-":
            flush()
            continue
        if not words and bad is None:
            start = i
        if len(cells) != width:
            why = ("a word holding a space? Columns are separated by spaces and tabs: write one word a line"
                   if len(cells) > width else "a missing column?")
            bad = bad or (f"{path}:{i}: {len(cells)} column(s) where the file's token lines have {width} (as "
                          f"line {example_line}): {' '.join(cells)!r} ({why})")
            continue
        if tag_column is None:
            words.append(cells[0])
            continue
        needed = tag_column + 1 if tag_column >= 0 else -tag_column + 1
        if len(cells) < max(2, needed):
            bad = bad or (
                f"{path}:{i}: {len(cells)} column(s) where word and tag (column {tag_column}) are needed: "
                f"{' '.join(cells)!r}"
            )
            continue
        words.append(cells[0])
        tags.append(cells[tag_column])
    flush()
    return sentences


# ----------------------------------------------------------------------------------------------------------
# SQuAD JSON


def read_squad(path: Path, train: bool, policy: BadExamplePolicy, version_2: bool | None = None):
    """Questions of a SQuAD v1.1/v2.0 file as ``QAExample`` s, each checked (answer text at answer_start).

    The file's shape is checked field by field (``data`` a list of articles, ``context`` and ``question``
    text, ``answers`` a list of ``{"text", "answer_start"}``, ``is_impossible`` a boolean): a value of another
    type is an error naming the question and the field. ``version_2`` (the task's
    ``data.version_2_with_negative``, for labelled splits; None for a file to predict) checks the answers
    against the SQuAD version: v1.1 has no ``is_impossible`` questions and every evaluation question needs an
    answer (one without would be scored 0 whatever the model says); in v2.0 a question without answers must
    be marked ``is_impossible`` and one so marked has none.
    """
    from bertlab.data.qa import QADataError, validate_example

    try:
        data = json.loads(read_text(path), object_pairs_hook=lambda pairs: unique_keys(pairs, str(path)))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(data, dict) or "data" not in data:
        raise DataError(f"{path}: not SQuAD format (no top-level 'data' list)")
    examples = []
    seen: dict[str, str] = {}  # question id -> where it first appeared
    for a, article in enumerate(_squad_list(data, "data", path, "data", "a list of articles")):
        for p, paragraph in enumerate(_squad_list(article, "paragraphs", path, f"data[{a}]", "a list of paragraphs")):
            at = f"data[{a}].paragraphs[{p}]"
            qas = _squad_list(paragraph, "qas", path, at, "a list of questions")
            context = paragraph.get("context")
            for q, qa in enumerate(qas):
                where = f"{path}: {at}.qas[{q}]"
                try:
                    if not isinstance(context, str):
                        raise wrong_type(f"{path}: {at}", "context", context, "text (a JSON string)")
                    example = _squad_question(qa, where, context)
                    _check_squad_version(example, where, train, version_2)
                except BadValue as err:
                    policy.bad(str(err))
                    continue
                if example.id in seen:
                    # Scoring and predictions are keyed by id: a second question under the same id would be
                    # scored as one and lose its prediction.
                    policy.bad(f"{where}: duplicate question id {example.id!r}, first used at {seen[example.id]}; "
                               "every question needs its own id")
                    continue
                seen[example.id] = where[len(f"{path}: "):]
                try:
                    validate_example(example, train=train)
                except QADataError as err:
                    policy.bad(f"{path}: {err}")
                    continue
                examples.append(example)
    return examples


def _squad_list(obj: Any, key: str, path: Path, at: str, expected: str) -> list[Any]:
    """``obj[key]`` of a SQuAD file's skeleton (articles, paragraphs, questions): a list, else an error for the
    whole file (no question under it can be read)."""
    if not isinstance(obj, dict):
        raise DataError(f"{path}: {at} is {json_type(obj)} where a JSON object is expected (SQuAD layout: "
                        "{\"data\": [{\"paragraphs\": [{\"context\": ..., \"qas\": [...]}]}]})")
    value = obj.get(key, [] if key != "data" else None)
    if not isinstance(value, list):
        where = key if key == "data" else f"{at}.{key}"
        raise DataError(f"{path}: {where} is {json_type(value)} where {expected} is expected (SQuAD layout: "
                        "{\"data\": [{\"paragraphs\": [{\"context\": ..., \"qas\": [...]}]}]})")
    return value


def _squad_question(qa: Any, where: str, context: str):
    from bertlab.data.qa import QAExample

    if not isinstance(qa, dict):
        raise BadValue(f"{where} is {json_type(qa)} where a question object is expected")
    qid = expect(qa, "id", (str, int), where, "an id (text)")
    question = expect(qa, "question", str, where, "text (a JSON string)")
    answers = []
    for k, answer in enumerate(expect(qa, "answers", list, where, "a list of answers", required=False) or []):
        at = f"{where}.answers[{k}]"
        if not isinstance(answer, dict):
            raise BadValue(f"{at} is {json_type(answer)} where an answer object {{\"text\", \"answer_start\"}} is "
                           "expected")
        start = expect(answer, "answer_start", (int, str), at, "an integer (a character index)")
        if isinstance(start, str):
            if not start.strip().isdigit() or not start.strip().isascii():
                raise wrong_type(at, "answer_start", start, "an integer (a character index)")
            start = int(start)
        answers.append({"text": expect(answer, "text", str, at, "text (a JSON string)"), "answer_start": start})
    impossible = expect(qa, "is_impossible", bool, where, "true or false", required=False)
    return QAExample(id=str(qid), question=question, context=context, answers=answers,
                     is_impossible=bool(impossible))


def _check_squad_version(example, where: str, train: bool, version_2: bool | None) -> None:
    if version_2 is None:
        return
    if not version_2 and example.is_impossible:
        raise BadValue(f"{where}: is_impossible is true, but this task reads SQuAD v1.1, which has no "
                       "unanswerable questions (it would be trained towards an answer it does not have). For "
                       "SQuAD 2.0 data use task=squad_v2 (data.version_2_with_negative=true); otherwise remove "
                       "the question or its is_impossible")
    if not version_2 and not train and not example.answers:
        raise BadValue(f"{where}: no answers. SQuAD v1.1 scores a question against its answers, so one without "
                       "any would score 0 whatever the model predicts; add its answers or remove it (SQuAD 2.0 "
                       "data with unanswerable questions: task=squad_v2)")
    if version_2 and example.is_impossible and example.answers:
        raise BadValue(f"{where}: is_impossible is true but it has {len(example.answers)} answer(s); an "
                       "unanswerable question has none (SQuAD 2.0 keeps them as plausible_answers)")
    if version_2 and not example.is_impossible and not example.answers:
        raise BadValue(f"{where}: no answers and not marked is_impossible: mark it \"is_impossible\": true "
                       "(SQuAD 2.0) or add its answers")


def read_text_lines_joined(path: Path) -> str:
    return read_text(path)


def one_text_per_id(rows: list[tuple[str | None, str, str]], path: Path, what: str) -> list[tuple[str | None, str]]:
    """(id, text) of ``(id, text, where)`` rows, each id once: the rule for ids of every corpus and query file
    (``data.corpus_file``, ``bertlab.retrieve``'s files). A row repeating an earlier row's id *and* text is read
    once (counted in a log line); an id given twice with different texts is an error naming both lines (a run
    file or a metric names passages by id: it could not say which one was meant). Rows without an id pass."""
    out: list[tuple[str | None, str]] = []
    first: dict[str, tuple[str, str]] = {}  # id → (its text, where it was read)
    repeated = 0
    for key, text, where in rows:
        if key is not None and key in first:
            if first[key][0] != text:
                raise DataError(
                    f"{where}: {what} id {key!r} is given twice with different texts (first at {first[key][1]}); "
                    "a run file and the metrics name passages by id, so each id must name one text. Give one of "
                    "the rows another id, or remove it")
            repeated += 1
            continue
        if key is not None:
            first[key] = (text, where)
        out.append((key, text))
    if repeated:
        log.info("%s: %d rows repeat an earlier row's id and text: read once", path, repeated)
    return out
