"""Prediction on new text: ``Predictor`` (used by ``python -m bertlab.predict`` and ``predict=true``).

``Predictor.from_run(path)`` takes a run dir (its best checkpoint), a ``.ckpt`` file, an exported Hugging Face
folder (``export=true`` / ``python -m bertlab.export``) or an ONNX export (``--format onnx``), which
:func:`bertlab.inference.loading.load` tells apart, and brings the run's own tokenizer and label set; it needs
no training or validation data. Calling it on inputs gives one JSON-ready record per input, made by the task family's piece of the table in
:mod:`bertlab.inference.tasks` (one module per family, shared by the PyTorch and the ONNX backend):

- classification ``{"text", "label", "score", "scores": {label: probability}}`` with the label strings of the
  data (pair tasks add ``"text_pair"``); regression ``{"text", "value"}`` (:mod:`~bertlab.inference.tasks.sequence`);
- tagging ``{"text", "entities": [{"type", "text", "start", "end", "score"}], "tags", "words", "offsets"}``,
  one IOB2 tag per word (:mod:`~bertlab.inference.tasks.token`);
- QA ``{"id", "question", "answer", "start", "score"}``: the best span over all windows
  (:mod:`~bertlab.inference.tasks.qa`);
- multiple choice ``{"context", "choices", "label", "choice", "score", "scores"}``
  (:mod:`~bertlab.inference.tasks.multiple_choice`); embeddings ``{"text", "embedding"}``
  (:mod:`~bertlab.inference.tasks.embedding`).

Scores are softmax probabilities computed as ``transformers.pipeline()`` computes them. The command line
reads plain text (one example per line; ``sentence<TAB>pair`` for pair tasks, ``question<TAB>context`` for
QA), JSONL, or the task's own file format (a GLUE-style table, a CoNLL file with or without its tag column, a
SQuAD JSON file with or without answers), and writes JSONL: to standard output unless ``--output`` is given;
progress and logs go to standard error. ``predict=true`` in train.py writes the same records for
``data.predict_file`` to ``<run_dir>/predictions/predict_predictions.jsonl``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.data.windows import WindowCap
from bertlab.inference import loading
from bertlab.inference.batches import READ_AHEAD, TorchLogits, forward_documents, forward_features
from bertlab.inference.onnx_session import OnnxSession
from bertlab.inference.settings import PredictSettings
from bertlab.inference.tasks import PREDICT_FAMILIES, PREDICTION_TASKS
from bertlab.inference.tasks.embedding import embed_texts, input_texts
from bertlab.inference.tasks.sequence import score_pairs
from bertlab.inference.tasks.token import word_tags_to_entities  # noqa: F401  (imported from here too)
from bertlab.runtime.config import RAW_TEXT_FAMILIES, ConfigError, DataConfig, TaskSpec

if TYPE_CHECKING:
    import torch

    from bertlab.models.heads import TaskModel

# torch is imported only where a PyTorch model is loaded or run: a prediction from an ONNX export runs on
# onnxruntime, tokenizers and numpy alone, and starts without torch's import (seconds).

log = logging.getLogger(__name__)

PREDICTIONS_FILE = "predict_predictions.jsonl"


# ----------------------------------------------------------------------------------------------------------
# The predictor


class Predictor:
    """A trained model with its tokenizer and label set, turning inputs into records (module docstring).

    What each family reads and writes is its piece of the table in :mod:`bertlab.inference.tasks` (``read_input``
    of each module): classification a string (pair tasks: ``"text<TAB>pair"``), a ``(text, pair)`` tuple or a
    dict; tagging a string (split at whitespace), a list of words, or a dict with ``"tokens"`` / ``"words"`` or
    ``"text"``; QA a dict with ``"question"``, ``"context"`` and optionally ``"id"``, a ``(question, context)``
    tuple or ``"question<TAB>context"``; multiple choice ``"context<TAB>choice<TAB>..."``, a ``(context,
    [choices])`` tuple or a dict; embeddings a text or a dict with one.
    """

    def __init__(self, model: TaskModel | OnnxSession, tokenizer: EncoderTokenizer, task: TaskSpec,
                 labels: list[str] | None, settings: PredictSettings, source: str = "") -> None:
        if task.family not in PREDICT_FAMILIES:
            pretraining = ("; a pre-training run is a start for fine-tuning: train a task from it with "
                           "model.init_from=<its run dir>" if task.family in RAW_TEXT_FAMILIES else "")
            raise ConfigError(
                f"{source}: a {task.family} model (task {task.name}) gives no prediction records; bertlab "
                f"predicts with classification, regression, tagging, QA and multiple-choice models{pretraining}"
            )
        self.model = model if isinstance(model, OnnxSession) else model.eval()
        # numpy batches in, numpy logits out, whichever backend computes them
        self._logits = model if isinstance(model, OnnxSession) else TorchLogits(self.model)
        self.tokenizer = tokenizer
        self.task = task
        self.labels = labels
        self.settings = settings
        self.source = source
        if PREDICTION_TASKS[task.family].one_text:  # every input is one text (a tab inside it is text)
            settings.pair = False

    # ------------------------------------------------------------------------------------------------
    # Loading

    @classmethod
    def from_run(cls, path: str | Path, device: str | torch.device | None = None, batch_size: int | None = None,
                 tokenizer: EncoderTokenizer | None = None, data: DataConfig | None = None,
                 backend: str = "auto") -> Predictor:
        """A run dir (its best checkpoint, else ``last.ckpt``), a ``.ckpt`` file, an exported HF folder or an
        ONNX export (``backend``: auto, torch, onnx (fp32) or onnx-int8; auto takes what the folder holds, the
        gated int8 graph of an ONNX export first).

        ``device``: where a PyTorch model computes (None: where it was loaded, the CPU; ``"auto"``: CUDA when
        available, else the CPU); an ONNX graph always computes on the CPU. ``data`` replaces the run's own
        ``data.*`` settings (max_seq_length, columns, QA windows); ``tokenizer`` the run's ``tokenizer/``
        folder next to the checkpoint.
        """
        predictor = cls(*loading.load(path, tokenizer, backend))
        if data is not None:
            predictor.settings = PredictSettings.from_data(asdict(data))
        if batch_size is not None:
            predictor.settings.batch_size = int(batch_size)
        if device == "auto":
            device = None if predictor.onnx else _default_device()
        return predictor.to(device) if device is not None else predictor

    # ------------------------------------------------------------------------------------------------
    # Device

    @property
    def onnx(self) -> bool:
        """Whether an onnxruntime session computes (an ONNX export), not a PyTorch model."""
        return isinstance(self.model, OnnxSession)

    def to(self, device: str | torch.device) -> Predictor:
        """Move a PyTorch model to ``device``; an ONNX graph stays on the CPU."""
        if not self.onnx:
            self.model.to(device)
        return self

    @property
    def device(self) -> torch.device:
        if self.onnx:
            import torch

            return torch.device("cpu")
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------------------------------------
    # Predicting

    def __call__(self, inputs: Any, batch_size: int | None = None, word_scores: bool = False) -> Any:
        """Records for ``inputs`` (a list; a single string or dict gives a single record).

        ``word_scores=True`` adds, for tagging, each word's tag probability (``"word_scores"``).
        """
        if isinstance(inputs, str | dict):
            return self([inputs], batch_size, word_scores)[0]
        return list(self.predict_iter(inputs, batch_size, word_scores))

    def predict_iter(self, inputs: Iterable[Any], batch_size: int | None = None,
                     word_scores: bool = False) -> Iterator[dict[str, Any]]:
        """Records one by one (for inputs too large to hold), ``batch_size`` features per forward pass; the
        inputs are read :data:`~bertlab.inference.batches.READ_AHEAD` batches at a time and batched by length
        within them (:mod:`bertlab.inference.batches`)."""
        items = ((f"input {i}", x) for i, x in enumerate(inputs))
        yield from self.predict_items(items, batch_size, word_scores)

    def predict_items(self, items: Iterable[tuple[str, Any]], batch_size: int | None = None,
                      word_scores: bool = False) -> Iterator[dict[str, Any]]:
        """Like :meth:`predict_iter` for ``(where, input)`` pairs; ``where`` (``file:line``) names bad input."""
        size = int(batch_size or self.settings.batch_size)
        if size < 1:
            raise ConfigError(f"batch size must be at least 1, got {size}")
        it = iter(items)
        records = PREDICTION_TASKS[self.task.family].records
        while chunk := list(itertools.islice(it, size * READ_AHEAD)):
            yield from records(self, chunk, size, word_scores)

    def embed_texts(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """(N, D) float32: each text's embedding as the run computes it (an embedding model only), texts
        longer than ``max_seq_length`` tokens cut there (counted in a warning), ``batch_size`` per forward."""
        return embed_texts(self, texts, batch_size)

    def embed_items(self, items: Iterable[tuple[str, Any]], batch_size: int | None = None,
                    ) -> Iterator[tuple[list[tuple[str, Any]], np.ndarray]]:
        """An embedding model's ``(where, input)`` pairs, read as :meth:`predict_items` reads them, as matrices:
        (the chunk's pairs, their (n, D) float32 embeddings), READ_AHEAD batches of inputs at a time (the
        ``.npy`` output of :mod:`bertlab.inference.embedding_output`)."""
        size = int(batch_size or self.settings.batch_size)
        it = iter(items)
        while chunk := list(itertools.islice(it, size * READ_AHEAD)):
            yield chunk, embed_texts(self, input_texts(self, chunk), size)

    def score_pairs(self, pairs: list[tuple[str, str]], batch_size: int | None = None) -> np.ndarray:
        """(N,) float32: a reranker's score of each (query, passage) pair (:func:`~bertlab.inference.tasks.sequence.score_pairs`)."""
        return score_pairs(self, pairs, batch_size, self.source)

    # ------------------------------------------------------------------------------------------------
    # What the per-task pieces use (inference.tasks.base.Reading)

    def warn_cut(self, count: int, consequence: str) -> None:
        """Every predict path that cuts an input to the window says how many it cut and what that does."""
        if count:
            log.warning("%d texts longer than max_seq_length=%d tokens: %s", count, self.settings.max_seq_length,
                        consequence)

    def window_cap(self) -> WindowCap:
        """The most windows one input is read in (the run's data.max_windows_per_example and on_bad_example)."""
        return WindowCap(self.settings.max_windows_per_example, self.settings.on_bad_example, "the input")

    def forward(self, features: list[dict[str, Any]], size: int | None = None) -> list[np.ndarray]:
        """Each feature's float32 logits, in order: (C,) for sequences, (T_i, C) cropped to its tokens for
        tagging and QA, (K_i,) over its own K_i choices for multiple choice (the batch's padded choices left
        out); batches of the predict call's size, by length (:func:`~bertlab.inference.batches.forward_features`).
        ``size``: features per batch (default: the settings' batch size)."""
        return forward_features(self._logits, features, int(size or self.settings.batch_size), self.tokenizer.pad_id)

    def forward_documents(self, features: list[dict[str, Any]], size: int) -> list[np.ndarray]:
        """(C,) logits per long document read in windows, at most ``data.max_windows_per_batch`` windows a
        batch (:func:`~bertlab.inference.batches.forward_documents`)."""
        cap = self.settings.max_windows_per_batch or size
        return forward_documents(self._logits, features, size, cap, self.tokenizer.pad_id)


def load_predictor(model: str | Path, device: str | None, batch_size: int | None,
                   refusal: Callable[[TaskSpec, str], str | None]) -> Predictor:
    """The predictor of ``model`` as ``bertlab.predict`` loads it (on ``device``, else the default one for PyTorch),
    refused before any work when ``refusal(task, source)`` names why this model is not the kind the caller needs."""
    loaded = loading.load(model)
    why = refusal(loaded.task, str(loaded.source))
    if why:
        raise ConfigError(why)
    predictor = Predictor(*loaded)
    if batch_size is not None:
        predictor.settings.batch_size = int(batch_size)
    if device is None:
        device = None if predictor.onnx else _default_device()
    return predictor.to(device) if device is not None else predictor


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
