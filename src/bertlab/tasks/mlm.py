"""Masked language modelling (with optional next-sentence prediction): the masked-LM loss and the MLM family.

The corruption of batches (:func:`bertlab.data.mlm.mask_tokens`) and the NSP pairs are data
(:mod:`bertlab.data.mlm`); here the loss over the selected positions, the metrics, perplexity.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bertlab.data.mlm import IGNORE_INDEX
from bertlab.models.heads import PreTrainingHead
from bertlab.tasks.base import Family


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross entropy averaged over the selected positions only: sum of their losses / their count.

    Positions labelled ``IGNORE_INDEX`` contribute nothing to the value and get no gradient. Half-precision
    logits are upcast to float32 first (fp16/bf16 softmax over a 30k vocabulary loses too much); float32
    and float64 logits keep their dtype. When no position is selected (a short batch can draw none) the
    loss is 0.0 with a zero gradient, not the NaN that ``cross_entropy(reduction="mean")`` returns for
    0 / 0: the denominator is clamped to at least 1.

    Shapes: ``logits`` (..., V), ``labels`` (...) long → scalar.
    """
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match labels {tuple(labels.shape)} + (V,)")
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    flat_logits = logits.reshape(-1, logits.shape[-1])  # (N, V)
    flat_labels = labels.reshape(-1)  # (N,)
    total = F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE_INDEX, reduction="sum")
    count = (flat_labels != IGNORE_INDEX).sum().clamp(min=1)
    return total / count


# ----------------------------------------------------------------------------------------------------
# Next sentence prediction (the original BERT create_pretraining_data.py, without its masking step)
# ----------------------------------------------------------------------------------------------------


class MLMFamily(Family):
    head_kind = "mlm"

    @classmethod
    def logged_metrics(cls, task, data):
        nsp = {"nsp_accuracy": "max", "nsp_loss": "min", "mlm_loss": "min"} if task.get("nsp") else {}
        return {"loss": "min", "perplexity": "min", "mlm_accuracy": "max", **nsp}

    def build_head(self, config, head, word_embeddings):
        return PreTrainingHead(config, word_embeddings, nsp=self.task.nsp)

    @property
    def pretraining_kind(self) -> str:
        return "pretraining" if self.task.nsp else "mlm"

    def stock_head_kind(self, head):
        return self.pretraining_kind

    def head_kwargs(self, batch):
        return {"positions": (batch["labels"] != IGNORE_INDEX).nonzero()}

    def _losses(self, out, batch):
        mlm_logits, nsp_logits = out
        selected = batch["labels"][batch["labels"] != IGNORE_INDEX]
        mlm = mlm_loss(mlm_logits, selected)
        nsp = F.cross_entropy(nsp_logits, batch["next_sentence_label"]) if nsp_logits is not None else None
        return mlm, nsp, selected

    def loss(self, out, batch):
        mlm, nsp, _ = self._losses(out, batch)
        return mlm + nsp if nsp is not None else mlm

    def eval_step(self, out, batch, state):
        mlm_logits, nsp_logits = out
        mlm, nsp, selected = self._losses(out, batch)
        n = selected.numel()
        state.add_loss(mlm * n, n)
        state.extra["mlm_correct"] = state.extra.get("mlm_correct", 0.0) + float((mlm_logits.argmax(-1) == selected).sum())
        state.extra["mlm_count"] = state.extra.get("mlm_count", 0.0) + n
        if nsp_logits is not None:
            label = batch["next_sentence_label"]
            state.extra["nsp_correct"] = state.extra.get("nsp_correct", 0.0) + float((nsp_logits.argmax(-1) == label).sum())
            state.extra["nsp_loss"] = state.extra.get("nsp_loss", 0.0) + float(nsp) * len(label)
        state.index.append(batch["index"].cpu())

    def score(self, index, outputs, split, loss, extra):
        result = {"loss": loss, "perplexity": math.exp(min(loss, 50.0)),
                  "mlm_accuracy": extra.get("mlm_correct", 0.0) / max(extra.get("mlm_count", 0.0), 1.0)}
        if self.task.nsp:
            n = max(len(index), 1)
            result["nsp_accuracy"] = extra.get("nsp_correct", 0.0) / n
            result["nsp_loss"] = extra.get("nsp_loss", 0.0) / n
            result["loss"] = loss + result["nsp_loss"]
            result["mlm_loss"] = loss
        return result
