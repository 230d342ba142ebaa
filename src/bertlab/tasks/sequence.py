"""Sequence classification and regression (GLUE-style single sentences and pairs): pooled-vector head,
cross-entropy or MSE, accuracy / F1 / MCC or Pearson / Spearman. A document longer than the window is read in
windows whose vectors the head pools into one (``model.window_pooling``): one logit vector and one loss per
document, on its own label (:mod:`bertlab.data.documents`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bertlab.models.heads import SequenceClassificationHead
from bertlab.tasks import metrics
from bertlab.tasks.base import Family


class SequenceFamily(Family):
    head_kind = "sequence"

    @classmethod
    def logged_metrics(cls, task, data):
        if task.get("regression"):
            return {"loss": "min", "pearson": "max", "spearmanr": "max", "combined_score": "max"}
        return {"loss": "min", "accuracy": "max", "f1": "max", "matthews_correlation": "max"}

    def build_head(self, config, head, word_embeddings):
        return SequenceClassificationHead(config, head, self.num_labels)

    def stock_head_kind(self, head):
        # Attention over a long document's windows has weights no transformers class holds: a custom head.
        stock = head.pooling == "pooler" and head.window_pooling != "attention"
        return super().stock_head_kind(head) if stock else None

    def head_kwargs(self, batch):
        # A batch with long documents (data.long_text=windows) has a row per window: the head pools them.
        return {"window_doc": batch["window_doc"]} if "window_doc" in batch else {}

    def loss(self, logits, batch):
        if self.task.regression:
            return F.mse_loss(logits.float().squeeze(-1), batch["labels"].float())
        return F.cross_entropy(logits.float(), batch["labels"])

    def eval_step(self, logits, batch, state):
        logits = logits.float()
        if self.task.regression:
            per = F.mse_loss(logits.squeeze(-1), batch["labels"].float(), reduction="none")
            preds = logits.squeeze(-1)
        else:
            per = F.cross_entropy(logits, batch["labels"], reduction="none")
            preds = logits.argmax(-1)
        state.add_loss(per.sum(), per.numel())
        state.index.append(batch["index"].cpu())
        state.outputs.append(torch.stack([preds.float(), batch["labels"].float()], dim=1).cpu())

    def score(self, index, outputs, split, loss, extra):
        pairs = torch.cat(outputs)
        preds, target = pairs[:, 0], pairs[:, 1]
        if self.task.regression:
            return {"loss": loss, **metrics.regression_scores(preds, target)}
        return {"loss": loss, **metrics.classification_scores(preds.long(), target.long(), self.num_labels)}
