"""What every task family provides: the head it builds, the loss on a batch, a per-rank evaluation step, and
the scores over a whole split.

Evaluation is exact: each rank keeps (example index, prediction) pairs, the pairs of all ranks are gathered
at the end of the epoch, de-duplicated by index and scored once — so accuracy, F1 and SQuAD scores count
every example exactly once whatever the world size and batch size (``num_examples`` proves it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from bertlab.data.features import Split
from bertlab.runtime.config import EncoderConfig, HeadConfig, TaskSpec


@dataclass
class EvalState:
    """What one rank collected during an evaluation epoch (plain CPU objects, cheap to gather)."""

    index: list[torch.Tensor] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)
    loss_sum: float = 0.0
    loss_count: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def add_loss(self, total: torch.Tensor, count: int | float) -> None:
        self.loss_sum += float(total)
        self.loss_count += float(count)


@dataclass
class Evaluation:
    """What a family computes over a whole split: its scores, and the predictions it writes (QA: answer text
    per example id, to ``predictions/<split>_predictions.json``), or None."""

    scores: dict[str, float]
    predictions: dict[str, Any] | None = None


class Family:
    head_kind: str | None = None

    @classmethod
    def logged_metrics(cls, task: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, str | None]:
        """The names :meth:`score` returns for a task and data settings (plain mappings: checked before the
        typed configuration exists), each with its better direction: "min" (a loss), "max" (a score) or None
        (a count or threshold, not for selecting on). ``runtime.checks`` refuses a monitor not among them."""
        return {"loss": "min"}

    def __init__(self, task: TaskSpec, num_labels: int, labels: list[str] | None, data_cfg: Any = None):
        self.task = task
        self.num_labels = num_labels
        self.labels = labels
        self.data_cfg = data_cfg

    def build_head(self, config: EncoderConfig, head: HeadConfig, word_embeddings: nn.Embedding) -> nn.Module:
        raise NotImplementedError

    def stock_head_kind(self, head: HeadConfig) -> str | None:
        """The HF layout this head matches (for export), or None for custom heads."""
        plain = head.hidden_layers == 0 and head.layers == "last"
        return self.head_kind if plain else None

    def loss(self, out: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def trainable_modules(self) -> dict[str, nn.Module]:
        """Modules that train with the model but are no part of it (never exported): the LightningModule holds
        them (optimizer, device, training checkpoints). Distillation's layer-matching projection; none here."""
        return {}

    def training_loss(self, forward: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The loss of a training batch, ``forward`` being the module's forward pass. A family that must
        control how the batch is run (the bi-encoder's gradient caching) overrides this."""
        return self.loss(forward(batch), batch)

    def eval_step(self, out: Any, batch: dict[str, torch.Tensor], state: EvalState) -> None:
        raise NotImplementedError

    def score(self, index: np.ndarray, outputs: list[Any], split: Split, loss: float,
              extra: dict[str, float]) -> dict[str, float]:
        raise NotImplementedError

    def evaluate(self, index: np.ndarray, outputs: list[Any], split: Split, loss: float,
                 extra: dict[str, float]) -> Evaluation:
        """The scores over a split (:meth:`score`) and the predictions a family writes (none by default)."""
        return Evaluation(self.score(index, outputs, split, loss, extra))

    def head_kwargs(self, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        return {}

    def run_summary(self, model: nn.Module, tokenizer: Any) -> dict[str, Any]:
        """What the family adds to metrics.json and the printed summary after training (clm: samples)."""
        return {}
