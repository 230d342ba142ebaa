"""The exported ONNX graph computes what PyTorch computes at every length, for every family of the registry and
every prediction head: lengths beyond each local window, relative-position bucket and position table (the export
check's own hard lengths), padded and unpadded, a batch of one, pairs, long documents of several windows; run
with onnxruntime. And the check finds a graph that is wrong only past a window (the bug of a window frozen at
the traced length, put back on purpose)."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")

from test_families import tiny_hf_config  # noqa: E402

from bertlab.inference import onnx as bonnx  # noqa: E402
from bertlab.inference.onnx_check import (  # noqa: E402
    FP32_TOLERANCE,
    LENGTH_FIELDS,
    TRACE_LENGTH,
    check_graph,
    hard_lengths,
    length_boundaries,
)
from bertlab.models import deberta, kernels  # noqa: E402
from bertlab.models.assemble import assemble, needs_pooler  # noqa: E402
from bertlab.models.families import families, family_spec, tiny_config  # noqa: E402
from bertlab.runtime.config import HeadConfig, TaskSpec  # noqa: E402
from bertlab.tasks.families import build_family  # noqa: E402

FAMILIES = sorted(families())  # the registry: a family added there is checked here too
HEADS = {"sequence": "sequence", "token": "token", "span": "qa", "multiple_choice": "multiple_choice"}
# Boundaries as hard as the issue's: ModernBERT's local window of 16 (8 each side: the traced length itself), DeBERTa
# exact up to 4 positions and log-bucketed beyond; position tables of 64, every position of them used (max_len).
# Set on every family whose tiny config has the key (FamilySpec.tiny_config).
HARD = dict(local_attention=16, position_buckets=8, max_relative_positions=32)


def tiny_model(model_type: str, head_kind: str, pooling: str = "max"):
    """A tiny random model of the family with its stock head; weights moved off their init (no zero biases, no
    unit norms), so that every position and length changes the outputs."""
    hard = {key: value for key, value in HARD.items() if key in tiny_config(model_type)}
    config = family_spec(model_type).read_config(tiny_hf_config(model_type, **hard).to_dict(), "test")
    family_name = HEADS[head_kind]
    task = TaskSpec(name=family_name, family=family_name,
                    labels=["a", "b", "c"] if family_name in ("sequence", "token") else None)
    family = build_family(task, 3, task.labels, None)
    head = HeadConfig(pooling="pooler", window_pooling=pooling)
    torch.manual_seed(0)
    model = assemble(config, head, family.build_head, head_kind,
                     add_pooling_layer=needs_pooler(config, family_name, head)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model, task


def exported(model, task, path, windows: bool):
    bonnx.export_graph(copy.deepcopy(model), task, path, windows=windows)
    return bonnx.OnnxTaskModel(path, task.family)


@pytest.mark.parametrize("head_kind", list(HEADS))
@pytest.mark.parametrize("model_type", FAMILIES)
def test_graph_equals_pytorch_at_every_hard_length(tmp_path, model_type, head_kind):
    model, task = tiny_model(model_type, head_kind)
    windows = task.family == "sequence"
    graph = exported(model, task, tmp_path / "m.onnx", windows)
    # No pass that replaces NaN over the attention scores (what the exporter writes for a boolean mask): the
    # traced attention takes an additive mask (kernels.traced_mask).
    import onnx

    assert "IsNaN" not in {n.op_type for n in onnx.load(str(tmp_path / "m.onnx")).graph.node}
    segments = "token_type_ids" in graph.graph.inputs
    max_len = model.encoder.config.max_sequence_length
    report = check_graph(model, graph, task.family, max_len, segments, windows)
    assert report["max_abs_diff"] <= 1e-5, report
    assert report["passed"] and report["tolerance"] == FP32_TOLERANCE
    # The lengths it ran: one token, around the traced length, around every window and bucket, the longest.
    assert {1, TRACE_LENGTH - 1, TRACE_LENGTH + 1, max_len} <= set(report["lengths"])
    for b in length_boundaries(model.encoder.config):
        assert {n for n in (b - 1, b, b + 1, 2 * b + 3) if n <= max_len} <= set(report["lengths"])


@pytest.mark.parametrize("model_type", FAMILIES)
def test_the_unpadded_path_is_the_reference(tmp_path, model_type):
    """The run computes padded batches on packed tokens (unpad=auto on CPU): the graph (padded path) equals it."""
    model, task = tiny_model(model_type, "token")
    model.encoder.unpad = "true"
    graph = exported(model, task, tmp_path / "m.onnx", False)
    report = check_graph(model, graph, "token", 40, "token_type_ids" in graph.graph.inputs, False)
    assert report["max_abs_diff"] <= 1e-5, report


def test_hard_lengths_cross_every_boundary():
    """ModernBERT (window 8 each side, 16 in all): 1, 7, window - 1, window, window + 1, 2·window + 3 and the longest;
    DeBERTa's bucket edge (4) and bucket count (8); a field a fresh encoder might name (generic config.json)."""
    model, _ = tiny_model("modernbert", "sequence")
    lengths = hard_lengths(model.encoder.config, 64)
    assert {1, 7, 8, 9, 15, 16, 17, 19, 35, 64} <= set(lengths) and max(lengths) == 64
    model, _ = tiny_model("deberta-v2", "sequence")
    assert {3, 4, 5, 7, 8, 9, 11, 19} <= set(hard_lengths(model.encoder.config, 64))

    class Generic:
        hf_config = {"attention_window": [32, 32], "relative_attention_num_buckets": 12}

    assert {31, 32, 33, 11, 12, 13, 5, 6, 7} <= set(hard_lengths(Generic(), 40))
    assert all(name in LENGTH_FIELDS for name in ("local_attention", "position_buckets", "sliding_window"))


