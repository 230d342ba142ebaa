"""CPU inference's prepacked Linear layers (bertlab.models.kernels.PrepackedLinear): the same function, state
dict and gradients as nn.Linear; oneDNN's reordered weight only where it applies (CPU, float32, no autograd),
rebuilt when the weight changes; and prediction's PyTorch backend turning a model's plain Linears into them."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from bertlab.models.kernels import PrepackedLinear, onednn_linear_available, prepack_linears
from bertlab.models.lora import LoRALinear

needs_onednn = pytest.mark.skipif(not onednn_linear_available(), reason="this torch build has no oneDNN linear")


def _pair(seed: int = 0, bias: bool = True) -> tuple[nn.Linear, nn.Linear]:
    torch.manual_seed(seed)
    plain = nn.Linear(24, 40, bias=bias)
    packed = nn.Linear(24, 40, bias=bias)
    packed.load_state_dict(plain.state_dict())
    prepack_linears(packed)
    return plain, packed


@needs_onednn
@pytest.mark.parametrize("shape", [(1, 24), (5, 24), (3, 1, 24), (7, 13, 24), (2, 3, 4, 24)])
@pytest.mark.parametrize("bias", [True, False])
def test_inference_equals_nn_linear_within_float_rounding(shape, bias):
    plain, packed = _pair(bias=bias)
    assert type(packed) is PrepackedLinear
    x = torch.randn(*shape)
    with torch.inference_mode():
        want, got = plain(x), packed(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert "_prepacked_weight" in packed.__dict__  # oneDNN computed it, not the fallback


@needs_onednn
def test_autograd_and_other_dtypes_take_nn_linear_exactly():
    plain, packed = _pair()
    x = torch.randn(6, 24, requires_grad=True)
    y = packed(x)  # grad enabled: F.linear, bit for bit
    assert torch.equal(y, plain(x))
    assert "_prepacked_weight" not in packed.__dict__
    y.sum().backward()
    assert packed.weight.grad is not None and x.grad is not None
    with torch.no_grad():
        assert torch.equal(packed.double()(x.double()), plain.double()(x.double()))
    assert "_prepacked_weight" not in packed.__dict__


@needs_onednn
def test_the_reordered_weight_follows_a_changed_weight():
    plain, packed = _pair()
    x = torch.randn(4, 24)
    with torch.no_grad():
        packed(x)
        for m in (plain, packed):
            m.weight.mul_(-2.0)  # in place: the weight's version changes
        torch.testing.assert_close(packed(x), plain(x), rtol=1e-5, atol=1e-5)
        packed.weight = nn.Parameter(plain.weight * 3)  # a new tensor
        torch.testing.assert_close(packed(x), x @ (plain.weight * 3).T + plain.bias, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_state_dict_and_saving_are_nn_linears():
    plain, packed = _pair()
    with torch.no_grad():
        packed(torch.randn(2, 24))
    assert list(packed.state_dict()) == list(plain.state_dict())
    buffer = io.BytesIO()
    torch.save(packed.state_dict(), buffer)
    buffer.seek(0)
    restored = nn.Linear(24, 40)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert torch.equal(restored.weight, plain.weight)
    import copy

    twin = copy.deepcopy(packed)  # the cached oneDNN tensor is not copied; the twin rebuilds its own
    assert "_prepacked_weight" not in twin.__dict__
    with torch.no_grad():
        torch.testing.assert_close(twin(torch.ones(1, 24)), plain(torch.ones(1, 24)), rtol=1e-5, atol=1e-5)


@needs_onednn
def test_prepack_changes_plain_linears_only():
    model = nn.Sequential(nn.Linear(8, 8), LoRALinear.from_linear(nn.Linear(8, 8), r=2, alpha=4, dropout=0.0),
                          nn.LayerNorm(8))
    assert prepack_linears(model) == 1
    assert type(model[0]) is PrepackedLinear and type(model[1]) is LoRALinear
    assert prepack_linears(model) == 0  # already done
