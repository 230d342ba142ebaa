"""task=rerank trained from (query, positive) pairs whose negatives a tiny task=embedding run mines when the run
starts (task.negatives_from, task.num_negatives, task.skip_top): the mined rows never hold a positive of their
query, there are exactly N per query, the first K ranks are passed over (checked against the embedding run's own
ranking), the triples are cached and recorded, and each bad input is a clear error before the first step."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import FIXTURES, run_train

from bertlab.data.files import DataFiles
from bertlab.data.readers import DataError
from bertlab.runtime.config import ConfigError, DataConfig, TaskSpec

DATA = FIXTURES / "retrieval"
PAIRS = DATA / "rerank_pairs.tsv"  # 10 pairs, 9 queries (one with two positives), 8 passages


def _pairs() -> list[tuple[str, str]]:
    return [tuple(line.split("\t")) for line in PAIRS.read_text().splitlines()[1:]]


def mine(source, run_dir, n=3, skip=0, train=PAIRS, cache=None, loss="pointwise", **data):
    from bertlab.inference.rerank import mined_negatives

    task = TaskSpec(name="rerank", family="sequence", rerank=True, negatives_from=str(source), num_negatives=n,
                    skip_top=skip, rerank_loss=loss)
    cfg = DataConfig(**{"train_file": str(train), "text_column": "text", "text_pair_column": "text_pair",
                        "label_column": "label", "negative_column": "negative", "cache_dir": cache, **data})
    return mined_negatives(task, cfg, DataFiles(task, cfg), run_dir)


def triples(data: DataConfig) -> list[list[str]]:
    header, *rows = [line.split("\t") for line in open(data.train_file, encoding="utf-8").read().splitlines()]
    assert header == ["text", "text_pair", "negative"]
    return rows


def ranking(emb_run) -> dict[str, list[str]]:
    """Each query's passages, best first, by the embedding run's own cosine similarity (an independent search)."""
    from bertlab.inference.predictor import Predictor

    predictor = Predictor.from_run(emb_run, device="cpu")
    queries = list(dict.fromkeys(q for q, _ in _pairs()))
    passages = list(dict.fromkeys(p for _, p in _pairs()))
    q, p = predictor.embed_texts(queries), predictor.embed_texts(passages)
    scores = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (p / np.linalg.norm(p, axis=1, keepdims=True)).T
    return {text: [passages[i] for i in np.argsort(-scores[k], kind="stable")] for k, text in enumerate(queries)}


@pytest.mark.parametrize("n, skip", [(3, 0), (2, 2), (1, 5)])
def test_n_negatives_per_query_never_a_positive_after_the_skipped_ranks(emb_run, tmp_path, n, skip):
    data = mine(emb_run, tmp_path / "run", n=n, skip=skip)
    rows = triples(data)
    positives: dict[str, set[str]] = {}
    for q, p in _pairs():
        positives.setdefault(q, set()).add(p)
    assert len(rows) == len(positives) * n
    ranked = ranking(emb_run)
    for query, positive in positives.items():
        mined = [neg for q, _, neg in rows if q == query]
        assert len(mined) == n
        assert not set(mined) & positive  # "Which river runs past Thornby?" has two positives: neither
        # the rule, recomputed: the best-ranked passages that are no positive, after the first `skip` ranks
        assert mined == [p for p in ranked[query][skip:] if p not in positive][:n]
        assert {pos for q, pos, _ in rows if q == query} == {next(p for q, p in _pairs() if q == query)}
    if skip:  # the skipped ranks matter: without them the first non-positive would be a negative
        top = {q: next(p for p in ranked[q] if p not in positives[q]) for q in positives}
        skipped = {q for q in positives if top[q] not in ranked[q][skip:]}
        assert skipped and all(top[q] not in {neg for r, _, neg in rows if r == q} for q in skipped)
    record = json.loads((tmp_path / "run" / "negatives" / "mined.json").read_text())
    assert (record["queries"], record["passages"], record["num_negatives"], record["skip_top"]) == (9, 8, n, skip)


def test_the_mined_rows_are_cached_and_mined_again_when_a_setting_changes(emb_run, tmp_path, monkeypatch, caplog):
    import bertlab.inference.rerank as rerank

    cache = str(tmp_path / "cache")
    first = triples(mine(emb_run, tmp_path / "a", cache=cache))
    monkeypatch.setattr(rerank, "_mine", lambda *a: pytest.fail("mined again with the same model and settings"))
    caplog.set_level("INFO", logger="bertlab")
    again = mine(emb_run, tmp_path / "b", cache=cache)
    assert triples(again) == first and str(tmp_path / "b") in again.train_file
    assert "loaded the mined negatives" in caplog.text
    with pytest.raises(pytest.fail.Exception):  # another count: another key, mined again
        mine(emb_run, tmp_path / "c", n=2, cache=cache)


def test_max_train_samples_mines_only_the_queries_training_reads(emb_run, tmp_path):
    data = mine(emb_run, tmp_path / "run", n=3, max_train_samples=9)
    assert len({q for q, _, _ in triples(data)}) == math.ceil(9 / 4)  # a positive and 3 negatives: 4 rows each
    data = mine(emb_run, tmp_path / "listwise", n=3, max_train_samples=5, loss="listwise")
    assert len({q for q, _, _ in triples(data)}) == 5  # listwise: a query's positive and negatives are one group


def test_a_run_trains_on_the_mined_triples_and_logs_where_they_came_from(emb_run, tmp_path, caplog):
    run = tmp_path / "run"
    caplog.set_level("INFO", logger="bertlab")
    m = run_train(["model=bert_tiny", "task=rerank", f"data.train_file={PAIRS}", f"task.negatives_from={emb_run}",
                   "task.num_negatives=2", "task.skip_top=1", f"data.val_file={DATA}/rerank_dev.tsv",
                   "data.batch_size=8", "trainer.max_steps=2"], run)
    assert m["train"]["steps"] == 2 and m["val"]["num_examples"] == 5
    log = caplog.text
    assert "task.negatives_from: 2 negatives for each of 9 queries" in log and str(emb_run) in log
    assert "27 pairs (9 positives, 18 negatives)" in log  # what the data module read: the mined file
    assert len((run / "negatives" / "train.tsv").read_text().splitlines()) == 1 + 18
    with pytest.raises(ConfigError, match="not an embedding model; task.negatives_from mines negatives"):
        run_train(["model=bert_tiny", "task=rerank", f"data.train_file={PAIRS}", f"task.negatives_from={run}",
                   f"data.val_file={DATA}/rerank_dev.tsv", "trainer.max_steps=2"], tmp_path / "other")
    assert not (tmp_path / "other" / "checkpoints").exists()  # refused before the first step


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_bad_inputs_are_clear_errors(emb_run, tmp_path):
    with pytest.raises(ConfigError, match="task.negatives_from.*does not exist|task.negatives_from.*no such"):
        mine(tmp_path / "nowhere", tmp_path / "run")
    with pytest.raises(ConfigError, match="is a file, not an embedding model.*data.train_file=OUT"):
        mine(DATA / "qrels.txt", tmp_path / "run")
    empty = _write(tmp_path / "empty.tsv", "text\ttext_pair\nWhere?\tThere.\nWhen?\t\nWho?\tHim.\n")
    with pytest.raises(DataError, match=r"empty.tsv:3: empty text in column 'text_pair'"):
        mine(emb_run, tmp_path / "run", n=1, train=empty)  # a query with no positive
    for name, text, what in (("labelled.tsv", "text\ttext_pair\tlabel\nq\tp\t1\n", "relevance labels"),
                             ("triples.tsv", "text\ttext_pair\tnegative\nq\tp\tn\n", "negatives")):
        with pytest.raises(DataError, match=f"has {what} already"):
            mine(emb_run, tmp_path / "run", train=_write(tmp_path / name, text))
    with pytest.raises(ConfigError, match=r"8 distinct passages.*at least 2 \+ 5 \+ 2 = 9"):
        mine(emb_run, tmp_path / "run", n=5, skip=2)  # the query with two positives cannot have 5 negatives
    with pytest.raises(ConfigError, match="data.negative_column, which is null"):
        mine(emb_run, tmp_path / "run", negative_column=None)
    with pytest.raises(ConfigError, match="mined negatives train a reranker"):
        TaskSpec(name="embedding", family="embedding", negatives_from=str(emb_run))
    assert not (tmp_path / "run" / "negatives" / "train.tsv").exists()  # nothing written by a refused call
