"""Source-prototype study: frozen backbone vs full update, reproduced through bertlab's freeze + audit.

Run:  python experiments/update_scope_prototype.py

The seed prototype (../shared/docs/BERT-SEMANTICS.md, "Update scope"): one ``nn.TransformerEncoderLayer``
(d_model 4, 2 heads, FFN 8, ReLU, post-norm, dropout 0) with learned token + position embeddings and a linear
4→2 classifier on position 0; every parameter overwritten with fixed values; float64 on CPU; one SGD step at
lr 0.1 on two hand-set examples. It is not BERT and makes no accuracy claim: it only shows which named
parameter tensors get a gradient and change.

Here the update scope is chosen by bertlab (``apply_freeze(model.backbone, model.classifier,
FreezeConfig(policy=...))``, the optimizer gets ``FreezePlan.trainable_parameters``) and the counts come from
``bertlab.training.freeze.ScopeAudit``, not from this script. Expected: loss before the step 0.97189157079009 in both
modes; freeze=encoder: 0 of 14 backbone tensors get a gradient or change, 2 of 2 head tensors do;
freeze=none: 14 of 14 and 2 of 2. The last line printed is one JSON object with those counts.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import torch
from torch import nn

from bertlab.runtime.config import FreezeConfig
from bertlab.training.audit import ScopeAudit
from bertlab.training.freeze import apply_freeze

DTYPE = torch.float64
EXPECTED_LOSS = 0.97189157079009


class TinyBackbone(nn.Module):
    """A small bidirectional Transformer encoder, not a BERT implementation (the seed's, unchanged)."""

    def __init__(self, vocab_size: int = 6, seq_len: int = 4, d_model: int = 4):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Parameter(torch.zeros(1, seq_len, d_model))
        self.encoder_layer = nn.TransformerEncoderLayer(
            d_model=d_model,
            nhead=2,
            dim_feedforward=8,
            dropout=0.0,
            activation="relu",
            batch_first=True,
            norm_first=False,
            bias=True,
            layer_norm_eps=1e-5,
        )

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        x = self.token_embedding(token_ids) + self.position_embedding  # (B, T, 4)
        return self.encoder_layer(x)  # (B, T, 4)


class TinySequenceClassifier(nn.Module):
    """CLS-position linear classifier on top of the toy backbone."""

    def __init__(self):
        super().__init__()
        self.backbone = TinyBackbone()
        self.classifier = nn.Linear(4, 2)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        contextual = self.backbone(token_ids)  # (B, T, 4)
        return self.classifier(contextual[:, 0, :])  # (B, 2)


def assign_all_parameters(model: TinySequenceClassifier) -> None:
    """Overwrite every initialized parameter with deterministic fixed values (the seed's values)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            i = torch.arange(parameter.numel(), dtype=DTYPE, device="cpu")
            if name.endswith("norm1.weight") or name.endswith("norm2.weight"):
                value = torch.ones_like(i)
            elif name.endswith("bias"):
                value = (i.remainder(5) - 2.0) * 0.01
            else:
                value = (i.remainder(9) - 4.0) * 0.025
            parameter.copy_(value.reshape(parameter.shape))
        model.backbone.token_embedding.weight.copy_(torch.tensor(
            [
                [0.10, 0.00, 0.20, -0.10],  # [CLS]
                [0.20, 0.10, 0.00, 0.30],  # good
                [-0.20, 0.10, 0.10, 0.00],  # bad
                [0.10, -0.10, 0.10, 0.20],  # movie
                [-0.10, 0.20, 0.00, 0.10],  # not
                [0.00, 0.20, 0.30, -0.10],  # great
            ], dtype=DTYPE))
        model.backbone.position_embedding.copy_(torch.tensor(
            [[[0.00, 0.01, 0.02, 0.03],
              [0.01, 0.00, 0.03, 0.02],
              [0.02, 0.03, 0.00, 0.01],
              [0.03, 0.02, 0.01, 0.00]]], dtype=DTYPE))
        model.classifier.weight.copy_(torch.tensor(
            [[0.20, -0.30, 0.40, 0.10],
             [-0.10, 0.20, -0.20, 0.30]], dtype=DTYPE))
        model.classifier.bias.copy_(torch.tensor([0.05, -0.03], dtype=DTYPE))
    if any(not torch.isfinite(p).all() for p in model.parameters()):
        raise RuntimeError("non-finite fixed parameter")


def examples() -> tuple[torch.Tensor, torch.Tensor]:
    vocab = {"[CLS]": 0, "good": 1, "bad": 2, "movie": 3, "not": 4, "great": 5}
    token_ids = torch.tensor([
        [vocab["[CLS]"], vocab["good"], vocab["movie"], vocab["great"]],
        [vocab["[CLS]"], vocab["not"], vocab["bad"], vocab["movie"]],
    ], dtype=torch.long)  # (2, 4)
    labels = torch.tensor([1, 0], dtype=torch.long)  # (2,)
    return token_ids, labels


def one_update(policy: str, initial: TinySequenceClassifier, token_ids: torch.Tensor,
               labels: torch.Tensor) -> tuple[float, dict[str, Any]]:
    """One SGD step (lr 0.1) under ``freeze=<policy>``; returns the loss before the step and the audit."""
    model = TinySequenceClassifier().to(dtype=DTYPE, device="cpu")
    model.load_state_dict(initial.state_dict())
    model.train()
    plan = apply_freeze(model.backbone, model.classifier, FreezeConfig(policy=policy))  # frozen parts → eval
    optimizer = torch.optim.SGD([p for _, p in plan.trainable_parameters(model)], lr=0.1)
    audit = ScopeAudit(model.backbone, model.classifier, optimizer, policy,
                       encoder_prefix="backbone", head_prefix="classifier")
    audit.start()

    optimizer.zero_grad(set_to_none=True)
    # As bertlab's LightningModule does: a fully frozen encoder runs without an autograd graph.
    with torch.no_grad() if plan.encoder_frozen else contextlib.nullcontext():
        features = model.backbone(token_ids)[:, 0, :]  # (B, 4), position 0
    logits = model.classifier(features)  # (B, 2)
    loss = nn.functional.cross_entropy(logits, labels)
    loss.backward()
    audit.record_grads()
    optimizer.step()
    audit.after_step("one_step")  # raises FrozenTensorChanged if a frozen tensor moved
    return float(loss.detach()), audit.report()


def main() -> None:
    torch.set_num_threads(1)
    token_ids, labels = examples()
    initial = TinySequenceClassifier().to(dtype=DTYPE, device="cpu")
    assign_all_parameters(initial)
    if len(dict(initial.named_parameters())) != 16:
        raise RuntimeError("expected 16 named parameter tensors (14 backbone + 2 head)")

    results = {}
    for name, policy in (("frozen", "encoder"), ("full", "none")):
        loss, report = one_update(policy, initial, token_ids, labels)
        enc, head = report["totals"]["encoder"], report["totals"]["head"]
        results[name] = (policy, loss, enc, head)

    print(f"{'mode':<8} {'freeze':<8} {'loss before':>18} {'backbone grad':>14} {'backbone chg':>13} "
          f"{'head grad':>10} {'head chg':>9}")
    for name, (policy, loss, enc, head) in results.items():
        print(f"{name:<8} {policy:<8} {loss:>18.14f} {enc['with_grad']:>7}/{enc['tensors']:<6} "
              f"{enc['changed']:>6}/{enc['tensors']:<6} {head['with_grad']:>5}/{head['tensors']:<4} "
              f"{head['changed']:>4}/{head['tensors']:<4}")

    frozen_loss, full_loss = results["frozen"][1], results["full"][1]
    if abs(frozen_loss - full_loss) > 1e-12:
        raise RuntimeError(f"the two modes start from different losses: {frozen_loss} vs {full_loss}")

    def counts(enc: dict[str, int], head: dict[str, int]) -> dict[str, int]:
        return {"backbone_with_grad": enc["with_grad"], "backbone_changed": enc["changed"],
                "head_with_grad": head["with_grad"], "head_changed": head["changed"]}

    print(json.dumps({
        "loss_before": full_loss,
        "frozen": counts(*results["frozen"][2:]),
        "full": counts(*results["full"][2:]),
    }))


if __name__ == "__main__":
    main()
