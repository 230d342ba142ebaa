"""Per task family: which head, the loss, and the metrics the field reports.

Evaluation is exact: each rank keeps (example index, prediction) pairs, the pairs of all ranks are gathered
at the end of the epoch, de-duplicated by index and scored once — so accuracy, F1 and SQuAD scores count
every example exactly once whatever the world size and batch size (``num_examples`` proves it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertlab.config import ConfigError, EncoderConfig, HeadConfig, TaskSpec
from bertlab.data.features import Split
from bertlab.data.mlm import IGNORE_INDEX, mlm_loss
from bertlab.heads import (
    CausalLMHead,
    MultipleChoiceHead,
    PreTrainingHead,
    SequenceClassificationHead,
    SpanHead,
    TokenClassificationHead,
)
from bertlab.tasks import metrics
from bertlab.tasks.clm import causal_lm_loss, generate, next_token_targets, target_positions


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


class Family:
    head_kind: str | None = None

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

    def eval_step(self, out: Any, batch: dict[str, torch.Tensor], state: EvalState) -> None:
        raise NotImplementedError

    def score(self, index: np.ndarray, outputs: list[Any], split: Split, loss: float,
              extra: dict[str, float]) -> dict[str, float]:
        raise NotImplementedError

    def head_kwargs(self, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        return {}

    def run_summary(self, model: nn.Module, tokenizer: Any) -> dict[str, Any]:
        """What the family adds to metrics.json and the printed summary after training (clm: samples)."""
        return {}


class SequenceFamily(Family):
    head_kind = "sequence"

    def build_head(self, config, head, word_embeddings):
        return SequenceClassificationHead(config, head, self.num_labels)

    def stock_head_kind(self, head):
        return super().stock_head_kind(head) if head.pooling == "pooler" else None

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


class TokenFamily(Family):
    head_kind = "token"

    def build_head(self, config, head, word_embeddings):
        return TokenClassificationHead(config, head, self.num_labels)

    def loss(self, logits, batch):
        return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)

    def eval_step(self, logits, batch, state):
        labels = batch["labels"]
        per = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
        state.add_loss(per, (labels != IGNORE_INDEX).sum())
        preds = logits.argmax(-1).cpu()
        lengths = batch["attention_mask"].sum(1).cpu()
        state.index.append(batch["index"].cpu())
        state.outputs.extend(preds[i, : lengths[i]].numpy() for i in range(len(preds)))

    def score(self, index, outputs, split, loss, extra):
        from bertlab.tasks.ner import decode_word_predictions

        gold = split.meta["gold_tags"]
        word_ids = split.meta["word_ids"]
        o_id = self.labels.index("O") if "O" in self.labels else 0
        true_seqs, pred_seqs = [], []
        for i, pred in zip(index.tolist(), outputs):
            words = decode_word_predictions(pred, word_ids[i], len(gold[i]), o_id=o_id)
            true_seqs.append(gold[i])
            pred_seqs.append([self.labels[w] for w in words])
        return {"loss": loss, **metrics.entity_scores(true_seqs, pred_seqs)}


class QAFamily(Family):
    head_kind = "span"

    def build_head(self, config, head, word_embeddings):
        return SpanHead(config, head)

    def loss(self, logits, batch):
        # Mean of start and end cross-entropies, as BertForQuestionAnswering, over the real tokens only: with
        # dynamic padding the pad positions of a window depend on its batch, so counting them in the softmax
        # would make the loss (and val/loss) depend on the batch size and the world size.
        t = logits.shape[1]
        start = batch["start_positions"].clamp(0, t - 1)
        end = batch["end_positions"].clamp(0, t - 1)
        if "attention_mask" in batch:
            logits = logits.masked_fill(~batch["attention_mask"].bool()[..., None], -1e4)  # float32 logits
        return (F.cross_entropy(logits[..., 0], start) + F.cross_entropy(logits[..., 1], end)) / 2

    def eval_step(self, logits, batch, state):
        if "start_positions" in batch:  # labelled evaluation windows carry the first answer's positions
            state.add_loss(self.loss(logits, batch) * len(logits), len(logits))
        mask = batch["attention_mask"].bool()
        logits = logits.masked_fill(~mask[..., None], -1e4).cpu()
        lengths = mask.sum(1).cpu()
        state.index.append(batch["index"].cpu())
        state.outputs.extend(logits[i, : lengths[i]].numpy() for i in range(len(logits)))

    def score(self, index, outputs, split, loss, extra):
        from bertlab.tasks.qa import postprocess_qa_predictions, squad_references, squad_scores

        examples = split.meta["examples"]
        features = split.meta["qa_features"]
        if getattr(self.data_cfg, "version_2_with_negative", False):
            return self._score_v2(index, outputs, examples, features, loss)
        predictions = postprocess_qa_predictions(
            examples, features, [o[:, 0] for o in outputs], [o[:, 1] for o in outputs],
            feature_indices=index.tolist(), n_best_size=self.data_cfg.n_best_size,
            max_answer_length=self.data_cfg.max_answer_length, use_max_context=True,
        )
        references = squad_references(examples)
        arrived = {k: references[k] for k in predictions}
        scores = squad_scores(predictions, arrived)
        self.last_predictions = predictions
        return {"loss": loss, **scores, "num_examples": len(predictions)}

    def _score_v2(self, index, outputs, examples, features, loss):
        """SQuAD 2.0: "" when the null score wins by more than data.null_score_diff_threshold; the official v2
        metrics, with the best threshold on this split from the null-score differences."""
        from bertlab.tasks.qa import postprocess_qa_predictions_v2, squad_references, squad_v2_scores

        cfg = self.data_cfg
        predictions, diffs = postprocess_qa_predictions_v2(
            examples, features, [o[:, 0] for o in outputs], [o[:, 1] for o in outputs],
            feature_indices=index.tolist(), null_score_diff_threshold=cfg.null_score_diff_threshold,
            n_best_size=cfg.n_best_size, max_answer_length=cfg.max_answer_length, use_max_context=True,
        )
        references = squad_references(examples)
        scores = squad_v2_scores(predictions, {k: references[k] for k in predictions}, na_probs=diffs)
        scores.pop("total")
        self.last_predictions = predictions
        return {"loss": loss, **scores, "num_examples": len(predictions)}


class MLMFamily(Family):
    head_kind = "mlm"

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


class CLMFamily(Family):
    """Next-token language modelling with teacher forcing (``bertlab.tasks.clm``); needs a left-to-right
    encoder. Metrics per WordPiece token: loss, perplexity, accuracy; greedy samples from ``task.prompts``."""

    head_kind = None  # no transformers layout for a recurrent LM

    def __init__(self, task, num_labels, labels, data_cfg=None):
        super().__init__(task, num_labels, labels, data_cfg)
        if task.nsp:
            raise ConfigError("task.nsp=true is for task=mlm: a causal LM reads single segments (task.nsp=false)")

    def build_head(self, config, head, word_embeddings):
        # BERT's config has no `bidirectional`: self-attention reads both ways, so it is bidirectional too.
        if getattr(config, "bidirectional", True):
            raise ConfigError(
                "task=clm predicts each token from the tokens before it, so it needs a left-to-right encoder, "
                "but this one reads the whole segment in both directions (model.bidirectional=true, or a BERT "
                "encoder) and would see the token it must predict. Use model=lstm (or model.bidirectional=false)"
            )
        return CausalLMHead(config, word_embeddings, tie=getattr(config, "tie_word_embeddings", True))

    def stock_head_kind(self, head):
        return None

    def head_kwargs(self, batch):
        return {"positions": target_positions(next_token_targets(batch["input_ids"], batch.get("attention_mask")))}

    def loss(self, logits, batch):
        return causal_lm_loss(logits, batch["input_ids"], batch.get("attention_mask"))

    def eval_step(self, logits, batch, state):
        targets = next_token_targets(batch["input_ids"], batch.get("attention_mask"))
        selected = targets[targets != IGNORE_INDEX]  # (N,): the order of the head's positions
        n = selected.numel()
        state.add_loss(mlm_loss(logits, selected) * n, n)
        state.extra["correct"] = state.extra.get("correct", 0.0) + float((logits.argmax(-1) == selected).sum())
        state.extra["count"] = state.extra.get("count", 0.0) + n
        state.index.append(batch["index"].cpu())

    def score(self, index, outputs, split, loss, extra):
        return {"loss": loss, "perplexity": math.exp(min(loss, 50.0)),
                "accuracy": extra.get("correct", 0.0) / max(extra.get("count", 0.0), 1.0)}

    def run_summary(self, model, tokenizer):
        samples = [{"prompt": p, "continuation": generate(model, tokenizer, p, self.task.max_new_tokens)}
                   for p in self.task.prompts or []]
        return {"samples": samples} if samples else {}


class MultipleChoiceFamily(Family):
    """One shared linear score per (context, choice) row, softmax over an example's choices
    (``BertForMultipleChoice``); padded choices (examples with fewer choices than the batch's most) never win."""

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


FAMILIES = {"sequence": SequenceFamily, "token": TokenFamily, "qa": QAFamily, "mlm": MLMFamily, "clm": CLMFamily,
            "multiple_choice": MultipleChoiceFamily}


def build_family(task: TaskSpec, num_labels: int, labels: list[str] | None, data_cfg: Any) -> Family:
    try:
        cls = FAMILIES[task.family]
    except KeyError:
        raise ValueError(f"task family {task.family!r} has no implementation yet") from None
    return cls(task, num_labels, labels, data_cfg)
