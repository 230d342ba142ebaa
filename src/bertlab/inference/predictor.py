"""Prediction on new text: ``Predictor`` (used by ``python -m bertlab.predict`` and ``predict=true``).

``Predictor.from_run(path)`` takes a run dir (its best checkpoint), a ``.ckpt`` file, an exported Hugging Face
folder (``export=true`` / ``python -m bertlab.export``) or an ONNX export (``--format onnx``), which
:func:`bertlab.inference.loading.load` tells apart, and brings the run's own tokenizer and label set; it needs
no training or validation data. Calling it on inputs gives one JSON-ready record per input:

- classification ``{"text", "label", "score", "scores": {label: probability}}`` with the label strings of the
  data (pair tasks add ``"text_pair"``); regression ``{"text", "value"}``;
- tagging ``{"text", "entities": [{"type", "text", "start", "end", "score"}], "tags", "words", "offsets"}``:
  one IOB2 tag per word (the prediction at the word's first sub-word, an ``I-X`` that would start an entity
  written ``B-X``; a text longer than ``max_seq_length`` is read in overlapping windows as in training, each
  word tagged by the window where it has the most context); raw text is split into words by :func:`bertlab.inference.text.split_words` (whitespace,
  then punctuation off the ends of words), ``offsets`` are each word's ``[start, end)`` in ``text``, and
  entities carry character offsets into ``text`` too;
- QA ``{"id", "question", "answer", "start", "score"}``: the best span over all windows, ``start`` its first
  character in the context and ``score`` the probability of its start times that of its end.

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
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bertlab.data.choices import encode_choices
from bertlab.data.documents import encode_documents, is_windowed
from bertlab.data.readers import DataError
from bertlab.data.tags import iob1_to_iob2
from bertlab.data.tokenizer import BertTokenizer
from bertlab.data.windows import WindowCap
from bertlab.inference import loading
from bertlab.inference.batches import READ_AHEAD, TorchLogits, forward_documents, forward_features
from bertlab.inference.loading import PredictSettings
from bertlab.inference.onnx_session import OnnxSession
from bertlab.inference.text import split_words
from bertlab.runtime.config import RAW_TEXT_FAMILIES, ConfigError, DataConfig, TaskSpec
from bertlab.tasks.entities import extract_entities

if TYPE_CHECKING:
    import torch

    from bertlab.models.heads import TaskModel

# torch is imported only where a PyTorch model is loaded or run: a prediction from an ONNX export runs on
# onnxruntime, tokenizers and numpy alone, and starts without torch's import (seconds).

log = logging.getLogger(__name__)

FAMILIES = ("sequence", "token", "qa", "multiple_choice", "embedding")
PREDICTIONS_FILE = "predict_predictions.jsonl"


# ----------------------------------------------------------------------------------------------------------
# NER: word tags → valid IOB2 and entities


def word_tags_to_entities(text: str, words: list[tuple[str, int]], tags: list[str],
                          scores: list[float | None]) -> tuple[list[str], list[dict[str, Any]]]:
    """Valid IOB2 tags and the entities they spell, for one text.

    ``words`` are ``(word, start character in text)``, ``tags`` the predicted tag of each word and ``scores``
    its probability (None for a word the model did not see: one the tokenizer turns into nothing, or one cut
    by ``data.long_text=truncate``). An ``I-X`` that would start an entity (first word, after ``O`` or after
    another type) becomes ``B-X``: the model's ``I-X`` says "inside an X", and an X that nothing opened
    starts here. An entity's ``end`` is exclusive and its score
    the mean probability of its words' tags.
    """
    fixed = iob1_to_iob2(tags)
    entities = []
    for type_, first, last in sorted(extract_entities(fixed), key=lambda e: e[1]):
        start, end = words[first][1], words[last][1] + len(words[last][0])
        probs = [s for s in scores[first:last + 1] if s is not None]
        entities.append({"type": type_, "text": text[start:end], "start": start, "end": end,
                         "score": float(np.mean(probs)) if probs else 0.0})
    return fixed, entities


def _softmax(x: np.ndarray) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


# ----------------------------------------------------------------------------------------------------------
# The predictor


class Predictor:
    """A trained model with its tokenizer and label set, turning inputs into records (module docstring).

    Inputs per family: classification a string (pair tasks: ``"text<TAB>pair"``), a ``(text, pair)`` tuple or
    a dict (``"text"`` or the run's text column, ``"text_pair"`` or its pair column); tagging a string (split
    at whitespace), a list of words, or a dict with ``"tokens"`` / ``"words"`` or ``"text"``; QA a dict with
    ``"question"``, ``"context"`` and optionally ``"id"``, a ``(question, context)`` tuple or
    ``"question<TAB>context"``.
    """

    def __init__(self, model: TaskModel | OnnxSession, tokenizer: BertTokenizer, task: TaskSpec,
                 labels: list[str] | None, settings: PredictSettings, source: str = "") -> None:
        if task.family not in FAMILIES:
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
        if task.family == "embedding":  # every input is one text to embed (a tab inside it is text)
            settings.pair = False

    # ------------------------------------------------------------------------------------------------
    # Loading

    @classmethod
    def from_run(cls, path: str | Path, device: str | torch.device | None = None, batch_size: int | None = None,
                 tokenizer: BertTokenizer | None = None, data: DataConfig | None = None,
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
        while chunk := list(itertools.islice(it, size * READ_AHEAD)):
            if self.task.family == "sequence":
                yield from self._sequence(chunk, size)
            elif self.task.family == "token":
                yield from self._token(chunk, size, word_scores)
            elif self.task.family == "multiple_choice":
                yield from self._choices(chunk, size)
            elif self.task.family == "embedding":
                yield from self._embedding(chunk, size)
            else:
                yield from self._qa(chunk, size)

    def _warn_cut(self, count: int, consequence: str) -> None:
        """Every predict path that cuts an input to the window says how many it cut and what that does."""
        if count:
            log.warning("%d texts longer than max_seq_length=%d tokens: %s", count, self.settings.max_seq_length,
                        consequence)

    def _forward(self, features: list[dict[str, Any]], size: int | None = None) -> list[np.ndarray]:
        """Each feature's float32 logits, in order: (C,) for sequences, (T_i, C) cropped to its tokens for
        tagging and QA, (K_i,) over its own K_i choices for multiple choice (the batch's padded choices left
        out); batches of the predict call's size, by length (:func:`~bertlab.inference.batches.forward_features`).
        Long documents read in windows: (C,) per document (:func:`~bertlab.inference.batches.forward_documents`).
        ``size``: features per batch (default: the settings' batch size)."""
        size = int(size or self.settings.batch_size)
        if self.task.family == "sequence" and any(is_windowed(f) for f in features):
            cap = self.settings.max_windows_per_batch or size
            return forward_documents(self._logits, features, size, cap, self.tokenizer.pad_id)
        return forward_features(self._logits, features, size, self.tokenizer.pad_id)

    # Sequence classification and regression

    def _sequence_input(self, x: Any, where: str) -> tuple[str, str | None]:
        s = self.settings
        pair = None
        if isinstance(x, dict):
            text = x.get(s.text_column, x.get("text"))
            pair = x.get(s.text_pair_column, x.get("text_pair")) if s.text_pair_column else x.get("text_pair")
            if text is None:
                raise DataError(f"{where}: no {s.text_column!r} or 'text' key in {sorted(x)}")
        elif isinstance(x, tuple | list) and len(x) == 2:
            text, pair = x
        elif isinstance(x, str):
            text = x
            if s.pair is not False and "\t" in x:
                text, pair = x.split("\t", 1)
        else:
            raise DataError(f"{where}: expected a text, a (text, pair) tuple or a dict, got {type(x).__name__}")
        text, pair = str(text).strip(), None if pair is None else str(pair).strip()
        if s.pair and not pair:
            raise DataError(f"{where}: task {self.task.name} classifies sentence pairs, and this input has one "
                            "text: give 'sentence<TAB>pair' on a line, a (text, pair) tuple, or a JSON object "
                            f"with {s.text_column!r} and {s.text_pair_column!r}")
        if s.pair is False and pair is not None:
            raise DataError(f"{where}: task {self.task.name} classifies single texts, and this input has a pair")
        if not text:
            raise DataError(f"{where}: the text is empty")
        return text, pair

    def _window_cap(self) -> WindowCap:
        """The most windows one input is read in (the run's data.max_windows_per_example and on_bad_example)."""
        return WindowCap(self.settings.max_windows_per_example, self.settings.on_bad_example, "the input")

    def _sequence_features(self, pairs: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
        """One feature per input, read as the run read its data: a text past the window in windows (one row of
        ids per window, pooled by the model) or cut (``data.long_text``; :mod:`bertlab.data.documents`)."""
        s = self.settings
        features: list[dict[str, Any]] = [{} for _ in pairs]
        cut = 0
        for is_pair in (False, True):  # a Hugging Face folder takes single texts and pairs in one batch
            at = [i for i, (_, pair) in enumerate(pairs) if (pair is not None) == is_pair]
            if not at:
                continue
            rows, long = encode_documents(self.tokenizer, [pairs[i][0] for i in at],
                                          [pairs[i][1] for i in at] if is_pair else None, s.max_seq_length,
                                          s.long_text, s.window_stride, self._window_cap())
            cut += long.truncated
            for i, row in zip(at, rows):
                features[i] = {**row, "index": i}
        self._warn_cut(cut, "each was read up to the window and the rest ignored, as the run was trained "
                            "(data.long_text=truncate; a run trained with windows reads the whole text)"
                       if s.long_text == "truncate" else "the first text of each pair was cut to leave the second "
                       "at least half the window, as the run was trained (data.long_text=windows)")
        return features

    def _sequence(self, chunk: list[tuple[str, Any]], size: int) -> Iterator[dict[str, Any]]:
        pairs = [self._sequence_input(x, where) for where, x in chunk]
        for (text, pair), logits in zip(pairs, self._forward(self._sequence_features(pairs), size)):
            record: dict[str, Any] = {"text": text}
            if pair is not None:
                record["text_pair"] = pair
            if self.task.regression:
                record["value"] = float(logits[0])
            else:
                probs = _softmax(logits.astype(np.float64))
                best = int(probs.argmax())
                record.update(label=self.labels[best], score=float(probs[best]),
                              scores={label: float(p) for label, p in zip(self.labels, probs)})
            yield record

    # Embeddings (task=embedding): {"text", "embedding"} per input, the vector as the run computes it

    def _embedding_text(self, x: Any, where: str) -> str:
        s = self.settings
        text = x.get(s.text_column, x.get("text")) if isinstance(x, dict) else x
        if not isinstance(text, str):
            raise DataError(f"{where}: expected a text, or a dict with {s.text_column!r} or 'text', got "
                            f"{type(x).__name__}")
        if not text.strip():
            raise DataError(f"{where}: the text is empty")
        return text.strip()

    def _embedding(self, chunk: list[tuple[str, Any]], size: int) -> Iterator[dict[str, Any]]:
        texts = [self._embedding_text(x, where) for where, x in chunk]
        for text, vector in zip(texts, self.embed_texts(texts, size)):
            yield {"text": text, "embedding": [float(v) for v in vector]}

    def embed_items(self, items: Iterable[tuple[str, Any]], batch_size: int | None = None,
                    ) -> Iterator[tuple[list[tuple[str, Any]], np.ndarray]]:
        """An embedding model's ``(where, input)`` pairs (read as :meth:`predict_items` reads them) as matrices:
        (the chunk's pairs, their (n, D) float32 embeddings), READ_AHEAD batches of inputs at a time."""
        size = int(batch_size or self.settings.batch_size)
        it = iter(items)
        while chunk := list(itertools.islice(it, size * READ_AHEAD)):
            yield chunk, self.embed_texts([self._embedding_text(x, where) for where, x in chunk], size)

    def embed_texts(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """(N, D) float32: each text's embedding as the run computes it (an embedding model only), texts
        longer than ``max_seq_length`` tokens cut there (counted in a warning), ``batch_size`` per forward."""
        encodings = self.tokenizer.truncated(self.settings.max_seq_length).encode_batch(texts)
        self._warn_cut(sum(bool(e.overflowing) for e in encodings), "each was embedded from its first "
                       "max_seq_length tokens, as the run read its data")
        features = [{"input_ids": e.ids, "token_type_ids": e.type_ids, "index": i} for i, e in enumerate(encodings)]
        vectors = self._forward(features, batch_size)
        return np.stack(vectors).astype(np.float32) if vectors else np.zeros((0, 0), dtype=np.float32)

    # Multiple choice

    def _choice_input(self, x: Any, where: str) -> tuple[str, list[str]]:
        s = self.settings
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

    def _choices(self, chunk: list[tuple[str, Any]], size: int) -> Iterator[dict[str, Any]]:
        examples = [self._choice_input(x, where) for where, x in chunk]
        features, cut = encode_choices(self.tokenizer, self.settings.max_seq_length, examples)
        self._warn_cut(cut, "their (context, choice) rows were cut to the window, the longer text first, as the "
                            "run was trained")
        for (context, choices), scores in zip(examples, self._forward(features, size)):
            probs = _softmax(scores.astype(np.float64))
            best = int(probs.argmax())
            yield {"context": context, "choices": choices, "label": best, "choice": choices[best],
                   "score": float(probs[best]), "scores": [float(p) for p in probs]}

    # Tagging

    @staticmethod
    def _token_input(x: Any, where: str) -> tuple[str, list[tuple[str, int]]]:
        if isinstance(x, dict):
            x = x.get("tokens", x.get("words", x.get("text")))
        if isinstance(x, str):
            text = x
            words = split_words(x)
        elif isinstance(x, list | tuple) and all(isinstance(w, str) for w in x):
            words, at = [], 0
            for w in x:
                words.append((w, at))
                at += len(w) + 1
            text = " ".join(x)
        else:
            raise DataError(f"{where}: expected a text, a list of words or a dict with 'tokens' or 'text', got "
                            f"{type(x).__name__}")
        if not words:
            raise DataError(f"{where}: no words to tag")
        return text, words

    def _token(self, chunk: list[tuple[str, Any]], size: int, word_scores: bool) -> Iterator[dict[str, Any]]:
        from bertlab.data.tags import tag_features
        from bertlab.tasks.entities import decode_word_predictions, stitch_windows

        inputs = [self._token_input(x, where) for where, x in chunk]
        # Windows as in training (data.long_text, data.window_stride), cut outside the model: every backend
        # (PyTorch, ONNX) reads the same ones.
        encodings = self.tokenizer.encode_words_batch([[w for w, _ in words] for _, words in inputs],
                                                      add_special_tokens=False)
        features, word_ids, sentence, long = tag_features(encodings, self.tokenizer.template,
                                                          self.settings.max_seq_length, self.settings.long_text,
                                                          self.settings.window_stride, cap=self._window_cap())
        rows = self._forward(features, size)
        spans = np.searchsorted(sentence, np.arange(len(inputs) + 1))  # sentence i: features spans[i]:spans[i+1]
        o_id = self.labels.index("O") if "O" in self.labels else 0
        for (text, words), a, b in zip(inputs, spans[:-1], spans[1:]):
            logits, ids_of = stitch_windows(rows[a:b], word_ids[a:b])
            probs = _softmax(logits.astype(np.float64))  # (T, C)
            ids = decode_word_predictions(logits.argmax(-1), ids_of, len(words), o_id=o_id)
            first: dict[int, int] = {}
            for position, w in enumerate(ids_of):
                if w >= 0:
                    first.setdefault(w, position)
            scores = [float(probs[first[w], ids[w]]) if w in first else None for w in range(len(words))]
            tags, entities = word_tags_to_entities(text, words, [self.labels[i] for i in ids], scores)
            record = {"text": text, "entities": entities, "tags": tags, "words": [w for w, _ in words],
                      "offsets": [[at, at + len(w)] for w, at in words]}
            if word_scores:
                record["word_scores"] = scores
            yield record
        self._warn_cut(long.truncated, "their last words are tagged O (data.long_text=truncate)")

    # Extractive QA

    @staticmethod
    def _qa_input(x: Any, where: str, default_id: str):
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

    def _qa(self, chunk: list[tuple[str, Any]], size: int) -> Iterator[dict[str, Any]]:
        from bertlab.data.qa import QAExample, prepare_qa_features
        from bertlab.tasks.spans import best_spans, null_answers, null_scores

        s = self.settings
        # An input without an id gets its line number (files) or its position (Python lists).
        given = [self._qa_input(x, where, where.rsplit(":", 1)[-1].removeprefix("input ")) for where, x in chunk]
        # Own ids for decoding: ids given by users need not be unique.
        examples = [QAExample(id=str(k), question=e.question, context=e.context) for k, e in enumerate(given)]
        try:
            qa = prepare_qa_features(examples, self.tokenizer.tokenizer, template=self.tokenizer.template,
                                     train=False, max_seq_length=s.max_seq_length,
                                     doc_stride=s.doc_stride, max_query_length=s.max_query_length,
                                     cap=self._window_cap())
        except DataError:  # an input over the window cap
            raise
        except ValueError as err:
            raise ConfigError(str(err)) from None
        features = [{"input_ids": qa.input_ids[i], "token_type_ids": qa.token_type_ids[i], "index": i}
                    for i in range(len(qa))]
        rows = self._forward(features, size)
        starts, ends = [r[:, 0] for r in rows], [r[:, 1] for r in rows]
        spans = best_spans(examples, qa, starts, ends, n_best_size=s.n_best_size,
                           max_answer_length=s.max_answer_length, use_max_context=True)
        no_answer: dict[str, float] = {}
        if s.version_2_with_negative:  # the spans above against each example's null score
            answers, diffs = null_answers(examples, spans, null_scores(qa, starts, ends),
                                          s.null_score_diff_threshold)
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
                p_start = _softmax(rows[f][keep, 0].astype(np.float64))[span.start_position - cs + 1]
                p_end = _softmax(rows[f][keep, 1].astype(np.float64))[span.end_position - cs + 1]
                record.update(answer=span.text, start=span.start_char, score=float(p_start * p_end))
            yield record


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
