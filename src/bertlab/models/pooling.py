"""The bi-encoder's head (``task=embedding``): a sentence vector from the encoder's token states — the mean of
the real tokens, the first token ([CLS]) or the last real token — optionally L2-normalised. It has no weights:
what trains is the encoder, and a sentence-transformers export is the encoder + this Pooling (+ Normalize)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.models.encoder import EncoderOutput
from bertlab.models.heads import masked_mean

EMBEDDING_POOLINGS = ("mean", "cls", "last")


def last_token(x: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """The state of each row's last real token (right padding): (B, T, D) → (B, D)."""
    if attention_mask is None:
        return x[:, -1]
    last = attention_mask.long().sum(1).clamp_min(1) - 1  # (B,)
    return x[torch.arange(x.shape[0], device=x.device), last]


class EmbeddingHead(nn.Module):
    """``features(enc, mask)`` pools the last layer into (B, H); ``forward`` gives float32 embeddings (unit length
    when ``normalize``)."""

    def __init__(self, pooling: str, normalize: bool):
        super().__init__()
        if pooling not in EMBEDDING_POOLINGS:
            raise ValueError(f"embedding pooling must be one of {', '.join(EMBEDDING_POOLINGS)}, got {pooling!r}")
        self.pooling = pooling
        self.normalize = normalize

    reads_attention_mask = True  # mean and last read it; cls ignores it

    @property
    def reads_first_token_only(self) -> bool:
        return self.pooling == "cls"  # the encoder may skip the last layer's other positions

    def features(self, enc: EncoderOutput, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = enc.last_hidden_state
        if self.pooling == "mean":
            return masked_mean(x, attention_mask)
        if self.pooling == "cls":
            return x[:, 0]
        return last_token(x, attention_mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        return F.normalize(x, dim=-1) if self.normalize else x
