"""The embeddings measurement's scripts keep working on synthetic results: benchmarks/embedding_speed.py's rows
reach ``make bench``'s report, and experiments/embeddings/table.py writes mean ± sd over seeds. (The scripts
themselves run minutes of MiniLM: smoke-tested by hand, see experiments/embeddings/README.md.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "experiments" / "embeddings"))

pytestmark = pytest.mark.bench

EMBEDDING = {
    "encode": {"texts": 100, "batch_size": 64, "max_seq_length": 256, "sides": {
        "bertlab_predict": {"wall_s": 10.0, "texts_per_s": 10.0, "peak_rss_mib": 900.0, "speed_vs_st": 2.5,
                            "max_abs_diff_vs_st": 3e-7, "min_cosine_vs_st": 1.0},
        "st_encode": {"wall_s": 25.0, "texts_per_s": 4.0, "peak_rss_mib": 1100.0, "speed_vs_st": 1.0,
                      "max_abs_diff_vs_st": 0.0, "min_cosine_vs_st": 1.0},
        "bertlab_onnx_int8": {"wall_s": 5.0, "texts_per_s": 20.0, "peak_rss_mib": 500.0, "speed_vs_st": 5.0,
                              "max_abs_diff_vs_st": 0.02, "min_cosine_vs_st": 0.991234},
        "speed_vs_st": 2.5, "max_abs_diff": 3e-7}},
    "memory": {"max_seq_length": 256, "bertlab_cached_256_vs_32": 1.25, "cases": {
        "bertlab batch 32": {"peak_rss_mib": 1000.0, "rss_before_step_mib": 700.0},
        "bertlab batch 256, cached chunks of 32": {"peak_rss_mib": 1250.0, "rss_before_step_mib": 720.0}}},
}


def test_embedding_rows_reach_the_bench_report():
    import embedding_speed  # noqa: F401
    import run_all

    rows = {name: (ratio, target) for name, ratio, target in run_all.ratio_rows({"embedding": EMBEDDING})}
    assert rows["embedding: encode SQuAD paragraphs, bertlab predict vs SentenceTransformer.encode"] == (2.5, 2.0)
    ratio, target = rows["embedding: peak RSS batch 32 / batch 256 cached (1/1.3 = 0.77)"]
    assert ratio == pytest.approx(0.8) and ratio >= target  # 1.25x of batch 32's peak meets "within 1.3x"
    text = "\n".join(run_all.render_embedding(EMBEDDING))
    assert "## Embedding a corpus (100 SQuAD paragraphs" in text and "3.00e-07" in text
    assert "| bertlab_onnx_int8 | 5.00 | 20.00 | 5.00× | 2.0e-02 | 0.991234 | 500 |" in text  # every side measured
    assert "| bertlab batch 256, cached chunks of 32 | 1,250 | 720 |" in text


def test_table_gives_mean_and_sd_over_seeds(tmp_path):
    import table

    def record(framework, seed, ndcg, speed):
        return {"framework": framework, "seed": seed, "train": {"samples_per_s": speed},
                "squad_dev": {"ndcg_at_10": ndcg, "mrr_at_10": ndcg, "recall_at_1": ndcg, "recall_at_10": 1.0,
                              "recall_at_100": 1.0}, "stsb_dev": {"spearman": 0.8},
                **({"budget": {"pairs": 1000}} if framework == "sentence-transformers" else {})}

    results = [record("bertlab", s, n, 30.0 + s) for s, n in ((1, 0.70), (2, 0.72), (3, 0.74))]
    results += [record("sentence-transformers", s, 0.71, 15.0) for s in (1, 2, 3)]
    results.append({"framework": "checkpoint (before fine-tuning)", "seed": None,
                    "squad_dev": {"ndcg_at_10": 0.6}, "stsb_dev": {"spearman": 0.85}})
    for k, r in enumerate(results):
        (tmp_path / f"{k}.json").write_text(json.dumps(r))
    table.main([str(tmp_path)])
    text = (tmp_path / "TABLE.md").read_text()
    assert "| bertlab | 1, 2, 3 | 72.00 ± 2.00 |" in text
    assert "| checkpoint (before fine-tuning) | – | 60.00 |" in text
    assert "nDCG@10, bertlab − sentence-transformers on seeds 1, 2, 3: +1.00 points" in text
    # A seed only bertlab ran is in its row, not in the comparisons, which read the seeds both ran
    (tmp_path / "extra.json").write_text(json.dumps(record("bertlab", 4, 0.90, 80.0)))
    table.main([str(tmp_path)])
    text = (tmp_path / "TABLE.md").read_text()
    assert "| bertlab | 1, 2, 3, 4 |" in text and "on seeds 1, 2, 3: +1.00 points" in text
    assert "2.13× (goal ≥ 1.5×)" in text and "Budget: pairs 1000" in text


def test_a_reference_case_killed_for_memory_is_a_recorded_result_and_our_own_is_a_failure(monkeypatch, tmp_path):
    import embedding_speed
    import run_all
    from common import ChildRun

    def fake_child(cmd, env=None, **_):
        side, batch, chunk = cmd[3], int(cmd[5]), int(cmd[6])
        if batch == 256 and not chunk and (side == "st" or killing_ours):  # killed by the kernel
            return ChildRun(-9, 3.0, 23000.0, "", "Loading weights")
        return ChildRun(0, 1.0, 1000.0 + batch + chunk, json.dumps({"rss_before_mib": 500.0, "loss": 1.0}), "")

    killing_ours = False
    monkeypatch.setattr(embedding_speed, "run_child", fake_child)
    mem = embedding_speed.memory(tmp_path / "pairs.jsonl", 2, 256)
    killed = mem["cases"]["sentence-transformers batch 256 (MNRL)"]
    assert killed["killed"].startswith("SIGKILL") and killed["peak_rss_mib"] == 23000.0
    assert mem["bertlab_cached_256_vs_32"] == round(1288 / 1032, 3)
    text = "\n".join(run_all.render_embedding({"memory": mem}))
    assert "| sentence-transformers batch 256 (MNRL) | killed at 23000.0 (SIGKILL (out of memory" in text
    # bertlab's own case killed is not a result: the benchmark stops and says which case
    killing_ours = True
    with pytest.raises(SystemExit, match=r"memory case 'bertlab batch 256, uncached' failed \(exit -9\)"):
        embedding_speed.memory(tmp_path / "pairs.jsonl", 2, 256)


def test_table_gives_the_reranker_rows_and_the_mrr_gain(tmp_path):
    import table

    def record(seed, before, after):
        block = {"ndcg_at_10": 0.8, "recall_at_1": 0.7, "recall_at_10": 0.96}
        return {"framework": "bertlab + reranker", "seed": seed, "train": {"samples_per_s": 12.0 + seed},
                "budget": {"negatives_per_question": 3, "top_k": 20},
                "squad_dev": {"top_k": 20, "queries": 1232, "first_stage": {**block, "mrr_at_10": before},
                              "reranked": {**block, "mrr_at_10": after}}}

    for seed, before, after in ((1, 0.80, 0.83), (2, 0.80, 0.82), (3, 0.81, 0.82)):
        (tmp_path / f"rerank-pointwise-e1-seed{seed}.json").write_text(json.dumps(record(seed, before, after)))
    table.main([str(tmp_path)])
    text = (tmp_path / "TABLE.md").read_text()
    assert "## Reranking the bi-encoder's top 20 (SQuAD dev, 1232 questions; reranker trained pointwise, 1 epoch)" in text
    assert "| bertlab bi-encoder alone | 1, 2, 3 | 80.00 ± 0.00 | 80.33 ± 0.58 |" in text
    assert "| + MiniLM reranker (task=rerank) | 1, 2, 3 | 80.00 ± 0.00 | 82.33 ± 0.58 |" in text
    assert "+2.00 ± 1.00 points (per seed: +3.00, +2.00, +1.00)" in text and "— met" in text
    assert "Reranker budget: negatives_per_question 3, top_k 20" in text
    (tmp_path / "rerank-pointwise-e1-seed3.json").write_text(json.dumps(record(3, 0.83, 0.82)))  # one seed loses: not met
    table.main([str(tmp_path)])
    assert "— not met" in (tmp_path / "TABLE.md").read_text()
    # A listwise reranker's records: a table of their own, its throughput in pairs (a sample is a group of
    # the positive and its 3 negatives)
    listwise = record(1, 0.80, 0.81)
    listwise["budget"]["loss"] = "listwise"
    (tmp_path / "rerank-listwise-e1-seed1.json").write_text(json.dumps(listwise))
    table.main([str(tmp_path)])
    text = (tmp_path / "TABLE.md").read_text()
    assert text.index("trained pointwise, 1 epoch)") < text.index("trained listwise, 1 epoch)")
    assert "| + MiniLM reranker (task=rerank) | 1 | 80.00 | 81.00 | 70.00 | 96.00 | 52.00 |" in text
    # The same loss trained longer is another measurement: its own table, after the shorter one's
    longer = {**listwise, "budget": {**listwise["budget"], "epochs": 2}, "seed": 2}
    longer["squad_dev"] = {**listwise["squad_dev"], "reranked": {**listwise["squad_dev"]["reranked"], "mrr_at_10": 0.85}}
    (tmp_path / "rerank-listwise-e2-seed2.json").write_text(json.dumps(longer))
    table.main([str(tmp_path)])
    text = (tmp_path / "TABLE.md").read_text()
    assert text.index("trained listwise, 1 epoch)") < text.index("trained listwise, 2 epochs)")
    assert "| + MiniLM reranker (task=rerank) | 2 | 80.00 | 85.00 | 70.00 | 96.00 | 52.00 |" in text
