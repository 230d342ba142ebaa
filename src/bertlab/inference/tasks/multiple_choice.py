"""Multiple choice (``task.family=multiple_choice``): ``{"context", "choices", "label", "choice", "score",
"scores"}`` per input, ``label`` the index of the best choice and ``scores`` every choice's probability."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bertlab.data.choices import encode_choices
from bertlab.data.readers import BadExamplePolicy, DataError
from bertlab.inference.settings import PredictSettings
from bertlab.inference.tasks.base import Item, Reading, TaskPrediction, softmax


def read_input(reading: Reading, x: Any, where: str) -> tuple[str, list[str]]:
    """``"context<TAB>choice<TAB>choice..."``, a ``(context, [choices])`` tuple or a dict (``"context"`` or the
    run's text column, ``"choices"`` or its choices field or columns) as ``(context, choices)``."""
    s = reading.settings
    prefix = ""
    if isinstance(x, dict):
        context = x.get(s.text_column, x.get("context"))
        choices = x.get(s.choices_field, x.get("choices"))
        if choices is None and s.choice_columns and all(c in x for c in s.choice_columns):
            choices = [x[c] for c in s.choice_columns]
        if s.choice_prefix_column:
            prefix = str(x.get(s.choice_prefix_column) or "").strip()
    elif isinstance(x, tuple | list) and len(x) == 2 and isinstance(x[1], list | tuple):
        context, choices = x
    elif isinstance(x, str):
        context, *choices = x.split("\t")
    else:
        raise DataError(f"{where}: expected 'context<TAB>choice<TAB>choice...', a (context, [choices]) tuple "
                        f"or a dict with 'context' and 'choices', got {type(x).__name__}")
    if not isinstance(choices, list | tuple) or len(choices) < 2:
        raise DataError(f"{where}: a multiple-choice input needs at least two choices: give "
                        "'context<TAB>choice<TAB>choice...' on a line, or a JSON object with 'context' and a "
                        f"{s.choices_field!r} list")
    choices = [str(c).strip() for c in choices]
    if any(not c for c in choices):
        raise DataError(f"{where}: an empty choice")
    context = str(context or "").strip()
    if not context:
        raise DataError(f"{where}: the context is empty")
    return context, [f"{prefix} {c}" if prefix else c for c in choices]


def read_table(path: Path, settings: PredictSettings, policy: BadExamplePolicy) -> list[Item]:
    """A table of contexts and choice columns (SWAG's CSV), as the run reads its data."""
    from bertlab.data.choices import read_choices
    from bertlab.runtime.config import DataConfig

    columns = DataConfig(text_column=settings.text_column, choice_columns=settings.choice_columns,
                         choice_prefix_column=settings.choice_prefix_column, choices_field=settings.choices_field)
    return [(e.where, (e.context, e.choices)) for e in read_choices(path, columns, labelled=False, policy=policy)]


def records(reading: Reading, chunk: list[Item], size: int, word_scores: bool = False) -> Iterator[dict[str, Any]]:
    examples = [read_input(reading, x, where) for where, x in chunk]
    features, cut = encode_choices(reading.tokenizer, reading.settings.max_seq_length, examples)
    reading.warn_cut(cut, "their (context, choice) rows were cut to the window, the longer text first, as the "
                          "run was trained")
    for (context, choices), scores in zip(examples, reading.forward(features, size)):
        probs = softmax(scores.astype(np.float64))
        best = int(probs.argmax())
        yield {"context": context, "choices": choices, "label": best, "choice": choices[best],
               "score": float(probs[best]), "scores": [float(p) for p in probs]}


TASK = TaskPrediction("multiple_choice", records, output="choices", file_format="table", read_table=read_table)
