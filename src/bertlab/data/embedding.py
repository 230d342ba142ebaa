"""Bi-encoder data (``task=embedding``): (query, passage[, hard negative]) pairs → features, and the collator
that stacks every text of a batch into one set of rows for the shared encoder.

Files: TSV/CSV/JSONL with ``data.text_column`` (query), ``data.text_pair_column`` (passage) and, optionally,
``data.negative_column`` (a hard negative; used where the training file has the column); a SQuAD-format JSON
file reads as (question, its paragraph) pairs (SQuAD 2.0's unanswerable questions left out: their paragraph
does not answer them).

A training feature holds the ids of each side and ``keys``: a 63-bit hash of each text, so the loss can
recognise the same text in two rows of a batch (a duplicate passage is never another row's negative).
An evaluation split is a list of single texts to embed, queries first, then the corpus (every distinct passage
of the file, then ``data.corpus_file``'s); :class:`EmbeddingEvalData` says which passages are relevant to each
query. With ``data.label_column`` set, an evaluation file is a similarity set instead (STS-B: sentence pairs
with a score): first sentences, then second ones, and the gold scores.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertlab.data.readers import (
    BadExamplePolicy,
    DataError,
    one_text_per_id,
    read_squad,
    read_table,
    read_text_lines,
)
from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.runtime.config import DataConfig

log = logging.getLogger(__name__)


@dataclass
class EmbeddingEvalData:
    """What scoring an embedding split needs beyond its features (single texts, ``index`` = position).

    ``mode="retrieval"``: features ``0..num_queries-1`` are the queries, the rest the corpus; ``relevant[q]``
    the corpus positions (0-based, into the corpus part) relevant to query ``q``; ``passage_ids`` each corpus
    entry's id (``p<k>`` for the file's passages, the corpus file's own ids where it has an ``id`` column).
    ``mode="similarity"``: features ``0..n-1`` the first sentences, ``n..2n-1`` the second, ``scores`` the
    gold scores (``relevant`` and ``passage_ids`` empty)."""

    mode: str
    num_queries: int
    relevant: list[list[int]]
    passage_ids: list[str]
    scores: list[float]


class _Optional(BadExamplePolicy):
    """For an optional column (hard negatives, corpus ids): a row without a value just has none, silently."""

    def bad(self, message: str) -> None:
        self.skipped += 1


def text_key(text: str) -> int:
    """A stable 63-bit id of a text (equal texts, equal keys; fits an int64 tensor)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little") >> 1


def _is_squad(path: Path) -> bool:
    """A .json file holding one object with a ``data`` list (JSON lines named .json are tables)."""
    if path.suffix.lower() != ".json":
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and "data" in data


def read_pairs(path: Path, data: DataConfig, policy: BadExamplePolicy, negatives: bool,
               scored: bool = False) -> list[tuple[str, str, str | None, float | None, str]]:
    """(query, passage, negative or None, score or None, where) rows of a pair file. An empty query or passage
    is a bad example (an error, or skipped under ``data.on_bad_example=skip``)."""
    if _is_squad(path):
        examples = read_squad(path, train=False, policy=policy)
        impossible = sum(e.is_impossible for e in examples)
        if impossible:  # a query with no relevant passage: neither a pair to train on nor a query to score
            log.info("%s: %d of %d questions are unanswerable (SQuAD 2.0): left out, their paragraph is no passage "
                     "relevant to them", path, impossible, len(examples))
        return [(e.question.strip(), e.context.strip(), None, None, f"{path}: question {e.id}")
                for e in examples if not e.is_impossible]
    if data.text_pair_column is None:
        raise DataError(f"{path}: task=embedding reads (query, passage) pairs and data.text_pair_column is null: "
                        "set it to the passage column")
    label = data.label_column if scored else None
    rows = read_table(path, data.text_column, data.text_pair_column, label, policy)
    negative: dict[str, str] = {}
    if negatives and data.negative_column is not None and _has_column(path, data.negative_column):
        # A row may lack its negative (empty cell, null, no field): it just brings none.
        if path.suffix.lower() in (".jsonl", ".json"):
            negative = _json_negatives(path, data.negative_column)
        else:
            for ex in read_table(path, data.negative_column, None, None, _Optional("skip")):
                negative[ex.where] = ex.text
    out = []
    for ex in rows:
        score = None
        if label:
            try:
                score = float(ex.label)
            except ValueError:
                policy.bad(f"{ex.where}: score {ex.label!r} in column {label!r} is not a number")
                continue
        out.append((ex.text, ex.text_pair, negative.get(ex.where), score, ex.where))
    return out


