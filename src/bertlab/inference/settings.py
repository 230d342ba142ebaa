"""How a ``Predictor`` reads its inputs: :class:`PredictSettings`, taken from a run's ``data.*`` settings (or an
export's records). Below the loaders (:mod:`bertlab.inference.loading`, which re-exports it) and the per-task
pieces (:mod:`bertlab.inference.tasks`) that both read it; imports nothing of bertlab."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass
class PredictSettings:
    """What reading and windowing need, taken from the run's ``data.*`` settings (defaults for HF folders)."""

    max_seq_length: int = 512
    batch_size: int = 32
    text_column: str = "text"
    text_pair_column: str | None = None
    pair: bool | None = None  # None (a Hugging Face folder): a pair wherever the input holds two texts
    doc_stride: int = 128
    # Text longer than max_seq_length: "windows" (overlapping, data.window_stride tokens shared; None: a
    # quarter of the window) or "truncate". Classification and regression pool a document's windows as the run
    # trained, at most max_windows_per_batch windows a batch (None: batch_size); a classifier whose run or
    # folder does not say it read windows (recorded before them, or not bertlab's) truncates, as it was trained.
    long_text: str = "windows"
    window_stride: int | None = None
    max_windows_per_batch: int | None = None
    # The most windows one input is read in (data.max_windows_per_example, bertlab.data.windows.WindowCap): over
    # it, an error (on_bad_example=error) or its first windows, with a warning (skip). None: no cap.
    max_windows_per_example: int | None = 128
    on_bad_example: str = "error"
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    # SQuAD 2.0: answer "" when the null score beats the best span by more than the threshold.
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0
    # Multiple choice: the choice list of a JSON input, or a table's choice columns, and a text put before
    # every choice (SWAG's sent2).
    choices_field: str = "choices"
    choice_columns: list[str] | None = None
    choice_prefix_column: str | None = None

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> PredictSettings:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names and v is not None}
        if data.get("eval_batch_size"):
            values["batch_size"] = int(data["eval_batch_size"])
        values["pair"] = data.get("text_pair_column") is not None
        return cls(**values)
