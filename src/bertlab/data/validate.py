"""Input validation by kind: each kind of input is checked once, here, and every reader that meets that kind
calls the same check, so a case nobody listed is caught as surely as the ones that were.

The kinds (docs/reliability.md, "Input validation by kind", has one real message per kind):

- **a data path** must be a regular file this user can read (not a folder, FIFO, socket or device, not a
  link that loops or points nowhere): :func:`check_readable`;
- **a label** has one spelling per class: :func:`canonical_label` is the rule that merges spellings of one
  value (numbers, booleans, surrounding whitespace), :class:`LabelSpellings` refuses spellings that differ
  only in case or inner whitespace, :func:`unknown_labels` names every evaluation label the label set lacks;
- **a JSON value** has the type its field needs (:func:`text_value`, :func:`label_value`,
  :func:`number_value`, :func:`expect`): a JSON object, array, number, boolean or null where text is expected
  is an error naming file, line and field, never text made from its Python ``repr``;
- **a table header** names each column once and unambiguously (:func:`check_header`), and a configured
  column that is missing is named with its near matches (:func:`missing_column`); one column plays one role
  (:func:`check_column_roles`);
- **quoting** in a delimited file is the quoting its reader applies: :func:`csv_style_quoted` spots CSV-style
  quoting in a TSV (which bertlab reads unquoted, as GLUE's files are);
- **splits** are different files (:func:`check_split_files`), and a run resumes on the data it started with
  (:func:`data_fingerprint`, checked by the data module when a checkpoint is restored for training).

Errors about one example are :class:`BadValue` (a :class:`DataError`): readers pass them to the
``data.on_bad_example`` policy, so ``skip`` counts them like any bad example. Errors about a whole file or
setting are plain :class:`DataError`\\ s.
"""

from __future__ import annotations

import difflib
import errno
import json
import logging
import math
import os
import re
import stat
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from bertlab.runtime.errors import DataError

log = logging.getLogger(__name__)


class BadValue(DataError):
    """One example's value is unusable (wrong type, not a number): the reader's bad-example policy decides."""


# ----------------------------------------------------------------------------------------------------------
# Data paths


_NOT_REGULAR = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def check_readable(path: Path) -> None:
    """A :class:`DataError` saying what is wrong when ``path`` is not a readable regular file: a folder, a
    FIFO, socket or device, a symbolic link that loops or points nowhere, a missing file, or a file this
    user may not read."""
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
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be examined ({err.strerror or err}); check the path") from None
    for test, what in _NOT_REGULAR:
        if test(mode):
            # A pipe can be read once only, and bertlab reads a data file several times (the tokenizer, the
            # cache key, each split); a device or socket is no data file at all.
            raise DataError(
                f"{path}: {what}, not a regular file. bertlab reads a data file more than once (to train the "
                "tokenizer, to key the cache, to read the split), so it needs a file on disk: write the data "
                "to a file and point the data.*_file setting at it"
            )
    if not os.access(path, os.R_OK):
        raise DataError(
            f"{path}: permission denied, this user cannot read the file; fix its permissions "
            f"(e.g. chmod a+r {path}) or copy it somewhere readable"
        )


# ----------------------------------------------------------------------------------------------------------
# Labels: one spelling per class

# Plain decimal numbers in ASCII digits. Python's float() also takes "1_000", "nan", "infinity" and digits of
# other scripts ("١"), none of which a label or score file means as a number.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_BOOLEANS = {"true": "true", "false": "false"}


def canonical_label(text: str) -> str:
    """The one spelling of a class label (the documented rule, docs/tasks.md "Labels"):

    - surrounding whitespace is not part of a label (``" 1"`` is ``"1"``);
    - a plain decimal number is written in its shortest exact form: ``1``, ``1.0``, ``01``, ``+1`` and
      ``1e0`` are all ``"1"``, ``0.50`` is ``"0.5"`` (exact decimal arithmetic: no float rounding);
    - ``true`` / ``false`` in any case are ``"true"`` / ``"false"``;
    - anything else is kept as written (case-sensitive): spellings that differ only in case or inner
      whitespace are refused by :class:`LabelSpellings`, not merged.
    """
    text = text.strip()
    if _NUMBER.fullmatch(text) and -30 <= Decimal(text).adjusted() <= 30:  # 1e999999 stays as written
        number = Decimal(text)
        if number == number.to_integral_value():
            return str(int(number))
        return format(number.normalize(), "f")
    return _BOOLEANS.get(text.lower(), text)


