"""Freeze policies, optimizer groups, module modes and the update-scope audit on a tiny BERT."""

from __future__ import annotations

import json
import warnings

import lightning.pytorch as pl
import pytest
import torch
from torch import nn

from bertlab.models.bert import BertModel
from bertlab.runtime.config import ConfigError, EncoderConfig, FreezeConfig, LoraConfig
from bertlab.training.audit import (
    COUNT_KEYS,
    FrozenTensorChanged,
    ScopeAudit,
    UpdateScopeAuditCallback,
    UpdateScopeWarning,
)
from bertlab.training.callbacks import FreezeModeGuard
from bertlab.training.freeze import apply_freeze
from bertlab.training.optim import optimizer_param_groups

# Lightning 2.6's own pytree helper trips a torch 2.13 deprecation; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated")

NUM_LAYERS = 2


def tiny_encoder(pooler: bool = True) -> BertModel:
    torch.manual_seed(0)
    config = EncoderConfig(vocab_size=50, hidden_size=16, num_hidden_layers=NUM_LAYERS, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=32)
    return BertModel(config, add_pooling_layer=pooler)


class PoolerHead(nn.Module):
    """pooler_output → dropout → linear (BertForSequenceClassification's head)."""

    def __init__(self, reads_pooler: bool = True):
        super().__init__()
        self.reads_pooler = reads_pooler
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(16, 3)

    def forward(self, enc) -> torch.Tensor:
        x = enc.pooler_output if self.reads_pooler else enc.last_hidden_state[:, 0]  # (B, H)
        return self.classifier(self.dropout(x))  # (B, 3)


class TinyTaskModel(nn.Module):
    def __init__(self, reads_pooler: bool = True):
        super().__init__()
        self.encoder = tiny_encoder()
        self.head = PoolerHead(reads_pooler)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.encoder(input_ids, attention_mask=attention_mask))


def batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, 50, (4, 7), generator=g)
    mask = torch.ones_like(input_ids)
    mask[0, 5:] = 0  # one padded row
    labels = torch.randint(0, 3, (4,), generator=g)
    return input_ids, mask, labels


def freeze_cfg(policy: str, k: int = 0) -> FreezeConfig:
    return FreezeConfig(policy=policy, k=k, lora=LoraConfig(r=2, alpha=4.0))


def trainable_names(model: nn.Module) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


def all_names(model: nn.Module) -> set[str]:
    return {n for n, _ in model.named_parameters()}


# --------------------------------------------------------------------------------------------------------
# Policies: trainable tensors, plan fields
# --------------------------------------------------------------------------------------------------------

def expected_trainable(policy: str, names: set[str], k: int = 0) -> set[str]:
    head = {n for n in names if n.startswith("head.")}
    enc = names - head
    if policy == "none":
        return names
    if policy == "encoder":
        return head
    if policy == "embeddings":
        return head | {n for n in enc if not n.startswith("encoder.embeddings.")}
    if policy == "bottom_k":
        frozen = ("encoder.embeddings.",) + tuple(f"encoder.encoder.layer.{i}." for i in range(k))
        return head | {n for n in enc if not n.startswith(frozen)}
    if policy == "bitfit":
        return head | {n for n in enc if n.endswith(".bias")}
    if policy == "lora":
        return head | {n for n in enc if n.endswith((".lora_A", ".lora_B"))}
    raise AssertionError(policy)


@pytest.mark.parametrize("policy,k", [("none", 0), ("encoder", 0), ("embeddings", 0), ("bottom_k", 1),
                                      ("bottom_k", 2), ("bitfit", 0), ("lora", 0)])
def test_trainable_tensors_per_policy(policy: str, k: int) -> None:
    model = TinyTaskModel()
    plan = apply_freeze(model.encoder, model.head, freeze_cfg(policy, k))
    names = all_names(model)
    assert trainable_names(model) == expected_trainable(policy, names, k)
    assert plan.policy == policy
    assert plan.encoder_frozen == (policy == "encoder")
    assert {n for n, _ in plan.trainable_parameters(model)} == trainable_names(model)
    assert plan.num_trainable == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert plan.num_total == sum(p.numel() for p in model.parameters())
    expected_frozen = {
        "none": [], "encoder": [""], "embeddings": ["embeddings"], "bitfit": [], "lora": [],
        "bottom_k": ["embeddings"] + [f"encoder.layer.{i}" for i in range(k)],
    }[policy]
    assert plan.frozen_module_names == expected_frozen
    # every frozen module is fully frozen
    for module in plan.frozen_modules:
        assert not any(p.requires_grad for p in module.parameters())


