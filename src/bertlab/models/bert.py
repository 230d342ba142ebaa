"""The BERT encoder, top to bottom: embeddings → self-attention → attention output → MLP → layer →
encoder → pooler → model.

Submodule names are Hugging Face's (``embeddings.word_embeddings``, ``encoder.layer.N.attention.self.query``,
``LayerNorm``, ...) so checkpoints map one to one (``bertlab.models.hf_weights``). Outputs equal
``transformers.BertModel`` on the same weights to float32 rounding: exact (erf) GELU, post-LN residuals,
learned absolute positions, LayerNorm eps from the config, a padding mask hiding padded keys, tanh pooler on token 0.

Two execution paths compute the same function. The padded path runs every (B, T) position, padding included,
and hides padded keys from attention. The unpadded path (``unpad``; docs/performance.md) packs the real tokens of
the batch into one (N, H) tensor before the embeddings, runs every Linear, GELU, LayerNorm and dropout on those N
rows only, restricts attention to each sequence's own tokens, and puts the rows back in (B, T) order (zeros at
padded positions) for the heads.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.models.encoder import ConfigSizes, EncoderOutput
from bertlab.models.kernels import (  # noqa: F401  (attention, Kernels, ... are also imported from here)
    DEFAULT_ATTENTION_SLICE_BYTES,
    DEFAULT_KERNELS,
    VARLEN_KERNELS,
    Dropout,
    FirstTokens,
    Kernels,
    attention,
    cpu_keep_mask,
    dropout,
    is_plain_linear,
    repad_attention,
    tracing,
    varlen_attention,
    varlen_kernel,
)
from bertlab.models.packing import Packing, pack
from bertlab.runtime.config import EncoderConfig, unpad_mode


class BertEmbeddings(nn.Module):
    """token + segment + learned position embeddings, summed, then LayerNorm and dropout (BERT §3.2).

    The BERT-shaped families differ only here: RoBERTa / XLM-R count positions from ``pad_token_id + 1``
    (``position_style="after_padding"``), DistilBERT has no segment embeddings (``type_vocab_size=0``) and
    RoBERTa one row of them, ELECTRA's embeddings may be narrower than the layers (``embedding_size``).
    """

    def __init__(self, config: EncoderConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        width = config.embedding_width
        self.word_embeddings = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        after_padding = config.position_style == "after_padding"
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, width,
                                                padding_idx=config.pad_token_id if after_padding else None)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, width) if config.type_vocab_size else None
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob, kernels.cpu_fast_dropout)
        self.pad_token_id = config.pad_token_id if after_padding else None
        self.max_length = config.max_sequence_length

    def position_ids(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        """(B, T) position rows for RoBERTa-style positions (HF's ``create_position_ids_from_input_ids``: real
        tokens count from pad_token_id + 1, padding takes row pad_token_id); None for BERT's 0..T-1."""
        if self.pad_token_id is None:
            return None
        real = input_ids.ne(self.pad_token_id).long()  # int64 before the sum: ONNX's CumSum takes no booleans
        return torch.cumsum(real, dim=1).mul_(real) + self.pad_token_id  # (B, T) int64

    def _segments(self, token_type_ids: torch.Tensor | None) -> torch.Tensor | None:
        """The segment embeddings to add: none (DistilBERT), row 0 everywhere (no ids given, or a family with
        one segment row: a pair template's 1s must not index past it), or one row per token."""
        if self.token_type_embeddings is None:
            return None
        if token_type_ids is None or self.token_type_embeddings.num_embeddings == 1:
            return self.token_type_embeddings.weight[0]
        return self.token_type_embeddings(token_type_ids)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                packing: Packing | None = None) -> torch.Tensor:
        """(B, T) ids → (B, T, E); with ``packing``, only the real tokens → (N, E)."""
        seq_len = input_ids.shape[1]
        if seq_len > self.max_length:
            raise ValueError(
                f"sequence length {seq_len} exceeds the {self.max_length} positions of the model's position "
                "embeddings: lower data.max_seq_length"
            )
        positions = self.position_ids(input_ids)  # (B, T), or None: 0..T-1
        if packing is not None:
            # The same sum in the same order as below, on the real tokens: each keeps its own position id.
            x = self.word_embeddings(packing.gather(input_ids))  # (N, E)
            x = x + self.position_embeddings(packing.positions if positions is None else packing.gather(positions))
            segments = self._segments(None if token_type_ids is None else packing.gather(token_type_ids))
        else:
            x = self.word_embeddings(input_ids)  # (B, T, E)
            # (T, E) broadcast over the batch, or (B, T, E)
            x = x + (self.position_embeddings.weight[:seq_len] if positions is None
                     else self.position_embeddings(positions))
            segments = self._segments(token_type_ids)
        if segments is not None:
            x = x + segments
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, config: EncoderConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.kernels = kernels
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        # Separate q/k/v Linears (not fused) keep the checkpoint key map an identity.
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)

    def _packed_qkv(self, hidden: torch.Tensor, with_query: bool = True) -> torch.Tensor:
        """q, k and v of packed tokens (N, H), stacked (N, 3, nh, hd); k and v only, (N, 2, nh, hd), without
        ``with_query``. Plain Linears compute them as one product of their weights stacked (the same numbers, one
        matmul and one bias add instead of three); wrapped projections (LoRA) each compute their own."""
        projections = (self.query, self.key, self.value) if with_query else (self.key, self.value)
        shape = (hidden.shape[0], len(projections), self.num_heads, self.head_dim)
        if all(is_plain_linear(lin) for lin in projections):
            weight = torch.cat([lin.weight for lin in projections])  # (3H, H)
            bias = torch.cat([lin.bias for lin in projections])
            return F.linear(hidden, weight, bias).view(shape)
        return torch.stack([lin(hidden) for lin in projections], 1).view(shape)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | Packing | None) -> torch.Tensor:
        p = self.dropout_p if self.training else 0.0
        if isinstance(mask, FirstTokens):  # packed tokens (N, H) → each row's first token only (B, H)
            queries = self.query(hidden[mask.rows]).view(-1, self.num_heads, self.head_dim)  # (B, nh, hd)
            kv = self._packed_qkv(hidden, with_query=False)  # (N, 2, nh, hd)
            return repad_attention(kv, mask.packing, p, self.kernels, queries=queries).flatten(1)  # (B, H)
        if isinstance(mask, Packing):  # packed tokens: hidden (N, H)
            n = hidden.shape[0]
            if varlen_kernel(hidden.device.type, hidden.dtype, setting=self.kernels.varlen_attention) == "repad":
                return repad_attention(self._packed_qkv(hidden), mask, p, self.kernels).reshape(n, -1)  # (N, H)
            q, k, v = (lin(hidden).view(n, self.num_heads, self.head_dim) for lin in (self.query, self.key, self.value))
            return varlen_attention(q, k, v, mask, p, self.kernels).reshape(n, self.num_heads * self.head_dim)  # (N, H)
        q, k, v = self._split(self.query(hidden)), self._split(self.key(hidden)), self._split(self.value(hidden))
        # mask: (B, 1, 1, T) bool, True where the key is a real token; None = no padding.
        ctx = attention(q, k, v, mask, p, self.kernels)  # (B, nh, T, hd)
        b, _, t, _ = ctx.shape
        return ctx.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim)  # (B, T, H)


