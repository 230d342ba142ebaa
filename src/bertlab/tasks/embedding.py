"""Bi-encoder (``task=embedding``): one shared encoder embeds queries, passages and hard negatives; the loss is
the multiple-negatives ranking loss; validation scores retrieval (or, for a scored pair file, the correlation of
cosine similarity with the gold scores).

Loss: for each query i of a batch of B (query, passage) pairs and N hard negatives, cross-entropy over
``scale · cos(q_i, c_j)`` for every candidate c_j (the B passages, then the N negatives), the target being its
own passage. A candidate that is a *known positive* of the query other than its own column — the same passage
text in another row, or the passage of another row with the same query text — is masked out (logit −∞): a
duplicate is not a negative. ``task.symmetric`` adds the passage → query term (each passage against the B
queries) and averages the two, as sentence-transformers' symmetric loss.

Gradient caching (``task.cache_chunk_size``; Gao et al. 2021, sentence-transformers' cached loss): the rows are
embedded without a graph in chunks (cut by tokens: :func:`row_chunks`), the loss's gradient w.r.t. the
embeddings is taken, and the backward pass embeds each chunk again with a graph and back-propagates its slice of
that gradient — so a large batch trains in the memory of one chunk, with the gradients of the whole batch at once. Each chunk's RNG state is saved before
its first pass and restored for the second, so dropout draws the same masks both times.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bertlab.models.pooling import EmbeddingHead
from bertlab.runtime.errors import ConfigError
from bertlab.tasks import metrics
from bertlab.tasks.base import Family
from bertlab.tasks.retrieval import RETRIEVAL_MEASURES, retrieval_scores, search

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------------------
# The loss


def known_positive_mask(query_key: torch.Tensor, candidate_key: torch.Tensor) -> torch.Tensor:
    """(B, C) bool: candidate c is a known positive of query i other than i's own column (c ≠ i): some row m of
    the batch pairs a query of i's text with a passage of c's text. Keys are the texts' hashes."""
    b = query_key.shape[0]
    same_query = (query_key[:, None] == query_key[None, :]).float()  # (B, B)
    passage_is = (candidate_key[None, :b].T == candidate_key[None, :]).float()  # (B, C): row m's passage is c
    mask = (same_query @ passage_is) > 0
    mask[torch.arange(b), torch.arange(b)] = False
    return mask


