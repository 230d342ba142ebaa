"""ONNX export with its quality gate: per head, the fp32 graph equals PyTorch on the run's dev set and on odd
shapes (batch 1, odd lengths, the longest length), int8 is scored against fp32, the gate fails a broken
quantization, and predictions from the export folder equal the run's."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import records_close, run_train
from test_entry_imports import heavy_imports

pytest.importorskip("onnxruntime")

from bertlab.inference import onnx as bonnx  # noqa: E402
from bertlab.inference.export import load_checkpoint_model  # noqa: E402
from bertlab.inference.predictor import Predictor  # noqa: E402

QUICK = ("model=bert_tiny", "trainer.max_epochs=1", "trainer.limit_train_batches=3")
CASES = {
    "sequence": ("task=sst2",),
    "regression": ("task=stsb",),
    "token": ("task=conll2003",),
    "span": ("task=squad", "data.max_seq_length=128", "data.doc_stride=32"),
    "choice": ("task=swag",),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("onnx")
    @functools.cache
    def get(name: str) -> Path:
        run_train([*QUICK, *CASES[name]], root / name)
        return root / name

    return get


@pytest.mark.parametrize("name", list(CASES))
def test_fp32_graph_equals_pytorch_and_int8_is_gated(runs, tmp_path, name):
    run_dir = runs(name)
    out = tmp_path / "onnx"
    report = bonnx.export_onnx(run_dir, out, quantize="int8", max_drop=100.0)
    assert (out / bonnx.ONNX_NAME).is_file() and (out / bonnx.INT8_NAME).is_file()
    assert json.loads((out / bonnx.REPORT_NAME).read_text()) == json.loads(json.dumps(report))
    assert report["onnx_fp32_vs_pytorch"]["max_abs_logit_diff"] <= 1e-4
    assert report["onnx_fp32_vs_pytorch"]["passed"] and report["onnx_fp32_check"]["passed"]
    assert report["onnx_fp32_check"]["max_abs_diff"] <= 1e-4 and max(report["onnx_fp32_check"]["lengths"]) >= 128
    assert report["dev"]["onnx_fp32"]["scores"]["num_examples"] == report["dev"]["pytorch"]["scores"]["num_examples"]
    gate = report["onnx_int8_vs_fp32"]
    assert gate["passed"] and gate["size_ratio"] > 1.0
    if name != "regression":
        assert 0.0 <= gate["agreement"] <= 1.0


@pytest.mark.parametrize("shape", [(1, 3), (1, 17), (5, 9), (3, 128)])
def test_dynamic_shapes(runs, tmp_path, shape):
    """Batch 1, odd lengths and the longest length, with padding in every batch of more than one row."""
    run_dir = runs("sequence")
    ckpt = json.loads((run_dir / "metrics.json").read_text())["best_checkpoint"]
    loaded = load_checkpoint_model(ckpt)
    path = tmp_path / "m.onnx"
    bonnx.export_graph(load_checkpoint_model(ckpt).model, loaded.task, path)
    graph = bonnx.OnnxTaskModel(path, "sequence")
    ids = torch.randint(5, loaded.model.encoder.config.vocab_size, shape)
    mask = torch.ones_like(ids)
    if shape[0] > 1:
        mask[-1, shape[1] // 2:] = 0
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    with torch.no_grad():
        want = loaded.model.eval()(batch)
    torch.testing.assert_close(graph(batch), want, atol=1e-4, rtol=0)


def test_gate_fails_a_broken_quantization(tmp_path, monkeypatch):
    """A quantizer that ruins the model (its int8 graph negates the logits: every decision flipped) on a run that
    fits its dev sentences: the export fails with the figures, and leaves no int8 file."""
    from conftest import FIXTURE_DATA

    lines = (FIXTURE_DATA / "sst2" / "train.tsv").read_text().splitlines()
    dev = tmp_path / "dev.tsv"
    dev.write_text("\n".join(lines[:-1]) + "\n")  # the training sentences: a fitted model scores high on them
    run_dir = tmp_path / "run"
    run_train(["model=bert_tiny", "task=sst2", "trainer.max_epochs=12", "optim.lr=2e-3", "optim.warmup_ratio=0",
               "model.hidden_dropout_prob=0", f"data.val_file={dev}"], run_dir)
    real = bonnx.quantize_int8

    def broken(fp32, int8):
        import onnx
        from onnx import helper

        real(fp32, int8)
        model = onnx.load(str(int8))
        out = model.graph.output[0].name
        for node in model.graph.node:
            node.output[:] = [f"{o}_raw" if o == out else o for o in node.output]
        model.graph.node.append(helper.make_node("Neg", [f"{out}_raw"], [out]))
        onnx.save(model, str(int8))

    monkeypatch.setattr(bonnx, "quantize_int8", broken)
    out = tmp_path / "onnx"
    with pytest.raises(bonnx.QualityGateError, match="points of accuracy") as err:
        bonnx.export_onnx(run_dir, out, quantize="int8", max_drop=1.0)
    assert "--force" in str(err.value)
    assert not (out / bonnx.INT8_NAME).exists() and (out / bonnx.ONNX_NAME).is_file()
    report = json.loads((out / bonnx.REPORT_NAME).read_text())
    assert report["onnx_int8_vs_fp32"]["passed"] is False and report["onnx_int8_vs_fp32"]["drop_points"] > 50
    assert report["onnx_int8_vs_fp32"]["agreement"] < 0.5
    report = bonnx.export_onnx(run_dir, tmp_path / "forced", quantize="int8", max_drop=1.0, force=True)
    assert (tmp_path / "forced" / bonnx.INT8_NAME).is_file()


@pytest.mark.parametrize("name", ["sequence", "token", "span"])
def test_predict_records_equal_across_backends(runs, tmp_path, name):
    run_dir = runs(name)
    out = tmp_path / "onnx"
    bonnx.export_onnx(run_dir, out, check_dev=False)
    inputs = {
        "sequence": ["a gorgeous, witty film .", "the plot is a mess", "x"],
        "token": ["John Smith visited New York .", "Paris"],
        "span": [{"question": "Who wrote it?", "context": "It was written by Jane Doe in 1999 in London."}],
    }[name]
    torch_records = Predictor.from_run(run_dir)(inputs)
    onnx_records = Predictor.from_run(out)(inputs)
    assert len(torch_records) == len(onnx_records)
    for a, b in zip(torch_records, onnx_records):
        assert records_close(a, b), (a, b)


ONNX_INPUTS = {
    "sequence": [{"text": "a gorgeous, witty film ."}, {"text": "the plot is a mess"}],
    "token": [{"text": "John Smith visited New York ."}, {"tokens": ["Paris", "is", "big"]}],
    "span": [{"id": "q1", "question": "Who wrote it?", "context": "It was written by Jane Doe in 1999 in London."}],
    "choice": [{"context": "A girl sits down at the piano.", "choices": ["She plays.", "She bows.", "She goes."]}],
}


@pytest.mark.parametrize("name", list(ONNX_INPUTS))
def test_predicting_from_an_onnx_export_loads_no_torch(runs, tmp_path, name):
    """onnxruntime, tokenizers and numpy only: every family's records from an ONNX folder, in a fresh process,
    without torch, Lightning, torchmetrics or transformers; the records those of Predictor in Python."""
    out = tmp_path / "onnx"
    bonnx.export_onnx(runs(name), out, quantize="int8", check_dev=False, force=True)  # unchecked: forced
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("".join(json.dumps(x) + "\n" for x in ONNX_INPUTS[name]))
    for backend in ("onnx", "onnx-int8"):
        records = tmp_path / f"{backend}.jsonl"
        heavy, done = heavy_imports(["-m", "bertlab.predict", str(out), str(inputs), "--backend", backend,
                                     "--no-progress", "--output", str(records)],
                                    ("torch", "lightning", "torchmetrics", "transformers"))
        assert done.returncode == 0, done.stderr[-2000:]
        assert not heavy, f"{name} {backend} imported {heavy}"
        got = [json.loads(line) for line in records.read_text().splitlines()]
        assert got == Predictor.from_run(out, backend=backend)(ONNX_INPUTS[name])


def _perturb_logits(path, by: float) -> None:
    """The graph's first output plus ``by``: a graph that no longer computes what the run computes."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(path))
    out = model.graph.output[0].name
    for node in model.graph.node:
        node.output[:] = [f"{o}_raw" if o == out else o for o in node.output]
    model.graph.initializer.append(numpy_helper.from_array(np.array(by, dtype=np.float32), "perturbation"))
    model.graph.node.append(helper.make_node("Add", [f"{out}_raw", "perturbation"], [out]))
    onnx.save(model, str(path))