def test_lora_policy_adapts_query_and_value_only() -> None:
    model = TinyTaskModel()
    plan = apply_freeze(model.encoder, model.head, freeze_cfg("lora"))
    assert plan.adapted_modules == [f"encoder.layer.{i}.attention.self.{m}"
                                    for i in range(NUM_LAYERS) for m in ("query", "value")]
    adapters = {n for n in trainable_names(model) if "lora_" in n}
    assert len(adapters) == 2 * 2 * NUM_LAYERS
    # base weights keep their Hugging Face names and stay frozen
    query = dict(model.named_parameters())["encoder.encoder.layer.0.attention.self.query.weight"]
    assert not query.requires_grad


def test_reapplying_a_policy_is_idempotent() -> None:
    model = TinyTaskModel()
    apply_freeze(model.encoder, model.head, freeze_cfg("encoder"))
    apply_freeze(model.encoder, model.head, freeze_cfg("bitfit"))
    assert trainable_names(model) == expected_trainable("bitfit", all_names(model))
    apply_freeze(model.encoder, model.head, freeze_cfg("none"))
    assert trainable_names(model) == all_names(model)


def test_bottom_k_larger_than_the_stack_is_a_config_error() -> None:
    model = TinyTaskModel()
    with pytest.raises(ConfigError, match="freeze.k=3 exceeds the encoder's 2 layers"):
        apply_freeze(model.encoder, model.head, freeze_cfg("bottom_k", 3))


