"""What one task family's prediction is (:class:`TaskPrediction`, an entry of the table in
:mod:`bertlab.inference.tasks`) and what it may use of the predictor that calls it (:class:`Reading`).

A piece reads its family's inputs, makes the features the model reads, has the predictor compute their logits
(PyTorch or an ONNX graph: the piece never knows which) and turns them into one JSON-ready record per input.
Its other fields say what the ONNX export and its checks need to know of the family: the shape of its outputs,
whether it pools long documents' windows, its own input file format. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bertlab.data.readers import BadExamplePolicy
from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.data.windows import WindowCap
from bertlab.inference.settings import PredictSettings
from bertlab.runtime.config import TaskSpec

# The shape of a family's logits, which the ONNX graph's axes, the export's checks and the comparison of two
# models follow: "row" one row per input (B, C); "choices" one score per choice (B, K) of inputs (B, K, T);
# "tokens" a row per token (B, T, C); "spans" a start and an end logit per token (B, T, 2), two graph outputs.
OUTPUTS = ("row", "choices", "tokens", "spans")

# One input as the predictor is given it: (where, the input), ``where`` naming it in errors ("file:line").
Item = tuple[str, Any]


class Reading(Protocol):
    """What a piece uses of the predictor that calls it (:class:`bertlab.inference.predictor.Predictor`)."""

    task: TaskSpec
    tokenizer: EncoderTokenizer
    labels: list[str] | None
    settings: PredictSettings

    def forward(self, features: list[dict[str, Any]], size: int | None = None) -> list[np.ndarray]:
        """Each feature's float32 logits, in order (:func:`bertlab.inference.batches.forward_features`)."""
        ...

    def forward_documents(self, features: list[dict[str, Any]], size: int) -> list[np.ndarray]:
        """(C,) logits per feature of long documents read in windows
        (:func:`bertlab.inference.batches.forward_documents`)."""
        ...

    def warn_cut(self, count: int, consequence: str) -> None:
        """Say how many inputs were cut to the window and what that does."""
        ...

    def window_cap(self) -> WindowCap:
        """The most windows one input is read in."""
        ...


Records = Callable[[Reading, list[Item], int, bool], Iterator[dict[str, Any]]]
TableReader = Callable[[Path, PredictSettings, BadExamplePolicy], list[Item]]


@dataclass(frozen=True)
class TaskPrediction:
    """One task family's prediction: ``records(reading, items, batch_size, word_scores)`` turns a chunk of
    ``(where, input)`` items into their records, in order (``word_scores``: tagging adds each word's tag
    probability), and the facts the predictor, the input reader and the ONNX export go by."""

    family: str
    records: Records
    output: str = "row"  # the shape of the logits: OUTPUTS
    onnx: bool = True  # an ONNX export covers the family (its graph computes what records reads)
    windows: bool = False  # a model may pool a long document's windows into one row (data.long_text=windows)
    one_text: bool = False  # every input is one text (a tab inside it is text, not a pair)
    file_format: str | None = None  # its own input file format besides text and JSONL: table, conll or squad
    read_table: TableReader | None = None  # how it reads a table, when not as (text, pair) rows
    metric_scale: float = 100.0  # points per unit of its metric (SQuAD's EM/F1 are on a 0-100 scale already)
    graph_outputs: tuple[str, ...] = ()  # the ONNX graph's output names, when not the logits' (output_names)
    # The int8 gate's metric: the first of these the dev scores hold (mode max), whatever task.monitor is; empty:
    # task.monitor (an embedding model is gated on what it is served for, retrieval, not on its val/loss).
    gate_metrics: tuple[str, ...] = ()
    vector: bool = False  # the output is a vector, not logits: two models compare by cosine, not argmax
    default_window: int = 512  # max_seq_length of a folder that records none (QA: 384, transformers' pipeline's)

    def __post_init__(self) -> None:
        if self.output not in OUTPUTS:
            raise ValueError(f"{self.family}: output must be one of {', '.join(OUTPUTS)}, got {self.output!r}")

    @property
    def output_names(self) -> list[str]:
        """The names of the ONNX graph's outputs."""
        if self.graph_outputs:
            return list(self.graph_outputs)
        return ["start_logits", "end_logits"] if self.output == "spans" else ["logits"]

    @property
    def per_token(self) -> bool:
        """Whether the logits have a row per token (compared at real tokens only, padding left out)."""
        return self.output in ("tokens", "spans")


def softmax(x: np.ndarray) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)

