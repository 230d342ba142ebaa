"""task=embedding end to end on a tiny BERT and the bundled samples: retrieval metrics in metrics.json and as
a monitor, gradient caching under LoRA, similarity (STS-B) evaluation, and the retrieval scores against
ir_measures on hand-made runs, bad runs refused."""

from __future__ import annotations

import math

import pytest
import torch

from bertlab.data.readers import DataError
from bertlab.tasks.retrieval import RETRIEVAL_MEASURES, retrieval_scores, search

TINY = ("model=bert_tiny", "task=embedding", "data.source=sample", "trainer.max_epochs=1", "data.batch_size=8")


def test_retrieval_run_logs_every_measure_and_monitors_one(train_run, tmp_path):
    from test_train_tasks import _check_contract

    m = train_run(*TINY, "task.monitor=val/mrr_at_10", "task.cache_chunk_size=6")
    _check_contract(m, tmp_path / "run", "embedding")  # what every task's metrics.json holds
    val = m["val"]
    assert set(RETRIEVAL_MEASURES) | {"loss", "num_examples"} <= set(val)
    assert val["num_examples"] == 80  # the sample dev file's questions, each with its paragraph among all of them
    assert 0 < val["recall_at_1"] <= val["recall_at_10"] <= val["recall_at_100"] == 1.0
    assert math.isfinite(val["loss"]) and m["train"]["steps"] > 0


def test_gradient_caching_trains_lora_adapters_only(train_run, tmp_path):
    import json

    m = train_run(*TINY, "task.cache_chunk_size=5", "freeze=lora", "trainer.max_steps=3")
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    assert scope["policy"] == "lora" and scope["frozen_changed"] == []
    assert m["train"]["steps"] == 3


def test_similarity_file_scores_cosine_correlation(train_run):
    m = train_run(*TINY, "data.val_file=stsb/dev.tsv", "data.text_column=sentence1",
                  "data.text_pair_column=sentence2", "data.label_column=score", "task.monitor=val/spearmanr",
                  "trainer.max_steps=3")
    assert {"pearson", "spearmanr", "combined_score"} <= set(m["val"])
    assert -1 <= m["val"]["spearmanr"] <= 1


def test_a_retrieval_monitor_on_a_similarity_file_is_refused(train_run):
    from bertlab.runtime.config import ConfigError

    with pytest.raises(ConfigError, match="ndcg_at_10"):
        train_run(*TINY, "data.val_file=stsb/dev.tsv", "data.label_column=score")


def _run(ranked: list[list[int]]):
    """A run whose query q retrieved ``ranked[q]`` (corpus positions), best first."""
    k = len(ranked[0])
    scores = torch.tensor([[float(k - r) for r in range(k)]] * len(ranked))
    return scores, torch.tensor(ranked)


def test_measures_equal_their_definitions_on_a_hand_made_run():
    import ir_measures

    ids = [f"d{i}" for i in range(12)]
    # q0: relevant at rank 1; q1: at rank 3; q2: two relevant at ranks 2 and 11 (beyond @10); q3: relevant
    # passage in the corpus but not retrieved at all (the run's top-k misses it)
    ranked = [list(range(11)), [4, 5, 0, 6, 7, 8, 9, 10, 1, 2, 3], [3, 2, 4, 5, 6, 7, 8, 9, 10, 0, 1],
              [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]]
    relevant = [[0], [0], [2, 1], [11]]
    got = retrieval_scores(*_run(ranked), relevant, ids)
    log2 = math.log2
    ndcg_q2 = (1 / log2(3)) / (1 + 1 / log2(3))  # rank 2 found within 10, rank 11 not; ideal has both at 1, 2
    want = {"ndcg_at_10": (1 + 1 / log2(4) + ndcg_q2 + 0) / 4, "mrr_at_10": (1 + 1 / 3 + 1 / 2 + 0) / 4,
            "recall_at_1": (1 + 0 + 0 + 0) / 4, "recall_at_10": (1 + 1 + 0.5 + 0) / 4,
            "recall_at_100": (1 + 1 + 1 + 0) / 4}
    assert got == pytest.approx(want, abs=1e-6)
    # and what ir_measures itself says of the same run, built independently
    qrels = [ir_measures.Qrel(f"q{q}", ids[d], 1) for q, rel in enumerate(relevant) for d in rel]
    run = [ir_measures.ScoredDoc(f"q{q}", ids[d], float(11 - r)) for q, docs in enumerate(ranked)
           for r, d in enumerate(docs)]
    lib = ir_measures.calc_aggregate([ir_measures.parse_measure(m) for m in RETRIEVAL_MEASURES.values()], qrels, run)
    assert got == pytest.approx({n: lib[ir_measures.parse_measure(m)] for n, m in RETRIEVAL_MEASURES.items()})


def test_bad_runs_are_errors_not_zero_scores():
    scores, idx = _run([[0, 1], [1, 0]])
    with pytest.raises(DataError, match="query q1 has no relevant passage"):
        retrieval_scores(scores, idx, [[0], []], ["a", "b"])
    with pytest.raises(DataError, match=r"query q0's relevant passage\(s\) \[5\] are not in the corpus"):
        retrieval_scores(scores, idx, [[5], [0]], ["a", "b"])
    with pytest.raises(DataError, match="corpus is empty"):
        search(torch.randn(2, 4), torch.zeros(0, 4))


def test_search_is_exact_in_blocks():
    torch.manual_seed(0)
    q, c = torch.randn(37, 8), torch.randn(50, 8)
    s, i = search(q, c, top_k=7, block=5)
    full = torch.nn.functional.normalize(q, dim=-1) @ torch.nn.functional.normalize(c, dim=-1).T
    want_s, want_i = full.topk(7, dim=1)
    assert torch.allclose(s, want_s) and torch.equal(i, want_i)
