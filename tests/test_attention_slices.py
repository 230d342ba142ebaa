"""CPU training attention (bertlab.models.bert.attention: (batch, head) slices, bertlab's CPU dropout) is SDPA.

With a dropout probability so small that no element is dropped, the sliced path must equal one SDPA call on
the whole batch (outputs and gradients, with and without a padding mask); with a real probability it must
drop at that rate. The CPU dropout itself must keep 1 - p of the elements, rescaled, in forward and backward.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import bertlab.models.bert as encoder
import bertlab.models.kernels as kernels
from bertlab.models.bert import Kernels, attention


@pytest.fixture
def small_slices():
    # 2·16·16·4 bytes = 2 KiB: slices of two (batch, head) rows for T = 16 in float32.
    return Kernels(cpu_attention_slice_bytes=2 * 16 * 16 * 4)


def _qkv(b=3, nh=4, t=16, hd=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, nh, t, hd, generator=g, requires_grad=True) for _ in range(3)]


@pytest.mark.parametrize("padded", [False, True])
def test_slices_equal_one_sdpa_call(small_slices, padded):
    q, k, v = _qkv()
    mask = None
    if padded:
        lengths = torch.tensor([16, 9, 3])
        mask = (torch.arange(16)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
    tiny_p = 1e-12  # takes the dropout (sliced) path, drops nothing in practice
    out = attention(q, k, v, mask, tiny_p, small_slices)
    grads = torch.autograd.grad(out.pow(2).sum(), (q, k, v))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ref_grads = torch.autograd.grad(ref.pow(2).sum(), (q, k, v))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)


def test_sliced_dropout_drops_at_its_rate(small_slices):
    # v = ones: each output element is the sum of the kept, rescaled probabilities (mean 1 over many rows).
    b, nh, t, hd = 8, 4, 16, 1
    q = torch.zeros(b, nh, t, hd)
    out = attention(q, q, torch.ones(b, nh, t, hd), None, 0.5, small_slices)
    assert out.shape == (b, nh, t, hd)
    assert abs(out.mean().item() - 1.0) < 0.05
    assert 0.15 < out.std().item() < 0.35  # 16 terms of 0 or 1/8 (p = 0.5): std = 0.25


def test_eval_and_unsliced_paths_are_plain_sdpa():
    q, k, v = _qkv()
    torch.testing.assert_close(attention(q, k, v, None, 0.0), F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("fast", [True, False])
def test_cpu_dropout_keeps_one_minus_p_rescaled(fast):
    torch.manual_seed(0)
    x = torch.ones(200_000, requires_grad=True)
    y = encoder.dropout(x, 0.1, training=True, fast=fast)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.9) < 0.005
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / 0.9))
    (g,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(g, y.detach())  # the same mask and scale in backward
    assert encoder.dropout(x, 0.1, training=False) is x


def test_cpu_dropout_follows_the_global_seed():
    x = torch.ones(1000)
    torch.manual_seed(3)
    a = encoder.dropout(x, 0.5, training=True)
    torch.manual_seed(3)
    b = encoder.dropout(x, 0.5, training=True)
    assert torch.equal(a, b)


def test_cpu_keep_mask_uses_every_16_bit_lane_uniformly():
    # Four masks come from each 64-bit draw: each lane (position mod 4) must keep 1 - p, the top one included
    # (a generator range short of 64 bits leaves that lane's sign bit at 0 and keeps everything there).
    torch.manual_seed(0)
    keep = encoder.cpu_keep_mask((50_001, 4), 0.1)
    assert keep.shape == (50_001, 4) and keep.dtype == torch.bool
    for lane in range(4):
        assert abs(keep[:, lane].float().mean().item() - 0.9) < 0.006, lane
    assert abs(encoder.cpu_keep_mask((3, 7, 11), 0.5).float().mean().item() - 0.5) < 0.2  # odd sizes
    assert not encoder.cpu_keep_mask((1000,), 1 - 2**-17).any()  # p rounds to 1 - 2⁻¹⁶ at worst


def test_hidden_dropout_modules_use_the_cpu_masks(monkeypatch):
    from bertlab.runtime.config import EncoderConfig

    layer = encoder.BertLayer(EncoderConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                            num_attention_heads=2, intermediate_size=32))
    assert isinstance(layer.output.dropout, torch.nn.Dropout)  # same type checks as nn.Dropout
    calls = []
    monkeypatch.setattr(kernels, "cpu_keep_mask", lambda shape, p: calls.append(shape) or torch.ones(shape, dtype=torch.bool))
    layer.train()(torch.randn(2, 5, 16), None)
    assert (2, 5, 16) in [tuple(s) for s in calls]
    calls.clear()
    layer.eval()(torch.randn(2, 5, 16), None)
    assert calls == []


def _tiny_model(kernels):
    from bertlab.runtime.config import EncoderConfig

    config = EncoderConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=32, attention_probs_dropout_prob=0.1)
    return encoder.BertModel(config, kernels=kernels)


def test_kernel_choices_belong_to_the_model_not_to_the_process(monkeypatch):
    """Two models built with different kernels in one process each keep their own: the choice is made when a
    model is built (model.cpu_fast_dropout, model.cpu_attention_slice_mb), not by a module global."""
    calls = []
    real = encoder.cpu_keep_mask
    monkeypatch.setattr(kernels, "cpu_keep_mask", lambda shape, p: calls.append(tuple(shape)) or real(shape, p))
    ids = torch.randint(5, 50, (2, 6))
    fast, plain = _tiny_model(Kernels()), _tiny_model(Kernels(cpu_fast_dropout=False, cpu_attention_slice_bytes=0))
    plain.train()(ids)
    assert calls == []  # torch's dropout in every Dropout and in the attention probabilities
    fast.train()(ids)
    assert (4, 6, 6) in calls and (2, 6, 16) in calls  # attention probabilities (B·nh rows) and hidden states
    for model, want in ((fast, True), (plain, False)):
        assert {m.fast for m in model.modules() if isinstance(m, encoder.Dropout)} == {want}
        assert {m.kernels for m in model.modules() if isinstance(m, encoder.BertSelfAttention)} == {model.kernels}


def test_the_model_config_chooses_the_kernels():
    from bertlab.runtime.config import ConfigError, ExecutionConfig

    execution = ExecutionConfig.from_model_cfg({"cpu_fast_dropout": False, "cpu_attention_slice_mb": 8,
                                                "varlen_attention": "repad"})
    assert (execution.cpu_fast_dropout, execution.cpu_attention_slice_mb, execution.varlen_attention) == \
        (False, 8, "repad")
    assert ExecutionConfig.from_model_cfg({}) == ExecutionConfig()  # the defaults: fast masks, 32 MiB, auto
    with pytest.raises(ConfigError, match="model.cpu_attention_slice_mb must be a whole number"):
        ExecutionConfig(cpu_attention_slice_mb=-1)
    with pytest.raises(ConfigError, match="model.varlen_attention must be one of auto, repad"):
        Kernels(varlen_attention="fastest")