class GenericEncoder(nn.Module):
    """Not BERT: no `embeddings`, no `encoder.layer` (like the prototype's backbone or an LSTM encoder)."""

    def __init__(self):
        super().__init__()
        self.token_embedding = nn.Embedding(10, 8)
        self.rnn = nn.LSTM(8, 8, batch_first=True)
        self.value = nn.Linear(8, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.value(self.rnn(self.token_embedding(ids))[0])  # (B, T, 8)


@pytest.mark.parametrize("policy,message", [
    ("embeddings", "freeze=embeddings needs an embeddings module"),
    ("bottom_k", "freeze=bottom_k needs an embeddings module"),
])
def test_policies_needing_bert_structure_fail_clearly_on_other_encoders(policy: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_freeze(GenericEncoder(), nn.Linear(8, 2), freeze_cfg(policy, 1))


def test_bottom_k_needs_a_layer_stack() -> None:
    class EmbeddingsOnly(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = nn.Embedding(10, 8)

    with pytest.raises(ConfigError, match="freeze=bottom_k needs a layer stack"):
        apply_freeze(EmbeddingsOnly(), nn.Linear(8, 2), freeze_cfg("bottom_k", 1))


@pytest.mark.parametrize("policy", ["none", "encoder", "bitfit", "lora"])
def test_generic_policies_work_on_any_encoder(policy: str) -> None:
    encoder, head = GenericEncoder(), nn.Linear(8, 2)
    cfg = FreezeConfig(policy=policy, lora=LoraConfig(r=2, target_modules=["value"]))
    plan = apply_freeze(encoder, head, cfg)
    assert all(p.requires_grad for p in head.parameters())
    trainable = trainable_names(encoder)
    if policy == "encoder":
        assert trainable == set() and plan.encoder_frozen and plan.frozen_modules == [encoder]
    if policy == "bitfit":
        # nn.LSTM's gate biases (bias_ih_l0, bias_hh_l0) are bias terms too.
        assert trainable == {"value.bias", "rnn.bias_ih_l0", "rnn.bias_hh_l0"}
    if policy == "lora":
        assert trainable == {"value.lora_A", "value.lora_B"}


def test_nothing_to_train_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="freeze=encoder leaves nothing to train"):
        apply_freeze(tiny_encoder(), nn.Identity(), freeze_cfg("encoder"))


def test_tied_head_tensor_follows_the_encoder_and_is_counted_once() -> None:
    encoder = tiny_encoder()
    decoder = nn.Linear(16, 50)
    decoder.weight = encoder.embeddings.word_embeddings.weight  # MLM decoder tied to the word embeddings
    plan = apply_freeze(encoder, decoder, freeze_cfg("embeddings"))
    assert not decoder.weight.requires_grad and decoder.bias.requires_grad
    names = [n for n, _ in plan.trainable_parameters()]
    assert "head.bias" in names and "head.weight" not in names
    audit = ScopeAudit(encoder, decoder, None, "embeddings")
    audit.start()
    report = audit.report()
    assert report["totals"]["head"]["tensors"] == 1  # the tied weight is counted under the encoder
    assert report["totals"]["encoder"]["tensors"] == len(list(encoder.parameters()))


# --------------------------------------------------------------------------------------------------------
# Module modes
# --------------------------------------------------------------------------------------------------------

def assert_modes(model: TinyTaskModel, plan) -> None:
    frozen_ids = {id(m) for fm in plan.frozen_modules for m in fm.modules()}
    for name, module in model.named_modules():
        if id(module) in frozen_ids:
            assert not module.training, f"{name} should be in eval mode"
        else:
            assert module.training, f"{name} should be in train mode"


@pytest.mark.parametrize("policy,k", [("none", 0), ("encoder", 0), ("embeddings", 0), ("bottom_k", 1),
                                      ("bitfit", 0), ("lora", 0)])
def test_frozen_modules_eval_trainable_modules_train(policy: str, k: int) -> None:
    model = TinyTaskModel()
    plan = apply_freeze(model.encoder, model.head, freeze_cfg(policy, k))
    model.train()
    plan.set_modes()
    assert_modes(model, plan)
    # What Lightning (or an overridden on_validation_model_train) does around validation:
    model.eval()
    model.train()
    plan.set_modes()
    assert_modes(model, plan)
    if policy in ("bitfit", "lora"):
        assert plan.frozen_modules == [] and model.encoder.training  # partially trainable: dropout stays on
    if policy == "bottom_k":
        assert not model.encoder.encoder.layer[0].training and model.encoder.encoder.layer[1].training


def test_frozen_encoder_runs_deterministically_in_eval_mode() -> None:
    model = TinyTaskModel()
    for m in model.encoder.modules():  # strong dropout everywhere, so train mode would show
        if isinstance(m, nn.Dropout):
            m.p = 0.5
    plan = apply_freeze(model.encoder, model.head, freeze_cfg("encoder"))
    model.train()
    plan.set_modes()
    ids, mask, _ = batch()
    with torch.no_grad():
        a = model.encoder(ids, attention_mask=mask).last_hidden_state
        b = model.encoder(ids, attention_mask=mask).last_hidden_state
    assert torch.equal(a, b)


# --------------------------------------------------------------------------------------------------------
# Optimizer parameter groups
# --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy,k", [("none", 0), ("encoder", 0), ("bottom_k", 1), ("bitfit", 0),
                                      ("lora", 0)])
def test_param_groups_hold_only_trainable_tensors_and_split_decay(policy: str, k: int) -> None:
    model = TinyTaskModel()
    apply_freeze(model.encoder, model.head, freeze_cfg(policy, k))
    groups = optimizer_param_groups(model, weight_decay=0.01, lr=1e-3)
    names = [n for g in groups for n in g["param_names"]]
    assert len(names) == len(set(names))
    assert set(names) == trainable_names(model)
    params = dict(model.named_parameters())
    for g in groups:
        assert len(g["params"]) == len(g["param_names"])
        assert all(params[n] is p for n, p in zip(g["param_names"], g["params"]))
        no_decay = [n for n in g["param_names"] if n.endswith(".bias") or ".LayerNorm." in n]
        if g["weight_decay"] == 0.0:
            assert no_decay == g["param_names"], g["name"]
        else:
            assert g["weight_decay"] == 0.01 and no_decay == [], g["name"]
        assert g["lr"] == 1e-3
    optimizer = torch.optim.AdamW(groups)  # torch accepts the extra keys
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(names)
    assert optimizer.state_dict()["param_groups"][0]["param_names"] == groups[0]["param_names"]


