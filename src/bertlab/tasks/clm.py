"""Causal (next-token) language modelling with teacher forcing, and greedy generation.

Teacher forcing: the encoder reads the gold tokens, and the target at each position is the gold token that
follows it, so position ``t`` learns P(x[t+1] | x[0..t]). A mistake the model would make at ``t`` is never fed
back as the context of ``t+1`` (the context is always the truth), which keeps training stable; the price is
that generation, which must feed back its own guesses, sees a situation training never showed it.

A segment is ``[CLS] w1 … wn [SEP]`` (the raw-text segments of pre-training, without NSP and without
masking): [CLS] serves as the start symbol and [SEP] as the end of the segment, so the targets are
``w1 … wn [SEP]``. Padding is never a target and is never read (the recurrent encoder packs its input).
Loss, perplexity and accuracy are per WordPiece token, so the perplexity is not comparable with the
word-level numbers usually quoted for WikiText-2.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from bertlab.data.mlm import IGNORE_INDEX
from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.models.heads import CausalLMHead
from bertlab.runtime.errors import ConfigError
from bertlab.tasks.base import Family
from bertlab.tasks.mlm import mlm_loss


def next_token_targets(input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T) → (B, T) targets: ``input_ids`` shifted left by one; ``IGNORE_INDEX`` where the next position
    is padding and at the last column (nothing follows it)."""
    targets = torch.full_like(input_ids, IGNORE_INDEX)
    targets[:, :-1] = input_ids[:, 1:]
    if attention_mask is not None:
        targets[:, :-1] = targets[:, :-1].masked_fill(attention_mask[:, 1:] == 0, IGNORE_INDEX)
    return targets


def target_positions(targets: torch.Tensor) -> torch.Tensor:
    """(N, 2) [batch, token] indices of the positions that have a target (what the head scores)."""
    return (targets != IGNORE_INDEX).nonzero()


def causal_lm_loss(logits: torch.Tensor, input_ids: torch.Tensor,
                   attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean next-token cross entropy over real targets.

    ``logits``: (B, T, V) for every position, or (N, V) for the positions of :func:`target_positions` (in
    that order). Padded positions contribute nothing, whatever their logits.
    """
    targets = next_token_targets(input_ids, attention_mask)
    if logits.dim() == 2:
        targets = targets[targets != IGNORE_INDEX]  # (N,), row-major: the order of target_positions
    return mlm_loss(logits, targets)


@torch.no_grad()
def generate(model: nn.Module, tokenizer: EncoderTokenizer, prompt: str, n_tokens: int) -> str:
    """Greedy continuation of ``prompt`` by up to ``n_tokens`` pieces; returns the continuation's text.

    The prompt is read as the template's start (``[CLS]``, RoBERTa's ``<s>``) + its pieces (how training segments
    start); each step appends the most likely next piece and stops at the template's end token ([SEP], ``</s>``).
    Padding, start and mask tokens never occur as targets and are excluded. ``model`` is a ``TaskModel`` with a causal LM head; it runs in eval mode and
    its mode is restored afterwards. Each step re-reads the whole sequence: a few tokens, no state cache.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    start = list(tokenizer.template.prefix)
    end = tokenizer.template.suffix[-1] if tokenizer.template.suffix else tokenizer.sep_id
    ids = start + tokenizer.encode_batch([prompt], add_special_tokens=False)[0].ids
    banned = torch.tensor([i for i in (tokenizer.pad_id, *start, tokenizer.mask_id) if i is not None and i != end],
                          device=device)
    new: list[int] = []
    try:
        for _ in range(n_tokens):
            input_ids = torch.tensor([ids + new], device=device)  # (1, T)
            last = torch.tensor([[0, input_ids.shape[1] - 1]], device=device)
            logits = model({"input_ids": input_ids}, positions=last)[0]  # (V,)
            logits[banned] = float("-inf")
            token = int(logits.argmax())
            if token == end:
                break
            new.append(token)
    finally:
        model.train(was_training)
    # Decode with the prompt, so a first piece continuing the prompt's last word ("##s") joins it.
    full, head = tokenizer.decode(ids[len(start):] + new), tokenizer.decode(ids[len(start):])
    return full[len(head):].strip() if full.startswith(head) else tokenizer.decode(new)


__all__ = ["next_token_targets", "target_positions", "causal_lm_loss", "generate"]


class CLMFamily(Family):
    """Next-token language modelling with teacher forcing (``bertlab.tasks.clm``); needs a left-to-right
    encoder. Metrics per WordPiece token: loss, perplexity, accuracy; greedy samples from ``task.prompts``."""

    @classmethod
    def logged_metrics(cls, task, data):
        return {"loss": "min", "perplexity": "min", "accuracy": "max"}

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
