"""Reranking with a cross-encoder (``task=rerank``): the first stage an embedding run gives a reranker's
validation (a TREC run file under the run folder), the training negatives an embedding run mines for (query,
positive) pairs (``task.negatives_from``), and the reranking of a retrieval run for ``python -m
bertlab.retrieve ... --rerank RUN``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import shutil
from pathlib import Path

import numpy as np

from bertlab.data.files import DataFiles
from bertlab.data.readers import BadExamplePolicy, DataError
from bertlab.inference.predictor import Predictor, load_predictor
from bertlab.inference.retrieve import (
    embed_in_batches,
    load_embedding_model,
    mine_negatives,
    model_fingerprint,
    search_corpus,
    write_trec_run,
    write_triples,
)
from bertlab.inference.tasks.sequence import reranker_refusal
from bertlab.runtime.config import DataConfig, TaskSpec
from bertlab.runtime.errors import ConfigError
from bertlab.runtime.files import atomic_path, cache_lock
from bertlab.runtime.fingerprints import file_digest
from bertlab.runtime.paths import existing_path, typed_path

log = logging.getLogger(__name__)

FIRST_STAGE_DIR = "first_stage"
NEGATIVES_DIR = "negatives"  # <run>/negatives/train.tsv: the mined triples a run trained on, with mined.json
NEGATIVES_FORMAT = 1  # of the cached triples (data.cache_dir/negatives/<key>.tsv): a change re-mines


def is_model_source(path: Path) -> bool:
    """A run dir, a ``.ckpt`` file or an export folder (what retrieves), rather than a TREC run file."""
    return path.is_dir() or path.suffix == ".ckpt"


def first_stage_run(task: TaskSpec, data: DataConfig, files: DataFiles, run_dir: Path) -> TaskSpec:
    """``task.first_stage`` naming an embedding run or export: its retrieval of the validation file's queries
    among the validation corpus (:func:`bertlab.data.rerank.retrieval_universe`), top ``task.rerank_top_k``,
    written to ``<run_dir>/first_stage/val.trec``; the task then names that file (the checkpoint records it, so
    an evaluation or an export gate later reads the same candidates). A TREC file or no first stage: as given."""
    if not task.rerank or task.first_stage is None:
        return task
    source = typed_path(task.first_stage)
    if not is_model_source(source):
        return task  # a TREC run file: the data module reads it
    source = existing_path(source, "task.first_stage", ConfigError)
    from bertlab.data.rerank import retrieval_universe
    from bertlab.runtime.files import writing

    val = files.split_file("val")
    if val is None:
        raise ConfigError(f"task.first_stage={task.first_stage}: the first stage retrieves for the validation file, "
                          "and data.val_file is not set")
    policy = BadExamplePolicy(data.on_bad_example)
    qids, queries, pids, passages, _ = retrieval_universe(val, data, files.resolve(data.corpus_file), policy,
                                                           data.max_eval_samples)
    predictor = load_embedding_model(source, None, data.eval_batch_size)
    size = int(predictor.settings.batch_size)
    q = embed_in_batches(predictor, queries, size, False, "query")
    c = embed_in_batches(predictor, passages, size, False, "passage")
    scores, indices = search_corpus(q, c, task.rerank_top_k)
    out = run_dir / FIRST_STAGE_DIR / "val.trec"
    with writing(out.parent, "the first-stage run", "give the run folder a disk with room"):
        out.parent.mkdir(parents=True, exist_ok=True)
        write_trec_run(out, qids, pids, scores, indices, "first_stage")
    log.info("task.first_stage: %s retrieved the top %d of %d passages for %d validation queries → %s", source,
             indices.shape[1], len(pids), len(qids), out)
    return dataclasses.replace(task, first_stage=str(out.resolve()))


def mined_negatives(task: TaskSpec, data: DataConfig, files: DataFiles, run_dir: Path) -> DataConfig:
    """``task.negatives_from`` naming an embedding run or export: the (query, positive) pairs of data.train_file get
    their negatives from its retrieval, by the rule of ``bertlab.retrieve --mine-negatives``
    (:func:`bertlab.inference.retrieve.mine_negatives`): each query searched among the file's distinct passages,
    its ``task.num_negatives`` best-ranked passages that are not its positives, after its first ``task.skip_top``
    ranks. The triples are written to ``<run_dir>/negatives/train.tsv`` (with ``mined.json``: from where, how
    many) and cached under ``data.cache_dir/negatives/`` by the model's fingerprint, the pairs file's digest and
    the settings (the next run with the same ones embeds nothing); data.train_file then names them, so the
    checkpoint's data fingerprint records what the run trained on. No ``task.negatives_from``: ``data`` as given.
    """
    if task.negatives_from is None:
        return data
    from bertlab.data.rerank import pairs_to_mine
    from bertlab.runtime.files import writing

    source = existing_path(task.negatives_from, "task.negatives_from", ConfigError)
    if not is_model_source(source):
        raise ConfigError(f"task.negatives_from={task.negatives_from} is a file, not an embedding model: negatives "
                          "are mined with a task=embedding run dir, its .ckpt or its export folder. Triples mined "
                          "already (python -m bertlab.retrieve ... --mine-negatives N OUT) are a training file: "
                          "data.train_file=OUT, without task.negatives_from")
    train = files.split_file("train")
    if train is None:
        raise ConfigError(f"task.negatives_from={task.negatives_from} mines negatives for the (query, positive) pairs "
                          "of data.train_file, which is not set")
    if data.negative_column is None:
        raise ConfigError("task.negatives_from writes (query, positive, negative) triples that the run reads through "
                          "data.negative_column, which is null: set data.negative_column=negative")
    n, skip = task.num_negatives, task.skip_top
    qids, queries, pids, passages, qrels = pairs_to_mine(train, data, BadExamplePolicy(data.on_bad_example))
    most = max(len(judged) for judged in qrels.values())
    if len(pids) < skip + n + most:
        raise ConfigError(f"task.num_negatives={n} with task.skip_top={skip}: {train} has {len(pids)} distinct "
                          f"passages, and a query with {most} positive(s) needs at least {skip} + {n} + {most} = "
                          f"{skip + n + most} for {n} negatives. Lower task.num_negatives or task.skip_top, or give "
                          "more pairs")
    if data.max_train_samples is not None:  # pointwise: a query's positive and its n negatives are n + 1 rows;
        # listwise: they are one group
        keep = data.max_train_samples if task.rerank_loss == "listwise" else \
            math.ceil(data.max_train_samples / (n + 1))
        qids, queries = qids[:keep], queries[:keep]
    predictor = load_embedding_model(source, None, data.eval_batch_size, use="task.negatives_from mines negatives")
    columns = (data.text_column, data.text_pair_column, data.negative_column)
    parts = {"format": NEGATIVES_FORMAT, "model": model_fingerprint(predictor.source), "pairs": file_digest(train),
             "columns": list(columns), "num_negatives": n, "skip_top": skip, "queries": len(qids),
             "on_bad_example": data.on_bad_example, "max_seq_length": predictor.settings.max_seq_length,
             "backend": "onnx" if predictor.onnx else "torch"}
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    cache = Path(data.cache_dir) / NEGATIVES_DIR / f"{key}.tsv" if data.cache_dir else None
    out = run_dir / NEGATIVES_DIR / "train.tsv"
    record = {"negatives_from": str(source), "model": str(predictor.source), "pairs_file": str(train),
              "queries": len(qids), "passages": len(pids), "num_negatives": n, "skip_top": skip,
              "rows": len(qids) * n, "key": parts}
    with writing(out.parent, "the mined negatives", "give the run folder a disk with room"), cache_lock(cache):
        out.parent.mkdir(parents=True, exist_ok=True)
        if cache is not None and _cached(cache, parts):
            shutil.copyfile(cache, out)
            log.info("task.negatives_from: loaded the mined negatives %s (same model, pairs and settings)", cache)
        else:
            rows = _mine(predictor, qids, queries, pids, passages, qrels, n, skip)
            write_triples(out, rows, columns)
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                with atomic_path(cache) as tmp:
                    shutil.copyfile(out, tmp)
                with atomic_path(cache.with_suffix(".json")) as tmp:  # written last: a .tsv without it is not read
                    tmp.write_text(json.dumps(record), encoding="utf-8")
        (out.parent / "mined.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    pairs = sum(len(judged) for judged in qrels.values())
    log.info("task.negatives_from: %d negatives for each of %d queries (%s) from %s among the %d passages of %s → "
             "%s (%d triples)", n, len(qids), f"the first {skip} rank{'s' if skip > 1 else ''} passed over" if skip else "from rank 1",
             source, len(pids), train, out, len(qids) * n)
    if pairs > len(qrels):
        log.info("task.negatives_from: %d pair(s) repeat the query of an earlier pair: each query trains with its "
                 "first positive", pairs - len(qrels))
    return dataclasses.replace(data, train_file=str(out.resolve()))


def _cached(cache: Path, parts: dict) -> bool:
    """Whether ``cache`` holds the triples of ``parts`` (its record, written after it, says so)."""
    try:
        return cache.is_file() and json.loads(cache.with_suffix(".json").read_text(encoding="utf-8"))["key"] == parts
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _mine(predictor: Predictor, qids: list[str], queries: list[str], pids: list[str], passages: list[str],
          qrels: dict[str, dict[str, int]], n: int, skip: int) -> list[tuple[str, str, str]]:
    """(query, positive, negative) rows, ``n`` per query: ``bertlab.retrieve --mine-negatives``'s rule over the top
    ``skip + n + most positives`` of an exact search (enough for ``n`` non-positives after the skipped ranks)."""
    size = int(predictor.settings.batch_size)
    q = embed_in_batches(predictor, queries, size, False, "query")
    c = embed_in_batches(predictor, passages, size, False, "passage")
    top = min(len(pids), skip + n + max(len(qrels[qid]) for qid in qids))
    _, indices = search_corpus(q, c, top)
    rows = mine_negatives(qrels, qids, queries, pids, passages, indices, n, skip)
    if len(rows) != len(qids) * n:  # guaranteed by the passage count checked before: a broken rule if not
        raise DataError(f"mining gave {len(rows)} negatives for {len(qids)} queries, not {n} each")
    return rows


def load_reranker(model: str | Path, device: str | None, batch_size: int | None) -> Predictor:
    """The predictor of a reranker (a task=rerank run, its export, or any one-score sequence model), refused in
    one paragraph otherwise."""
    return load_predictor(model, device, batch_size,
                          lambda task, _source: reranker_refusal(task, f"--rerank {model}"))


def rerank(predictor: Predictor, query_texts: list[str], doc_texts: list[str], indices: np.ndarray, top_k: int,
           batch_size: int, progress: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each query's first ``top_k`` candidates (``indices``, best first) scored by the reranker and reordered:
    (scores, indices), (Q, k) each, best first."""
    import sys

    from tqdm.auto import tqdm

    k = min(top_k, indices.shape[1])
    cut = indices[:, :k]
    scores = np.zeros(cut.shape, dtype=np.float32)
    per_call = max(1, (batch_size * 16) // max(k, 1))  # queries per call: the predictor sorts a call's pairs by length
    with tqdm(total=len(query_texts), unit=" queries", file=sys.stderr, disable=not progress,
              dynamic_ncols=True) as bar:
        for start in range(0, len(query_texts), per_call):
            block = range(start, min(start + per_call, len(query_texts)))
            pairs = [(query_texts[q], doc_texts[int(i)]) for q in block for i in cut[q]]
            scores[block.start:block.stop] = predictor.score_pairs(pairs, batch_size).reshape(len(block), k)
            bar.update(len(block))
    order = np.argsort(-scores, axis=1, kind="stable")  # ties keep the first stage's order
    return np.take_along_axis(scores, order, 1), np.take_along_axis(cut, order, 1)
