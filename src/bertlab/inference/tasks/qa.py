"""Extractive QA (``task.family=qa``): ``{"id", "question", "answer", "start", "score"}`` per input: the best
span over all windows, ``start`` its first character in the context and ``score`` the probability of its start
times that of its end (softmax over [CLS] and the window's context tokens, as transformers' QA pipeline);
SQuAD 2.0 models answer "" with ``null_score_diff`` where the null answer wins."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from bertlab.data.readers import DataError
from bertlab.inference.tasks.base import Item, Reading, TaskPrediction, softmax
from bertlab.runtime.errors import ConfigError

# data.qa and tasks.spans are imported where a QA model predicts, not with the table of every family.


def read_input(x: Any, where: str, default_id: str):
    """A dict with ``"question"``, ``"context"`` and optionally ``"id"``, a ``(question, context)`` tuple,
    ``"question<TAB>context"`` or a ``QAExample`` (a SQuAD file's), checked as the run checks its data."""
    from bertlab.data.qa import QADataError, QAExample, validate_example

    if isinstance(x, QAExample):
        example = x
    else:
        if isinstance(x, str):
            if "\t" not in x:
                raise DataError(f"{where}: a QA input line is 'question<TAB>context'; this one has no tab")
            x = tuple(x.split("\t", 1))
        if isinstance(x, tuple | list) and len(x) == 2:
            x = {"question": x[0], "context": x[1]}
        if not isinstance(x, dict) or not {"question", "context"} <= set(x):
            raise DataError(f"{where}: a QA input needs 'question' and 'context' (a dict, a (question, "
                            f"context) tuple or 'question<TAB>context'), got {x!r:.80}")
        example = QAExample(id=str(x.get("id", default_id)), question=str(x["question"]),
                            context=str(x["context"]))
    try:
        validate_example(example, train=False)
    except QADataError as err:
        raise DataError(f"{where}: {err}") from None
    return example


def records(reading: Reading, chunk: list[Item], size: int, word_scores: bool = False) -> Iterator[dict[str, Any]]:
    from bertlab.data.qa import QAExample, prepare_qa_features
    from bertlab.tasks.spans import best_spans, null_answers, null_scores

    s = reading.settings
    # An input without an id gets its line number (files) or its position (Python lists).
    given = [read_input(x, where, where.rsplit(":", 1)[-1].removeprefix("input ")) for where, x in chunk]
    # Own ids for decoding: ids given by users need not be unique.
    examples = [QAExample(id=str(k), question=e.question, context=e.context) for k, e in enumerate(given)]
    try:
        qa = prepare_qa_features(examples, reading.tokenizer.tokenizer, template=reading.tokenizer.template,
                                 train=False, max_seq_length=s.max_seq_length,
                                 doc_stride=s.doc_stride, max_query_length=s.max_query_length,
                                 cap=reading.window_cap())
    except DataError:  # an input over the window cap
        raise
    except ValueError as err:
        raise ConfigError(str(err)) from None
    features = [{"input_ids": qa.input_ids[i], "token_type_ids": qa.token_type_ids[i], "index": i}
                for i in range(len(qa))]
    rows = reading.forward(features, size)
    starts, ends = [r[:, 0] for r in rows], [r[:, 1] for r in rows]
    spans = best_spans(examples, qa, starts, ends, n_best_size=s.n_best_size,
                       max_answer_length=s.max_answer_length, use_max_context=True)
    no_answer: dict[str, float] = {}
    if s.version_2_with_negative:  # the spans above against each example's null score
        answers, diffs = null_answers(examples, spans, null_scores(qa, starts, ends), s.null_score_diff_threshold)
        no_answer = {k: diffs[k] for k, text in answers.items() if text == ""}
    for k, example in enumerate(given):
        span = spans.get(str(k))
        record = {"id": example.id, "question": example.question, "answer": "", "start": -1, "score": 0.0}
        if str(k) in no_answer:  # SQuAD 2.0: the null answer won (score: null minus best span score)
            record["null_score_diff"] = float(no_answer[str(k)])
        elif span is not None:
            f = span.feature_index
            cs, ce = qa.context_start[f], qa.context_end[f]
            # As transformers' QA pipeline: softmax over [CLS] and the window's context tokens.
            keep = np.r_[0, cs:ce]
            p_start = softmax(rows[f][keep, 0].astype(np.float64))[span.start_position - cs + 1]
            p_end = softmax(rows[f][keep, 1].astype(np.float64))[span.end_position - cs + 1]
            record.update(answer=span.text, start=span.start_char, score=float(p_start * p_end))
        yield record


TASK = TaskPrediction("qa", records, output="spans", file_format="squad", metric_scale=1.0, default_window=384)