@pytest.mark.parametrize("model_type, module", [("modernbert", kernels), ("bert", kernels), ("deberta-v2", deberta)])
def test_the_check_finds_a_branch_frozen_at_the_traced_length(tmp_path, monkeypatch, model_type, module):
    """The issue's bug put back: the sliding window decided from the traced example's length (8 tokens, within the
    window: no band in the graph), equal up to the window and wrong past it; and its fresh twin, DeBERTa's
    relative-position index cached for the traced length. The check finds both; a family without either is not
    touched by it."""
    model, task = tiny_model(model_type, "sequence")
    monkeypatch.setattr(module, "tracing", lambda: False)
    graph = exported(model, task, tmp_path / "m.onnx", True)
    report = check_graph(model, graph, "sequence", 40, "token_type_ids" in graph.graph.inputs, True)
    if model_type == "bert":
        assert report["passed"], report
        return
    assert not report["passed"], report
    if model_type == "modernbert":
        assert report["max_abs_diff"] > 1e-3, report
        short = {"input_ids": torch.randint(5, 99, (1, 9)), "attention_mask": torch.ones(1, 9, dtype=torch.long)}
        with torch.no_grad():
            torch.testing.assert_close(graph(short), model(short), atol=1e-5, rtol=0)  # within the window: equal


def test_the_generic_path_is_checked_too(tmp_path):
    """A model_type that is no native family (mpnet, through transformers' AutoModel): its relative-position buckets
    (relative_attention_num_buckets) are among the hard lengths, and its graph equals PyTorch at them."""
    import transformers

    from bertlab.models.families.generic import GenericEncoderConfig

    hf = transformers.AutoConfig.for_model("mpnet", vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                           num_attention_heads=4, intermediate_size=37, max_position_embeddings=66,
                                           relative_attention_num_buckets=32, hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0, pad_token_id=1)
    config = GenericEncoderConfig.from_hf(hf.to_dict())
    task = TaskSpec(name="sequence", family="sequence", labels=["a", "b", "c"])
    family = build_family(task, 3, task.labels, None)
    head = HeadConfig(pooling="cls")
    torch.manual_seed(0)
    model = assemble(config, head, family.build_head, "sequence", add_pooling_layer=False).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    graph = exported(model, task, tmp_path / "m.onnx", True)
    report = check_graph(model, graph, "sequence", 48, "token_type_ids" in graph.graph.inputs, True)
    assert {15, 16, 17, 31, 32, 33, 35, 48} <= set(report["lengths"])
    assert report["max_abs_diff"] <= 1e-5, report