def test_layerwise_lr_decay_and_head_lr() -> None:
    model = TinyTaskModel()
    apply_freeze(model.encoder, model.head, freeze_cfg("none"))
    groups = optimizer_param_groups(model, weight_decay=0.01, lr=1.0, layer_lr_decay=0.5, head_lr=3.0)
    lr_of = {n: g["lr"] for g in groups for n in g["param_names"]}
    L = NUM_LAYERS
    assert lr_of["encoder.embeddings.word_embeddings.weight"] == 0.5 ** (L + 1)
    assert lr_of["encoder.embeddings.LayerNorm.bias"] == 0.5 ** (L + 1)
    assert lr_of["encoder.encoder.layer.0.attention.self.query.weight"] == 0.5 ** L
    assert lr_of["encoder.encoder.layer.1.output.dense.bias"] == 0.5 ** (L - 1)
    assert lr_of["encoder.pooler.dense.weight"] == 1.0
    assert lr_of["head.classifier.weight"] == 3.0
    # explicit num_layers wins over the inferred one
    groups = optimizer_param_groups(model, weight_decay=0.0, lr=1.0, layer_lr_decay=0.5, num_layers=4)
    lr_of = {n: g["lr"] for g in groups for n in g["param_names"]}
    assert lr_of["encoder.encoder.layer.0.attention.self.query.weight"] == 0.5 ** 4


def test_layerwise_lr_decay_needs_a_layer_stack() -> None:
    with pytest.raises(ConfigError, match="layer_lr_decay=0.9 needs an encoder with `encoder.layer.N`"):
        optimizer_param_groups(GenericEncoder(), weight_decay=0.01, lr=1e-3, layer_lr_decay=0.9)


def test_no_decay_on_norm_modules_of_other_encoders() -> None:
    layer = nn.TransformerEncoderLayer(d_model=4, nhead=2, dim_feedforward=8, batch_first=True)
    groups = optimizer_param_groups(layer, weight_decay=0.1, lr=1e-3)
    no_decay = {n for g in groups if g["weight_decay"] == 0.0 for n in g["param_names"]}
    assert {"norm1.weight", "norm2.weight", "self_attn.in_proj_bias", "linear1.bias"} <= no_decay
    assert "self_attn.in_proj_weight" not in no_decay


# --------------------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------------------

def train_steps(model: TinyTaskModel, optimizer: torch.optim.Optimizer, audit: ScopeAudit, steps: int = 1,
                encoder_frozen: bool = False) -> None:
    for step in range(steps):
        ids, mask, labels = batch(step)
        optimizer.zero_grad(set_to_none=True)
        if encoder_frozen:
            with torch.no_grad():
                enc = model.encoder(ids, attention_mask=mask)
            logits = model.head(enc)
        else:
            logits = model(ids, mask)
        nn.functional.cross_entropy(logits, labels).backward()
        audit.record_grads()
        optimizer.step()
        audit.after_step("first_step" if step == 0 else "last_step")


ENCODER_TENSORS = len(list(tiny_encoder().parameters()))
HEAD_TENSORS = 2
KEY_BIASES = NUM_LAYERS  # softmax is shift-invariant per query: the key bias gets (almost) no gradient


@pytest.mark.parametrize("policy,k", [("none", 0), ("encoder", 0), ("embeddings", 0), ("bottom_k", 1),
                                      ("bitfit", 0), ("lora", 0)])
