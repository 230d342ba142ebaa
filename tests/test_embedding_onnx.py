"""ONNX export of an embedding run (``export=onnx`` / ``python -m bertlab.export RUN OUT --format onnx``): the graph's
output is the pooled (and normalised) embedding; the fp32 graph passes the same gate as every head (hard lengths,
dev set); the int8 graph is gated on retrieval nDCG@10 over the run's validation retrieval set (Spearman for a
similarity file), whatever the run monitors; predict from the folder gives the run's embeddings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, run_train

pytest.importorskip("onnxruntime")

from bertlab.inference import onnx as bonnx  # noqa: E402
from bertlab.inference.predictor import Predictor  # noqa: E402

TINY = ["model=bert_tiny", "task=embedding", "data.source=sample", "trainer.max_steps=2", "data.batch_size=8"]
TEXTS = ["Where is the town of Wrenfield?", "A market has been held in the square every Saturday.", "wool",
         "Ünïcödé text, with punctuation!"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Monitors val/loss (mode min): the int8 gate still compares nDCG@10. export=onnx through train.py."""
    run = tmp_path_factory.mktemp("emb_onnx") / "run"
    run_train([*TINY, "task.monitor=val/loss", "task.mode=min", "export=onnx"], run)
    return run


def test_train_exports_the_embedding_graph_that_predicts_the_run_embeddings(run_dir):
    onnx_dir = run_dir / "onnx"
    info = json.loads((onnx_dir / bonnx.INFO_NAME).read_text())
    assert info["outputs"] == ["embedding"] and info["task"]["family"] == "embedding"
    report = json.loads((onnx_dir / bonnx.REPORT_NAME).read_text())
    assert report["onnx_fp32_check"]["passed"] and report["onnx_fp32_vs_pytorch"]["passed"]
    assert report["onnx_fp32_vs_pytorch"]["min_cosine"] > 0.9999
    assert "ndcg_at_10" in report["dev"]["onnx_fp32"]["scores"]
    want = Predictor.from_run(run_dir).embed_texts(TEXTS)
    got = Predictor.from_run(onnx_dir).embed_texts(TEXTS)
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)  # task.normalize=true: in the graph


def test_predict_command_on_the_onnx_folder_writes_the_run_embeddings(run_dir, tmp_path):
    from bertlab.predict import main

    (tmp_path / "in.txt").write_text("".join(t + "\n" for t in TEXTS))
    records = {}
    for model in (run_dir, run_dir / "onnx"):
        out = tmp_path / f"{model.name}.jsonl"
        main([str(model), str(tmp_path / "in.txt"), "--output", str(out), "--no-progress", "--batch-size", "3"])
        records[model.name] = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["text"] for r in records["onnx"]] == TEXTS
    got = np.array([r["embedding"] for r in records["onnx"]])
    want = np.array([r["embedding"] for r in records["run"]])
    assert np.abs(got - want).max() <= 1e-5


def test_int8_is_gated_on_ndcg_whatever_the_run_monitors(run_dir, tmp_path):
    out = tmp_path / "int8"
    report = bonnx.export_onnx(run_dir, out, quantize="int8", max_drop=100.0)
    gate = report["onnx_int8_vs_fp32"]
    assert gate["metric"] == "ndcg_at_10" and gate["passed"]  # not val/loss, the run's monitor
    assert gate["drop_points"] == pytest.approx(100 * (gate["fp32"] - gate["int8"]), abs=1e-3)
    assert gate["agreement"] is None and 0.5 < gate["min_cosine"] <= 1.0
    assert "ndcg_at_10" in bonnx.gate_line(report) and "lowest cosine" in bonnx.gate_line(report)
    predictor = Predictor.from_run(out)  # auto: the checked int8 graph
    assert predictor.model.path.name == bonnx.INT8_NAME
    emb = predictor.embed_texts(TEXTS)
    fp32 = Predictor.from_run(out, backend="onnx").embed_texts(TEXTS)
    cos = (emb * fp32).sum(1) / np.linalg.norm(emb, axis=1) / np.linalg.norm(fp32, axis=1)
    assert cos.min() > 0.5


def test_an_int8_graph_that_loses_ndcg_is_removed(run_dir, tmp_path):
    out = tmp_path / "refused"
    with pytest.raises(bonnx.QualityGateError, match="points of ndcg_at_10 on the run's dev set"):
        bonnx.export_onnx(run_dir, out, quantize="int8", max_drop=-100.0)  # any result fails a negative limit
    assert not (out / bonnx.INT8_NAME).exists() and (out / bonnx.ONNX_NAME).is_file()
    assert "int8" not in json.loads((out / bonnx.INFO_NAME).read_text())["files"]


def test_a_similarity_run_is_gated_on_spearman(tmp_path):
    run = tmp_path / "sts"
    run_train([*TINY, "data.val_file=stsb/dev.tsv", "data.text_column=sentence1", "data.text_pair_column=sentence2",
               "data.label_column=score", "task.monitor=val/spearmanr"], run)
    report = bonnx.export_onnx(run, tmp_path / "out", quantize="int8", max_drop=100.0)
    assert report["onnx_int8_vs_fp32"]["metric"] == "spearmanr"


def test_gate_metric_by_kind():
    from bertlab.runtime.config import TaskSpec

    emb = TaskSpec(name="embedding", family="embedding", monitor="val/loss", mode="min")
    assert bonnx.gate_metric(emb, {"ndcg_at_10": 0.5, "loss": 1.0}) == ("ndcg_at_10", "max")
    assert bonnx.gate_metric(emb, {"spearmanr": 0.5}) == ("spearmanr", "max")
    sst2 = TaskSpec(name="sst2", family="sequence", monitor="val/accuracy", mode="max")
    assert bonnx.gate_metric(sst2, {"accuracy": 0.9}) == ("accuracy", "max")
    assert bonnx.metric_points(emb, 0.50, 0.49, "max") == pytest.approx(1.0)


def test_retrieve_searches_with_the_onnx_folder_as_with_the_run(run_dir, tmp_path):
    from bertlab.retrieve import main

    data = FIXTURES / "retrieval"
    metrics = {}
    for model in (run_dir, run_dir / "onnx"):
        out = tmp_path / model.name
        main([str(model), "--corpus", str(data / "corpus.tsv"), "--queries", str(data / "queries.tsv"), "--qrels",
              str(data / "qrels.txt"), "--out", str(out), "--no-progress"])
        metrics[model.name] = json.loads((out / "metrics.json").read_text())
    assert metrics["onnx"] == pytest.approx(metrics["run"], abs=1e-6)
