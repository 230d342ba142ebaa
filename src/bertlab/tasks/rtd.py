"""Replaced-token detection (ELECTRA): the generator's masked-LM loss plus ``task.disc_weight`` times the
discriminator's binary cross entropy over every real token, and the family that trains it.

The batch arrives masked as for ``task=mlm`` (:func:`bertlab.data.mlm.mask_tokens`: ``labels`` hold the original
ids at the selected positions); the model (:mod:`bertlab.models.rtd`) samples the generator's replacements and
runs the discriminator on them. A position is "replaced" when the discriminator's input differs from the
original there: a sampled token equal to the original counts as original, as in ELECTRA. Every real token
([CLS] and [SEP] included, padding excluded) is scored, as ELECTRA does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bertlab.data.mlm import IGNORE_INDEX
from bertlab.models.rtd import ReplacedTokenDetectionHead, RTDOutput
from bertlab.runtime.errors import ConfigError
from bertlab.tasks.base import Family
from bertlab.tasks.mlm import mlm_loss


def original_ids(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, T) the text before masking: ``labels`` where a position was selected, the input elsewhere."""
    return torch.where(batch["labels"] != IGNORE_INDEX, batch["labels"], batch["input_ids"])


def replaced_labels(original: torch.Tensor, corrupted: torch.Tensor,
                    attention_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(is_replaced (B, T) float 0/1, real (B, T) bool): 1 where the discriminator's input differs from the
    original text; ``real`` marks the tokens scored (not padding)."""
    real = attention_mask.bool() if attention_mask is not None else torch.ones_like(original, dtype=torch.bool)
    return ((corrupted != original) & real).float(), real


def rtd_losses(out: RTDOutput, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The generator's mean MLM loss over the selected positions, the discriminator's mean BCE over the real
    tokens, and what the metrics count (labels, real-token mask, selected original ids)."""
    selected = batch["labels"][batch["labels"] != IGNORE_INDEX]  # (N,): the order of the head's positions
    labels, real = replaced_labels(original_ids(batch), out.corrupted, batch.get("attention_mask"))
    bce = F.binary_cross_entropy_with_logits(out.logits, labels, reduction="none")  # (B, T)
    disc_sum = (bce * real).sum()
    n_real = real.sum()
    return {"gen": mlm_loss(out.generator_logits, selected), "disc": disc_sum / n_real.clamp(min=1),
            "disc_sum": disc_sum, "labels": labels, "real": real, "selected": selected}


class RTDFamily(Family):
    """ELECTRA's pre-training: ``loss = gen_loss + task.disc_weight × disc_loss`` (module docstring). Metrics:
    the combined loss, each part, the discriminator's accuracy, precision and recall on replaced tokens, the share
    of real tokens replaced (the majority-class accuracy is 1 minus it), and the generator's accuracy."""

    head_kind = None  # no transformers class holds generator + discriminator; init_from takes the encoder

    @classmethod
    def logged_metrics(cls, task, data):
        return {"loss": "min", "gen_loss": "min", "disc_loss": "min", "disc_accuracy": "max",
                "disc_precision": "max", "disc_recall": "max", "replaced_fraction": None, "mlm_accuracy": "max"}

    def __init__(self, task, num_labels, labels, data_cfg=None):
        super().__init__(task, num_labels, labels, data_cfg)
        if task.nsp:
            raise ConfigError("task.nsp=true is for task=mlm: replaced-token detection reads single segments "
                              "(task.nsp=false)")

    def build_head(self, config, head, word_embeddings):
        return ReplacedTokenDetectionHead(config, size=self.task.generator_size, layers=self.task.generator_layers,
                                          temperature=self.task.temperature)

    def stock_head_kind(self, head):
        return None

    def head_kwargs(self, batch):
        return {"positions": (batch["labels"] != IGNORE_INDEX).nonzero()}

    def loss(self, out, batch):
        parts = rtd_losses(out, batch)
        return parts["gen"] + self.task.disc_weight * parts["disc"]

    def eval_step(self, out, batch, state):
        parts = rtd_losses(out, batch)
        n = parts["selected"].numel()
        state.add_loss(parts["gen"] * n, n)  # the generator's part; score() adds the discriminator's
        labels, real = parts["labels"].bool(), parts["real"]
        predicted = (out.logits > 0) & real
        counts = {
            "gen_correct": (out.generator_logits.argmax(-1) == parts["selected"]).sum(),
            "disc_loss_sum": parts["disc_sum"], "disc_count": real.sum(),
            "disc_correct": ((predicted == labels) & real).sum(), "replaced": labels.sum(),
            "predicted": predicted.sum(), "true_positive": (predicted & labels).sum(),
        }
        for key, value in counts.items():
            state.extra[key] = state.extra.get(key, 0.0) + float(value)
        state.extra["gen_count"] = state.extra.get("gen_count", 0.0) + n
        state.index.append(batch["index"].cpu())

    def score(self, index, outputs, split, loss, extra):
        def ratio(a: str, b: str) -> float:
            return extra.get(a, 0.0) / max(extra.get(b, 0.0), 1.0)

        gen_loss = loss if extra.get("gen_count") else 0.0
        disc_loss = ratio("disc_loss_sum", "disc_count")
        return {"loss": gen_loss + self.task.disc_weight * disc_loss, "gen_loss": gen_loss, "disc_loss": disc_loss,
                "disc_accuracy": ratio("disc_correct", "disc_count"), "disc_precision": ratio("true_positive", "predicted"),
                "disc_recall": ratio("true_positive", "replaced"), "replaced_fraction": ratio("replaced", "disc_count"),
                "mlm_accuracy": ratio("gen_correct", "gen_count")}
