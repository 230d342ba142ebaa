"""Prediction per task family, as one table: :data:`PREDICTION_TASKS` maps each family a model can predict with
to its :class:`~bertlab.inference.tasks.base.TaskPrediction` (one small module each: the inputs it reads, the
features it feeds the model, how it turns the logits into records, and the shape of those logits). Both backends
go by it: the ``Predictor`` (PyTorch or an ONNX graph computing the logits), the ONNX export (its graph's inputs,
outputs and axes, the fp32 check, the dev-set comparison) and the input reader (a family's own file format).

Adding a task family to prediction is one module here with its ``TASK`` and one line in :data:`PREDICTION_TASKS`;
every list of supported families (:data:`PREDICT_FAMILIES`, :data:`ONNX_FAMILIES`) is read from the table.
"""

from __future__ import annotations

from bertlab.inference.tasks import embedding, multiple_choice, qa, sequence, token
from bertlab.inference.tasks.base import OUTPUTS, Reading, TaskPrediction

# The order is the order error messages list the families in.
PREDICTION_TASKS: dict[str, TaskPrediction] = {piece.TASK.family: piece.TASK for piece in (
    sequence, token, qa, multiple_choice, embedding)}

PREDICT_FAMILIES = tuple(PREDICTION_TASKS)  # a Predictor gives records for these
ONNX_FAMILIES = tuple(f for f, t in PREDICTION_TASKS.items() if t.onnx)  # python -m bertlab.export --format onnx


def prediction_task(family: str) -> TaskPrediction | None:
    """The family's entry, None for a family without prediction (pre-training: mlm, clm, rtd)."""
    return PREDICTION_TASKS.get(family)


def pools_windows(family: str) -> bool:
    """Whether a model of ``family`` may pool a long document's windows into one row (classification and
    regression trained with ``data.long_text=windows``)."""
    task = PREDICTION_TASKS.get(family)
    return bool(task and task.windows)


__all__ = ["ONNX_FAMILIES", "OUTPUTS", "PREDICTION_TASKS", "PREDICT_FAMILIES", "Reading", "TaskPrediction",
           "pools_windows", "prediction_task"]
