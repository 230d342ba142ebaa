"""DeBERTa-v2/v3 beyond the per-head parity of test_families.py: relative-position buckets at their extremes, the
encoder against ``transformers.DebertaV2Model`` with weights large enough that every position term matters (both
paths, forward and gradients, across the variants of DebertaV2Config), what hub checkpoints carry that the model
does not use, LoRA's role names, and a run's record of the config."""

from __future__ import annotations

import dataclasses

import pytest
import torch

transformers = pytest.importorskip("transformers")
modeling = pytest.importorskip("transformers.models.deberta_v2.modeling_deberta_v2")

from bertlab.models.assemble import config_from_record  # noqa: E402
from bertlab.models.deberta import DebertaConfig, log_bucket, relative_index  # noqa: E402
from bertlab.models.families import family_spec  # noqa: E402
from bertlab.models.hf_weights import CheckpointError, convert_hf_state_dict, load_into  # noqa: E402
from bertlab.models.lora import inject_lora, lora_modules  # noqa: E402
from bertlab.runtime.config import LoraConfig  # noqa: E402
from bertlab.runtime.errors import ConfigError  # noqa: E402

SPEC = family_spec("deberta-v2")
V3 = dict(relative_attention=True, position_biased_input=False, pos_att_type="p2c|c2p", position_buckets=8,
          max_relative_positions=16, share_att_key=True, norm_rel_ebd="layer_norm", type_vocab_size=0)
VARIANTS = {
    "v3": V3,
    "v3_no_buckets": dict(V3, position_buckets=-1, max_relative_positions=6),  # clamped at ±6
    "own_position_projections": dict(V3, share_att_key=False),
    "c2p_only_no_norm": dict(V3, pos_att_type="c2p", norm_rel_ebd="none"),
    # DeBERTa-v2 style: absolute positions in the input, segments, narrower embeddings projected up
    "v2_absolute_positions": dict(V3, position_biased_input=True, type_vocab_size=2, embedding_size=16),
}


def hf_encoder(**extra):
    cfg = transformers.DebertaV2Config(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=37, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0, **extra)
    torch.manual_seed(3)
    model = transformers.DebertaV2Model(cfg).eval()
    with torch.no_grad():  # weights large enough that content and both position terms all move the output
        for name, p in model.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if "proj" in name or "rel_embeddings" in name else 0.05))
    return model


def ours_from(hf, unpad: str):
    config = SPEC.read_config(hf.config.to_dict(), "test")
    ours = SPEC.build_encoder(config, add_pooling_layer=False, unpad=unpad).eval()
    state, report = convert_hf_state_dict(hf.state_dict(), None, has_pooler=False, spec=SPEC)
    load_into(ours, {k[len("encoder."):]: v for k, v in state.items()}, report)
    return ours


