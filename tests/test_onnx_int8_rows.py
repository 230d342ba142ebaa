"""bertlab's int8 graph (:mod:`bertlab.inference.onnx_int8`): every weight MatMul quantized, one activation scale
per row, so each input's output is its own at any batch and padding, for every family of the registry; close to
the fp32 graph; weights within ±63 (no saturation of AVX2's 16-bit pair sums); a weight another node also reads
is kept."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")

from test_onnx_graph import FAMILIES, exported, tiny_model  # noqa: E402

from bertlab.inference.onnx_int8 import WEIGHT_MAX, quantize_int8, quantize_weight  # noqa: E402
from bertlab.inference.onnx_session import OnnxSession, runs_per_input  # noqa: E402


def weight_matmuls(path) -> int:
    model = onnx.load(str(path))
    weights = {t.name for t in model.graph.initializer if len(t.dims) == 2 and t.data_type == onnx.TensorProto.FLOAT}
    return sum(n.op_type == "MatMul" and n.input[1] in weights for n in model.graph.node)


def batch(lengths: list[int], width: int, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = (np.arange(width)[None] < np.asarray(lengths)[:, None]).astype(np.int64)
    ids = rng.integers(5, vocab, size=(len(lengths), width)) * mask
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


@pytest.mark.parametrize("model_type", FAMILIES)
def test_every_weight_matmul_int8_and_each_row_its_own(tmp_path, model_type):
    model, task = tiny_model(model_type, "token")
    exported(model, task, tmp_path / "m.onnx", False)
    fp32_count = weight_matmuls(tmp_path / "m.onnx")
    assert quantize_int8(tmp_path / "m.onnx", tmp_path / "q.onnx") == fp32_count > 0
    assert weight_matmuls(tmp_path / "q.onnx") == 0 and not runs_per_input(tmp_path / "q.onnx")
    fp32, int8 = OnnxSession(tmp_path / "m.onnx", "token"), OnnxSession(tmp_path / "q.onnx", "token")
    vocab = model.encoder.config.vocab_size
    lengths = [1, 7, 23, 40, 12]
    feed = batch(lengths, 40, vocab)
    out = int8(feed)
    # Each row alone, cut to its own tokens, and the batch padded further: bitwise the same at real positions.
    for i, n in enumerate(lengths):
        alone = int8({k: v[i:i + 1, :n] for k, v in feed.items()})
        assert np.array_equal(alone[0], out[i, :n])
    wider = {k: np.pad(v, ((0, 0), (0, 9))) for k, v in feed.items()}
    assert np.array_equal(int8(wider)[:, :40][feed["attention_mask"] == 1], out[feed["attention_mask"] == 1])
    # Close to fp32 at real positions: within 5 % of the logits' range.
    ref, real = fp32(feed), feed["attention_mask"] == 1
    assert np.abs(out[real] - ref[real]).max() <= 0.05 * np.abs(ref[real]).max()


def test_weights_within_seven_bits_one_scale_per_column():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((48, 5)).astype(np.float32)
    w[:, 3] = 0.0  # a column of zeros keeps a usable scale
    q, scale = quantize_weight(w)
    assert q.dtype == np.int8 and np.abs(q).max() == WEIGHT_MAX and scale.shape == (5,)
    assert np.all(np.abs(q[:, [0, 1, 2, 4]]).max(0) == WEIGHT_MAX) and np.all(q[:, 3] == 0)
    assert np.abs(q * scale - w).max() <= scale.max() / 2 + 1e-7


def test_a_weight_other_nodes_read_is_kept(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 4])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["x", "w"], ["z"])],
                              "g", [x], [y, z], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert quantize_int8(tmp_path / "m.onnx", tmp_path / "q.onnx") == 1
    import onnxruntime as ort

    x_val = np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32)
    out_y, out_z = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": x_val})
    assert np.array_equal(out_z, x_val + w) and np.abs(out_y - x_val @ w).max() <= 0.05 * np.abs(x_val @ w).max()


def _matmul_graph(path, opset: int, w: np.ndarray) -> None:
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", w.shape[0]])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "t", w.shape[1]])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.mark.parametrize("opset", [13, 17, 18, 21])
def test_any_opset_from_13_and_rank_3_inputs(tmp_path, opset):
    """ReduceMax/ReduceMin take their axes as an attribute before opset 18 and as an input since; a (B, T, K)
    input comes back as (B, T, N)."""
    import onnxruntime as ort

    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    _matmul_graph(tmp_path / "m.onnx", opset, w)
    assert quantize_int8(tmp_path / "m.onnx", tmp_path / "q.onnx") == 1
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    (y,) = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert y.shape == (2, 3, 5) and np.abs(y - x @ w).max() <= 0.05 * np.abs(x @ w).max()


def test_a_graph_older_than_opset_13_is_refused(tmp_path):
    from bertlab.runtime.errors import ConfigError

    _matmul_graph(tmp_path / "m.onnx", 12, np.ones((4, 4), dtype=np.float32))
    with pytest.raises(ConfigError, match="opset 13 or later"):
        quantize_int8(tmp_path / "m.onnx", tmp_path / "q.onnx")
