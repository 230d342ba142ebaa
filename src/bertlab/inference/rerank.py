"""Reranking with a cross-encoder (``task=rerank``): the first stage an embedding run gives a reranker's
validation (a TREC run file under the run folder), and the reranking of a retrieval run for ``python -m
bertlab.retrieve ... --rerank RUN``."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np

from bertlab.data.files import DataFiles
from bertlab.data.readers import BadExamplePolicy
from bertlab.inference.predictor import Predictor, load_predictor
from bertlab.inference.tasks.sequence import reranker_refusal
from bertlab.runtime.config import DataConfig, TaskSpec
from bertlab.runtime.errors import ConfigError
from bertlab.runtime.paths import existing_path, typed_path

log = logging.getLogger(__name__)

FIRST_STAGE_DIR = "first_stage"


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
    import torch

    from bertlab.data.rerank import retrieval_universe
    from bertlab.inference.retrieve import embed_in_batches, load_embedding_model, write_trec_run
    from bertlab.runtime.files import writing
    from bertlab.tasks.retrieval import search

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
    scores, indices = search(torch.from_numpy(q), torch.from_numpy(c), top_k=task.rerank_top_k)
    out = run_dir / FIRST_STAGE_DIR / "val.trec"
    with writing(out.parent, "the first-stage run", "give the run folder a disk with room"):
        out.parent.mkdir(parents=True, exist_ok=True)
        write_trec_run(out, qids, pids, scores.numpy(), indices.numpy(), "first_stage")
    log.info("task.first_stage: %s retrieved the top %d of %d passages for %d validation queries → %s", source,
             indices.shape[1], len(pids), len(qids), out)
    return dataclasses.replace(task, first_stage=str(out.resolve()))


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