def batch(length: int = 23):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 60, (3, length), generator=g)
    mask = torch.ones_like(ids)
    mask[1, length - 6:] = 0
    mask[2, 5:] = 0
    types = torch.zeros_like(ids)
    types[:, length // 2:] = 1
    return ids.masked_fill(mask == 0, 0), mask, types


# ----------------------------------------------------------------------------------------------------------
# Buckets


@pytest.mark.parametrize("buckets, max_position", [(256, 512), (8, 64), (4, 16), (2, 8)])
def test_log_buckets_equal_transformers_at_the_extremes(buckets, max_position):
    """Every distance up to well past max_position, both signs: exact within ±buckets/2, log-spaced beyond,
    ±(buckets - 1) at ±(max_position - 1), odd (c2p and p2c share one index table)."""
    relative = torch.arange(-4 * max_position, 4 * max_position + 1)
    ours = log_bucket(relative, buckets, max_position)
    theirs = modeling.make_log_bucket_position(relative, buckets, max_position).long()
    assert torch.equal(ours, theirs)
    mid = buckets // 2
    inside = relative.abs() <= mid
    assert torch.equal(ours[inside], relative[inside])
    assert int(log_bucket(torch.tensor([max_position - 1]), buckets, max_position)) == buckets - 1
    assert torch.equal(log_bucket(-relative, buckets, max_position), -ours)


@pytest.mark.parametrize("length, span, buckets, max_relative", [
    (1, 256, 256, 512), (11, 8, 8, 64), (300, 256, 256, 512), (1500, 256, 256, 512), (40, 6, -1, 6)])
def test_relative_index_covers_exactly_the_rows_a_length_reaches(length, span, buckets, max_relative):
    """index + lo is transformers' clamp(bucket(i - j) + span, 0, 2·span - 1) for every pair; lo..hi-1 are
    the rows used, clamped at the table's ends for lengths past max_relative."""
    index, lo, hi = relative_index(length, span, buckets, max_relative)
    rel = modeling.build_relative_position(torch.zeros(length, 1), torch.zeros(length, 1), bucket_size=buckets,
                                           max_position=max_relative)[0]
    want = torch.clamp(rel + span, 0, 2 * span - 1)
    assert torch.equal(index + lo, want)
    assert lo == int(want.min()) and hi == int(want.max()) + 1 and 0 <= lo < hi <= 2 * span
    if length > max_relative:  # the far pairs fall off the table: clamped to its first and last rows
        assert lo == 0 and hi == 2 * span


# ----------------------------------------------------------------------------------------------------------
# The encoder


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("unpad", ["false", "true"])
def test_encoder_and_gradients_equal_transformers(variant, unpad):
    hf = hf_encoder(**VARIANTS[variant])
    ours = ours_from(hf, unpad)
    ids, mask, types = batch()
    assert ours.uses_unpadded_path(ids, mask) == (unpad == "true")
    with_types = VARIANTS[variant]["type_vocab_size"] > 0
    want = hf(input_ids=ids, attention_mask=mask, token_type_ids=types if with_types else None).last_hidden_state
    got = ours(ids, attention_mask=mask, token_type_ids=types if with_types else None).last_hidden_state
    real = mask.bool()
    assert torch.allclose(got[real], want[real], atol=1e-5), (got[real] - want[real]).abs().max()
    # The same loss on the real positions: every parameter's gradient equal (the bias's gather, backwards).
    weights = torch.randn_like(want)
    (want[real] * weights[real]).sum().backward()
    (got[real] * weights[real]).sum().backward()
    theirs = dict(hf.named_parameters())
    for name, p in ours.named_parameters():
        g_theirs = theirs[name].grad
        assert g_theirs is not None and torch.allclose(p.grad, g_theirs, atol=1e-4, rtol=1e-4), name


def test_the_position_terms_matter_at_this_scale():
    """The check above can fail: without p2c the output moves far beyond its tolerance."""
    hf = hf_encoder(**V3)
    ours = ours_from(hf, "false")
    for layer in ours.encoder.layer:
        layer.attention.self.terms = ("c2p",)
    ids, mask, _ = batch()
    with torch.no_grad():
        diff = (ours(ids, mask).last_hidden_state - hf(input_ids=ids, attention_mask=mask).last_hidden_state)
    assert diff[mask.bool()].abs().max() > 1e-2


def test_sequences_past_the_relative_table_and_dropout_in_training():
    """Longer than max_relative_positions (clamped rows), and training mode with dropout: finite, and equal to
    transformers once dropout is off again."""
    hf = hf_encoder(**dict(V3, position_buckets=-1, max_relative_positions=6))
    ours = ours_from(hf, "auto")
    ids, mask, _ = batch(40)
    ours.train()
    for m in ours.modules():
        if hasattr(m, "dropout_p"):
            m.dropout_p = 0.2
    out = ours(ids, mask).last_hidden_state
    out.sum().backward()
    assert torch.isfinite(out).all()
    ours.eval()
    with torch.no_grad():
        got, want = ours(ids, mask).last_hidden_state, hf(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.allclose(got[mask.bool()], want[mask.bool()], atol=1e-5)


# ----------------------------------------------------------------------------------------------------------
# Checkpoints, config, LoRA


def test_hub_extras_are_dropped_and_reported_unknown_keys_refused():
    """DeBERTa-v3 hub folders hold absolute position embeddings (the original enhanced mask decoder's) and the
    replaced-token-detection head, both unused by transformers' classes: dropped and reported."""
    hf = hf_encoder(**V3)
    ours = ours_from(hf, "false")
    state = {f"deberta.{k}": v for k, v in hf.state_dict().items()}
    state["deberta.embeddings.position_embeddings.weight"] = torch.zeros(64, 32)
    state["mask_predictions.dense.weight"] = torch.zeros(32, 32)
    converted, report = convert_hf_state_dict(state, None, has_pooler=False, spec=SPEC)
    load_into(ours, {k[len("encoder."):]: v for k, v in converted.items()}, report)
    assert "mask_predictions.dense.weight" in report.dropped
    assert "embeddings.position_embeddings.weight" in report.dropped
    state["deberta.encoder.mystery.weight"] = torch.zeros(1)
    converted, report = convert_hf_state_dict(state, None, has_pooler=False, spec=SPEC)
    with pytest.raises(CheckpointError, match="mystery"):
        load_into(ours, {k[len("encoder."):]: v for k, v in converted.items()}, report)


@pytest.mark.parametrize("key, value, match", [("conv_kernel_size", 3, "convolution"),
                                               ("pooler_hidden_act", "tanh", "pooler_hidden_act"),
                                               ("attention_head_size", 4, "head size"),
                                               ("norm_rel_ebd", "batch_norm", "norm_rel_ebd"),
                                               ("hidden_act", "relu", "hidden_act")])
def test_configs_computed_otherwise_are_refused(key, value, match):
    data = hf_encoder(**V3).config.to_dict()
    data[key] = value
    with pytest.raises(ConfigError, match=match):
        SPEC.read_config(data, "config.json")


def test_run_record_rebuilds_the_deberta_config():
    config = SPEC.read_config(hf_encoder(**V3).config.to_dict(), "test")
    record = dataclasses.asdict(config)
    again = config_from_record(record)
    assert type(again) is DebertaConfig and again == config
    assert SPEC.read_config(SPEC.write_config(config), "again") == config


@pytest.mark.parametrize("targets, adapted", [
    (["query", "value"], {"query_proj", "value_proj"}),  # conf/freeze/lora.yaml's default
    (["query", "key", "value", "dense"], {"query_proj", "key_proj", "value_proj", "dense"}),  # its recommendation
    (["query_proj"], {"query_proj"}),  # the family's own names work too
])
def test_lora_roles_map_to_deberta_names(targets, adapted):
    ours = ours_from(hf_encoder(**V3), "false")
    inject_lora(ours, LoraConfig(target_modules=targets))
    assert {name.rsplit(".", 1)[-1] for name in lora_modules(ours)} == adapted
    ids, mask, _ = batch()
    ours(ids, mask).last_hidden_state.sum().backward()  # adapters in both paths of the attention
    assert all(m.lora_A.grad is not None for m in lora_modules(ours).values())


@pytest.mark.parametrize("slice_bytes", [0, 3 * 23 * 23 * 4, 4 * 23 * 23 * 4 * 2, 2 * 23 * 23 * 4])
@pytest.mark.parametrize("unpad", ["false", "true"])
def test_cpu_attention_slices_compute_the_bias_per_slice(slice_bytes, unpad):
    """Training on CPU computes attention with dropout over slices of (batch, head) rows, the position bias of each
    slice within it (whole batch rows, or a range of heads of one row): the same values and gradients as one SDPA
    call (dropout at 1e-9 keeps every score)."""
    from bertlab.models.kernels import Kernels

    hf = hf_encoder(**V3)
    config = SPEC.read_config(hf.config.to_dict(), "test")
    sliced = SPEC.build_encoder(config, unpad=unpad, kernels=Kernels(cpu_attention_slice_bytes=slice_bytes))
    whole = ours_from(hf, unpad)
    sliced.load_state_dict(whole.state_dict())
    sliced.train()
    for layer in sliced.encoder.layer:
        layer.attention.self.dropout_p = 1e-9
    ids, mask, _ = batch()
    real = mask.bool()
    got = sliced(ids, mask).last_hidden_state
    want = whole(ids, mask).last_hidden_state
    assert torch.allclose(got[real], want[real], atol=1e-5)
    got[real].sum().backward()
    want[real].sum().backward()
    theirs = dict(whole.named_parameters())
    for name, p in sliced.named_parameters():
        assert torch.allclose(p.grad, theirs[name].grad, atol=1e-4, rtol=1e-4), name


def test_the_relative_index_cache_made_in_inference_mode_trains_afterwards():
    """The relative-position index is cached across calls: one first built during a prediction (inference mode)
    must still serve a training step (an inference tensor cannot be saved for backward)."""
    import torch

    from bertlab.models.deberta import DebertaConfig, DebertaModel, relative_index

    relative_index.cache_clear()
    torch.manual_seed(0)
    model = DebertaModel(DebertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32, max_position_embeddings=64), unpad="false")
    ids = torch.randint(5, 50, (2, 13))
    with torch.inference_mode():
        model.eval()(ids)
    model.train()(ids).last_hidden_state.sum().backward()
    assert model.embeddings.word_embeddings.weight.grad is not None
