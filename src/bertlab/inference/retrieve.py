"""Dense retrieval with an embedding model (``python -m bertlab.retrieve``): read a corpus, queries and relevance
judgements, embed (the corpus's embeddings saved and reused), search, write a TREC run file, score it, and mine
hard negatives for the next training round.

Rules, each stated where a user reads it (docs/embeddings.md "Retrieval command"):

- Corpus and queries are TSV/CSV/JSONL tables with an id and a text column. An empty id or text is an error
  naming file and line. An id given twice with the *same* text is one row (counted in a log line); with
  different texts it is an error naming both lines: a run file could not say which one it retrieved.
- Qrels: TREC qrels (``qid iteration docid relevance``, whitespace-separated) or a TSV of (qid, docid,
  relevance), a header line optional. A relevance above 0 is relevant, 0 or less judged not relevant. A query
  or doc id the queries or corpus do not hold is an error (the judgements belong to other files).
- A query with no relevant passage in the qrels is left out of the metrics, counted and logged, and the count
  is written beside them (``queries_without_relevant``): never scored as a silent zero. No scorable query at
  all is an error.
- Mined negatives: for each query with a relevant passage, its first relevant passage is the positive (the
  most relevant; ties: the first in the qrels) and the ``N`` best-ranked passages that are not judged relevant,
  after skipping the first ``skip`` ranks (near-duplicates of the positive the qrels missed sit there), are the
  negatives: one (text, text_pair, negative) row each, what ``task=embedding`` reads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from bertlab.data.readers import BadExamplePolicy, DataError, one_text_per_id, read_table, read_text_lines
from bertlab.inference.predictor import Predictor, load_predictor
from bertlab.runtime.config import TaskSpec
from bertlab.runtime.errors import ConfigError
from bertlab.runtime.files import atomic_path
from bertlab.runtime.fingerprints import RECORD_NAME, file_digest

log = logging.getLogger(__name__)

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.onnx", "model.int8.onnx")
CACHE_FORMAT = 1


class _Strict(BadExamplePolicy):
    """Every bad row is an error, with this command's advice (not ``data.on_bad_example``, a training key)."""

    def bad(self, message: str) -> None:
        raise DataError(f"{message}. Every row needs a non-empty id and text; fix or remove that row")


# ----------------------------------------------------------------------------------------------------------
# Reading


def read_texts(path: Path, id_column: str, text_column: str, what: str) -> tuple[list[str], list[str]]:
    """(ids, texts) of a corpus or query table, one row per id (the rule of duplicate ids:
    :func:`bertlab.data.readers.one_text_per_id`, shared with ``data.corpus_file``)."""
    rows = read_table(Path(path), text_column, None, id_column, _Strict())
    kept = one_text_per_id([(str(row.label), row.text, row.where) for row in rows], Path(path), what)
    if not kept:
        raise DataError(f"{path}: no {what} rows; give a table with {id_column!r} and {text_column!r} columns")
    return [str(k) for k, _ in kept], [t for _, t in kept]


def read_qrels(path: Path, query_ids: Iterable[str], doc_ids: Iterable[str]) -> dict[str, dict[str, int]]:
    """{query id: {doc id: relevance}} of a TREC qrels file or a (qid, docid, relevance) TSV (module docstring);
    ids the queries or the corpus lack are an error that names the first few and counts them."""
    known_q, known_d = set(query_ids), set(doc_ids)
    qrels: dict[str, dict[str, int]] = {}
    unknown_q: list[tuple[str, int]] = []
    unknown_d: list[tuple[str, int]] = []
    for number, line in enumerate(read_text_lines(Path(path)), 1):
        if not line.strip():
            continue
        cells = line.split("\t") if "\t" in line else line.split()
        cells = [c.strip() for c in cells]
        if len(cells) == 4:
            qid, _, docid, rel = cells
        elif len(cells) == 3:
            qid, docid, rel = cells
        else:
            raise DataError(f"{path}:{number}: {len(cells)} columns; a qrels line is 'qid iteration docid "
                            "relevance' (TREC) or 'qid<TAB>docid<TAB>relevance'")
        if not re.fullmatch(r"[+-]?\d+", rel):
            if not qrels and not unknown_q and not unknown_d:
                continue  # a header line
            raise DataError(f"{path}:{number}: the relevance {rel!r} is not a whole number")
        if qid not in known_q:
            unknown_q.append((qid, number))
        if docid not in known_d:
            unknown_d.append((docid, number))
        qrels.setdefault(qid, {})[docid] = int(rel)
    for kind, unknown, where in (("query", unknown_q, "--queries"), ("passage", unknown_d, "--corpus")):
        if unknown:
            shown = ", ".join(f"{i!r} (line {n})" for i, n in unknown[:3])
            raise DataError(f"{path}: {len(unknown)} judgement(s) name a {kind} id that {where} does not hold: "
                            f"{shown}{' ...' if len(unknown) > 3 else ''}; the qrels belong to other files, or "
                            f"{where} is missing rows. Give the matching files (ids compare as text)")
    if not qrels:
        raise DataError(f"{path}: no relevance judgements")
    return qrels


