"""DeBERTa-v2/v3 (``model_type`` ``deberta-v2``): disentangled attention over log-bucketed relative positions.

Submodule names are Hugging Face's (``embeddings.word_embeddings``, ``encoder.rel_embeddings``,
``encoder.layer.N.attention.self.query_proj``, ``LayerNorm``, ...), so the checkpoint key map is an identity, and
outputs equal ``transformers.DebertaV2Model`` on the same weights to float32 rounding.

A layer's attention scores are content→content q·k, content→position q·Pk[δ(i, j)] (c2p) and position→content
k·Pq[δ(i, j)] (p2c), all scaled by 1/√(hd·(1 + number of position terms)), where δ(i, j) is the bucket of the
relative distance i - j (log-spaced beyond ``position_buckets / 2``), Pk / Pq the relative embeddings (after
``norm_rel_ebd``'s LayerNorm) through the key / query projection (``share_att_key``) or their own ones.

How it is computed (not what): transformers projects all 2·``position_buckets`` relative rows in every layer,
multiplies every query with every one of them ((B·nh, T, 512) per position term), gathers (B·nh, T, T) out of
that and sums several (B·nh, T, T) tensors before its softmax. Here only the relative rows a length T can reach
(2T - 1 below the log buckets) are projected and multiplied; the two position terms are gathered with one index
table (δ is odd, so c2p and p2c share it, p2c transposed) into one additive bias, which goes to SDPA with the
content scores (:func:`bertlab.models.kernels.attention`): softmax, dropout and the product with v are SDPA's.

Two execution paths, as BERT's (``unpad``; docs/performance.md): the padded path, and the unpadded one, where
every Linear, GELU, LayerNorm and dropout runs on the real tokens packed as (N, H) and attention on the ``repad``
layout (each row's tokens at 0..L-1, so relative positions are the in-row ones), with the bias per group.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn

from bertlab.models.bert import BertIntermediate, BertModel, BertOutput, BertSelfOutput, padding_mask
from bertlab.models.encoder import ConfigSizes, EncoderOutput
from bertlab.models.kernels import DEFAULT_KERNELS, Dropout, Kernels, attention, repad_attention, tracing
from bertlab.models.packing import Packing, pack
from bertlab.runtime.config import EncoderConfig, unpad_mode
from bertlab.runtime.errors import ConfigError

POSITION_TERMS = ("c2p", "p2c")
NORM_REL_EBD = ("none", "layer_norm")


@dataclass
class DebertaConfig(EncoderConfig):
    """``EncoderConfig`` plus DeBERTa's relative attention (names and meanings of ``DebertaV2Config``; the
    defaults are DeBERTa-v3's)."""

    model_type: str = "deberta-v2"
    type_vocab_size: int = 0
    layer_norm_eps: float = 1e-7
    vocab_size: int = 128100
    relative_attention: bool = True
    max_relative_positions: int = -1  # < 1: max_position_embeddings
    position_buckets: int = 256  # log-bucketed distances beyond half of it; <= 0: no buckets
    pos_att_type: str = "p2c|c2p"  # the position terms, "|"-separated (a string: run records stay plain)
    share_att_key: bool = True  # the position terms use the content key/query projections
    norm_rel_ebd: str = "layer_norm"  # "layer_norm": the relative embeddings pass a LayerNorm first
    position_biased_input: bool = False  # absolute position embeddings added to the input (DeBERTa-v2's)
    pooler_dropout: float = 0.0  # the classification head's dropout before its dense layer
    legacy: bool = True  # transformers' MLM head names (cls.predictions.*; False: lm_predictions.lm_head.*)

    def __post_init__(self) -> None:
        super().__post_init__()
        terms = self.position_terms
        unknown = [t for t in terms if t not in POSITION_TERMS]
        if unknown:
            raise ConfigError(f"pos_att_type {self.pos_att_type!r}: unknown terms {unknown} (known: c2p, p2c)")
        if self.norm_rel_ebd not in NORM_REL_EBD:
            raise ConfigError(f"norm_rel_ebd must be one of {', '.join(NORM_REL_EBD)}, got {self.norm_rel_ebd!r}")
        if not 0.0 <= self.pooler_dropout < 1.0:
            raise ConfigError(f"pooler_dropout must be in [0, 1), got {self.pooler_dropout}")

    @property
    def position_terms(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.pos_att_type.lower().split("|") if t.strip()) \
            if self.relative_attention else ()

    @property
    def relative_span(self) -> int:
        """S: the relative embeddings hold 2·S rows; δ + S indexes them (clamped to 0..2S-1)."""
        max_relative = self.max_relative_positions if self.max_relative_positions >= 1 else \
            self.max_position_embeddings
        return self.position_buckets if self.position_buckets > 0 else max_relative

    @property
    def max_sequence_length(self) -> int:
        return self.max_position_embeddings


