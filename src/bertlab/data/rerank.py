"""Cross-encoder data (``task=rerank``): (query, passage) pairs read as one encoder input, each with a relevance.

Training files (TSV/CSV/JSONL):

- pointwise rows: ``data.text_column`` (query), ``data.text_pair_column`` (passage), ``data.label_column``
  (relevance). A label must be a number of 0 or more: 0/1, or a grade (0-3 ...). Binary cross-entropy takes
  targets in [0, 1], so grades above 1 are divided by the file's highest grade (logged once);
- triples: a file with ``data.negative_column`` and without the label column (what ``python -m
  bertlab.retrieve ... --mine-negatives`` writes): each row gives (query, positive) with label 1 and (query,
  negative) with label 0; a (query, positive) pair repeated over several triples is read once.

Validation groups each query's candidates (:class:`RerankEvalData`), from either

- a labelled file (it has the label column) and no ``task.first_stage``: a query's candidates are its rows, the
  first stage their order in the file; the labels are the judgements (a whole number is its grade; a fraction
  counts as relevant from 0.5, logged);
- a (query, relevant passage) file (SQuAD JSON too) and ``task.first_stage``, a TREC run file: the candidates
  are the run's top ``task.rerank_top_k`` passages of the query. Ids: a query's is ``q<k>`` (k-th distinct
  query of the file, from 0); a passage's is its ``data.corpus_file`` id (or ``c<k>``, its row there) when the
  corpus holds its text, else ``p<k>`` (k-th distinct passage of the file): :func:`retrieval_universe` gives
  them, and the run an embedding run retrieves for validation is written with them.

A query without a relevant passage is left out of the metrics, counted and logged, never scored as 0; a query
the first stage gives no candidate is an error, as is a run naming a passage the corpus lacks.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.data.documents import encode_documents
from bertlab.data.embedding import _has_column, read_corpus_file, read_pairs
from bertlab.data.readers import BadExamplePolicy, DataError, read_table, read_text_lines
from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.data.validate import BadValue, number_value
from bertlab.runtime.config import DataConfig, TaskSpec

log = logging.getLogger(__name__)


@dataclass
class RerankEvalData:
    """Feature ``k`` scores the pair (``query_ids[pair_query[k]]``, ``passage_ids[pair_passage[k]]``), which the
    first stage scored ``first_stage[k]`` (higher: better); ``qrels`` the judgements of the scored queries
    ({query id: {passage id: grade}}; a grade above 0 is relevant); ``without_relevant`` how many queries have
    no relevant passage (left out of the metrics)."""

    query_ids: list[str]
    passage_ids: list[str]
    pair_query: list[int]
    pair_passage: list[int]
    first_stage: list[float]
    qrels: dict[str, dict[str, int]]
    without_relevant: int


def _label(value: Any, where: str, column: str, policy: BadExamplePolicy) -> float | None:
    """A relevance label: a finite number of 0 or more (a bad one goes through ``policy``: error or skip)."""
    try:
        x = number_value(value, where, f"relevance label (column {column!r})")
    except BadValue as err:
        policy.bad(f"{err}; a reranker's label is a relevance: 0/1 or a grade")
        return None
    if not math.isfinite(x) or x < 0:
        policy.bad(f"{where}: relevance label {value!r} (column {column!r}) must be a finite number of 0 or more "
                   "(0 = not relevant; 1, or a higher grade, relevant)")
        return None
    return x


def _check_pair(text: str, pair: str | None, where: str, policy: BadExamplePolicy) -> bool:
    if not text or not pair:
        policy.bad(f"{where}: the {'query' if not text else 'passage'} is empty; a reranker scores a (query, "
                   "passage) pair and needs both")
        return False
    return True


def is_triples(path: Path, data: DataConfig) -> bool:
    """Whether a training file holds (query, positive, negative) triples: the negative column, no label column."""
    label = data.label_column is not None and _has_column(path, data.label_column)
    return not label and data.negative_column is not None and _has_column(path, data.negative_column)


def read_training_rows(path: Path, data: DataConfig, policy: BadExamplePolicy) -> list[tuple[str, str, float, str]]:
    """(query, passage, target in [0, 1], where) rows of a training file (module docstring)."""
    if data.text_pair_column is None:
        raise DataError(f"{path}: task=rerank reads (query, passage) pairs and data.text_pair_column is null: set "
                        "it to the passage column")
    rows: list[tuple[str, str, float, str]] = []
    if is_triples(path, data):
        seen: set[tuple[str, str]] = set()
        negatives = {ex.where: ex.text for ex in read_table(path, data.negative_column, None, None, policy)}
        for ex in read_table(path, data.text_column, data.text_pair_column, None, policy):
            negative = negatives.get(ex.where)
            if not _check_pair(ex.text, ex.text_pair, ex.where, policy) or \
                    not _check_pair(ex.text, negative, ex.where, policy):
                continue
            if (ex.text, ex.text_pair) not in seen:
                seen.add((ex.text, ex.text_pair))
                rows.append((ex.text, ex.text_pair, 1.0, ex.where))
            rows.append((ex.text, negative, 0.0, ex.where))
        log.info("%s: (query, positive, negative) triples: %d pairs (%d positives, %d negatives)", path, len(rows),
                 len(seen), len(rows) - len(seen))
        return rows
    if data.label_column is None or not _has_column(path, data.label_column):
        raise DataError(f"{path}: no relevance column {data.label_column!r} (data.label_column) and no negative "
                        f"column {data.negative_column!r} (data.negative_column): task=rerank trains on (query, "
                        "passage, label) rows or on (query, positive, negative) triples. Name the columns")
    for ex in read_table(path, data.text_column, data.text_pair_column, data.label_column, policy):
        label = _label(ex.label, ex.where, data.label_column, policy)
        if label is not None and _check_pair(ex.text, ex.text_pair, ex.where, policy):
            rows.append((ex.text, ex.text_pair, label, ex.where))
    top = max((r[2] for r in rows), default=0.0)
    if top > 1:
        log.info("%s: graded relevance labels up to %g: divided by %g for the binary cross-entropy (targets in "
                 "[0, 1])", path, top, top)
        rows = [(q, p, label / top, where) for q, p, label, where in rows]
    return rows


def _encode(tokenizer: EncoderTokenizer, queries: list[str], passages: list[str], data: DataConfig):
    """One feature per (query, passage), cut to the window (longest text first, as a CrossEncoder cuts)."""
    return encode_documents(tokenizer, queries, passages, data.max_seq_length, "truncate")


def listwise_groups(rows: list[tuple[str, str, float, str]], path: Path) -> list[tuple[str, list[str]]]:
    """``task.rerank_loss=listwise``: (query, [positive, negative, ...]) groups from training rows, one per
    (query, relevant passage), in file order. A query's negatives are its passages labelled 0 (each once); its
    other relevant passages are left out of a group rather than counted against the positive (the kind a
    duplicate positive is in a bi-encoder's batch). A query without a negative or without a relevant passage
    gives no group: counted and logged, as the rule docs/embeddings.md states."""
    by_query: dict[str, tuple[dict[str, None], dict[str, None]]] = {}  # (relevant, label 0), each once, in order
    for query, passage, target, _ in rows:
        by_query.setdefault(query, ({}, {}))[0 if target > 0 else 1][passage] = None
    groups: list[tuple[str, list[str]]] = []
    no_negative = no_positive = 0
    for query, (relevant, zero) in by_query.items():
        negs = [p for p in zero if p not in relevant]
        if not relevant:
            no_positive += 1
        elif not negs:
            no_negative += 1
        else:
            groups.extend((query, [pos, *negs]) for pos in relevant)
    if no_negative or no_positive:
        log.warning("%s: task.rerank_loss=listwise scores a query's relevant passage against its negatives: %d "
                    "queries without a negative (label 0) and %d without a relevant passage were left out of "
                    "training", path, no_negative, no_positive)
    if not groups:
        raise DataError(f"{path}: task.rerank_loss=listwise found no query with both a relevant passage (label "
                        "above 0) and a negative (label 0): give each query negatives (a triples file, "
                        "task.negatives_from) or train with task.rerank_loss=pointwise")
    return groups


def rerank_train_split(name: str, path: Path, data: DataConfig, tokenizer: EncoderTokenizer,
                       max_examples: int | None = None, listwise: bool = False):
    """Pointwise: one feature per (query, passage) row, its target in [0, 1]. Listwise: one feature per
    (query, positive, negatives) group (:func:`listwise_groups`), a row of ids per pair and label 0 (the
    positive's place), which the collator batches as multiple choice (B, C, T)."""
    from bertlab.data.features import Split

    policy = BadExamplePolicy(data.on_bad_example)
    rows = read_training_rows(path, data, policy)
    if not listwise:
        rows = rows[:max_examples]
    if not rows:
        raise DataError(f"{path}: no usable (query, passage) pairs")
    if all(r[2] == rows[0][2] for r in rows):
        log.warning("%s: every pair has the label %g: the reranker learns no ranking from it", path, rows[0][2])
    if listwise:
        groups = listwise_groups(rows, path)[:max_examples]
        encoded, long = _encode(tokenizer, [q for q, c in groups for _ in c], [p for _, c in groups for p in c],
                                data)
        features, at = [], 0
        for i, (_, candidates) in enumerate(groups):
            pairs = encoded[at:at + len(candidates)]
            at += len(candidates)
            features.append({"input_ids": [f["input_ids"] for f in pairs],
                             "token_type_ids": [f["token_type_ids"] for f in pairs], "index": i, "labels": 0})
        return Split(name, features, len(groups), policy.skipped, truncated=long.truncated)
    features, long = _encode(tokenizer, [r[0] for r in rows], [r[1] for r in rows], data)
    for i, (f, row) in enumerate(zip(features, rows)):
        f.update(index=i, labels=float(row[2]))
    return Split(name, features, len(rows), policy.skipped, truncated=long.truncated)


# ----------------------------------------------------------------------------------------------------------
# Validation


def retrieval_universe(path: Path, data: DataConfig, corpus_path: Path | None, policy: BadExamplePolicy,
                       max_examples: int | None = None):
    """The queries, the corpus and the judgements of a (query, relevant passage) file (module docstring: ids):
    (query ids, query texts, passage ids, passage texts, {query id: {passage id: 1}})."""
    rows = read_pairs(path, data, policy, negatives=False)[:max_examples]
    passage_ids: list[str] = []
    passage_of: dict[str, int] = {}
    if corpus_path is not None:
        for k, (pid, text) in enumerate(read_corpus_file(corpus_path, data)):
            if text not in passage_of:
                passage_of[text] = len(passage_ids)
                passage_ids.append(str(pid) if pid is not None else f"c{k}")
        if len(set(passage_ids)) != len(passage_ids):
            seen: set[str] = set()
            dup = next(p for p in passage_ids if p in seen or seen.add(p))
            raise DataError(f"{corpus_path}: passage id {dup!r} names two different passages: every passage of "
                            "data.corpus_file needs its own id")
    query_of: dict[str, int] = {}
    qrels: dict[str, dict[str, int]] = {}
    own = 0
    for query, passage, *_ in rows:
        if not query or not passage:
            raise DataError(f"{path}: a pair with an empty query or passage")
        if passage not in passage_of:
            passage_of[passage] = len(passage_ids)
            passage_ids.append(f"p{own}")
            own += 1
        qid = f"q{query_of.setdefault(query, len(query_of))}"
        qrels.setdefault(qid, {})[passage_ids[passage_of[passage]]] = 1
    if not rows:
        raise DataError(f"{path}: no usable (query, passage) pairs")
    return [f"q{k}" for k in range(len(query_of))], list(query_of), passage_ids, list(passage_of), qrels


def pairs_to_mine(path: Path, data: DataConfig, policy: BadExamplePolicy):
    """The (query, positive) pairs of a training file whose negatives ``task.negatives_from`` mines, as
    :func:`retrieval_universe` gives them (the corpus: the file's distinct passages). A file with relevance labels
    or with negatives already is refused: mining would mix its own negatives with the mined ones."""
    for column, what in ((data.label_column, "relevance labels"), (data.negative_column, "negatives")):
        if column is not None and _has_column(path, column):
            raise DataError(f"{path}: task.negatives_from mines negatives for (query, positive) pairs, and this file "
                            f"has {what} already (column {column!r}). Train on the file as it is (remove "
                            "task.negatives_from), or give a file of (query, positive) pairs")
    return retrieval_universe(path, data, None, policy)


def read_trec_run(path: Path, query_ids: list[str], passage_ids: list[str],
                  top_k: int) -> dict[str, list[tuple[str, float]]]:
    """{query id: [(passage id, score)], best first, at most ``top_k``} of a TREC run file (``qid Q0 docid rank
    score tag``). A passage id the corpus lacks is an error; a query id the validation queries lack is ignored
    (counted in a log line: a run over more queries than validation reads)."""
    known_q, known_p = set(query_ids), set(passage_ids)
    run: dict[str, list[tuple[float, int, str]]] = {}
    other = set()
    for number, line in enumerate(read_text_lines(path), 1):
        cells = line.split()
        if not cells:
            continue
        if len(cells) != 6:
            raise DataError(f"{path}:{number}: {len(cells)} columns; a TREC run line is 'qid Q0 docid rank score "
                            "tag' (what python -m bertlab.retrieve writes)")
        qid, _, docid, rank, value, _ = cells
        try:
            score, place = float(value), int(rank)
        except ValueError:
            raise DataError(f"{path}:{number}: rank {rank!r} or score {value!r} is not a number") from None
        if qid not in known_q:
            other.add(qid)
            continue
        if docid not in known_p:
            raise DataError(f"{path}:{number}: passage {docid!r} is not in the validation corpus (the validation "
                            "file's passages p<k> and data.corpus_file's ids): the run was made on other files. "
                            "Give the run of this validation set (task.first_stage=<embedding run> retrieves it)")
        run.setdefault(qid, []).append((-score, place, docid))
    if other:
        log.info("%s: %d queries of the run are not validation queries: ignored", path, len(other))
    return {q: [(d, -s) for s, _, d in sorted(c)[:top_k]] for q, c in run.items()}


def _relevance(label: float, fractional: list[int]) -> int:
    if label == int(label):
        return int(label)
    fractional[0] += 1
    return int(label >= 0.5)


def rerank_eval_split(name: str, path: Path, data: DataConfig, task: TaskSpec, tokenizer: EncoderTokenizer,
                      corpus_path: Path | None, first_stage: Path | None, max_examples: int | None = None):
    from bertlab.data.features import Split

    policy = BadExamplePolicy(data.on_bad_example)
    pairs: list[tuple[int, int]] = []
    first: list[float] = []
    if first_stage is None:
        if data.label_column is None or not _has_column(path, data.label_column):
            raise DataError(
                f"{path}: a reranker's validation needs candidates to rerank: a labelled file (query, passage, "
                f"{data.label_column or 'label'}) whose rows are each query's candidates, or a (query, relevant "
                "passage) file with task.first_stage=<TREC run file | embedding run | export> that retrieves them")
        query_of: dict[str, int] = {}
        passage_of: dict[str, int] = {}
        qrels: dict[str, dict[str, int]] = {}
        fractional = [0]
        examples = read_table(path, data.text_column, data.text_pair_column, data.label_column, policy)
        for ex in examples[:max_examples]:
            label = _label(ex.label, ex.where, data.label_column, policy)
            if label is None or not _check_pair(ex.text, ex.text_pair, ex.where, policy):
                continue
            q = query_of.setdefault(ex.text, len(query_of))
            p = passage_of.setdefault(ex.text_pair, len(passage_of))
            judged = qrels.setdefault(f"q{q}", {})
            if f"p{p}" in judged:
                continue  # the same pair twice: one candidate
            judged[f"p{p}"] = _relevance(label, fractional)
            pairs.append((q, p))
            first.append(-float(len(judged)))  # the file's order: the first row ranks first
        if fractional[0]:
            log.info("%s: %d fractional labels: relevant (grade 1) from 0.5, else not", path, fractional[0])
        query_ids, query_texts = [f"q{k}" for k in range(len(query_of))], list(query_of)
        passage_ids, passage_texts = [f"p{k}" for k in range(len(passage_of))], list(passage_of)
    else:
        query_ids, query_texts, passage_ids, passage_texts, qrels = retrieval_universe(
            path, data, corpus_path, policy, max_examples)
        run = read_trec_run(first_stage, query_ids, passage_ids, task.rerank_top_k)
        missing = [q for q in query_ids if not run.get(q)]
        if missing:
            shown = ", ".join(f"{q} ({query_texts[int(q[1:])][:60]!r})" for q in missing[:3])
            raise DataError(f"{first_stage}: {len(missing)} validation queries have no candidate in the first-stage "
                            f"run: {shown}{' ...' if len(missing) > 3 else ''}. Every query needs candidates to "
                            "rerank: give the run of this validation file (task.first_stage=<embedding run> "
                            "retrieves it)")
        position = {p: i for i, p in enumerate(passage_ids)}
        for q, qid in enumerate(query_ids):
            for docid, score in run[qid]:
                pairs.append((q, position[docid]))
                first.append(score)
    if not pairs:
        raise DataError(f"{path}: no usable (query, passage) pairs")
    scored = {q: j for q, j in qrels.items() if any(g > 0 for g in j.values())}
    without = len(query_ids) - len(scored)
    if without:
        log.warning("%s: %d of %d queries have no relevant passage: left out of the ranking metrics (not scored "
                    "as 0)", path, without, len(query_ids))
    if not scored:
        raise DataError(f"{path}: no query has a relevant passage (a label above 0): there is nothing to rank")
    features, long = _encode(tokenizer, [query_texts[q] for q, _ in pairs], [passage_texts[p] for _, p in pairs], data)
    for i, (f, (q, p)) in enumerate(zip(features, pairs)):
        f.update(index=i, labels=float(qrels.get(query_ids[q], {}).get(passage_ids[p], 0) > 0))
    eval_data = RerankEvalData(query_ids, passage_ids, [q for q, _ in pairs], [p for _, p in pairs], first, scored,
                               without)
    log.info("%s: %d queries, %d (query, candidate) pairs to rerank", name, len(query_ids), len(pairs))
    return Split(name, features, len(pairs), policy.skipped, truncated=long.truncated, eval_data=eval_data)