# ----------------------------------------------------------------------------------------------------------
# Embeddings, saved and reused


def model_fingerprint(source: str | Path) -> str:
    """A hash of the weights a prediction reads: a checkpoint's bytes, or an export's fingerprint record (the
    digests of its files, checked when it was loaded), else its weight files' bytes."""
    path = Path(source)
    if path.is_file():
        return file_digest(path)
    record = path / RECORD_NAME
    if record.is_file():
        return hashlib.sha256(record.read_bytes()).hexdigest()
    h = hashlib.sha256()
    for name in WEIGHT_FILES:
        if (path / name).is_file():
            h.update(file_digest(path / name).encode())
    return h.hexdigest()


def corpus_embeddings(predictor: Predictor, ids: list[str], texts: list[str], corpus: Path, out: Path,
                      columns: tuple[str, str], batch_size: int, progress: bool) -> tuple[np.ndarray, Path]:
    """The corpus's (N, D) embeddings and the file they are saved in: ``out/corpus-<key>.npy`` (+ ``.json``, the
    ids and what the key is made of), loaded where an earlier call saved them for the same model (fingerprint),
    corpus file (SHA-256), columns, max_seq_length and backend; else embedded in batches and saved."""
    parts = {"format": CACHE_FORMAT, "model": model_fingerprint(predictor.source), "corpus": file_digest(corpus),
             "columns": list(columns), "max_seq_length": predictor.settings.max_seq_length,
             "backend": "onnx" if predictor.onnx else "torch"}
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    npy, meta = out / f"corpus-{key}.npy", out / f"corpus-{key}.json"
    if npy.is_file() and meta.is_file():
        try:
            saved = json.loads(meta.read_text(encoding="utf-8"))
            emb = np.load(npy)
            if saved.get("key") == parts and saved.get("ids") == ids and emb.shape[0] == len(ids):
                log.info("corpus embeddings: loaded %s (%d passages; same model and corpus file)", npy, len(ids))
                return emb, npy
        except (OSError, ValueError):
            pass
        log.info("corpus embeddings: %s does not match the corpus: embedding again", npy)
    emb = embed_in_batches(predictor, texts, batch_size, progress, "corpus")
    with atomic_path(npy) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, emb)
    with atomic_path(meta) as tmp:  # written last: a .npy without its .json is never read
        tmp.write_text(json.dumps({"key": parts, "source": str(predictor.source), "corpus_file": str(corpus),
                                   "ids": ids}), encoding="utf-8")
    log.info("corpus embeddings: %d passages embedded, saved to %s", len(ids), npy)
    return emb, npy


# ----------------------------------------------------------------------------------------------------------
# Searching the corpus (--index)

INDEXES = ("exact", "hnsw")
HNSW_M = 32  # graph neighbours per passage (faiss's and hnswlib's usual 16-64)
HNSW_EF_CONSTRUCTION = 200  # candidates kept while the graph is built: a better graph for a slower build
HNSW_EF_SEARCH = 128  # candidates kept per query while searching (at least top_k)


