"""Multiple choice (SWAG): one shared score per (context, choice) row, softmax over an example's choices."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bertlab.models.heads import MultipleChoiceHead
from bertlab.tasks.base import Family


class MultipleChoiceFamily(Family):
    """One shared linear score per (context, choice) row, softmax over an example's choices
    (``BertForMultipleChoice``); padded choices (examples with fewer choices than the batch's most) never win."""

    @classmethod
    def logged_metrics(cls, task, data):
        return {"loss": "min", "accuracy": "max"}

    head_kind = "multiple_choice"

    def build_head(self, config, head, word_embeddings):
        return MultipleChoiceHead(config, head)

    def stock_head_kind(self, head):
        return super().stock_head_kind(head) if head.pooling == "pooler" else None

    def head_kwargs(self, batch):
        return {"num_choices": batch["input_ids"].shape[1]}

    @staticmethod
    def _logits(scores, batch):
        if "choice_mask" in batch:
            scores = scores.masked_fill(~batch["choice_mask"], -1e9)  # float32 scores
        return scores

    def loss(self, scores, batch):
        return F.cross_entropy(self._logits(scores, batch), batch["labels"])

    def eval_step(self, scores, batch, state):
        logits = self._logits(scores, batch)
        per = F.cross_entropy(logits, batch["labels"], reduction="none")
        state.add_loss(per.sum(), per.numel())
        state.index.append(batch["index"].cpu())
        state.outputs.append(torch.stack([logits.argmax(-1), batch["labels"]], dim=1).cpu())

    def score(self, index, outputs, split, loss, extra):
        pairs = torch.cat(outputs)
        return {"loss": loss, "accuracy": float((pairs[:, 0] == pairs[:, 1]).float().mean())}
