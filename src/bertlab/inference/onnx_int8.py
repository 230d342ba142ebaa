"""int8 quantization of an exported graph, one activation scale per row (token).

Every MatMul whose second input is a 2-D weight (the encoder's and the head's linear layers; attention's two
products of activations and a 2-D classifier's Gemm stay fp32, as do the embedding tables, which are looked up,
not multiplied) becomes:

- the weight: int8, one scale per output channel, symmetric, 7 bits (−63 … 63);
- the activation: the input flattened to rows ``(M, K)``, each row quantized with its own scale
  (``max |x| / 127``, symmetric, stored as uint8 around 128): ``QuantizeLinear`` along axis 0;
- the integer product times the weight's column scales (onnxruntime's ``MatMulIntegerToFloat``, which applies
  them in the product's own output pass), then times the row's scale, back to the input's shape.

The int8 graph therefore runs on onnxruntime (its ``com.microsoft`` operator); the fp32 graph is plain ONNX.

Why per row: a scale taken over the whole tensor (onnxruntime's dynamic quantization, ``DynamicQuantizeLinear``)
depends on every other text of the batch and on the padding, so the same text scored differently at another
batch size, and such a graph must run one input at a time to be served as it was checked
(:func:`~bertlab.inference.onnx_session.runs_per_input`). A row's own scale sees that row only: the graph's
output for a text is the same alone or batched, so the gate's batched dev pass scores what prediction serves, at
batched speed, and a row's scale also fits it better than one scale for a whole batch.

Why 7-bit weights: on x86 CPUs without VNNI (AVX2), the uint8 × int8 kernel adds pairs of products in 16 bits,
which saturate above 32,767 (255 · 127 · 2 = 64,770); with weights within ±63 a pair is at most 32,130, so the
integer products are exact on every CPU (onnxruntime's quantizer documents the same trade as ``reduce_range``);
the fp32 steps around them are onnxruntime's kernels as in any graph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bertlab.inference.onnx_session import require_onnx
from bertlab.runtime.errors import ConfigError

WEIGHT_MAX = 63  # 7-bit symmetric weights: uint8 x int8 pair sums stay within int16 (module docstring)
ACTIVATION_MAX = 127  # a row's largest |x| maps to 127 around the zero point 128
ZERO_POINT = 128
ORT_DOMAIN = "com.microsoft"  # MatMulIntegerToFloat: onnxruntime's contrib op (the int8 graph needs onnxruntime)


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (K, N) fp32 weight as int8 values within ±:data:`WEIGHT_MAX` and one fp32 scale per output column."""
    scale = np.abs(w).max(axis=0) / WEIGHT_MAX
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale), -WEIGHT_MAX, WEIGHT_MAX).astype(np.int8)
    return q, scale