def search_corpus(queries: np.ndarray, corpus: np.ndarray, top_k: int, index: str = "exact",
                  saved: Path | None = None, ef_search: int = HNSW_EF_SEARCH) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``top_k`` passages by cosine similarity, best first: (scores, indices), (Q, k) arrays.

    - ``exact``: every query against every passage, by blocked matrix products (:func:`search`).
    - ``hnsw``: faiss's HNSW graph over the L2-normalised passages (inner product = cosine; the scores are the
      same cosines), approximate: a query visits ``ef_search`` candidates, not the whole corpus, so a passage the
      exact search would rank in the top k can be missed. For corpora where the (Q, N) products are what costs.
      The graph is built once and kept beside the corpus embeddings (``saved``: their ``.npy``), and the next
      call with the same embeddings loads it (:func:`hnsw_graph`)."""
    if index == "exact":
        import torch

        from bertlab.tasks.retrieval import search

        scores, indices = search(torch.from_numpy(queries), torch.from_numpy(corpus), top_k=top_k)
        return scores.numpy(), indices.numpy().astype(np.int64)
    if index != "hnsw":
        raise ConfigError(f"--index {index!r}: one of {', '.join(INDEXES)}")
    faiss = require_faiss()
    k = min(top_k, corpus.shape[0])
    graph = hnsw_graph(faiss, corpus, saved)
    graph.hnsw.efSearch = max(ef_search, k)
    scores, indices = graph.search(unit_rows(queries), k)
    if (indices < 0).any():  # the graph reached fewer than k passages from some query
        raise ConfigError(f"--index hnsw found fewer than {k} passages for {int((indices < 0).any(1).sum())} "
                          f"queries (efSearch {graph.hnsw.efSearch}). Raise --ef-search, or search exactly with "
                          "--index exact")
    return scores.astype(np.float32), indices.astype(np.int64)


def require_faiss():
    """The faiss module, or a ConfigError saying how to install it."""
    try:
        import faiss
    except ImportError:
        raise ConfigError("--index hnsw needs faiss, which is not installed. Install it with `pip install "
                          "faiss-cpu` (or bertlab's `index` extra), or search exactly with --index exact (the "
                          "default)") from None
    return faiss


def unit_rows(x: np.ndarray) -> np.ndarray:
    """``x``'s rows scaled to length 1, float32 and contiguous (as faiss takes them): inner product = cosine."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def hnsw_graph(faiss, corpus: np.ndarray, saved: Path | None):
    """The HNSW graph over ``corpus``'s rows (normalised here). With ``saved`` (the embeddings' ``.npy``) it is
    kept beside them as ``<stem>.hnsw<M>-<digest>.faiss``, the digest taken of these very embeddings and the
    graph's settings: the file is loaded only for the same vectors, and a graph of other vectors under that stem
    is replaced when this one is built."""
    corpus = np.ascontiguousarray(corpus, dtype=np.float32)
    path = None
    if saved is not None:
        digest = hashlib.blake2b(corpus.tobytes(), digest_size=8)
        digest.update(f"{corpus.shape}:{HNSW_M}:{HNSW_EF_CONSTRUCTION}".encode())
        path = saved.with_name(f"{saved.stem}.hnsw{HNSW_M}-{digest.hexdigest()}.faiss")
        if path.is_file():
            try:
                graph = faiss.read_index(str(path))
                if graph.ntotal == corpus.shape[0] and graph.d == corpus.shape[1]:
                    log.info("HNSW index: loaded %s (%d passages)", path, graph.ntotal)
                    return graph
            except RuntimeError:  # faiss's error for a file it cannot read
                pass
            log.info("HNSW index: %s cannot be read: building it again", path)
    graph = faiss.IndexHNSWFlat(corpus.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
    graph.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    graph.add(unit_rows(corpus))
    if path is not None:
        for stale in path.parent.glob(f"{saved.stem}.hnsw*.faiss"):  # graphs of other vectors of that stem
            if stale != path:
                stale.unlink()
        with atomic_path(path) as tmp:
            faiss.write_index(graph, str(tmp))
        log.info("HNSW index: built over %d passages (M %d, efConstruction %d), saved to %s", graph.ntotal,
                 HNSW_M, HNSW_EF_CONSTRUCTION, path)
    return graph


def embed_in_batches(predictor: Predictor, texts: list[str], batch_size: int, progress: bool,
                     what: str) -> np.ndarray:
    """(N, D) float32 embeddings of ``texts``, ``batch_size`` per forward pass, a progress bar on stderr."""
    import sys

    from tqdm.auto import tqdm

    step = batch_size * 16  # texts per call: the predictor sorts each call's texts by length
    parts = []
    with tqdm(total=len(texts), unit=f" {what} texts", file=sys.stderr, disable=not progress,
              dynamic_ncols=True) as bar:
        for start in range(0, len(texts), step):
            parts.append(predictor.embed_texts(texts[start:start + step], batch_size))
            bar.update(len(parts[-1]))
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def load_embedding_model(model: str | Path, device: str | None, batch_size: int | None,
                         use: str = "bertlab.retrieve searches") -> Predictor:
    """The predictor of ``model`` as ``bertlab.predict`` loads it, refused unless it is an embedding model (a
    classifier, a tagger, a pre-training run ...: one paragraph naming its task and ``use``, what needed the
    embeddings, before any embedding)."""
    return load_predictor(model, device, batch_size, lambda task, source: _not_an_embedding_model(task, source, use))


def _not_an_embedding_model(task: TaskSpec, source: str, use: str) -> str | None:
    if task.family == "embedding":
        return None
    return (f"{source}: a {task.family} model (task {task.name}), not an embedding model; {use} with the embeddings "
            "of a task=embedding run or its export. Give such a run (python train.py task=embedding ...)")


# ----------------------------------------------------------------------------------------------------------
# The run: TREC file, metrics, negatives


def write_trec_run(path: Path, query_ids: list[str], doc_ids: list[str], scores: np.ndarray,
                   indices: np.ndarray, tag: str) -> None:
    """``qid Q0 docid rank score tag`` per retrieved passage, ranks from 1, best first."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for q, qid in enumerate(query_ids):
            for rank, (i, s) in enumerate(zip(indices[q], scores[q]), 1):
                f.write(f"{qid} Q0 {doc_ids[int(i)]} {rank} {float(s):.6f} {tag}\n")


def run_dict(query_ids: list[str], doc_ids: list[str], scores: np.ndarray,
             indices: np.ndarray) -> dict[str, dict[str, float]]:
    return {qid: {doc_ids[int(i)]: float(s) for i, s in zip(indices[q], scores[q])}
            for q, qid in enumerate(query_ids)}


def score(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], top_k: int,
          warn: bool = True) -> dict[str, float]:
    """The measures over the queries with a relevant passage (module docstring), with the counts; ``warn``:
    log the queries left out and a short run's Recall@100 (once per command: not for a second run scored)."""
    from bertlab.tasks.retrieval import run_scores

    scored = [q for q in run if any(r > 0 for r in qrels.get(q, {}).values())]
    without = len(run) - len(scored)
    if without and warn:
        log.warning("%d of %d queries have no relevant passage in the qrels: left out of the metrics (not scored "
                    "as 0)", without, len(run))
    if not scored:
        raise DataError("no query has a relevant passage (relevance above 0) in the qrels: there is nothing to "
                        "score. Give qrels that judge passages of --corpus relevant to queries of --queries")
    if top_k < 100 and warn:
        log.warning("--top-k %d: recall_at_100 counts the relevant passages among the top %d only", top_k, top_k)
    values = run_scores({q: qrels[q] for q in scored}, {q: run[q] for q in scored})
    return {**values, "queries_scored": len(scored), "queries_without_relevant": without}


def mine_negatives(qrels: dict[str, dict[str, int]], query_ids: list[str], query_texts: list[str],
                   doc_ids: list[str], doc_texts: list[str], indices: np.ndarray, count: int,
                   skip: int) -> list[tuple[str, str, str]]:
    """(query, positive, negative) rows (module docstring: the rule)."""
    rows = []
    position = {d: i for i, d in enumerate(doc_ids)}
    for q, qid in enumerate(query_ids):
        judged = qrels.get(qid, {})
        relevant = [d for d, r in judged.items() if r > 0]
        if not relevant:
            continue
        positive = max(relevant, key=lambda d: judged[d])  # max keeps the first of equal grades
        taken = 0
        for i in indices[q][skip:]:
            doc = doc_ids[int(i)]
            if judged.get(doc, 0) > 0:
                continue
            rows.append((query_texts[q], doc_texts[position[positive]], doc_texts[int(i)]))
            taken += 1
            if taken == count:
                break
    return rows


def write_triples(path: Path, rows: list[tuple[str, str, str]],
                  columns: tuple[str, str, str] = ("text", "text_pair", "negative")) -> None:
    """A TSV of (query, positive, negative) ``columns`` (tabs and line breaks inside a text become spaces)."""
    def cell(text: str) -> str:
        return " ".join(text.split())

    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("\t".join(columns) + "\n")
        for row in rows:
            f.write("\t".join(cell(t) for t in row) + "\n")