def test_audit_counts_after_an_adamw_step_with_weight_decay(policy: str, k: int, tmp_path) -> None:
    model = TinyTaskModel()
    plan = apply_freeze(model.encoder, model.head, freeze_cfg(policy, k))
    model.train()
    plan.set_modes()
    optimizer = torch.optim.AdamW(optimizer_param_groups(model, weight_decay=0.1, lr=1e-2))
    audit = ScopeAudit(model.encoder, model.head, optimizer, policy, encoder_prefix="encoder")
    audit.start()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_steps(model, optimizer, audit, steps=2, encoder_frozen=plan.encoder_frozen)
        audit.check()  # no frozen change, every trainable tensor got a gradient

    report = json.loads(audit.write(tmp_path / "update_scope.json").read_text())
    assert report["policy"] == policy
    assert report["frozen_changed"] == []
    assert set(report["totals"]) == {"encoder", "head", "adapters"}
    for counts in list(report["totals"].values()) + list(report["groups"].values()):
        assert tuple(counts) == COUNT_KEYS

    expected = {n for n in expected_trainable(policy, all_names(model), k)}
    enc_trainable = {n for n in expected if n.startswith("encoder.") and "lora_" not in n}
    adapters = {n for n in expected if "lora_" in n}
    enc, head, ada = (report["totals"][p] for p in ("encoder", "head", "adapters"))
    assert enc["tensors"] == ENCODER_TENSORS
    assert enc["trainable"] == enc["in_optimizer"] == enc["with_grad"] == len(enc_trainable)
    # changed: every trainable encoder tensor, except key biases whose gradient may be exactly zero
    assert len(enc_trainable) - KEY_BIASES <= enc["changed"] <= len(enc_trainable)
    assert head == {"tensors": 2, "trainable": 2, "in_optimizer": 2, "with_grad": 2, "changed": 2}
    assert ada["tensors"] == ada["trainable"] == ada["in_optimizer"] == ada["with_grad"] == len(adapters)
    assert ada["changed"] == len(adapters)  # two steps: B moves first, then A

    rows = {r["name"]: r for r in report["tensors"]}
    assert set(rows) == all_names(model)
    changed = {n for n, r in rows.items() if r["changed"]}
    assert changed <= expected  # frozen tensors unchanged despite weight decay: they are not in the optimizer

    groups = list(report["groups"])
    assert groups[:4] == ["embeddings", "layer.0", "layer.1", "pooler"]
    assert groups[4:] == (["head", "adapters"] if policy == "lora" else ["head"])
    total = ENCODER_TENSORS + HEAD_TENSORS + len(adapters)
    assert sum(g["tensors"] for g in report["groups"].values()) == total
    assert set(report["checkpoints"]) == {"before", "first_step", "last_step"}
    before = report["checkpoints"]["before"]["totals"]["encoder"]
    assert before["changed"] == 0 and before["with_grad"] == 0
    eval_tensors = sum(len(list(m.parameters())) for m in plan.frozen_modules)
    assert report["checkpoints"]["last_step"]["tensors_in_eval_mode_modules"] == eval_tensors


def test_modifying_a_frozen_tensor_raises() -> None:
    model = TinyTaskModel()
    apply_freeze(model.encoder, model.head, freeze_cfg("bottom_k", 1))
    optimizer = torch.optim.AdamW(optimizer_param_groups(model, weight_decay=0.1, lr=1e-2))
    audit = ScopeAudit(model.encoder, model.head, optimizer, "bottom_k", encoder_prefix="encoder")
    audit.start()
    with torch.no_grad():
        model.encoder.encoder.layer[0].attention.self.key.weight.add_(1.0)
    with pytest.raises(FrozenTensorChanged, match=r"encoder\.encoder\.layer\.0\.attention\.self\.key\.weight"):
        audit.after_step("first_step")
    assert audit.frozen_changed == ["encoder.encoder.layer.0.attention.self.key.weight"]
    assert audit.report()["frozen_changed"] == audit.frozen_changed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        audit.check(raise_on_frozen_change=False)  # only warns
        with pytest.raises(FrozenTensorChanged):
            audit.check()
    messages = [str(w.message) for w in caught if issubclass(w.category, UpdateScopeWarning)]
    assert any("1 frozen tensor(s) changed" in m for m in messages)
    assert any("never got a gradient" in m for m in messages)  # no backward happened in this test


def test_trainable_tensor_without_gradient_warns() -> None:
    model = TinyTaskModel(reads_pooler=False)  # the pooler trains but is never used
    apply_freeze(model.encoder, model.head, freeze_cfg("none"))
    optimizer = torch.optim.AdamW(optimizer_param_groups(model, weight_decay=0.0, lr=1e-2))
    audit = ScopeAudit(model.encoder, model.head, optimizer, "none", encoder_prefix="encoder")
    audit.start()
    train_steps(model, optimizer, audit)
    assert audit.trainable_without_grad == ["encoder.pooler.dense.weight", "encoder.pooler.dense.bias"]
    with pytest.warns(UpdateScopeWarning, match="never got a gradient.*encoder.pooler.dense.weight"):
        audit.check()