def quantize_int8(fp32: Path, int8: Path) -> int:
    """Write ``int8``: the graph ``fp32`` with every weight MatMul quantized per row (module docstring). Returns
    how many MatMuls were quantized."""
    onnx, _ = require_onnx()
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(fp32))
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:
        raise ConfigError(f"{fp32}: int8 quantization needs a graph of ONNX opset 13 or later (per-axis "
                          f"QuantizeLinear); this one is opset {opset}. Export it again with bertlab.export")
    weights = {t.name: t for t in graph.initializer}
    graph_inputs = {i.name for i in graph.input}  # an initializer that is also an input can be overridden
    consts = [
        numpy_helper.from_array(np.array(ZERO_POINT, dtype=np.uint8), "int8/zero_point"),
        numpy_helper.from_array(np.array(1.0 / ACTIVATION_MAX, dtype=np.float32), "int8/inv_max"),
        numpy_helper.from_array(np.array(np.finfo(np.float32).tiny, dtype=np.float32), "int8/tiny"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "int8/flat"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "int8/zero"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "int8/one"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "int8/axis1"),
    ]

    def reduce(op: str, x: str, y: str):
        """``op`` over each row (axis 1), kept as (M, 1): ``axes`` an attribute before opset 18, an input since."""
        if opset >= 18:
            return helper.make_node(op, [x, "int8/axis1"], [y], keepdims=1)
        return helper.make_node(op, [x], [y], axes=[1], keepdims=1)

    nodes, used, count, rows_of = [], set(), 0, {}
    for node in graph.node:
        name = node.input[1] if node.op_type == "MatMul" and len(node.input) == 2 else None
        tensor = weights.get(name) if name not in graph_inputs else None
        if tensor is None or len(tensor.dims) != 2 or tensor.data_type != TensorProto.FLOAT:
            nodes.append(node)
            continue
        count += 1
        used.add(name)
        k, n = tensor.dims
        q, scale = quantize_weight(numpy_helper.to_array(tensor).astype(np.float32))
        p = f"int8/{count}/"
        graph.initializer.extend([numpy_helper.from_array(q, p + "weight"),
                                  numpy_helper.from_array(scale, p + "weight_scale"),
                                  numpy_helper.from_array(np.array([n], dtype=np.int64), p + "n")])
        x, y = node.input[0], node.output[0]
        if x not in rows_of:  # an input read by several MatMuls (attention's query, key and value) is quantized once
            r = f"int8/rows{len(rows_of) + 1}/"
            graph.initializer.append(numpy_helper.from_array(np.array([-1, k], dtype=np.int64), r + "shape"))
            nodes += [
                helper.make_node("Shape", [x], [r + "in_shape"]),
                helper.make_node("Reshape", [x, r + "shape"], [r + "rows"]),  # (M, K)
                # max |x| of each row as max(max x, −min x): two reads of the rows, no |x| written
                reduce("ReduceMax", r + "rows", r + "hi"),
                reduce("ReduceMin", r + "rows", r + "lo"),
                helper.make_node("Neg", [r + "lo"], [r + "minus_lo"]),
                helper.make_node("Max", [r + "hi", r + "minus_lo", "int8/tiny"], [r + "max_pos"]),
                helper.make_node("Mul", [r + "max_pos", "int8/inv_max"], [r + "scale"]),  # (M, 1)
                helper.make_node("Reshape", [r + "scale", "int8/flat"], [r + "scale_1d"]),  # (M,)
                helper.make_node("Shape", [r + "scale_1d"], [r + "m"]),
                helper.make_node("Expand", ["int8/zero_point", r + "m"], [r + "zero"]),
                helper.make_node("QuantizeLinear", [r + "rows", r + "scale_1d", r + "zero"], [r + "q"], axis=0),
                helper.make_node("Slice", [r + "in_shape", "int8/zero", "int8/flat"], [r + "lead"]),
            ]
            rows_of[x] = r
        r = rows_of[x]
        nodes += [
            # the integer product, to float and times the weight's column scales in the kernel's own output pass
            helper.make_node("MatMulIntegerToFloat", [r + "q", p + "weight", "int8/one", p + "weight_scale",
                                                      "int8/zero_point"], [p + "out_w"], domain=ORT_DOMAIN),
            helper.make_node("Mul", [p + "out_w", r + "scale"], [p + "out_rows"]),
            helper.make_node("Concat", [r + "lead", p + "n"], [p + "out_shape"], axis=0),
            helper.make_node("Reshape", [p + "out_rows", p + "out_shape"], [y], name=node.name),
        ]
    if count:
        graph.initializer.extend(consts)
        if not any(o.domain == ORT_DOMAIN for o in model.opset_import):
            model.opset_import.append(helper.make_opsetid(ORT_DOMAIN, 1))
    referenced = {name for node in nodes for name in node.input}  # a weight another node reads stays too
    kept = [t for t in graph.initializer if t.name not in used or t.name in referenced]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    onnx.save(model, str(int8))
    return count


__all__ = ["quantize_int8", "quantize_weight"]