def _export_graphs_off_by(monkeypatch, delta: float) -> None:
    """Every graph the export writes from now on has its logits moved by ``delta`` (a graph that differs)."""
    real = bonnx.export_graph

    def broken(model, task, path, **kwargs):
        inputs = real(model, task, path, **kwargs)
        _perturb_logits(path, delta)
        return inputs

    monkeypatch.setattr(bonnx, "export_graph", broken)


@pytest.mark.parametrize("name", ["sequence", "span"])
def test_export_fails_on_a_graph_that_differs_from_pytorch(runs, tmp_path, monkeypatch, capsys, name):
    """A graph off by 1e-3 (ten times the limit): the command exits 1 with the figures, and the folder is not an
    export (no graph, no bertlab record; the report says what was measured); --force does not keep it."""
    from bertlab.export import main

    _export_graphs_off_by(monkeypatch, 1e-3)
    out = tmp_path / "onnx"
    with pytest.raises(SystemExit) as exit_:
        main([str(runs(name)), str(out), "--format", "onnx", "--quantize", "int8", "--force"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "does not compute what the run computes" in err and "1.00e-03" in err and "limit is 0.0001" in err
    assert not (out / bonnx.ONNX_NAME).exists() and not (out / bonnx.INT8_NAME).exists()
    assert not bonnx.is_onnx_folder(out)
    report = json.loads((out / bonnx.REPORT_NAME).read_text())
    assert report["onnx_fp32_check"]["passed"] is False and report["onnx_fp32_check"]["max_abs_diff"] > 9e-4
    with pytest.raises(Exception, match="not a bertlab run dir|not an ONNX export|does not exist"):
        Predictor.from_run(out, backend="onnx")


def test_the_dev_set_comparison_gates_too(runs, tmp_path, monkeypatch):
    """The dev-set comparison is a gate of its own (a graph wrong only on what the dev set holds)."""
    _export_graphs_off_by(monkeypatch, 1e-3)
    monkeypatch.setattr(bonnx, "check_graph", lambda *a, **k: {"passed": True, "lengths": [8], "cases": 1,
                                                                "max_abs_diff": 0.0})
    out = tmp_path / "onnx"
    with pytest.raises(bonnx.GraphMismatchError, match="on the run's dev set"):
        bonnx.export_onnx(runs("sequence"), out)
    assert not bonnx.is_onnx_folder(out) and not (out / bonnx.ONNX_NAME).exists()
    assert json.loads((out / bonnx.REPORT_NAME).read_text())["onnx_fp32_vs_pytorch"]["passed"] is False
