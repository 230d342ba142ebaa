"""The int8 gate certifies what ``bertlab.predict`` serves: an input's int8 output is its own.

Kind: a graph whose activations are quantized with a scale taken over more than the input itself. onnxruntime's
dynamic int8 (``DynamicQuantizeLinear``: one scale per tensor per run) made a text's scores depend on the other
texts of its batch and on how far the batch was padded; the gate batched the dev set as the dev loader does,
``bertlab.predict`` as prediction does, so the same int8 graph on the same dev file scored 0.8108 in the gate and
0.8062 served. bertlab's int8 graph now takes one activation scale per row (token,
:mod:`bertlab.inference.onnx_int8`), so a text's output is the same alone or in any batch and the graph runs
batched; a graph with per-tensor scales (an older export's) is still run one input at a time, cut to its own
length (:func:`~bertlab.inference.onnx_session.runs_per_input`).

Cases: the gate's dev score equals the score of ``bertlab.predict``'s records on the dev file at a batch size
that splits it unevenly (regression: Pearson; classification: loss and accuracy); the same input's int8 output
is bitwise the same alone, beside longer and shorter inputs, padded further, and at other batch sizes, for a
classifier, a tagger (per-token outputs), multiple choice and a classifier reading long documents in windows;
a per-tensor graph is run per input and gives each input its own output.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURE_DATA, run_train

pytest.importorskip("onnxruntime")

from bertlab.inference import onnx as bonnx  # noqa: E402
from bertlab.inference.batches import pad_batch  # noqa: E402
from bertlab.inference.predictor import Predictor  # noqa: E402
from bertlab.predict import main as predict_main  # noqa: E402

QUICK = ("model=bert_tiny", "trainer.max_epochs=1", "trainer.limit_train_batches=2")
CASES = {
    "sequence": ("task=sst2",),
    "regression": ("task=stsb",),
    "token": ("task=conll2003",),
    "choice": ("task=swag",),
    "windows": ("task=sst2", "data.max_seq_length=16", "data.max_windows_per_batch=2"),
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("int8_batches")
    @functools.cache
    def get(name: str) -> Path:
        run_train([*QUICK, *CASES[name]], root / name / "run")
        bonnx.export_onnx(root / name / "run", root / name / "onnx", quantize="int8", max_drop=100.0)
        return root / name / "onnx"

    return get


def _predict_dev(export: Path, task: str, out: Path, batch_size: int = 5) -> tuple[list[dict], list[dict]]:
    """``bertlab.predict`` on the run's dev file through the int8 graph: its records and the file's rows."""
    dev = FIXTURE_DATA / task / "dev.tsv"
    predict_main([str(export), str(dev), "--backend", "onnx-int8", "--batch-size", str(batch_size),
                  "--no-progress", "--output", str(out)])
    records = [json.loads(line) for line in out.read_text().splitlines()]
    lines = dev.read_text().splitlines()
    rows = [dict(zip(lines[0].split("\t"), line.split("\t"))) for line in lines[1:]]
    assert len(records) == len(rows) > 10
    return records, rows


def _gate_int8(export: Path) -> dict:
    return json.loads((export / bonnx.REPORT_NAME).read_text())["dev"]["onnx_int8"]["scores"]


@pytest.mark.parametrize("batch_size", [5, 3])
def test_the_gate_scores_what_predict_serves_regression(exports, tmp_path, batch_size):
    export = exports("regression")
    records, rows = _predict_dev(export, "stsb", tmp_path / "p.jsonl", batch_size)
    served = np.array([r["value"] for r in records], dtype=np.float64)
    target = np.array([float(r["score"]) for r in rows])
    pearson = float(np.corrcoef(served, target)[0, 1])
    # A tiny model's values are nearly constant: its Pearson moves with any change of the values themselves.
    assert abs(pearson - _gate_int8(export)["pearson"]) <= 1e-5


def test_the_gate_scores_what_predict_serves_classification(exports, tmp_path):
    export = exports("sequence")
    records, rows = _predict_dev(export, "sst2", tmp_path / "p.jsonl", 5)
    labels = [r["label"] for r in rows]
    loss = -np.mean([math.log(r["scores"][y]) for r, y in zip(records, labels)])
    accuracy = np.mean([r["label"] == y for r, y in zip(records, labels)])
    gate = _gate_int8(export)
    assert abs(loss - gate["loss"]) <= 1e-5 and accuracy == pytest.approx(gate["accuracy"])


def _features(predictor: Predictor, texts: list[str]) -> list[dict]:
    ids = predictor.tokenizer.encode_ids_batch(texts)
    return [{"input_ids": i, "token_type_ids": [0] * len(i)} for i in ids]


TEXTS = ["a gripping , funny film", "x", "the plot is a mess and the actors look bored in every single scene of it",
         "not bad", "an hour too long , and yet it never once drags or lets go of you"]


@pytest.mark.parametrize("name", ["sequence", "token", "windows"])
def test_an_inputs_int8_output_is_its_own(exports, name):
    predictor = Predictor.from_run(exports(name), backend="onnx-int8")
    inputs = TEXTS if name != "token" else [t.split() for t in TEXTS]
    alone = [predictor([x], batch_size=1)[0] for x in inputs]
    for size in (2, 3, 5):
        assert predictor(inputs, batch_size=size) == alone
    assert predictor(list(reversed(inputs)), batch_size=4) == list(reversed(alone))


def test_padding_and_neighbours_change_no_int8_logit(exports):
    predictor = Predictor.from_run(exports("sequence"), backend="onnx-int8")
    graph, pad = predictor.model, predictor.tokenizer.pad_id
    feats = _features(predictor, TEXTS)
    alone = graph(pad_batch(feats[:1], pad))
    batch = pad_batch(feats, pad)
    assert np.array_equal(graph(batch)[0], alone[0])
    wider = {k: np.pad(v, ((0, 0), (0, 7)), constant_values=pad if k == "input_ids" else 0) for k, v in batch.items()}
    assert np.array_equal(graph(wider), graph(batch))


def test_each_choice_is_scored_alone(exports):
    predictor = Predictor.from_run(exports("choice"), backend="onnx-int8")
    graph, pad = predictor.model, predictor.tokenizer.pad_id
    ids = predictor.tokenizer.encode_ids_batch(TEXTS)
    one = {"input_ids": [ids[0], ids[1]], "token_type_ids": [[0] * len(ids[0]), [0] * len(ids[1])]}
    other = {"input_ids": [ids[2], ids[3], ids[4]], "token_type_ids": [[0] * len(i) for i in ids[2:]]}
    alone = graph({k: v for k, v in pad_batch([one], pad).items() if k != "choice_mask"})
    both = graph({k: v for k, v in pad_batch([one, other], pad).items() if k != "choice_mask"})
    assert np.array_equal(both[0, :2], alone[0])


def test_bertlab_int8_runs_batched_and_per_tensor_graphs_per_input(exports, tmp_path):
    """bertlab's int8 graph (one activation scale per row) is batch-independent by construction, so it runs
    batched, in the gate and in prediction; a graph quantized with one scale per tensor (onnxruntime's dynamic
    quantization, as the int8 graphs of older exports) is still found and run one input at a time."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from bertlab.inference.onnx_session import OnnxSession, runs_per_input

    export = exports("sequence")
    assert not runs_per_input(export / bonnx.INT8_NAME) and not runs_per_input(export / bonnx.ONNX_NAME)
    assert not Predictor.from_run(export, backend="onnx-int8").model.per_input
    record = json.loads((export / bonnx.INFO_NAME).read_text())["int8_check"]
    assert record["per_input"] is False

    older = tmp_path / "per_tensor.int8.onnx"
    quantize_dynamic(str(export / bonnx.ONNX_NAME), str(older), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul"])
    session = OnnxSession(older, "sequence")
    assert runs_per_input(older) and session.per_input
    predictor = Predictor.from_run(export, backend="onnx")
    feats = _features(predictor, TEXTS)
    batch = pad_batch(feats, predictor.tokenizer.pad_id)
    alone = np.concatenate([session(pad_batch([f], predictor.tokenizer.pad_id)) for f in feats])
    assert np.array_equal(session(batch), alone)
