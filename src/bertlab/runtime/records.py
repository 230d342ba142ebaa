"""Reading the JSON record files bertlab writes (and the few JSON files of model folders it trusts the same way).

A run's record (``.bertlab-run.json``), ``metrics.json``, an export's head file (``bertlab_head.json``) and
long-text record, an ONNX folder's manifest (``bertlab_onnx.json``), the fingerprint record
(``bertlab_fingerprint.json``), a prepared corpus's markers (``meta.json``, ``examples/NNNNN.json``), a model
folder's ``config.json`` and a sharded checkpoint's ``model.safetensors.index.json`` are read by
:func:`read_record` only. A file cut short by a
killed process, emptied by a full disk, edited by hand or replaced by another program's file is never a
``JSONDecodeError``, ``KeyError`` or ``TypeError`` traceback: every problem of parse or shape is one
:class:`RecordError` paragraph naming the file, the key when one is at fault, and what to do. Callers that can
rebuild the file (a cache) catch it and rebuild; the others raise it as the error kind of their part
(``error=CheckpointError``, ``DataError``, ...), which the command lines print without a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bertlab.runtime.errors import RecordError

# JSON's names for Python's types, as a message shows them.
_JSON_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
               bool: "true or false", type(None): "null"}

Shape = Mapping[str, type | tuple[type, ...]]


def json_kind(value: Any) -> str:
    """What a JSON value is, in words (``a string``, ``a list``, ...)."""
    for kind, name in _JSON_NAMES.items():
        if type(value) is kind:
            return name
    return type(value).__name__


def _expected(kinds: type | tuple[type, ...]) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    names = dict.fromkeys("a number" if k is float else _JSON_NAMES.get(k, k.__name__) for k in kinds)
    return " or ".join(names)


def _fits(value: Any, kinds: type | tuple[type, ...]) -> bool:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(value, bool):
        return bool in kinds
    if float in kinds and isinstance(value, int):
        return True
    return isinstance(value, kinds)


def shape_problem(data: Any, shape: Shape, required: tuple[str, ...] = ()) -> str | None:
    """What is wrong with a parsed record (``data``) against ``shape`` (key → its JSON type(s)) and the keys it
    must hold; None when nothing is."""
    if not isinstance(data, dict):
        return f"it holds {json_kind(data)} where an object is expected"
    missing = [k for k in required if k not in data]
    if missing:
        return f"it has no key {', '.join(repr(k) for k in missing)} (it has {sorted(data)[:12]})"
    for key, kinds in shape.items():
        if key in data and not _fits(data[key], kinds):
            shown = json.dumps(data[key], default=str)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            return f"key {key!r} is {json_kind(data[key])} ({shown}) where {_expected(kinds)} is expected"
    return None


def read_record(path: str | os.PathLike[str], what: str, fix: str, shape: Shape | None = None,
                required: tuple[str, ...] = (), error: type[Exception] = RecordError) -> dict[str, Any]:
    """The JSON object in ``path``, checked against ``shape`` and ``required`` (see :func:`shape_problem`).

    Any problem — the file cannot be read, is empty, is not UTF-8, is not JSON or ends in the middle (a write cut
    short), holds something else than an object, lacks a key or has a value of another type — raises ``error``
    with one paragraph: ``<path>: <what> is damaged: <problem>. <fix>``. ``error`` is :class:`RecordError` unless
    the caller names its part's error kind."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise _error(error, f"{path}: {what} cannot be read ({err.strerror or err}). {fix}") from None
    problem = None
    data: Any = None
    if not raw.strip():
        problem = "the file is empty"
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            problem = f"bytes that are not UTF-8 at byte {err.start} (not a file bertlab wrote)"
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as err:
                # At the end of the text, or a string still open there: the file stops in the middle.
                cut = err.pos >= len(text.rstrip()) or err.msg.startswith("Unterminated string")
                problem = ("it ends in the middle of its JSON (a write cut short: a killed process or a full disk)"
                           if cut else f"not valid JSON at line {err.lineno}, column {err.colno} ({err.msg})")
            except RecursionError:
                problem = "its JSON is nested too deeply"
    if problem is None:
        problem = shape_problem(data, shape or {}, required)
    if problem is not None:
        raise _error(error, f"{path}: {what} is damaged: {problem}. {fix}")
    return data


def record_object(cls: Any, record: Mapping[str, Any], key: str, path: str | os.PathLike[str], fix: str,
                  error: type[Exception] = RecordError) -> Any:
    """``cls(**record[key])``: a typed configuration (``TaskSpec``, ``HeadConfig``) a record holds, with an
    unknown field or a refused value as ``error`` naming the file and the key (not a ``TypeError``)."""
    value = record.get(key)
    if not isinstance(value, Mapping):
        raise _error(error, f"{path}: key {key!r} is {json_kind(value)} where an object is expected. {fix}")
    try:
        return cls(**value)
    except (TypeError, ValueError) as err:
        raise _error(error, f"{path}: key {key!r} does not describe a {cls.__name__} ({err}). {fix}") from None


def _error(kind: type[Exception], text: str) -> Exception:
    return kind(text)


__all__ = ["RecordError", "json_kind", "read_record", "record_object", "shape_problem"]