# ----------------------------------------------------------------------------------------------------------
# Relative positions


def log_bucket(relative: torch.Tensor, bucket_size: int, max_position: int) -> torch.Tensor:
    """DeBERTa's bucket of each relative distance (int64 → int64): the distance itself within ±bucket_size/2,
    log-spaced beyond (reaching ±(bucket_size - 1) at ±(max_position - 1)); transformers' float32 formula."""
    sign = torch.sign(relative)
    mid = bucket_size // 2
    abs_pos = torch.where((relative < mid) & (relative > -mid), torch.tensor(mid - 1).type_as(relative),
                          torch.abs(relative))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid))
                         * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, relative.type_as(log_pos), log_pos * sign).long()


@functools.lru_cache(maxsize=64)
def relative_index(length: int, span: int, buckets: int, max_relative: int) -> tuple[torch.Tensor, int, int]:
    """(index (L, L) int64, lo, hi) on the CPU: row ``index[i, j] + lo`` of the relative embeddings scores the
    pair (query i, key j), δ = bucket(i - j) + span clamped to 0..2·span-1; lo..hi-1 are the rows any pair of a
    length-L row reaches (δ grows with i - j: the extremes are (0, L-1) and (L-1, 0)).

    Built outside inference mode whatever the caller's mode: the cache outlives the call, and an inference
    tensor made during a prediction or validation could not be saved for backward by a later training step."""
    with torch.inference_mode(False):
        ids = torch.arange(length)
        relative = ids[:, None] - ids[None, :]  # (L, L) i - j
        if buckets > 0 and max_relative > 0:
            relative = log_bucket(relative, buckets, max_relative)
        index = torch.clamp(relative + span, 0, 2 * span - 1)
        lo, hi = int(index[0, -1]), int(index[-1, 0]) + 1
        return index - lo, lo, hi


def traced_relative_index(q: torch.Tensor, span: int, buckets: int, max_relative: int) -> torch.Tensor:
    """:func:`relative_index` over the whole table (lo = 0), from the length of ``q`` (…, L, hd) as a tensor
    computation, so that a traced graph computes it for whatever length it is given."""
    ids = torch.arange(q.shape[-2], device=q.device)
    relative = ids[:, None] - ids[None, :]  # (L, L) i - j
    if buckets > 0 and max_relative > 0:
        relative = log_bucket(relative, buckets, max_relative)
    return torch.clamp(relative + span, 0, 2 * span - 1)