def _rows_with_negatives_ce(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Cross-entropy averaged over the rows that have a negative (a finite logit besides their target), and how
    many rows had none. A row without one (a batch of one pair, a last batch of one, a batch whose other rows are
    all duplicates of the row's pair) has a loss of exactly 0 that teaches nothing: counted in the mean it would
    only shrink the loss of the rows that do, and a batch of such rows would log a silent 0."""
    ce = F.cross_entropy(logits, target, reduction="none")
    has_negative = torch.isfinite(logits).sum(1) > 1
    kept = int(has_negative.sum())
    if kept == 0:
        return ce.sum() * 0.0, len(ce)  # zero, with the graph (every parameter gets a zero gradient)
    return ce[has_negative].mean(), len(ce) - kept


def ranking_loss(emb: torch.Tensor, num_queries: int, query_key: torch.Tensor, candidate_key: torch.Tensor,
                 scale: float = 20.0, symmetric: bool = False,
                 without_negatives: Callable[[int, int], None] | None = None) -> torch.Tensor:
    """The multiple-negatives ranking loss (module docstring) of ``emb``: (B + B + N, D), queries, their passages,
    then hard negatives; ``query_key`` (B,), ``candidate_key`` (B + N,) the texts' keys. A row with no negative
    is left out of the mean (:func:`_rows_with_negatives_ce`); ``without_negatives(rows, of)`` hears of them."""
    b = num_queries
    q = F.normalize(emb[:b].float(), dim=-1)
    c = F.normalize(emb[b:].float(), dim=-1)
    target = torch.arange(b, device=emb.device)
    query_key, candidate_key = query_key.to(emb.device), candidate_key.to(emb.device)
    logits = (scale * q @ c.T).masked_fill(known_positive_mask(query_key, candidate_key), float("-inf"))
    loss, missing = _rows_with_negatives_ce(logits, target)
    if symmetric:
        # passage i against the B queries: query j is masked when (j's query, i's passage) is a known pair
        back = (scale * c[:b] @ q.T).masked_fill(known_positive_mask(candidate_key[:b], query_key), float("-inf"))
        back_loss, back_missing = _rows_with_negatives_ce(back, target)
        loss, missing = (loss + back_loss) / 2, max(missing, back_missing)
    if missing and without_negatives is not None:
        without_negatives(missing, b)
    return loss


# ----------------------------------------------------------------------------------------------------------
# Gradient caching


class RngState:
    """The CPU generator's state and, for a CUDA device, that device's: what dropout draws from."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def _set(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)

    @contextmanager
    def restored(self) -> Iterator[None]:
        """Run with this state, then put back the generators' state as it was before."""
        now = RngState(self.device)
        self._set()
        try:
            yield
        finally:
            now._set()


ROW_KEYS = ("input_ids", "attention_mask", "token_type_ids")


def row_chunks(batch: dict[str, Any], chunk: int) -> list[tuple[torch.Tensor, dict[str, torch.Tensor]]]:
    """The batch's encoder rows in chunks of about ``chunk`` rows' worth of tokens: (the rows' indices, their
    inputs cut to the chunk's longest row).

    Cut by tokens, not rows: the rows sorted by length (longest first, stable), a chunk closed before the row that
    would take it past ``chunk`` times the batch's mean row length (at least one row a chunk). A chunk's
    activations grow with its tokens, and the rows of a batch are queries and passages of very different
    lengths: ``chunk`` rows in batch order put the passages together, so their chunks held far more tokens than
    ``chunk`` rows on average and set the memory peak. Sorted, a chunk is also rows of like length (little
    padding on the padded path). Tokens bound the activations of the linear layers, most of the memory; attention
    scores grow with each row's length squared, so a chunk of a few long rows holds more of them than one of many
    short rows of the same tokens. Without an attention mask every row counts its full width: ``chunk`` rows a
    chunk, in order."""
    rows, width = batch["input_ids"].shape[:2]
    mask = batch.get("attention_mask")
    lengths = mask.sum(1) if mask is not None else torch.full((rows,), width, device=batch["input_ids"].device)
    order = torch.sort(lengths, descending=True, stable=True).indices
    budget = chunk * float(lengths.sum()) / max(rows, 1)
    groups, current, tokens = [], [], 0
    for i, n in zip(order.tolist(), lengths[order].tolist()):
        if current and tokens + n > budget:
            groups.append(current)
            current, tokens = [], 0
        current.append(i)
        tokens += n
    groups.append(current)
    out = []
    for group in groups:
        idx = torch.tensor(group, device=batch["input_ids"].device)
        sub = {k: batch[k][idx] for k in ROW_KEYS if batch.get(k) is not None}
        if "attention_mask" in sub:
            longest = int(sub["attention_mask"].sum(1).max())
            sub = {k: v[:, :max(longest, 1)] for k, v in sub.items()}
        out.append((idx, sub))
    return out


def in_row_order(chunks: list[tuple[torch.Tensor, Any]], parts: list[torch.Tensor]) -> torch.Tensor:
    """The chunks' embeddings (``parts``, one per chunk of :func:`row_chunks`) as one tensor in the batch's row
    order."""
    order = torch.cat([idx for idx, _ in chunks])
    return torch.cat(parts)[torch.argsort(order)]


def cached_loss(embed: Callable[[dict[str, torch.Tensor]], torch.Tensor], batch: dict[str, Any], chunk: int,
                loss_fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``loss_fn(embed(all rows))`` with the gradients of that, computed chunk by chunk (module docstring).

    Returns the loss as a leaf tensor: its backward pass (whoever calls it, Lightning's precision plugin
    included: a scaled or divided loss passes its factor on) re-embeds each chunk with a graph and
    back-propagates the cached gradient times that factor into the encoder."""
    chunks = row_chunks(batch, chunk)
    device = batch["input_ids"].device
    # The backward pass runs outside the forward's autocast region (Lightning's mixed precision): the replay
    # re-enters the autocast the first pass ran under, or it would compute other embeddings than it cached.
    autocast = dict(device_type=device.type, enabled=torch.is_autocast_enabled(device.type),
                    dtype=torch.get_autocast_dtype(device.type))
    states, parts = [], []
    with torch.no_grad():
        for _, sub in chunks:
            states.append(RngState(device))
            parts.append(embed(sub))
    emb = in_row_order(chunks, parts).detach().requires_grad_()
    with torch.enable_grad():
        loss = loss_fn(emb)
        (grad,) = torch.autograd.grad(loss, emb)
    grad = grad[torch.cat([idx for idx, _ in chunks])]  # in chunk order
    sizes = [p.shape[0] for p in parts]

    def replay(grad_output: torch.Tensor) -> None:
        with torch.enable_grad():
            for (_, sub), state, g in zip(chunks, states, grad.split(sizes)):
                with state.restored(), torch.autocast(**autocast):
                    part = embed(sub)
                part.backward(g.to(part.dtype) * grad_output.to(part.dtype))

    out = loss.detach().requires_grad_()
    out.register_hook(replay)
    return out


# ----------------------------------------------------------------------------------------------------------
# The family


def resolve_pooling(task_pooling: str, head_pooling: str) -> str:
    """``task.pooling=auto``: the pooling the checkpoint declares (``head.pooling=auto`` resolved by the
    model builder to mean or cls), else mean (sentence-transformers' default for a new model)."""
    if task_pooling != "auto":
        return task_pooling
    return head_pooling if head_pooling in ("mean", "cls") else "mean"


class EmbeddingFamily(Family):
    head_kind = None  # no transformers head class: exported as a sentence-transformers folder

    @classmethod
    def logged_metrics(cls, task, data):
        if data.get("label_column") is not None:  # similarity files (STS-B)
            return {"pearson": "max", "spearmanr": "max", "combined_score": "max"}
        return {"loss": "min", **{name: "max" for name in RETRIEVAL_MEASURES}}

    def __init__(self, task, num_labels, labels, data_cfg=None):
        super().__init__(task, num_labels, labels, data_cfg)
        batch_size = getattr(data_cfg, "batch_size", None)
        if batch_size is not None and batch_size < 2:
            raise ConfigError(
                f"task=embedding with data.batch_size={batch_size}: the ranking loss takes every other pair of a "
                "batch as a query's negatives, and a batch of one pair has none (its loss would be 0 and teach "
                "nothing). Use data.batch_size of 2 or more (larger is better; task.cache_chunk_size bounds memory)"
            )

    def build_head(self, config, head, word_embeddings):
        return EmbeddingHead(resolve_pooling(self.task.pooling, head.pooling), self.task.normalize)

    def stock_head_kind(self, head):
        return None

    def loss(self, emb, batch):
        return ranking_loss(emb, int(batch["num_queries"]), batch["query_key"], batch["candidate_key"],
                            self.task.scale, self.task.symmetric, self._without_negatives)

    def _without_negatives(self, rows: int, of: int) -> None:
        """The rule for training rows without a negative (:func:`_rows_with_negatives_ce`), logged the first time
        and then at every power of two of such batches, with the count so far."""
        self._batches_without = getattr(self, "_batches_without", 0) + 1
        n = self._batches_without
        if n & (n - 1) == 0:
            log.warning("%d of a batch's %d pairs had no negative (a batch of one pair, e.g. the last of an epoch, "
                        "or every other pair a duplicate of theirs): left out of the loss, which averages over the "
                        "pairs that have one (%d such batch(es) so far)%s", rows, of, n,
                        "; no pair of the batch had one, so it taught nothing" if rows == of else "")

    def training_loss(self, forward, batch):
        chunk = self.task.cache_chunk_size
        if not chunk or chunk >= batch["input_ids"].shape[0] or not torch.is_grad_enabled():
            return self.loss(forward(batch), batch)
        return cached_loss(forward, batch, int(chunk), lambda emb: self.loss(emb, batch))

    def eval_step(self, emb, batch, state):
        state.index.append(batch["index"].cpu())
        state.outputs.append(emb.float().cpu())

    def score(self, index, outputs, split, loss, extra):
        data = split.eval_data
        n = len(split.features)
        emb = torch.zeros((n, outputs[0].shape[1]) if outputs else (n, 1))
        present = np.zeros(n, dtype=bool)
        if outputs:
            emb[torch.from_numpy(index)] = torch.cat(outputs)
            present[index] = True
        if not present.all():
            log.warning("%s: %d of %d texts were embedded (a limited validation pass): scored over those only",
                        split.name, int(present.sum()), n)
        if data.mode == "similarity":
            k = data.num_queries
            keep = np.flatnonzero(present[:k] & present[k:2 * k])
            a, b = emb[keep], emb[keep + k]
            cos = F.cosine_similarity(a, b, dim=-1)
            scores = metrics.regression_scores(cos, torch.tensor(data.scores)[keep])
            return {**scores, "num_examples": len(keep)}
        return self._retrieval(emb, present, data)

    def _retrieval(self, emb, present, data) -> dict[str, float]:
        q_count = data.num_queries
        corpus_rows = np.flatnonzero(present[q_count:])
        position = {int(p): i for i, p in enumerate(corpus_rows)}  # corpus position → row of the embedded corpus
        queries = [q for q in range(q_count) if present[q] and any(p in position for p in data.relevant[q])]
        if not queries or not len(corpus_rows):
            return {"loss": float("nan"), **{name: float("nan") for name in RETRIEVAL_MEASURES}}
        corpus = emb[q_count + torch.from_numpy(corpus_rows)]
        q_emb = emb[torch.tensor(queries)]
        top_scores, top_idx = search(q_emb, corpus)
        relevant = [[position[p] for p in data.relevant[q] if p in position] for q in queries]
        # Doc ids for the metric library: corpus positions (a corpus file's own ids are unique among themselves
        # but may equal the p<k> names of the file's passages: two passages must never share a doc id).
        ids = [f"#{int(p)}" for p in corpus_rows]
        scores = retrieval_scores(top_scores, top_idx, relevant, ids, [f"q{q}" for q in queries])
        return {"loss": self._eval_loss(q_emb, corpus, relevant), **scores, "num_examples": len(queries)}

    def _eval_loss(self, q_emb, corpus, relevant) -> float:
        """The ranking loss over the queries in order, ``data.eval_batch_size`` at a time, each query's first
        relevant passage its positive (the other queries' passages its negatives, duplicates masked)."""
        size = max(2, int(getattr(self.data_cfg, "eval_batch_size", 64) or 64))
        total, count = 0.0, 0
        for start in range(0, len(relevant), size):
            rel = [r[0] for r in relevant[start:start + size]]
            if len(rel) < 2:
                continue
            emb = torch.cat([q_emb[start:start + len(rel)], corpus[torch.tensor(rel)]])
            qk = torch.arange(start, start + len(rel))
            with torch.no_grad():
                loss = ranking_loss(emb, len(rel), qk, torch.tensor(rel), self.task.scale, self.task.symmetric)
            total += float(loss) * len(rel)
            count += len(rel)
        return total / count if count else float("nan")