def _json_negatives(path: Path, column: str) -> dict[str, str]:
    """``file:line`` → hard negative of a JSON-lines file; a value other than a text (or null) is an error
    rather than a row silently without its negatives."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line).get(column)
            except (json.JSONDecodeError, AttributeError):
                continue  # the table reader reports the line
            if isinstance(value, str) and value.strip():
                out[f"{path}:{number}"] = value.strip()
            elif value is not None and not isinstance(value, str):
                raise DataError(
                    f"{path}:{number}: field {column!r} (data.negative_column) holds {type(value).__name__} "
                    f"{json.dumps(value)[:80]}; it takes one hard negative, a text. For several negatives of a "
                    "query give each its own row (the same query and passage, another negative)")
    return out


def _has_column(path: Path, column: str) -> bool:
    from bertlab.data.readers import _table_rows

    if path.suffix.lower() in (".jsonl", ".json"):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    try:
                        return column in json.loads(line)
                    except (json.JSONDecodeError, TypeError):
                        return False
        return False
    header, _ = _table_rows(path)
    return column in header


def _encode(tokenizer: EncoderTokenizer, texts: Sequence[str], max_len: int) -> tuple[list[list[int]], list[list[int]], int]:
    """ids and token types of each text alone, cut at ``max_len`` tokens (specials included); how many were cut."""
    encodings = tokenizer.truncated(max_len).encode_batch(list(texts))
    cut = sum(bool(e.overflowing) for e in encodings)
    return [e.ids for e in encodings], [e.type_ids for e in encodings], cut


def embedding_train_split(name: str, path: Path, data: DataConfig, tokenizer: EncoderTokenizer,
                          max_examples: int | None = None):
    from bertlab.data.features import Split

    policy = BadExamplePolicy(data.on_bad_example)
    rows = read_pairs(path, data, policy, negatives=True)
    if max_examples is not None:
        rows = rows[:max_examples]
    if len(rows) < 2:
        raise DataError(f"{path}: {len(rows)} usable (query, passage) pair(s): in-batch negatives need at least two "
                        "pairs (every other pair's passage is a row's negative)")
    queries, passages = [r[0] for r in rows], [r[1] for r in rows]
    q_ids, q_types, cut_q = _encode(tokenizer, queries, data.max_seq_length)
    p_ids, p_types, cut_p = _encode(tokenizer, passages, data.max_seq_length)
    negatives = [r[2] for r in rows]
    with_neg = [i for i, n in enumerate(negatives) if n]
    n_ids, n_types, cut_n = _encode(tokenizer, [negatives[i] for i in with_neg], data.max_seq_length) \
        if with_neg else ([], [], 0)
    neg_of = {i: k for k, i in enumerate(with_neg)}
    features = []
    for i in range(len(rows)):
        f: dict[str, Any] = {"input_ids": q_ids[i], "token_type_ids": q_types[i], "index": i,
                             "pair_input_ids": p_ids[i], "pair_token_type_ids": p_types[i],
                             "query_key": text_key(queries[i]), "pair_key": text_key(passages[i])}
        if i in neg_of:
            k = neg_of[i]
            f.update(negative_input_ids=n_ids[k], negative_token_type_ids=n_types[k],
                     negative_key=text_key(negatives[i]))
        features.append(f)
    if with_neg:
        log.info("%s: %d of %d pairs bring a hard negative (column %r)", name, len(with_neg), len(rows),
                 data.negative_column)
    return Split(name, features, len(rows), policy.skipped, truncated=cut_q + cut_p + cut_n)


def read_corpus_file(path: Path, data: DataConfig) -> list[tuple[str | None, str]]:
    """(id or None, passage) of ``data.corpus_file``: one passage a line (.txt), or a table's passage column
    (``data.text_pair_column``, else ``text``) with its ``id`` column where it has one (ids:
    :func:`~bertlab.data.readers.one_text_per_id`)."""
    if path.suffix.lower() == ".txt":
        return [(None, line.strip()) for line in read_text_lines(path) if line.strip()]
    column = data.text_pair_column if data.text_pair_column and _has_column(path, data.text_pair_column) else "text"
    policy = BadExamplePolicy(data.on_bad_example)
    rows = read_table(path, column, None, None, policy)
    ids: dict[str, str] = {}
    if _has_column(path, "id"):
        ids = {ex.where: ex.text for ex in read_table(path, "id", None, None, _Optional("skip"))}
    return one_text_per_id([(ids.get(ex.where), ex.text, ex.where) for ex in rows], path, "passage")


def embedding_eval_split(name: str, path: Path, data: DataConfig, tokenizer: EncoderTokenizer,
                         corpus_path: Path | None = None, max_examples: int | None = None):
    from bertlab.data.features import Split

    policy = BadExamplePolicy(data.on_bad_example)
    scored = data.label_column is not None
    rows = read_pairs(path, data, policy, negatives=False, scored=scored)
    if max_examples is not None:
        rows = rows[:max_examples]
    if not rows:
        raise DataError(f"{path}: no usable (query, passage) pairs")
    if scored:
        texts = [r[0] for r in rows] + [r[1] for r in rows]
        eval_data = EmbeddingEvalData("similarity", len(rows), [], [], [float(r[3]) for r in rows])
    else:
        # One query per distinct query text (its relevant passages: every passage it is paired with).
        query_of: dict[str, int] = {}
        passage_of: dict[str, int] = {}
        relevant: list[list[int]] = []
        for query, passage, *_ in rows:
            q = query_of.setdefault(query, len(query_of))
            p = passage_of.setdefault(passage, len(passage_of))
            if q == len(relevant):
                relevant.append([])
            if p not in relevant[q]:
                relevant[q].append(p)
        passage_ids = [f"p{k}" for k in range(len(passage_of))]
        if corpus_path is not None:
            extra = 0
            for pid, passage in read_corpus_file(corpus_path, data):
                if passage in passage_of:
                    continue
                passage_of[passage] = len(passage_of)
                passage_ids.append(str(pid) if pid is not None else f"c{extra}")
                extra += 1
            log.info("%s: corpus of %d passages (%d from the file, %d more from %s)", name, len(passage_of),
                     len(passage_of) - extra, extra, corpus_path)
        texts = list(query_of) + list(passage_of)
        eval_data = EmbeddingEvalData("retrieval", len(query_of), relevant, passage_ids, [])
    ids, types, cut = _encode(tokenizer, texts, data.max_seq_length)
    features = [{"input_ids": i, "token_type_ids": t, "index": k} for k, (i, t) in enumerate(zip(ids, types))]
    return Split(name, features, eval_data.num_queries, policy.skipped, truncated=cut, eval_data=eval_data)


class PairCollator:
    """A training batch of pairs as one set of rows for the shared encoder: the B queries, then the B
    passages, then the batch's hard negatives (N ≤ B), padded together. Beside the usual ``input_ids`` /
    ``attention_mask`` / ``token_type_ids`` (R, T) and ``index`` (B,): ``num_queries`` = B, ``query_key`` (B,),
    and ``candidate_key`` (B + N,): the text keys of the passages and negatives (the loss's candidates)."""

    def __init__(self, rows_collator):
        self.rows = rows_collator  # bertlab.data.batching.Collator: pads rows

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, Any]:
        rows = [{"input_ids": f["input_ids"], "token_type_ids": f["token_type_ids"], "index": f["index"]}
                for f in features]
        rows += [{"input_ids": f["pair_input_ids"], "token_type_ids": f["pair_token_type_ids"], "index": f["index"]}
                 for f in features]
        with_neg = [f for f in features if "negative_input_ids" in f]
        rows += [{"input_ids": f["negative_input_ids"], "token_type_ids": f["negative_token_type_ids"],
                  "index": f["index"]} for f in with_neg]
        batch = self.rows(rows)
        batch["index"] = torch.tensor([f["index"] for f in features], dtype=torch.long)
        batch["num_queries"] = len(features)
        batch["query_key"] = torch.tensor(np.array([f["query_key"] for f in features], dtype=np.int64))
        batch["candidate_key"] = torch.tensor(np.array(
            [f["pair_key"] for f in features] + [f["negative_key"] for f in with_neg], dtype=np.int64))
        return batch
