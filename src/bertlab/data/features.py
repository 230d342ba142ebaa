"""Examples → model features, one function per task family (tokenized once, batched, in Rust).

Each returns a :class:`Split`: ``features`` (one dict per model input row, unpadded; the collator pads per
batch) plus what evaluation needs to score whole examples (word-level gold tags for NER, the examples and
windows for QA). Over-long inputs are not bad input: they are truncated (or windowed) and counted.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertlab.data.documents import encode_documents
from bertlab.data.qa import QAEvalData
from bertlab.data.readers import BadExamplePolicy, DataError, read_conll, read_squad, read_table
from bertlab.data.tags import IGNORE_INDEX, UNLABELLED_WORD
from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.data.validate import (
    LabelSpellings,
    canonical_label,
    check_label_column,
    number_value,
    unknown_labels,
)
from bertlab.data.windows import WindowCap
from bertlab.runtime.config import ConfigError, DataConfig, TaskSpec

log = logging.getLogger(__name__)


@dataclass
class TokenEvalData:
    """What scoring a token-classification split needs beyond its features: the gold IOB2 tags of every
    sentence (one per word), each feature's word id per token (-1 at special tokens and at tokens another
    window of the sentence owns: :class:`bertlab.data.tags.TagWindow`) and each feature's sentence. A
    sentence that fits is one feature; a longer one several windows, stitched back by
    :func:`bertlab.tasks.entities.stitch_windows`."""

    gold_tags: list[list[str]]
    word_ids: list[list[int]]
    sentence: list[int]


@dataclass
class Split:
    """One split's features (what batches are made of) and what its family needs to score it.

    ``truncated``: inputs cut at ``data.max_seq_length``; ``windowed``: examples longer than it, read in
    several windows (``data.long_text=windows``); ``extra_windows``: windows beyond one per example (a long QA
    context, token-task sentence or classification document, :mod:`bertlab.data.documents`, is read in
    several). ``eval_data``: :class:`TokenEvalData` for token classification, :class:`bertlab.data.qa.QAEvalData`
    for QA, None for the families that score from the features alone.
    """

    name: str
    features: list[dict[str, Any]]
    num_examples: int
    skipped: int = 0
    truncated: int = 0
    extra_windows: int = 0
    eval_data: TokenEvalData | QAEvalData | None = None
    windowed: int = 0
    capped: int = 0  # examples over data.max_windows_per_example, read in their first windows (skip)


class LabelMap:
    """Label strings ↔ ids. Labels are compared in their canonical spelling
    (:func:`bertlab.data.validate.canonical_label`: ``1.0`` is ``1``, ``True`` is ``true``); ``labels`` keeps
    the set's own spelling. An evaluation label outside the set is an error naming every such label and its
    first line; ``source`` and ``fix`` say where the set comes from and what to do (the messages of
    :func:`bertlab.data.validate.unknown_labels`)."""

    def __init__(self, labels: list[str], source: str = "the task's label set",
                 fix: str = "fix the file, or give the task the full label set (task.labels=[...])"):
        self.labels = list(labels)
        self.index = {canonical_label(label): i for i, label in enumerate(self.labels)}
        self.source = source
        self.fix = fix

    def check(self, path: Path | str, seen: dict[str, str]) -> None:
        """Refuse the labels of ``seen`` (label → first file:line) that the set lacks, all of them at once."""
        unknown_labels(path, seen, self.labels, self.source, self.fix)

    def id(self, label: str, where: str) -> int:
        try:
            return self.index[canonical_label(label)]
        except KeyError:
            self.check(where.rsplit(":", 1)[0], {canonical_label(label): where})
            raise

    def __len__(self) -> int:
        return len(self.labels)


def class_labels(examples: list, path: Path | str, column: str | None) -> dict[str, str]:
    """Spell the class labels of ``examples`` one way (in place) and refuse spellings of one class that
    differ in case or spacing (:class:`bertlab.data.validate.LabelSpellings`); returns label → first line."""
    spellings = LabelSpellings(path, column)
    for ex in examples:
        ex.label = spellings.add(ex.label, ex.where)
    spellings.check()
    return spellings.first_where()


def window_cap(data: DataConfig, path: Path | str) -> WindowCap:
    """The bound on the windows one example of ``path`` is read in (bertlab.data.windows.WindowCap)."""
    return WindowCap(data.max_windows_per_example, data.on_bad_example, str(path))


# ----------------------------------------------------------------------------------------------------------
# Sequence (single texts and pairs)


def sequence_split(name: str, path: Path, data: DataConfig, tokenizer: EncoderTokenizer,
                   labels: LabelMap | None, regression: bool, labelled: bool = True,
                   max_examples: int | None = None) -> Split:
    policy = BadExamplePolicy(data.on_bad_example)
    examples = read_table(path, data.text_column, data.text_pair_column,
                          data.label_column if labelled else None, policy)
    if labelled and regression:
        examples = _finite_regression_labels(examples, policy)
    elif labelled:
        seen = class_labels(examples, path, data.label_column)
        labels.check(path, seen)  # every label the set lacks, named at once
    if max_examples is not None:
        examples = examples[:max_examples]
    if not examples:
        raise DataError(f"{path}: no usable examples")
    # Text longer than the window: read in windows pooled by the model, or cut (bertlab.data.documents).
    rows, long = encode_documents(tokenizer, [e.text for e in examples],
                                  [e.text_pair for e in examples] if data.text_pair_column else None,
                                  data.max_seq_length, data.long_text, data.window_stride, window_cap(data, path),
                                  [e.where for e in examples])
    features = []
    for i, (ex, feature) in enumerate(zip(examples, rows)):
        feature["index"] = i
        if labelled:
            if regression:
                feature["labels"] = float(ex.label)
            else:
                feature["labels"] = labels.id(ex.label, ex.where)
        features.append(feature)
    return Split(name, features, len(examples), policy.skipped, **asdict(long))


def with_unlabelled(train: Split, extra: Split, regression: bool) -> Split:
    """The training split and ``extra``'s unlabelled features (``data.distill_file``), numbered after it. A
    feature without labels gets the label that says "none" (IGNORE_INDEX, or NaN for regression); a tagging
    feature keeps its :data:`~bertlab.data.tags.UNLABELLED_WORD` marks. Only a distillation teacher's term learns
    from them (:mod:`bertlab.tasks.distill`)."""
    none = float("nan") if regression else IGNORE_INDEX
    features = list(train.features)
    for i, feature in enumerate(extra.features):
        features.append({**feature, "index": len(train.features) + i, "labels": feature.get("labels", none)})
    return dataclasses.replace(train, features=features, num_examples=train.num_examples + extra.num_examples,
                               skipped=train.skipped + extra.skipped, truncated=train.truncated + extra.truncated,
                               windowed=train.windowed + extra.windowed,
                               extra_windows=train.extra_windows + extra.extra_windows)


def _finite_regression_labels(examples, policy: BadExamplePolicy):
    """Regression labels must be finite numbers: a NaN would turn the dev metrics into 0 and a training loss
    into NaN mid-run. Found here, while reading, with file and line."""
    kept = []
    for ex in examples:
        value = number_value(ex.label, ex.where, "regression label")  # a non-number: an error, not a skip
        if not math.isfinite(value):
            policy.bad(f"{ex.where}: regression label {ex.label!r} is not a finite number; give the example a real "
                       "score or remove it")
            continue
        kept.append(ex)
    return kept


def derive_labels(path: Path, data: DataConfig, family: str) -> list[str]:
    """Generic tasks: the label set of the training split, sorted (so ids do not depend on file order).

    Class labels are spelled one way (:func:`class_labels`) and a column with a new value on most rows is
    refused (it is no label column). Tags: every entity type seen gets both its ``B-`` and its ``I-`` tag, so
    an evaluation file may hold a longer entity of a type the training split has only in one-word form.
    """
    policy = BadExamplePolicy("skip")
    if family == "token":
        spellings = LabelSpellings(path, "tags")
        for s in read_conll(path, data.tag_column, policy):
            for t in s.tags:
                spellings.add(t, s.where)
        spellings.check()
        tags = set(spellings.spellings)
        tags |= {prefix + t[2:] for t in tags if t[:2] in ("B-", "I-") for prefix in ("B-", "I-")}
        return sorted(tags, key=lambda t: (t != "O", t[2:], t[:2]))
    examples = read_table(path, data.text_column, data.text_pair_column, data.label_column, policy)
    labels = sorted(class_labels(examples, path, data.label_column))
    check_label_column(path, data.label_column, len(labels), len(examples))
    return labels


# ----------------------------------------------------------------------------------------------------------
# Token classification (NER)


def _tagged_features(sentences, word_labels, b_to_i, path: Path, data: DataConfig, tokenizer: EncoderTokenizer,
                     task: TaskSpec):
    """Features of tagging sentences, one word label id each, windowed or cut as ``data`` says
    (:func:`bertlab.data.tags.tag_features`): features, word ids, sentence of each feature, long-text counts."""
    from bertlab.data.tags import tag_features

    # Tokenized whole, without special tokens: tag_windows wraps each window in the family's own.
    encodings = tokenizer.encode_words_batch([s.words for s in sentences], add_special_tokens=False)
    return tag_features(encodings, tokenizer.template, data.max_seq_length, data.long_text, data.window_stride,
                        word_labels, task.label_all_tokens, b_to_i, window_cap(data, path),
                        [s.where for s in sentences])


def token_split(name: str, path: Path, data: DataConfig, tokenizer: EncoderTokenizer, labels: LabelMap,
                task: TaskSpec, max_examples: int | None = None) -> Split:
    from bertlab.data.tags import b_to_i_map, iob1_to_iob2, validate_iob2

    policy = BadExamplePolicy(data.on_bad_example)
    sentences = read_conll(path, data.tag_column, policy)
    if max_examples is not None:
        sentences = sentences[:max_examples]
    if not sentences:
        raise DataError(f"{path}: no sentences")
    valid, seen = [], {}
    for s in sentences:
        tags = iob1_to_iob2(s.tags) if data.tag_scheme == "iob1" else s.tags
        try:
            validate_iob2(tags, where=s.where)
        except ValueError as err:
            policy.bad(str(err) + " (is the file IOB1? set data.tag_scheme=iob1)")
            continue
        for t in tags:
            seen.setdefault(canonical_label(t), s.where)
        valid.append((s, tags))
    labels.check(path, seen)  # every tag the label set lacks, named at once
    kept = [(s, tags, [labels.id(t, s.where) for t in tags]) for s, tags in valid]
    features, word_ids, sentence, long = _tagged_features([s for s, _, _ in kept], [ids for _, _, ids in kept],
                                                          b_to_i_map(labels.labels), path, data, tokenizer, task)
    if long.truncated:
        log.info("%s: %d sentences truncated at %d tokens (data.long_text=truncate); their cut words are "
                 "predicted O and still scored", path, long.truncated, data.max_seq_length)
    return Split(name, features, len(kept), policy.skipped, **asdict(long),
                 eval_data=TokenEvalData(gold_tags=[tags for _, tags, _ in kept], word_ids=word_ids,
                                           sentence=sentence))


def token_unlabelled_split(name: str, path: Path, data: DataConfig, tokenizer: EncoderTokenizer,
                           labels: LabelMap, task: TaskSpec) -> Split:
    """``data.distill_file`` of a tagging task: sentences of a CoNLL column file read as a file to predict (one
    word a line, a blank line between sentences; a tag column, where there is one, is ignored), windowed and
    cut as the training sentences are. Each word's first piece is labelled
    :data:`~bertlab.data.tags.UNLABELLED_WORD` (with ``task.label_all_tokens``, its other pieces too): the
    positions the teacher's per-token term reads, as a gold tag marks them in a labelled sentence."""
    from bertlab.data.tags import b_to_i_map

    policy = BadExamplePolicy(data.on_bad_example)
    sentences = read_conll(path, None, policy)
    if not sentences:
        raise DataError(f"{path}: no sentences (data.distill_file of a tagging task: a CoNLL column file, one word "
                        "a line and a blank line between sentences)")
    b_to_i = {**b_to_i_map(labels.labels), UNLABELLED_WORD: UNLABELLED_WORD}
    features, _, _, long = _tagged_features(sentences, [[UNLABELLED_WORD] * len(s.words) for s in sentences],
                                            b_to_i, path, data, tokenizer, task)
    return Split(name, features, len(sentences), policy.skipped, **asdict(long))


