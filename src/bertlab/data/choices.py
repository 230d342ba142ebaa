"""Multiple choice (SWAG and your own data): read examples, and turn each into one (context, choice) pair per
choice, as ``BertForMultipleChoice`` reads them.

Formats (the family ``multiple_choice``; ``data.*`` keys name the fields):

- SWAG's CSV (``task=swag``): the context is ``sent1``; each choice is ``sent2`` (the start of the next
  sentence, ``data.choice_prefix_column``) followed by one of ``ending0`` … ``ending3``
  (``data.choice_columns``); ``label`` is the index of the right ending (run_swag's pairing).
- Your own TSV/CSV: the same keys with your column names, any number of choice columns.
- Your own JSONL (``task=multiple_choice``): ``{"context": ..., "choices": [...], "label": 1}``, the choices a
  list (``data.choices_field``) whose length may differ between examples; an optional
  ``data.choice_prefix_column`` string is put before every choice.

The label is the 0-based index of the right choice. A feature holds one row of ids per choice; the collator
pads rows and choices, and padded choices are masked out of the softmax (``choice_mask``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.data.features import Split
from bertlab.data.readers import BadExamplePolicy, DataError, _table_rows, json_object, read_text_lines
from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.data.validate import BadValue, canonical_label, expect, missing_column, text_value
from bertlab.runtime.config import DataConfig


@dataclass
class ChoiceExample:
    context: str
    choices: list[str]
    label: int | None
    where: str  # "file:line"


def _label(value, n_choices: int, where: str, policy: BadExamplePolicy) -> int | None | bool:
    """The label as a choice index (``1``, ``"1"``, ``1.0`` and ``" 01"`` are all choice 1: the label rule of
    :func:`bertlab.data.validate.canonical_label`); False (after policy.bad) when it is not one."""
    try:
        label = int(canonical_label(str(value)))
    except ValueError:
        policy.bad(f"{where}: label {value!r} is not the index of a choice (0..{n_choices - 1})")
        return False
    if not 0 <= label < n_choices:
        policy.bad(f"{where}: label {label} is outside the {n_choices} choices (0..{n_choices - 1})")
        return False
    return label


def read_choices(path: Path, data: DataConfig, labelled: bool, policy: BadExamplePolicy) -> list[ChoiceExample]:
    """Examples of a multiple-choice file (SWAG CSV, TSV/CSV with choice columns, or JSONL with a choice list)."""
    label_column = data.label_column if labelled else None
    examples = []
    if path.suffix.lower() in (".jsonl", ".json"):
        for i, line in enumerate(read_text_lines(path), 1):
            if not line.strip():
                continue
            where = f"{path}:{i}"
            obj = json_object(line, where)
            try:
                context, prefix, choices, label = _json_fields(obj, data, label_column, where)
            except BadValue as err:
                policy.bad(str(err))
                continue
            if len(choices) < 2 or not all(c.strip() for c in choices):
                policy.bad(f"{where}: {data.choices_field!r} must be a list of at least two non-empty strings "
                           "(data.choices_field)")
                continue
            examples.append(_example(context, prefix, choices, label, label_column, where, policy))
    else:
        columns = list(data.choice_columns or [])
        if len(columns) < 2:
            raise DataError(f"{path}: a table needs data.choice_columns (at least two columns, one per choice), "
                            f"got {columns}")
        header, rows = _table_rows(path)
        for key, names in (("text_column", [data.text_column]), ("choice_columns", columns),
                           ("choice_prefix_column", [data.choice_prefix_column] if data.choice_prefix_column
                            else []), ("label_column", [label_column] if label_column else [])):
            unknown = [c for c in names if c not in header]
            if unknown:
                raise missing_column(path, key, unknown[0], header)
        for line, row in rows:
            where = f"{path}:{line}"
            if "__bad__" in row:
                policy.bad(f"{where}: {row['__bad__']}")
                continue
            prefix = row.get(data.choice_prefix_column, "") if data.choice_prefix_column else ""
            examples.append(_example(row.get(data.text_column), prefix, [row[c] for c in columns],
                                     row.get(label_column) if label_column else None, label_column, where, policy))
    return [e for e in examples if e is not None]


def _json_fields(obj: dict, data: DataConfig, label_column: str | None, where: str):
    """(context, prefix, choices, label) of a JSON record, each of the type its field needs (:class:`BadValue`
    naming the field otherwise): text, text, a list of texts, a choice index (a number or its text)."""
    if data.text_column not in obj:
        raise BadValue(f"{where}: no field {data.text_column!r} (data.text_column); the record has {sorted(obj)}")
    context = text_value(obj[data.text_column], where, data.text_column)
    prefix = ""
    if data.choice_prefix_column and obj.get(data.choice_prefix_column) is not None:
        prefix = text_value(obj[data.choice_prefix_column], where, data.choice_prefix_column)
    choices = expect(obj, data.choices_field, list, where, "a list of texts (data.choices_field)")
    for k, choice in enumerate(choices):
        text_value(choice, where, f"{data.choices_field}[{k}]")
    label = None
    if label_column:
        label = expect(obj, label_column, (int, float, str), where, "the index of the right choice (an integer)",
                       required=False)
        if isinstance(label, str) and not label.strip():
            label = None
    return context, prefix, choices, label


def _example(context, prefix: str, choices: list[str], label, label_column, where: str,
             policy: BadExamplePolicy) -> ChoiceExample | None:
    context = str(context or "").strip()
    if not context:
        policy.bad(f"{where}: empty context (data.text_column)")
        return None
    if any(not str(c).strip() for c in choices):
        policy.bad(f"{where}: an empty choice")
        return None
    index = None
    if label_column:
        if label is None or not str(label).strip():
            policy.bad(f"{where}: empty label in {label_column!r}")
            return None
        index = _label(label, len(choices), where, policy)
        if index is False:
            return None
    prefix = str(prefix or "").strip()
    texts = [f"{prefix} {str(c).strip()}" if prefix else str(c).strip() for c in choices]
    return ChoiceExample(context, texts, index, where)


def choice_split(name: str, path: Path, data: DataConfig, tokenizer: EncoderTokenizer, labelled: bool = True,
                 max_examples: int | None = None) -> Split:
    """One feature per example: ``input_ids`` / ``token_type_ids`` as one row per choice
    (``[CLS] context [SEP] choice [SEP]``, cut longest-first to ``data.max_seq_length``), ``labels``."""
    policy = BadExamplePolicy(data.on_bad_example)
    examples = read_choices(path, data, labelled, policy)
    if max_examples is not None:
        examples = examples[:max_examples]
    if not examples:
        raise DataError(f"{path}: no usable examples")
    features, truncated = encode_choices(tokenizer, data.max_seq_length, [(e.context, e.choices) for e in examples])
    if labelled:
        for feature, ex in zip(features, examples):
            feature["labels"] = ex.label
    return Split(name, features, len(examples), policy.skipped, truncated)


def encode_choices(tokenizer: EncoderTokenizer, max_seq_length: int,
                   examples: list[tuple[str, list[str]]]) -> tuple[list[dict[str, Any]], int]:
    """One feature per (context, choices) example, as training and prediction both read it: ``input_ids`` /
    ``token_type_ids`` with one row per choice (``[CLS] context [SEP] choice [SEP]``, cut longest-first to
    ``max_seq_length``) and ``index``; with the number of examples that lost tokens to the cut."""
    encodings = tokenizer.truncated(max_seq_length).encode_batch(
        [context for context, choices in examples for _ in choices], [c for _, choices in examples for c in choices])
    features, truncated, k = [], 0, 0
    for i, (_, choices) in enumerate(examples):
        rows = encodings[k:k + len(choices)]
        k += len(choices)
        truncated += any(bool(enc.overflowing) for enc in rows)
        features.append({"input_ids": [enc.ids for enc in rows], "token_type_ids": [enc.type_ids for enc in rows],
                         "index": i})
    return features, truncated
