"""Packing: the real tokens of a padded (B, T) batch as one (N, ·) tensor, row by row, each row's tokens in
order, and back — the layout of the BERT encoder's unpadded path (:mod:`bertlab.models.bert`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class Packing:
    """Where each real token of a (B, T) batch sits in the packed (N, ·) layout, and back."""

    index: torch.Tensor  # (N,) int64: b·T + t, the token's place in the flattened (B, T) batch
    positions: torch.Tensor  # (N,) int64: t, the token's position id (as the padded path gives it)
    compact_index: torch.Tensor  # (N,) int64: b·L + r, r = the token's rank among row b's real tokens
    lengths: torch.Tensor  # (B,) real tokens per row
    cu_seqlens: torch.Tensor  # (B + 1,) int32: row b is packed[cu_seqlens[b]:cu_seqlens[b + 1]]
    max_len: int  # L, the longest row
    min_len: int  # the shortest row
    batch: int  # B
    seq_len: int  # T

    @property
    def num_tokens(self) -> int:
        return self.index.numel()

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) → (N, ...): the real positions only."""
        return x.reshape(self.batch * self.seq_len, *x.shape[2:])[self.index]

    def scatter(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) → (B, T, ...), zeros at padded positions (differentiable: the gradient is a gather)."""
        out = x.new_zeros(self.batch * self.seq_len, *x.shape[1:])
        return out.index_copy(0, self.index, x).view(self.batch, self.seq_len, *x.shape[1:])

    def compact_key_mask(self) -> torch.Tensor | None:
        """(B, 1, 1, L) bool "may attend" mask of the compact (B, L) layout; None when every row has L tokens."""
        if self.num_tokens == self.batch * self.max_len:
            return None
        ranks = torch.arange(self.max_len, device=self.lengths.device)
        return (ranks < self.lengths[:, None])[:, None, None, :]


def pack(attention_mask: torch.Tensor) -> Packing:
    """The packing of a (B, T) 1/0 mask. Every row needs at least one real token (its [CLS])."""
    b, t = attention_mask.shape
    real = attention_mask.reshape(-1) != 0
    index = real.nonzero().squeeze(1)  # (N,) ascending: row by row, in position order
    lengths = real.view(b, t).sum(1)  # (B,)
    cu = F.pad(lengths.cumsum(0), (1, 0))  # (B + 1,)
    max_len, min_len = int(lengths.max()), int(lengths.min())
    rows = index // t
    ranks = torch.arange(index.numel(), device=index.device) - cu[rows]  # rank within its row
    return Packing(index=index, positions=index % t, compact_index=rows * max_len + ranks, lengths=lengths,
                   cu_seqlens=cu.to(torch.int32), max_len=max_len, min_len=min_len, batch=b, seq_len=t)
