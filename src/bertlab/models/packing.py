"""Packing: the real tokens of a padded (B, T) batch as one (N, ·) tensor, and back — the layout of the BERT
encoder's unpadded path (:mod:`bertlab.models.bert`), with the length buckets its CPU attention kernel uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

# Packing: the real tokens of a (B, T) batch as one (N, ·) tensor, row after row (longest rows first), each
# row's tokens in order.

@dataclass
class Packing:
    """Where each real token of a (B, T) batch sits in the packed (N, ·) layout, and back.

    Rows are packed longest first (``lengths`` descending; ties in batch order), so rows of similar length sit
    next to each other: the ``repad`` attention kernel splits them into length buckets (:meth:`buckets`).
    """

    index: torch.Tensor  # (N,) int64: b·T + t, the token's place in the flattened (B, T) batch
    positions: torch.Tensor  # (N,) int64: t, the token's position id (as the padded path gives it)
    compact_index: torch.Tensor  # (N,) int64: i·L + r, i = the row's packed order, r = the token's rank in it
    lengths: torch.Tensor  # (B,) real tokens per row, in packed order (descending)
    cu_seqlens: torch.Tensor  # (B + 1,) int32: the i-th packed row is packed[cu_seqlens[i]:cu_seqlens[i + 1]]
    max_len: int  # L, the longest row
    min_len: int  # the shortest row
    batch: int  # B
    seq_len: int  # T
    _buckets: dict[float, list[Bucket]] = field(default_factory=dict, repr=False)

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

    def buckets(self, per_bucket: float) -> list[Bucket]:
        """Consecutive packed rows grouped so that attention on each group's own compact (rows, L_g) layout costs
        least: the sum over groups of rows · L_g² (the attention work, L_g the group's longest row) plus
        ``per_bucket`` for each group (its fixed cost, in the same units), at most four groups. Cached per value.
        """
        if per_bucket not in self._buckets:
            self._buckets[per_bucket] = _make_buckets(self, per_bucket)
        return self._buckets[per_bucket]


@dataclass
class Bucket:
    """Packed rows [first_row, first_row + rows) = packed tokens [start, end), attended in a (rows, max_len) layout."""

    start: int
    end: int
    rows: int
    max_len: int
    compact_index: torch.Tensor  # (end - start,) int64: i·max_len + r for the bucket's i-th row, rank r
    key_mask: torch.Tensor | None  # (rows, 1, 1, max_len) bool; None when every row has max_len tokens


MAX_BUCKETS = 4


def bucket_bounds(lengths: list[int], per_bucket: float, max_buckets: int = MAX_BUCKETS) -> list[int]:
    """Row boundaries [0, ..., B] of the cheapest split of ``lengths`` (descending) into at most ``max_buckets``
    consecutive groups, a group of rows i..j-1 costing (j - i) · lengths[i]² + ``per_bucket`` (dynamic program)."""
    n = len(lengths)
    sq = np.asarray(lengths, dtype=np.float64) ** 2
    i, j = np.arange(n)[:, None], np.arange(1, n + 1)[None, :]
    seg = np.where(j > i, (j - i) * sq[:, None], np.inf)  # seg[i, j - 1]: rows i..j-1 as one group
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    choices, totals = [], []
    for _ in range(min(max_buckets, n)):
        cost = best[:n, None] + seg  # (start i, end j)
        prev = cost.argmin(0)  # for each end j: the best start
        best = np.concatenate(([np.inf], cost[prev, np.arange(n)] + per_bucket))
        choices.append(prev)
        totals.append(best[n])
    k = int(np.argmin(totals))  # k + 1 groups
    bounds, end = [n], n
    for level in range(k, -1, -1):
        end = int(choices[level][end - 1])
        bounds.append(end)
    return bounds[::-1]


def _make_buckets(packing: Packing, per_bucket: float) -> list[Bucket]:
    lengths = packing.lengths.tolist()
    cu = packing.cu_seqlens.tolist()
    bounds = bucket_bounds(lengths, per_bucket)
    device = packing.index.device
    out = []
    for first, last in zip(bounds[:-1], bounds[1:]):
        rows, max_len = last - first, lengths[first]
        row_lengths = packing.lengths[first:last]
        start, end = cu[first], cu[last]
        row_of = torch.repeat_interleave(torch.arange(rows, device=device), row_lengths)
        rank = torch.arange(end - start, device=device) - (packing.cu_seqlens[first:last].long() - start)[row_of]
        full = end - start == rows * max_len
        mask = None if full else (torch.arange(max_len, device=device) < row_lengths[:, None])[:, None, None, :]
        out.append(Bucket(start, end, rows, max_len, row_of * max_len + rank, mask))
    return out


def pack(attention_mask: torch.Tensor) -> Packing:
    """The packing of a (B, T) 1/0 mask. Every row needs at least one real token (its [CLS])."""
    b, t = attention_mask.shape
    real = attention_mask != 0  # (B, T)
    row_lengths = real.sum(1)  # (B,)
    order = torch.argsort(row_lengths, descending=True, stable=True)  # packed order: longest rows first
    lengths = row_lengths[order]
    packed_row, col = real[order].nonzero(as_tuple=True)  # (N,) each: packed row by packed row, columns in order
    index = order[packed_row] * t + col
    cu = F.pad(lengths.cumsum(0), (1, 0))  # (B + 1,)
    max_len, min_len = int(lengths[0]), int(lengths[-1])
    ranks = torch.arange(index.numel(), device=index.device) - cu[packed_row]  # rank within its row
    return Packing(index=index, positions=col, compact_index=packed_row * max_len + ranks, lengths=lengths,
                   cu_seqlens=cu.to(torch.int32), max_len=max_len, min_len=min_len, batch=b, seq_len=t)