def test_optimizer_disagreeing_with_requires_grad_warns() -> None:
    model = TinyTaskModel()
    apply_freeze(model.encoder, model.head, freeze_cfg("encoder"))
    optimizer = torch.optim.SGD([model.head.classifier.weight], lr=0.1)  # bias left out by mistake
    audit = ScopeAudit(model.encoder, model.head, optimizer, "encoder", encoder_prefix="encoder")
    audit.start()
    train_steps(model, optimizer, audit, encoder_frozen=True)
    match = r"trainable but not in the optimizer \['head.classifier.bias'\]"
    with pytest.warns(UpdateScopeWarning, match=match):
        audit.check()


def test_audit_needs_start() -> None:
    model = TinyTaskModel()
    with pytest.raises(RuntimeError, match="start"):
        ScopeAudit(model.encoder, model.head, None, "none").after_step("x")


# --------------------------------------------------------------------------------------------------------
# Lightning
# --------------------------------------------------------------------------------------------------------

class TinyLitModule(pl.LightningModule):
    """Starts in eval mode and overrides on_validation_model_train with a blanket .train() — the two ways
    frozen parts silently get dropout back (PITFALLS.md); FreezeModeGuard must undo both."""

    def __init__(self, policy: str, k: int = 0, corrupt_frozen: bool = False):
        super().__init__()
        self.model = TinyTaskModel()
        self.freeze_plan = apply_freeze(self.model.encoder, self.model.head, freeze_cfg(policy, k))
        self.corrupt_frozen = corrupt_frozen
        self.mode_violations: list[str] = []
        self.train_steps_seen = 0
        self.eval()

    def _check_modes(self) -> None:
        frozen_ids = {id(m) for fm in self.freeze_plan.frozen_modules for m in fm.modules()}
        for name, module in self.model.named_modules():
            if module.training == (id(module) in frozen_ids):
                self.mode_violations.append(f"step {self.global_step}: {name} training={module.training}")

    def training_step(self, batch, batch_idx):
        self._check_modes()
        self.train_steps_seen += 1
        if self.corrupt_frozen:
            with torch.no_grad():
                self.model.encoder.embeddings.word_embeddings.weight.mul_(0.5)
        ids, mask, labels = batch
        encoder_ctx = torch.no_grad() if self.freeze_plan.encoder_frozen else torch.enable_grad()
        with encoder_ctx:
            enc = self.model.encoder(ids, attention_mask=mask)
        return nn.functional.cross_entropy(self.model.head(enc), labels)

    def validation_step(self, batch, batch_idx):
        ids, mask, labels = batch
        assert not self.model.training
        self.log("val_loss", nn.functional.cross_entropy(self.model(ids, mask), labels))

    def on_validation_model_train(self) -> None:
        self.train()

    def configure_optimizers(self):
        return torch.optim.AdamW(optimizer_param_groups(self.model, weight_decay=0.01, lr=1e-3))

    def train_dataloader(self):
        return loader(range(3))

    def val_dataloader(self):
        return loader([10])


def loader(seeds) -> torch.utils.data.DataLoader:
    """One batch of 4 per seed, in order."""
    parts = [batch(s) for s in seeds]
    dataset = torch.utils.data.TensorDataset(*(torch.cat(t) for t in zip(*parts)))
    return torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=False)


def make_trainer(tmp_path, callbacks) -> pl.Trainer:
    return pl.Trainer(
        max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
        num_sanity_val_steps=1, callbacks=callbacks,
    )