# ----------------------------------------------------------------------------------------------------------
# Extractive QA


def qa_split(name: str, path: Path, data: DataConfig, tokenizer: EncoderTokenizer, train: bool,
             max_examples: int | None = None) -> Split:
    from bertlab.data.qa import QADataError, prepare_qa_features

    policy = BadExamplePolicy(data.on_bad_example)
    # A labelled split's answers are checked against the SQuAD version (a file to predict has none).
    examples = read_squad(path, train=train, policy=policy,
                          version_2=None if name == "predict" else data.version_2_with_negative)
    if max_examples is not None:
        examples = examples[:max_examples]
    if not examples:
        raise DataError(f"{path}: no questions")
    # Evaluation windows get the first answer's positions too (when every question has one), so val/loss
    # is the same span loss as in training.
    labelled = all(e.answers or e.is_impossible for e in examples)  # SQuAD 2.0: no answer → [CLS]
    try:
        qa = prepare_qa_features(examples, tokenizer.tokenizer, template=tokenizer.template,
                                 train=labelled, max_seq_length=data.max_seq_length,
                                 doc_stride=data.doc_stride, max_query_length=data.max_query_length,
                                 cap=window_cap(data, path))
    except QADataError as err:
        raise DataError(f"{path}: {err}") from None
    except DataError:  # a context over data.max_windows_per_example (WindowCap): named already
        raise
    except ValueError as err:  # window sizes that do not fit together: a configuration error
        raise ConfigError(str(err)) from None
    long_questions = sum(len(enc.ids) > data.max_query_length for enc in tokenizer.encode_batch(
        [e.question for e in examples], add_special_tokens=False))
    if long_questions:
        # As BERT's run_squad: a question keeps its first max_query_length tokens (the context is windowed).
        log.warning("%s: %d questions longer than data.max_query_length=%d tokens were cut to that length",
                    path, long_questions, data.max_query_length)
    features = []
    for i in range(len(qa)):
        f = {"input_ids": qa.input_ids[i], "token_type_ids": qa.token_type_ids[i], "index": i}
        if labelled:
            f["start_positions"] = qa.start_positions[i]
            f["end_positions"] = qa.end_positions[i]
        features.append(f)
    windows = len(qa) - len({*qa.example_index})
    return Split(name, features, len(examples), policy.skipped, extra_windows=windows, capped=qa.capped,
                 eval_data=QAEvalData(examples=examples, features=qa))