def label_key(label: str) -> str:
    """What two labels that are one class by mistake share: case and inner whitespace dropped."""
    return " ".join(label.split()).casefold()


class LabelSpellings:
    """The labels of one file's label column: canonical labels, the spellings each was written in, and the
    first line of each spelling.

    :meth:`add` gives a raw label's canonical form; :meth:`check` refuses two classes whose labels differ only
    in case or inner whitespace (``Positive`` / ``positive``) and reports spellings merged by the rule.
    """

    def __init__(self, path: Path | str, column: str | None):
        self.path = path
        self.column = column
        self.spellings: dict[str, dict[str, str]] = {}  # canonical -> {raw spelling: first where}

    def add(self, raw: str, where: str) -> str:
        label = canonical_label(raw)
        self.spellings.setdefault(label, {}).setdefault(raw, where)
        return label

    def first_where(self) -> dict[str, str]:
        return {label: next(iter(raws.values())) for label, raws in self.spellings.items()}

    def check(self) -> None:
        clash = label_clashes(self.first_where())
        if clash:
            raise DataError(
                f"{self.path}: the label column{f' {self.column!r}' if self.column else ''} spells one class "
                f"several ways: {clash}. Labels are case-sensitive, so these would train as different "
                "classes; write each class one way (or, if they are different classes, give them names that "
                "differ in more than case and spacing)"
            )
        merged = {label: raws for label, raws in self.spellings.items() if len(raws) > 1}
        if merged:
            shown = "; ".join(f"{', '.join(repr(r) for r in raws)} → {label!r}"
                              for label, raws in list(merged.items())[:4])
            log.info("%s: labels written several ways are one class each (docs/tasks.md, \"Labels\"): %s",
                     self.path, shown)


def label_clashes(first_where: Mapping[str, str]) -> str | None:
    """A description of the labels that differ only in case or inner whitespace (with their first lines),
    or None."""
    groups: dict[str, list[str]] = {}
    for label in first_where:
        groups.setdefault(label_key(label), []).append(label)
    clashes = [names for names in groups.values() if len(names) > 1]
    if not clashes:
        return None
    return "; ".join(" vs ".join(f"{n!r} (first at {_line_of(first_where[n])})" for n in names)
                     for names in clashes[:3])


def _line_of(where: str) -> str:
    return where.rsplit("/", 1)[-1]


def unknown_labels(path: Path | str, seen: Mapping[str, str], known: list[str], source: str, fix: str) -> None:
    """Refuse the labels of an evaluation file that the label set lacks, naming every one with its first
    line (the first one with its file), and a known label that differs from one only in case or spacing.

    ``seen``: canonical label → first ``file:line``; ``source`` says where the label set comes from, ``fix``
    what to do.
    """
    index = {canonical_label(k) for k in known}
    missing = {label: where for label, where in seen.items() if label not in index}
    if not missing:
        return
    by_key = {label_key(canonical_label(k)): k for k in known}

    def hint(label: str) -> str:
        near = by_key.get(label_key(label))
        return f", which differs from {near!r} only in case or spacing" if near is not None else ""

    (first, first_where), *others = missing.items()
    nor = ", ".join(f"{label!r} (first at {_line_of(where)}{hint(label)})" for label, where in others[:8])
    more = f" and {len(others) - 8} more" if len(others) > 8 else ""
    raise DataError(f"{first_where}: label {first!r}{hint(first) and hint(first) + ','} is not in the task's "
                    f"label set {known} "
                    f"({source})" + (f"; nor are {nor}{more}" if others else "") + f"; {fix}")