class _GatherLast(torch.autograd.Function):
    """``torch.gather(x, -1, index)`` whose backward keeps the index and x's shape only: torch's gather keeps x
    itself for its backward, here the (B, nh, L, R) products of every layer, as large as the scores."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.shape = x.shape
        return torch.gather(x, -1, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (index,) = ctx.saved_tensors
        return grad.new_zeros(ctx.shape).scatter_add_(-1, index, grad), None


# ----------------------------------------------------------------------------------------------------------
# Modules


class DebertaEmbeddings(nn.Module):
    """token (+ absolute position with ``position_biased_input``) (+ segment) embeddings, the projection of narrower
    embeddings (``embed_proj``, no bias), LayerNorm, padding zeroed, dropout (HF ``DebertaV2Embeddings``)."""

    def __init__(self, config: DebertaConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        width = config.embedding_width
        self.word_embeddings = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, width) \
            if config.position_biased_input else None
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, width) if config.type_vocab_size else None
        self.embed_proj = nn.Linear(width, config.hidden_size, bias=False) if width != config.hidden_size else None
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob, kernels.cpu_fast_dropout)
        self.max_length = config.max_sequence_length

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                attention_mask: torch.Tensor | None, packing: Packing | None = None) -> torch.Tensor:
        """(B, T) → (B, T, H), padded positions zero before the dropout; with ``packing``, real tokens (N, H)."""
        if self.position_embeddings is not None and input_ids.shape[1] > self.max_length:
            raise ValueError(f"sequence length {input_ids.shape[1]} exceeds the {self.max_length} positions of the "
                             "model's position embeddings: lower data.max_seq_length")
        if packing is not None:
            x = self.word_embeddings(packing.gather(input_ids))  # (N, E)
            if self.position_embeddings is not None:
                x = x + self.position_embeddings(packing.positions)
            types = packing.gather(token_type_ids) if token_type_ids is not None else None
        else:
            x = self.word_embeddings(input_ids)  # (B, T, E)
            if self.position_embeddings is not None:
                x = x + self.position_embeddings.weight[:input_ids.shape[1]]
            types = token_type_ids
        if self.token_type_embeddings is not None:
            x = x + (self.token_type_embeddings.weight[0] if types is None or
                     self.token_type_embeddings.num_embeddings == 1 else self.token_type_embeddings(types))
        if self.embed_proj is not None:
            x = self.embed_proj(x)
        x = self.LayerNorm(x)
        if packing is None and attention_mask is not None:
            x = x * attention_mask.unsqueeze(-1).to(x.dtype)  # as transformers: padded positions hold zeros
        return self.dropout(x)


class DisentangledSelfAttention(nn.Module):
    """HF's ``DisentangledSelfAttention``: content and relative-position scores, one SDPA call (module docstring)."""

    def __init__(self, config: DebertaConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.kernels = kernels
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        hidden = config.hidden_size
        self.query_proj = nn.Linear(hidden, hidden)
        self.key_proj = nn.Linear(hidden, hidden)
        self.value_proj = nn.Linear(hidden, hidden)
        self.terms = config.position_terms
        self.share_att_key = config.share_att_key
        if self.terms and not self.share_att_key:
            if "c2p" in self.terms:
                self.pos_key_proj = nn.Linear(hidden, hidden)
            if "p2c" in self.terms:
                self.pos_query_proj = nn.Linear(hidden, hidden)
        self.pos_dropout = Dropout(config.hidden_dropout_prob, kernels.cpu_fast_dropout) if self.terms else None
        self.span = config.relative_span
        self.buckets, self.max_relative = config.position_buckets, (
            config.max_relative_positions if config.max_relative_positions >= 1 else config.max_position_embeddings)
        self.dropout_p = config.attention_probs_dropout_prob
        # Every score is scaled by 1/√(hd·(1 + position terms)), transformers' scale.
        self.scale = (self.head_dim * (1 + len(self.terms))) ** -0.5
        self._index: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor, int, int]] = {}

    def _relative_index(self, length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        """(index, its transpose (contiguous: a gather along a transposed index reads across rows), lo, hi)."""
        key = (length, device)
        if key not in self._index:
            index, lo, hi = relative_index(length, self.span, self.buckets, self.max_relative)
            with torch.inference_mode(False):  # cached across modes (see relative_index)
                self._index[key] = (index.to(device), index.t().contiguous().to(device), lo, hi)
        return self._index[key]

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(R, H) → (nh, R, hd)."""
        return x.view(x.shape[0], self.num_heads, self.head_dim).transpose(0, 1)

    def position_bias(self, q: torch.Tensor, k: torch.Tensor, heads: slice, rel: torch.Tensor) -> torch.Tensor:
        """The c2p + p2c scores, scaled, of q, k (n, h, L, hd), the heads ``heads`` of n batch rows: (n, h, L, L);
        ``rel`` (2S, H) the relative embeddings after their LayerNorm (:data:`kernels.ScoreBias`)."""
        n, h, length, _ = q.shape
        if tracing():
            # A graph serves every length: the index is computed from the traced length over all 2S rows (the
            # cached index and its row range are constants of one length).
            index = traced_relative_index(q, self.span, self.buckets, self.max_relative)
            index_t, rows = index.t(), self.pos_dropout(rel)
        else:
            index, index_t, lo, hi = self._relative_index(length, q.device)
            rows = self.pos_dropout(rel[lo:hi])  # (R, H): only the rows a length-L row reaches
        bias = None
        if "c2p" in self.terms:
            pos_key = self._heads((self.key_proj if self.share_att_key else self.pos_key_proj)(rows))[heads]
            c2p = torch.matmul(q, pos_key.transpose(-1, -2) * self.scale)  # (n, h, L, R)
            bias = _GatherLast.apply(c2p, index.expand(n, h, length, length))  # [i, j] = q_i · Pk[δ(i, j)]
        if "p2c" in self.terms:
            pos_query = self._heads((self.query_proj if self.share_att_key else self.pos_query_proj)(rows))[heads]
            p2c = torch.matmul(k, pos_query.transpose(-1, -2) * self.scale)  # (n, h, L, R): [j, r] = k_j · Pq[r]
            # δ is odd (bucket(-d) = -bucket(d)): p2c[i, j] = k_j · Pq[δ(i, j)] = gathered[j, i] with indexᵀ
            p2c = _GatherLast.apply(p2c, index_t.expand(n, h, length, length)).transpose(-1, -2)
            bias = p2c if bias is None else bias.add_(p2c)  # in place: no third (n, h, L, L) tensor
        return bias

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | Packing | None,
                rel: torch.Tensor | None) -> torch.Tensor:
        p = self.dropout_p if self.training else 0.0
        nh, hd = self.num_heads, self.head_dim
        bias_of = (lambda q, k, heads: self.position_bias(q, k, heads, rel)) if self.terms else None
        if isinstance(mask, Packing):  # packed (N, H): the repad layout, each row's tokens at 0..L-1
            n = hidden.shape[0]
            qkv = torch.stack([lin(hidden) for lin in (self.query_proj, self.key_proj, self.value_proj)], 1)
            ctx = repad_attention(qkv.view(n, 3, nh, hd), mask, p, self.kernels, score_bias=bias_of,
                                  scale=self.scale)
            return ctx.reshape(n, nh * hd)  # (N, H)
        b, t, _ = hidden.shape
        q, k, v = (lin(hidden).view(b, t, nh, hd).transpose(1, 2)
                   for lin in (self.query_proj, self.key_proj, self.value_proj))  # (B, nh, T, hd)
        ctx = attention(q, k, v, mask, p, self.kernels, bias=bias_of, scale=self.scale)  # (B, nh, T, hd)
        return ctx.transpose(1, 2).reshape(b, t, nh * hd)


class DebertaAttention(nn.Module):
    def __init__(self, config: DebertaConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.self = DisentangledSelfAttention(config, kernels)
        self.output = BertSelfOutput(config, kernels)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | Packing | None, rel: torch.Tensor | None):
        return self.output(self.self(hidden, mask, rel), hidden)


class DebertaLayer(nn.Module):
    def __init__(self, config: DebertaConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.attention = DebertaAttention(config, kernels)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config, kernels)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | Packing | None, rel: torch.Tensor | None):
        attended = self.attention(hidden, mask, rel)
        return self.output(self.intermediate(attended), attended)


class DebertaEncoder(nn.Module):
    """The layer stack with the shared relative embeddings (``rel_embeddings``) and their LayerNorm."""

    def __init__(self, config: DebertaConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.layer = nn.ModuleList(DebertaLayer(config, kernels) for _ in range(config.num_hidden_layers))
        self.rel_embeddings = nn.Embedding(2 * config.relative_span, config.hidden_size) \
            if config.relative_attention else None
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) \
            if config.relative_attention and config.norm_rel_ebd == "layer_norm" else None

    def relative_embeddings(self) -> torch.Tensor | None:
        if self.rel_embeddings is None:
            return None
        rel = self.rel_embeddings.weight  # (2S, H)
        return self.LayerNorm(rel) if self.LayerNorm is not None else rel


class DebertaModel(ConfigSizes, nn.Module):
    """DeBERTa-v2/v3 (HF's ``DebertaV2Model``): ``forward(input_ids, attention_mask, token_type_ids)`` →
    ``EncoderOutput`` (no pooler: the classification heads own DeBERTa's ContextPooler)."""

    config_class = DebertaConfig  # what a run's record of this encoder's config is rebuilt as
    layer_class = DebertaLayer  # one transformer layer: FSDP's shard unit and activation-checkpointing unit
    pooler = None

    def __init__(self, config: DebertaConfig, add_pooling_layer: bool = False, unpad: str = "auto",
                 kernels: Kernels | None = None):
        super().__init__()
        del add_pooling_layer  # DeBERTa has no encoder pooler
        kernels = kernels or DEFAULT_KERNELS
        self.config = config
        self.unpad = unpad_mode(unpad)
        self.kernels = kernels
        self.embeddings = DebertaEmbeddings(config, kernels)
        self.encoder = DebertaEncoder(config, kernels)
        self.static_graph = False  # the padded path whatever the batch (set while tracing to ONNX, as BERT's)
        self.apply(lambda m: BertModel._init_weights(self, m))

    # The same choice as BERT's: pack when unpad says so (position 0 of every row real).
    uses_unpadded_path = BertModel.uses_unpadded_path

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, output_hidden_states: bool = False) -> EncoderOutput:
        """input_ids, attention_mask, token_type_ids: (B, T) → last_hidden_state (B, T, H); real positions hold
        the same values on either path, padded ones zeros on the unpadded path."""
        packing = pack(attention_mask if attention_mask is not None else torch.ones_like(input_ids)) \
            if self.uses_unpadded_path(input_ids, attention_mask) else None
        hidden = self.embeddings(input_ids, token_type_ids, attention_mask, packing)
        mask = packing if packing is not None else padding_mask(attention_mask, self.static_graph)
        rel = self.encoder.relative_embeddings()
        all_hidden = [hidden] if output_hidden_states else None
        for layer in self.encoder.layer:
            hidden = layer(hidden, mask, rel)
            if all_hidden is not None:
                all_hidden.append(hidden)
        if packing is not None:
            hidden = packing.scatter(hidden)
            all_hidden = [packing.scatter(h) for h in all_hidden] if all_hidden is not None else None
        return EncoderOutput(hidden, None, tuple(all_hidden) if all_hidden is not None else None)


__all__ = ["DebertaConfig", "DebertaModel", "log_bucket", "relative_index"]
