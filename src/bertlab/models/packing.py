"""Packing: the real tokens of a padded (B, T) batch as one (N, ·) tensor, and back — the layout of the BERT
encoder's unpadded path (:mod:`bertlab.models.bert`).

Rows are packed shortest first (a stable sort by length), each row's tokens in order. Nothing but attention
cares about the order of the N rows; sorted rows let attention run on groups of rows of similar length
(:class:`AttentionGroup`), each a contiguous slice of the packed tensor padded only to its own longest row.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

# Splitting attention into groups trades padded attention work (a group of r rows padded to its longest row L
# computes r·L² scores per head) for a fixed cost per group (a dozen small kernels forward and backward). The
# cost is counted in scores per head: one group call costs about as much as this many scores (measured against
# one group and against 512 and 8,192: docs/performance.md, "What closed the gap").
GROUP_OVERHEAD_SCORES = 2048


@dataclass(frozen=True)
class AttentionGroup:
    """Packed rows row_start..row_start + rows, tokens ``packed[start:end]``, whose attention is computed
    together in a (rows, max_len) layout padded to the group's longest row."""

    start: int
    end: int
    row_start: int
    rows: int
    max_len: int
    compact_index: torch.Tensor  # (end - start,) int64: r·max_len + rank, r the row within the group
    key_mask: torch.Tensor | None  # (rows, 1, 1, max_len) bool "may attend"; None when no row is shorter


@dataclass
class Packing:
    """Where each real token of a (B, T) batch sits in the packed (N, ·) layout, and back."""

    index: torch.Tensor  # (N,) int64: b·T + t, the token's place in the flattened (B, T) batch
    positions: torch.Tensor  # (N,) int64: t, the token's position id (as the padded path gives it)
    order: torch.Tensor  # (B,) int64: the batch rows in packed order (shortest first)
    rank: torch.Tensor  # (B,) int64: where batch row b sits in packed order (order[rank[b]] == b)
    lengths: torch.Tensor  # (B,) real tokens per packed row (in packed order: ascending)
    cu_seqlens: torch.Tensor  # (B + 1,) int32: packed row i is packed[cu_seqlens[i]:cu_seqlens[i + 1]]
    batch: int  # B
    seq_len: int  # T
    host_lengths: list[int]  # lengths, on the host
    host_cu: list[int]  # cu_seqlens, on the host
    token_rows: torch.Tensor  # (N,) int64: each token's packed row
    ranks: torch.Tensor  # (N,) int64: each token's rank within its row
    overhead: int  # the cost of one attention group, in scores (split_groups)

    @property
    def num_tokens(self) -> int:
        return self.index.numel()

    @property
    def max_len(self) -> int:
        """L, the longest row."""
        return self.host_lengths[-1]

    @property
    def min_len(self) -> int:
        return self.host_lengths[0]

    @property
    def first(self) -> torch.Tensor:
        """(B,) int64: where batch row b's first token (its [CLS]) sits in the packed layout."""
        return self.cu_seqlens[:-1].long()[self.rank]

    @functools.cached_property
    def groups(self) -> tuple[AttentionGroup, ...]:
        """The attention groups, in packed order, covering every row; built when first read (only the ``repad``
        kernel and the [CLS]-only last layer read them), once per batch."""
        groups = []
        for lo, hi in split_groups(self.host_lengths, self.overhead):
            start, end, longest = self.host_cu[lo], self.host_cu[hi], self.host_lengths[hi - 1]
            local = (self.token_rows[start:end] - lo) * longest + self.ranks[start:end]
            key_mask = None
            if self.host_lengths[lo] < longest:
                ranks = torch.arange(longest, device=self.lengths.device)
                key_mask = (ranks < self.lengths[lo:hi, None])[:, None, None, :]
            groups.append(AttentionGroup(start, end, lo, hi - lo, longest, local, key_mask))
        return tuple(groups)

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) → (N, ...): the real positions only."""
        return x.reshape(self.batch * self.seq_len, *x.shape[2:])[self.index]

    def scatter(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) → (B, T, ...), zeros at padded positions (differentiable: the gradient is a gather)."""
        out = x.new_zeros(self.batch * self.seq_len, *x.shape[1:])
        return out.index_copy(0, self.index, x).view(self.batch, self.seq_len, *x.shape[1:])


def split_groups(lengths: list[int], overhead: int = GROUP_OVERHEAD_SCORES) -> list[tuple[int, int]]:
    """Contiguous groups (start row, end row) of ascending ``lengths`` with the least attention cost:
    Σ rows·longest² + ``overhead`` per group, exactly (dynamic programming over the ends of equal-length runs:
    cutting inside a run never helps)."""
    ends = [i + 1 for i in range(len(lengths)) if i + 1 == len(lengths) or lengths[i + 1] != lengths[i]]
    cuts = [0, *ends]
    best = [0] + [0] * len(ends)  # best[j]: least cost of rows 0..cuts[j]
    back = [0] * len(cuts)
    for j in range(1, len(cuts)):
        longest = lengths[cuts[j] - 1] ** 2
        best[j], back[j] = min((best[i] + (cuts[j] - cuts[i]) * longest + overhead, i) for i in range(j))
    groups, j = [], len(cuts) - 1
    while j > 0:
        groups.append((cuts[back[j]], cuts[j]))
        j = back[j]
    return groups[::-1]


def pack(attention_mask: torch.Tensor, overhead: int | None = None) -> Packing:
    """The packing of a (B, T) 1/0 mask. Every row needs at least one real token (its [CLS]).

    ``overhead``: the cost of one attention group in scores (:func:`split_groups`), ``GROUP_OVERHEAD_SCORES``
    when None."""
    overhead = GROUP_OVERHEAD_SCORES if overhead is None else overhead
    b, t = attention_mask.shape
    real = attention_mask != 0  # (B, T)
    lengths, order = torch.sort(real.sum(1), stable=True)  # packed rows: shortest first
    rows, pos = real[order].nonzero(as_tuple=True)  # (N,) each: packed row, position; row by row, in order
    cu = F.pad(lengths.cumsum(0), (1, 0))  # (B + 1,)
    ranks = torch.arange(rows.numel(), device=rows.device) - cu[rows]  # rank within its row
    rank = torch.empty_like(order)
    rank[order] = torch.arange(b, device=order.device)
    return Packing(index=order[rows] * t + pos, positions=pos, order=order, rank=rank, lengths=lengths,
                   cu_seqlens=cu.to(torch.int32), batch=b, seq_len=t, host_lengths=lengths.tolist(),
                   host_cu=cu.tolist(), token_rows=rows, ranks=ranks, overhead=overhead)