def check_label_column(path: Path | str, column: str | None, n_classes: int, n_rows: int) -> None:
    """A classification column with a new class on most rows is no label column (an id, a text or a score)."""
    if n_rows >= 10 and n_classes * 2 > n_rows:
        raise DataError(
            f"{path}: the label column {column!r} has {n_classes} different values in {n_rows} examples, so most "
            "classes would have one example: it looks like an id, text or score column, not a class label. "
            "Check data.label_column; for real-valued targets use task=text_regression; if these really are "
            "the classes, declare them with task.labels=[...]"
        )


# ----------------------------------------------------------------------------------------------------------
# JSON values of the expected type


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, dict):
        return "a JSON object"
    return type(value).__name__


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def wrong_type(where: str, field: str, value: Any, expected: str) -> BadValue:
    return BadValue(f"{where}: field {field!r} is {json_type(value)} ({_shown(value)}) where {expected} is "
                    f"expected; write it as {expected}")


def text_value(value: Any, where: str, field: str) -> str:
    """A JSON value that must be text: the string, else :class:`BadValue` naming where and the field."""
    if isinstance(value, str):
        return value
    raise wrong_type(where, field, value, "text (a JSON string)")


def label_value(value: Any, where: str, field: str) -> str | None:
    """A class label from JSON: text, a number or a boolean (as :func:`canonical_label` spells it), None for
    null; an object or array is :class:`BadValue`."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    raise wrong_type(where, field, value, "a label (text or a number)")


def number_value(value: Any, where: str, what: str) -> float:
    """A real number written as JSON number or as decimal text (see :data:`_NUMBER`); :class:`BadValue`
    otherwise. Non-finite values come back as such (the caller decides)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.fullmatch(text) or text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            return float(text)
    raise BadValue(f"{where}: {what} {value!r} is not a number (write it as a decimal number, e.g. 3.5)")


def expect(obj: Mapping[str, Any], field: str, types: type | tuple[type, ...], where: str, expected: str,
           required: bool = True) -> Any:
    """``obj[field]`` when it has one of ``types`` (a bool is no int here); :class:`BadValue` naming the field
    otherwise, or when it is missing and ``required``."""
    if field not in obj:
        if required:
            raise BadValue(f"{where}: no field {field!r} (expected {expected}); it has {sorted(obj)}")
        return None
    value = obj[field]
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
        return value
    raise wrong_type(where, field, value, expected)


def unique_keys(pairs: list[tuple[str, Any]], where: str) -> dict[str, Any]:
    """``json.loads(object_pairs_hook=...)``: an object naming a field twice is refused (json keeps the last
    value silently)."""
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise DataError(f"{where}: a JSON object names the field {key!r} twice; which value is meant is "
                            "ambiguous: keep one")
        obj[key] = value
    return obj


# ----------------------------------------------------------------------------------------------------------
# Table headers and columns


def check_header(path: Path | str, raw: list[str], what: str = "the header") -> None:
    """One name per column: a name given twice, or two names that differ only in case or surrounding/inner
    whitespace, is an error naming them (a column read by name would be one of them at random)."""
    seen: dict[str, tuple[int, str]] = {}
    for i, name in enumerate(raw):
        key = label_key(name)
        if not key:
            continue
        if key in seen:
            j, first = seen[key]
            how = "twice" if first == name else f"twice, spelled {first!r} and {name!r}"
            raise DataError(
                f"{path}: {what} names the column {first!r} {how} (columns {j} and {i}, from 0): a column read "
                "by name would be ambiguous. Rename or remove one of them"
            )
        seen[key] = (i, name)


def missing_column(path: Path | str, key: str, column: str, header: list[str], fix: str | None = None) -> DataError:
    """The error for a configured column the file lacks, with the header's near matches (did-you-mean: the
    same name in another case or spacing, or a close spelling); ``fix`` replaces the default advice."""
    near = [h for h in header if label_key(h) == label_key(column)]
    near += [h for h in difflib.get_close_matches(column, header, n=3, cutoff=0.6) if h not in near]
    hint = f" Did you mean {near[0]!r}? (data.{key}={near[0]})" if near else ""
    return DataError(f"{path}: no column {column!r} (data.{key}); the header has {header}.{hint} "
                     + (fix or f"Set data.{key} to one of them"))


