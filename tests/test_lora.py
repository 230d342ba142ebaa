"""LoRA: identity at init, only adapters (+ head) train, merged == unmerged, small checkpoints."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bertlab.models.bert import BertModel
from bertlab.models.lora import (
    LoRALinear,
    inject_lora,
    lora_modules,
    merge_lora,
)
from bertlab.runtime.config import ConfigError, EncoderConfig, FreezeConfig, LoraConfig
from bertlab.training.freeze import apply_freeze
from bertlab.training.optim import optimizer_param_groups

CONFIG = EncoderConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=32, max_position_embeddings=32)


def tiny_encoder(seed: int = 0) -> BertModel:
    torch.manual_seed(seed)
    return BertModel(CONFIG)


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 50, (3, 6), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    return ids, mask


def encode(encoder: nn.Module) -> torch.Tensor:
    ids, mask = inputs()
    with torch.no_grad():
        return encoder(ids, attention_mask=mask).last_hidden_state  # (B, T, H)


def test_lora_linear_from_linear_is_the_base_at_init() -> None:
    torch.manual_seed(0)
    base = nn.Linear(5, 3)
    lora = LoRALinear.from_linear(base, r=2, alpha=4.0, dropout=0.5)
    assert [n for n, _ in lora.named_parameters()] == ["weight", "bias", "lora_A", "lora_B"]
    assert lora.lora_A.shape == (2, 5) and lora.lora_B.shape == (3, 2)
    assert torch.count_nonzero(lora.lora_B) == 0 and torch.count_nonzero(lora.lora_A) > 0
    assert lora.scaling == 2.0
    x = torch.randn(4, 7, 5)
    lora.train()  # dropout is only on the LoRA path, which is zero at init
    assert torch.equal(lora(x), base(x))
    with torch.no_grad():
        lora.lora_B.normal_()
    lora.eval()
    expected = base(x) + (x @ lora.lora_A.T @ lora.lora_B.T) * 2.0
    torch.testing.assert_close(lora(x), expected)


def test_inject_lora_keeps_outputs_and_hf_names() -> None:
    base = tiny_encoder().eval()
    injected = tiny_encoder().eval()
    names = inject_lora(injected, LoraConfig(r=4, alpha=8.0))
    assert names == [f"encoder.layer.{i}.attention.self.{m}" for i in range(2) for m in ("query", "value")]
    assert set(lora_modules(injected)) == set(names)
    assert isinstance(injected.encoder.layer[0].attention.self.key, nn.Linear)
    assert not isinstance(injected.encoder.layer[0].attention.self.key, LoRALinear)
    # Hugging Face key names survive: the plain keys are all still there, plus the adapters only
    keys = set(injected.state_dict())
    assert {k for k in keys if not k.endswith((".lora_A", ".lora_B"))} == set(base.state_dict())
    assert torch.equal(encode(injected), encode(base))  # B = 0: the same function
    # the base weights of adapted modules are frozen, the adapters train
    query = injected.encoder.layer[0].attention.self.query
    assert not query.weight.requires_grad and not query.bias.requires_grad
    assert query.lora_A.requires_grad and query.lora_B.requires_grad
    # a base state dict loads strictly into the injected encoder's base part
    missing, unexpected = injected.load_state_dict(base.state_dict(), strict=False)
    assert unexpected == [] and all(k.endswith((".lora_A", ".lora_B")) for k in missing)


def test_inject_lora_twice_keeps_the_existing_adapters() -> None:
    encoder = tiny_encoder()
    first = inject_lora(encoder, LoraConfig(r=2))
    adapter = encoder.encoder.layer[0].attention.self.query
    assert inject_lora(encoder, LoraConfig(r=2)) == first
    assert encoder.encoder.layer[0].attention.self.query is adapter


def test_target_modules_matching_no_linear_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"match no nn.Linear.*'query'"):
        inject_lora(tiny_encoder(), LoraConfig(target_modules=["q_proj"]))
    # nn.MultiheadAttention reads out_proj's weight directly: an adapter there would never run
    layer = nn.TransformerEncoderLayer(d_model=4, nhead=2, dim_feedforward=8, batch_first=True)
    with pytest.raises(ConfigError, match="match no nn.Linear"):
        inject_lora(layer, LoraConfig(target_modules=["out_proj"]))


class Model(nn.Module):
    def __init__(self, seed: int = 0):
        super().__init__()
        self.encoder = tiny_encoder(seed)
        torch.manual_seed(seed + 100)
        self.head = nn.Linear(16, 2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(ids, attention_mask=mask).pooler_output)  # (B, 2)


def lora_model(seed: int = 0) -> Model:
    model = Model(seed)
    cfg = FreezeConfig(policy="lora", lora=LoraConfig(r=2, alpha=4.0, dropout=0.1))
    apply_freeze(model.encoder, model.head, cfg)
    return model


def train(model: Model, steps: int = 2) -> None:
    optimizer = torch.optim.AdamW(optimizer_param_groups(model, weight_decay=0.01, lr=1e-2))
    ids, mask = inputs()
    labels = torch.tensor([0, 1, 1])
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(ids, mask), labels).backward()
        optimizer.step()


def test_training_changes_only_adapters_and_head() -> None:
    model = lora_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train(model, steps=2)  # step 1 moves B (A's gradient is 0 while B = 0), step 2 moves A too
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    adapters = {n for n in before if n.endswith((".lora_A", ".lora_B"))}
    assert len(adapters) == 8
    assert changed == adapters | {"head.weight", "head.bias"}


def test_merged_model_equals_unmerged() -> None:
    model = lora_model()
    train(model)
    model.eval()
    expected = encode(model.encoder)

    plain = tiny_encoder(seed=7).eval()  # different init: everything must come from the merged state
    plain.load_state_dict(merge_lora(model.encoder), strict=True)
    torch.testing.assert_close(encode(plain), expected, atol=1e-6, rtol=0)
    assert lora_modules(model.encoder)  # merge_lora without inplace leaves the model as it was

    merge_lora(model.encoder, inplace=True)
    assert lora_modules(model.encoder) == {}
    assert type(model.encoder.encoder.layer[0].attention.self.query) is nn.Linear
    torch.testing.assert_close(encode(model.encoder), expected, atol=1e-6, rtol=0)


