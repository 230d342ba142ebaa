"""``bertlab.retrieve --index hnsw``: faiss's approximate HNSW graph against the exact search — the same cosines
for the passages both find and nearly the same top 10 on clustered vectors, the graph saved beside the corpus
embeddings and loaded (or rebuilt when it no longer fits them), the command line's results equal to the exact
search's on a corpus small enough for the graph to be exact, and a clear error without faiss."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from test_retrieve import fails, retrieve


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Vectors around 40 centres: neighbourhoods like those of text embeddings, not uniform noise."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, dim))
    return (centres[rng.integers(0, 40, n)] + 0.6 * rng.normal(size=(n, dim))).astype(np.float32)


def test_hnsw_finds_nearly_the_exact_top_10_with_the_same_scores():
    from bertlab.inference.retrieve import search_corpus

    corpus, queries = clustered(3000, 48, 0), clustered(200, 48, 1)
    exact_s, exact_i = search_corpus(queries, corpus, 10, "exact")
    hnsw_s, hnsw_i = search_corpus(queries, corpus, 10, "hnsw")
    assert hnsw_i.shape == exact_i.shape == (200, 10) and hnsw_i.dtype == np.int64
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact_i.tolist(), hnsw_i.tolist())])
    assert recall >= 0.95
    assert (hnsw_i[:, 0] == exact_i[:, 0]).mean() >= 0.95
    assert np.all(np.diff(hnsw_s, axis=1) <= 1e-6)  # best first
    for q in range(200):  # a passage found by both has the same score: the cosine
        both = {int(i): float(s) for s, i in zip(exact_s[q], exact_i[q])}
        for s, i in zip(hnsw_s[q], hnsw_i[q]):
            if int(i) in both:
                assert s == pytest.approx(both[int(i)], abs=1e-5)


def test_the_graph_is_saved_beside_the_embeddings_and_rebuilt_when_they_change(tmp_path, caplog):
    from bertlab.inference.retrieve import search_corpus

    corpus, queries = clustered(500, 16, 2), clustered(20, 16, 3)
    saved = tmp_path / "corpus-abc.npy"
    graphs = lambda: sorted(tmp_path.glob("corpus-abc.hnsw32-*.faiss"))  # noqa: E731
    with caplog.at_level("INFO", logger="bertlab"):
        first = search_corpus(queries, corpus, 5, "hnsw", saved)
        assert len(graphs()) == 1 and "built over 500 passages" in caplog.text
        caplog.clear()
        again = search_corpus(queries, corpus, 5, "hnsw", saved)
        assert "HNSW index: loaded" in caplog.text
        assert np.array_equal(first[1], again[1]) and np.allclose(first[0], again[0])
        # Other vectors of the same shape under that name (a corpus embedded again): a graph of their own,
        # which replaces the stale one; its results are those of a graph built afresh
        caplog.clear()
        other = corpus[::-1].copy()
        moved = search_corpus(queries, other, 5, "hnsw", saved)
        assert "built over 500 passages" in caplog.text and "loaded" not in caplog.text
        assert len(graphs()) == 1 and np.array_equal(moved[1], search_corpus(queries, other, 5, "hnsw")[1])
        caplog.clear()
        search_corpus(queries, corpus[:400], 5, "hnsw", saved)  # fewer rows: built again
        assert "built over 400 passages" in caplog.text
        caplog.clear()
        graphs()[0].write_bytes(b"not an index")  # unreadable: built again
        search_corpus(queries, corpus[:400], 5, "hnsw", saved)
        assert "cannot be read" in caplog.text and "built over 400 passages" in caplog.text


def test_top_k_above_the_corpus_and_an_unreachable_passage(monkeypatch):
    from bertlab.inference.retrieve import search_corpus
    from bertlab.runtime.errors import ConfigError

    corpus, queries = clustered(7, 8, 4), clustered(3, 8, 5)
    scores, indices = search_corpus(queries, corpus, 10, "hnsw")  # k is cut to the corpus, as exact search cuts it
    assert indices.shape == (3, 7) and sorted(indices[0].tolist()) == list(range(7))
    assert np.allclose(scores, search_corpus(queries, corpus, 10, "exact")[0], atol=1e-5)

    class Unreached:  # a graph that reaches fewer passages than asked: faiss marks the gaps with -1
        class hnsw:
            efSearch = 0

        @staticmethod
        def search(q, k):
            return np.zeros((len(q), k), np.float32), np.full((len(q), k), -1)

    import bertlab.inference.retrieve as r

    monkeypatch.setattr(r, "hnsw_graph", lambda *a: Unreached())
    with pytest.raises(ConfigError, match="found fewer than 5 passages for 3 queries.*--ef-search"):
        search_corpus(queries, corpus, 5, "hnsw")


def test_command_line_hnsw_equals_exact_on_a_small_corpus(emb_run, tmp_path):
    exact = retrieve(emb_run, tmp_path / "exact", "--top-k", "5")
    hnsw = retrieve(emb_run, tmp_path / "hnsw", "--top-k", "5", "--index", "hnsw", "--ef-search", "16")
    rows = {name: [line.split() for line in (out / "run.trec").read_text().splitlines()]
            for name, out in (("exact", exact), ("hnsw", hnsw))}
    assert len(rows["hnsw"]) == len(rows["exact"]) == 6 * 5
    for x, y in zip(rows["exact"], rows["hnsw"]):  # the same passages at the same ranks, the same scores
        assert x[:4] == y[:4] and float(x[4]) == pytest.approx(float(y[4]), abs=1e-5)
    assert len(list(hnsw.glob("corpus-*.hnsw32-*.faiss"))) == 1
    graph = next(hnsw.glob("corpus-*.hnsw32-*.faiss"))
    built = graph.stat().st_mtime_ns
    again = retrieve(emb_run, tmp_path / "hnsw", "--top-k", "5", "--index", "hnsw")  # the saved graph is read
    assert graph.stat().st_mtime_ns == built and (again / "run.trec").read_text() == (hnsw / "run.trec").read_text()
    assert json.loads((hnsw / "metrics.json").read_text()) == pytest.approx(
        json.loads((exact / "metrics.json").read_text()))


def test_hnsw_without_faiss_and_ef_search_without_hnsw_are_refused(emb_run, tmp_path, capsys, monkeypatch):
    message = fails(capsys, emb_run, tmp_path, "--ef-search", "32")
    assert "--ef-search 32" in message and "--index hnsw" in message
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss now raises ImportError
    message = fails(capsys, emb_run, tmp_path, "--index", "hnsw")
    assert "pip install faiss-cpu" in message and "--index exact" in message
    assert not (tmp_path / "out").exists()  # refused before anything was embedded or written