def check_column_roles(roles: Mapping[str, Any]) -> None:
    """One column per role: the text, its pair, the label and the choices must be different columns
    (``roles``: setting name → column name or list of names; None = unused)."""
    owner: dict[str, str] = {}
    for key, value in roles.items():
        for column in (value if isinstance(value, list | tuple) else [value]):
            if column is None:
                continue
            name = str(column)
            if name in owner:
                raise DataError(
                    f"data.{owner[name]} and data.{key} both name the column {name!r}: "
                    + ("the model would read the same text twice, as if it were a pair"
                       if {owner[name], key} == {"text_column", "text_pair_column"} else
                       "the model would be given its answer as input" if "label_column" in (owner[name], key)
                       else "one column cannot play two roles")
                    + f". Set data.{key} to another column" + (" (or null for single texts)"
                                                              if key == "text_pair_column" else "")
                )
            owner[name] = key


# ----------------------------------------------------------------------------------------------------------
# Quoting in delimited files

_CSV_QUOTED = re.compile(r'"(?:[^"]|"")*""(?:[^"]|"")*"')


def csv_style_quoted(cell: str) -> bool:
    """A TSV cell written with CSV quoting (``"He said ""hi"" twice"``, as pandas' ``to_csv(sep="\\t")`` writes
    a cell holding a quote mark): wrapped in quotes with doubled quotes inside. GLUE's unquoted TSVs never
    hold one, and reading it unquoted would train on the quote marks."""
    return len(cell) > 3 and _CSV_QUOTED.fullmatch(cell) is not None


TSV_QUOTING_ADVICE = ("bertlab reads .tsv files unquoted, as GLUE's are (a quote mark is text). Write the file "
                      "without quoting (pandas: to_csv(sep='\\t', quoting=csv.QUOTE_NONE), with no tab or line "
                      "break inside a cell), or save it as .csv (quoted cells are read as CSV) or .jsonl")


# ----------------------------------------------------------------------------------------------------------
# Splits and their content


def _flat(value: Path | list[Path] | None) -> list[Path]:
    if value is None:
        return []
    return [p for p in (value if isinstance(value, list) else [value]) if p is not None]


def check_split_files(files: Mapping[str, Path | list[Path] | None], settings: Mapping[str, str]) -> None:
    """The training file(s) must not be an evaluation split's file: the same path, a link to it, or a copy
    with the same content. ``settings``: split → the setting that names it (for the message)."""
    train = _flat(files.get("train"))
    for split, value in files.items():
        if split in ("train", "predict"):
            continue
        for path in _flat(value):
            for other in train:
                same = _same_file(path, other)
                if same:
                    raise DataError(
                        f"{settings.get(split, split)}={path} is {same} data.train_file ({other}): the "
                        f"{split} scores would measure how well the model remembers its training examples, "
                        f"not how it does on new ones. Point {settings.get(split, split)} at held-out data"
                    )


def _same_file(a: Path, b: Path) -> str | None:
    try:
        if os.path.samefile(a, b):
            return "the same file as"
        if a.stat().st_size != b.stat().st_size:
            return None
    except OSError:
        return None
    return "a copy (same content) of" if file_digest(a) == file_digest(b) else None


def file_digest(path: Path) -> str:
    """sha256 of a file's content (first 16 hex digits); a file over 1 GiB is sampled (see
    :func:`bertlab.data.corpus.corpus_fingerprint`), so a large corpus is not read whole at every start."""
    import hashlib

    path = Path(path)
    size = path.stat().st_size
    if size > 1 << 30:
        from bertlab.data.corpus import corpus_fingerprint

        return corpus_fingerprint([path])
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def data_fingerprint(files: Mapping[str, Path | list[Path] | None]) -> dict[str, str]:
    """Split → content digest of its file(s): what a checkpoint records of the data it was trained on."""
    out = {}
    for split, value in files.items():
        paths = _flat(value)
        if paths:
            out[split] = "+".join(file_digest(p) for p in paths)
    return out


def changed_splits(recorded: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    return [split for split in recorded if split in now and recorded[split] != now[split]]