def test_lightning_fit_keeps_modes_and_writes_the_audit(tmp_path) -> None:
    module = TinyLitModule("bottom_k", k=1)
    out = tmp_path / "run"
    make_trainer(tmp_path, [FreezeModeGuard(), UpdateScopeAuditCallback(out)]).fit(module)
    assert module.train_steps_seen == 6
    assert module.mode_violations == []
    report = json.loads((out / "update_scope.json").read_text())
    assert report["policy"] == "bottom_k"
    assert report["frozen_changed"] == []
    assert report["steps_recorded"] == 2
    assert report["groups"]["embeddings"] == {"tensors": 5, "trainable": 0, "in_optimizer": 0, "with_grad": 0,
                                              "changed": 0}
    assert report["groups"]["layer.0"]["changed"] == 0 and report["groups"]["layer.0"]["trainable"] == 0
    layer1 = report["groups"]["layer.1"]
    assert layer1["trainable"] == layer1["in_optimizer"] == layer1["with_grad"] == layer1["tensors"]
    assert report["totals"]["head"]["changed"] == 2
    assert report["tensors"][0]["name"] == "encoder.embeddings.word_embeddings.weight"
    assert set(report["checkpoints"]) == {"before", "first_step", "last_step"}


def test_lightning_fit_fails_when_a_frozen_tensor_changes(tmp_path) -> None:
    module = TinyLitModule("embeddings", corrupt_frozen=True)
    path = tmp_path / "scope.json"
    with pytest.raises(FrozenTensorChanged, match="encoder.embeddings.word_embeddings.weight"):
        make_trainer(tmp_path, [FreezeModeGuard(), UpdateScopeAuditCallback(path)]).fit(module)
    assert module.train_steps_seen == 1  # stopped after the first step
    report = json.loads(path.read_text())
    assert report["frozen_changed"] == ["encoder.embeddings.word_embeddings.weight"]


@pytest.mark.parametrize("policy", ["encoder", "none"])
def test_the_task_module_keeps_no_encoder_graph_when_the_encoder_is_frozen(policy) -> None:
    """TaskModule itself: a frozen encoder runs without autograd (no activations kept); the head trains."""
    from bertlab.models.heads import TaskModel
    from bertlab.runtime.config import DataConfig, HeadConfig, OptimConfig, TaskSpec
    from bertlab.tasks.families import build_family
    from bertlab.training.module import TaskModule

    task = TaskSpec(name="t", family="sequence", monitor="val/accuracy", mode="max")
    family = build_family(task, 2, ["0", "1"], DataConfig())
    config = EncoderConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=32)
    bert = BertModel(config)
    model = TaskModel(bert, family.build_head(config, HeadConfig(), bert.embeddings.word_embeddings), "sequence")
    module = TaskModule(model, family, apply_freeze(model.encoder, model.head, freeze_cfg(policy)), OptimConfig())
    module.train()
    seen = []
    model.encoder.register_forward_hook(lambda mod, args, out: seen.append(out.last_hidden_state.requires_grad))
    ids = torch.randint(5, 50, (3, 7))
    logits = module({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([0, 1, 0]),
                     "index": torch.arange(3)})
    assert seen == [policy == "none"]
    assert logits.requires_grad


def test_a_policy_brings_its_defaults_unless_the_command_line_sets_them(train_run, tmp_path) -> None:
    import torch as _torch

    m = train_run("model=bert_tiny", "task=sst2", "freeze=encoder", "trainer.max_steps=1", name="defaults")
    hp = _torch.load(m["best_checkpoint"], map_location="cpu", weights_only=True)["hyper_parameters"]
    assert hp["config"]["optim"]["lr"] == 1e-2 and hp["head"]["pooling"] == "mean"
    assert "recommended" not in hp["config"]["freeze"]
    m = train_run("model=bert_tiny", "task=sst2", "freeze=encoder", "optim.lr=3e-3", "trainer.max_steps=1",
                  name="user")
    hp = _torch.load(m["best_checkpoint"], map_location="cpu", weights_only=True)["hyper_parameters"]
    assert hp["config"]["optim"]["lr"] == 3e-3 and hp["head"]["pooling"] == "mean"
    m = train_run("model=bert_tiny", "task=sst2", "freeze=none", "trainer.max_steps=1", name="none")
    hp = _torch.load(m["best_checkpoint"], map_location="cpu", weights_only=True)["hyper_parameters"]
    assert hp["config"]["optim"]["lr"] == 5e-5 and hp["head"]["pooling"] == "pooler"