# ----------------------------------------------------------------------------------------------------------
# Pre-training (MLM, optionally NSP)


def mlm_split(name: str, paths: list[Path], data: DataConfig, tokenizer: EncoderTokenizer, task: TaskSpec,
              seed: int, max_examples: int | None = None) -> Split:
    from bertlab.data.mlm import build_nsp_examples, keyed_tokens, max_num_tokens_for, split_keys
    from bertlab.data.rawtext import read_corpus

    fmt = "wikitext" if data.text_format == "wikitext" else "auto"
    try:
        documents = read_corpus(paths, fmt=fmt)
    except FileNotFoundError as err:
        raise DataError(str(err)) from None
    sentences = [s for doc in documents for s in doc]
    encodings = tokenizer.encode_batch(sentences, add_special_tokens=False)
    it = iter(encodings)
    # Whole-word masking groups the pieces of a word by the encodings' word ids: each token travels through the
    # pair builder as one key with its word-start flag (mlm.keyed_tokens), so cutting and joining keep both.
    whole_word = task.whole_word_masking
    tokenized = [[keyed_tokens(enc) if whole_word else enc.ids for enc in (next(it) for _ in doc)]
                 for doc in documents]
    # A fixed rng per split: the same pairs every run; fresh masks come per batch from the collator.
    rng = random.Random(f"{seed}-{name}")
    budget = max_num_tokens_for(data.max_seq_length, task.nsp, tokenizer.num_special_tokens(pair=task.nsp))
    examples = build_nsp_examples(tokenized, None, budget, rng, short_seq_prob=data.short_seq_prob, nsp=task.nsp)
    if max_examples is not None:
        examples = examples[:max_examples]
    features = []
    for i, ex in enumerate(examples):
        if whole_word:
            (a, a_starts), (b, b_starts) = split_keys(ex.tokens_a), split_keys(ex.tokens_b)
            ids, types = tokenizer.build_inputs(a, b)
            f = {"input_ids": ids, "token_type_ids": types, "index": i,
                 "word_starts": tokenizer.template.layout(a_starts, b_starts, fill=1)}
        else:
            ids, types = tokenizer.build_inputs(ex.tokens_a, ex.tokens_b)
            f = {"input_ids": ids, "token_type_ids": types, "index": i}
        if task.nsp:
            f["next_sentence_label"] = ex.next_sentence_label
        features.append(f)
    return Split(name, features, len(features))


def lengths(features: list[dict[str, Any]]) -> np.ndarray:
    """Tokens per feature (what batching sorts on); a multiple-choice feature counts all of its choice rows."""
    def size(ids) -> int:
        return sum(len(row) for row in ids) if len(ids) and not np.isscalar(ids[0]) else len(ids)

    return np.fromiter((size(f["input_ids"]) for f in features), dtype=np.int64, count=len(features))