class BertSelfOutput(nn.Module):
    def __init__(self, config: EncoderConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        # DistilBERT adds the attention output to the residual without dropout.
        p = config.hidden_dropout_prob if config.attention_output_dropout else 0.0
        self.dropout = Dropout(p, kernels.cpu_fast_dropout)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden)) + residual)  # post-LN


class BertAttention(nn.Module):
    def __init__(self, config: EncoderConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.self = BertSelfAttention(config, kernels)
        self.output = BertSelfOutput(config, kernels)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | Packing | FirstTokens | None) -> torch.Tensor:
        residual = hidden[mask.rows] if isinstance(mask, FirstTokens) else hidden
        return self.output(self.self(hidden, mask), residual)


class BertIntermediate(nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(hidden))  # exact (erf) GELU, as BERT; not the tanh approximation


class BertOutput(nn.Module):
    def __init__(self, config: EncoderConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob, kernels.cpu_fast_dropout)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden)) + residual)


class BertLayer(nn.Module):
    def __init__(self, config: EncoderConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.attention = BertAttention(config, kernels)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config, kernels)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | Packing | FirstTokens | None) -> torch.Tensor:
        """hidden (B, T, H) with a padding mask, or packed (N, H) with its Packing → the same shape; packed with
        :class:`FirstTokens` → (B, H), the layer's output at each row's first token (packed order)."""
        attended = self.attention(hidden, mask)
        return self.output(self.intermediate(attended), attended)


class BertEncoder(nn.Module):
    """The layer stack (HF's ``BertEncoder``), named ``encoder`` inside ``BertModel`` as in HF's checkpoint keys."""

    def __init__(self, config: EncoderConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config, kernels) for _ in range(config.num_hidden_layers))


class BertPooler(nn.Module):
    """dense + tanh over the [CLS] vector (HF ``BertPooler``)."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, last_hidden_state: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(last_hidden_state[:, 0]))  # (B, H)


def padding_mask(attention_mask: torch.Tensor | None, static: bool = False) -> torch.Tensor | None:
    """(B, T) 1/0 mask → (B, 1, 1, T) boolean "may attend" mask, or None when nothing is padded.

    ``static`` (an encoder traced to a graph, ``static_graph``), or any trace (:func:`~bertlab.models.kernels.tracing`):
    the mask whatever the batch holds, since a graph cannot branch on whether this batch has padding.

    A boolean mask works under any autocast dtype, and None for unpadded batches lets SDPA take its
    unmasked kernel. It hides padded keys from every query; it is not [MASK] (input content) and not the
    loss's position selection. Every query keeps [CLS] visible, so no row is fully masked.
    """
    if attention_mask is None or (not static and not tracing() and bool(attention_mask.all())):
        return None
    return attention_mask.bool()[:, None, None, :]


# Device types where unpad=auto packs a padded batch: on CPU and CUDA every Linear/GELU/LayerNorm runs on N
# rows instead of B·T, for one gather and one scatter per batch. Elsewhere (mps, xla, ...) the padded path:
# their varlen attention would be the repad kernel, whose gain there is unknown.
UNPAD_AUTO_DEVICES = ("cpu", "cuda")
# The share of padded positions from which unpad=auto packs. Packing costs a few copies of the (N, H) rows per
# layer (gather/scatter, the repad kernel's compact layout) against ~12·H multiply-adds per element of those rows
# in the Linear layers, an estimated break-even near 2 % padding at MiniLM's width: below 5 % (a length-grouped
# batch) the padded path stays.
UNPAD_AUTO_MIN_PADDING = 0.05
# Device types where unpad=auto also packs a batch without padding when only [CLS] is wanted from the last layer
# (first_token_only): that layer then runs its queries, MLP and LayerNorm on B tokens instead of B·T, which
# outweighs the packing copies (benchmarks/unpadded.py, "fixed"). On CUDA unmeasured: the padding rule alone.
UNPAD_AUTO_FIRST_TOKEN_DEVICES = ("cpu",)


class BertModel(ConfigSizes, nn.Module):
    """BERT (HF's ``BertModel``): ``forward(input_ids, attention_mask, token_type_ids)`` → ``EncoderOutput``."""

    computes_first_token_only = True  # forward takes first_token_only (TaskModel passes it for [CLS] heads)
    layer_class = BertLayer  # one transformer layer: FSDP's shard unit and activation-checkpointing unit

    def __init__(self, config: EncoderConfig, add_pooling_layer: bool = True, unpad: str = "auto",
                 kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.config = config
        self.unpad = unpad_mode(unpad)  # "auto" | "true" | "false": see uses_unpadded_path
        self.kernels = kernels  # chosen once here: how it computes on each device, never what
        # Graph export (ONNX): one code path for every batch, with no branch on the values of the inputs (the
        # padded path, the padding mask always applied), so a traced graph holds for any batch and length.
        self.static_graph = False
        self.embeddings = BertEmbeddings(config, kernels)
        # ELECTRA: embeddings narrower than the layers are projected up (HF's ``ElectraModel.embeddings_project``).
        self.embeddings_project = (nn.Linear(config.embedding_width, config.hidden_size)
                                   if config.embedding_width != config.hidden_size else None)
        self.encoder = BertEncoder(config, kernels)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        # BERT's initialisation: N(0, 0.02) for Linear/Embedding, zero biases, unit LayerNorm.
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        first_token_only: bool = False,
    ) -> EncoderOutput:
        """input_ids, attention_mask, token_type_ids: (B, T) → last_hidden_state (B, T, H).

        Real positions hold the same values on either path; padded positions hold zeros on the unpadded one.
        ``first_token_only`` (for heads that read [CLS] alone: the pooler, raw [CLS]): last_hidden_state is
        (B, 1, H), position 0 only; the unpadded path then runs its last layer for those B tokens only (their
        keys and values still come from every token), the same values for a fraction of the layer's work.
        """
        if first_token_only and output_hidden_states:
            raise ValueError("first_token_only gives the last layer at position 0 only: it cannot also return "
                             "every layer's hidden states (output_hidden_states)")
        packing = None
        if self.uses_unpadded_path(input_ids, attention_mask, first_token_only):
            packing = pack(attention_mask if attention_mask is not None else torch.ones_like(input_ids))
        hidden = self.embeddings(input_ids, token_type_ids, packing)  # (B, T, E), or (N, E) packed
        if self.embeddings_project is not None:
            hidden = self.embeddings_project(hidden)  # (..., H)
        mask = packing if packing is not None else padding_mask(attention_mask, self.static_graph)
        all_hidden = [hidden] if output_hidden_states else None
        last = len(self.encoder.layer) - 1
        for i, layer in enumerate(self.encoder.layer):
            hidden = layer(hidden, FirstTokens.of(packing) if i == last and first_token_only and packing is not None
                           else mask)
            if all_hidden is not None:
                all_hidden.append(hidden)
        if packing is not None and first_token_only:  # (B, H) in packed order → (B, 1, H) in batch order
            hidden = hidden[packing.rank][:, None] if last >= 0 else hidden[packing.first][:, None]
        elif packing is not None:  # back to (B, T, H) for the heads
            hidden = packing.scatter(hidden)
            all_hidden = [packing.scatter(h) for h in all_hidden] if all_hidden is not None else None
        elif first_token_only:
            hidden = hidden[:, :1]
        pooled = self.pooler(hidden) if self.pooler is not None else None
        return EncoderOutput(hidden, pooled, tuple(all_hidden) if all_hidden is not None else None)

    def uses_unpadded_path(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                           first_token_only: bool = False) -> bool:
        """Whether this batch runs on packed real tokens (``unpad``; docs/performance.md, "The unpadded path").

        ``false``: never. ``true``: always, also without padding. ``auto``: on CPU and CUDA, when at least
        ``UNPAD_AUTO_MIN_PADDING`` of the batch's positions are padding (without padding both paths do the same
        work, and the padded one skips the gather); on CPU also whenever ``first_token_only`` (the last layer
        then runs on B tokens). Either way a batch whose position 0 is padding in some row (left padding) stays
        padded: the pooler reads position 0.
        """
        # A traced graph cannot branch on padding: the padded path, whatever the example batch holds.
        if self.unpad == "false" or getattr(self, "static_graph", False) or tracing():
            return False
        if attention_mask is not None and not bool(attention_mask[:, 0].all()):
            return False
        if self.unpad == "true":
            return True
        if first_token_only and input_ids.device.type in UNPAD_AUTO_FIRST_TOKEN_DEVICES:
            return True
        if attention_mask is None or input_ids.device.type not in UNPAD_AUTO_DEVICES:
            return False
        padded = int((attention_mask == 0).sum())
        return padded > 0 and padded >= UNPAD_AUTO_MIN_PADDING * attention_mask.numel()


def num_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


__all__ = ["BertModel", "EncoderConfig", "EncoderOutput", "Packing", "pack", "padding_mask", "num_parameters"]
