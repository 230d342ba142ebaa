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

import functools
import importlib.util
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.models.encoder import EncoderOutput
from bertlab.models.packing import Packing, pack
from bertlab.runtime.config import EncoderConfig, unpad_mode
from bertlab.runtime.errors import ConfigError

# SDPA has no CPU kernel with attention dropout, so training on CPU takes its math path, which allocates
# several (B, nh, T, T) tensors per layer. Past glibc's mmap threshold (≤ 32 MiB) each one is a fresh mmap,
# page-faulted in and unmapped again on every step. Computing attention over slices of (batch, head) rows whose
# scores stay under a budget keeps those buffers on the reused heap (benchmarks/ablations.py, "cpu_dropout",
# measures the effect). The price is RSS: freed heap memory is kept for reuse, so a large batch peaks higher
# than one SDPA call. ``Kernels.cpu_attention_slice_bytes`` is the budget; 0 = one slice.
DEFAULT_ATTENTION_SLICE_BYTES = 32 * 2**20
VARLEN_KERNELS = ("auto", "repad", "nested", "flash_attn")


@dataclass(frozen=True)
class Kernels:
    """How a ``BertModel`` computes, chosen once when it is built (``model.cpu_fast_dropout``,
    ``model.cpu_attention_slice_mb``, ``model.varlen_attention``); never the function it computes.

    - ``cpu_fast_dropout``: dropout masks on CPU from 16-bit uniforms (:func:`cpu_keep_mask`); False = torch's.
    - ``cpu_attention_slice_bytes``: attention with dropout on CPU over slices of (batch, head) rows whose
      scores stay under this many bytes (``model.cpu_attention_slice_mb`` MiB); 0 = one slice.
    - ``varlen_attention``: the kernel of the unpadded path's attention (:func:`varlen_kernel`).
    """

    cpu_fast_dropout: bool = True
    cpu_attention_slice_bytes: int = DEFAULT_ATTENTION_SLICE_BYTES
    varlen_attention: str = "auto"

    def __post_init__(self) -> None:
        if self.varlen_attention not in VARLEN_KERNELS:
            raise ConfigError(f"model.varlen_attention must be one of {', '.join(VARLEN_KERNELS)}, got "
                              f"{self.varlen_attention!r}")


DEFAULT_KERNELS = Kernels()


# Dropout masks on CPU: torch draws every element's Bernoulli from its own random double (``bernoulli_``). One
# 64-bit draw holds four 16-bit uniforms, so 64-bit random integers viewed as int16 and compared with a
# threshold give the same Bernoulli(1 - p), p to 2⁻¹⁶, with a quarter of the generator calls (the speed-up is
# in benchmarks/ablations.py, "cpu_dropout"). Seeded by torch's CPU generator like ``F.dropout``.
# ``Kernels.cpu_fast_dropout=False`` (``model.cpu_fast_dropout=false``) uses torch's dropout everywhere.


def cpu_keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A bool tensor of ``shape``, each element True with probability 1 - p (p rounded to a multiple of 2⁻¹⁶)."""
    cut = round(p * 2**16)
    if cut >= 2**16:  # p within 2⁻¹⁷ of 1: drop everything (the int16 threshold below would wrap around)
        return torch.zeros(shape, dtype=torch.bool)
    n = 1
    for size in shape:
        n *= size
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), 2**63 - 1)  # all 64 bits uniform
    uniform16 = words.view(torch.int16)[:n]  # four independent uniforms in [-2¹⁵, 2¹⁵) per word
    return (uniform16 >= cut - 2**15).view(shape)


class _CPUDropout(torch.autograd.Function):
    """x · keep / (1 - p) with :func:`cpu_keep_mask`; backward reuses the bool mask."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        keep = cpu_keep_mask(x.shape, p)
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return torch.where(keep, x, 0.0).mul_(ctx.scale)  # where, not x * keep: no bool → float copy

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad, 0.0).mul_(ctx.scale), None


def dropout(x: torch.Tensor, p: float, training: bool, fast: bool = True) -> torch.Tensor:
    """Inverted dropout (``F.dropout``); on CPU with the faster mask above unless ``fast`` is False."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0 or not fast:
        return F.dropout(x, p, training=True)
    return _CPUDropout.apply(x, p)


class Dropout(nn.Dropout):
    """``nn.Dropout`` (same attribute, same ``train()``/``eval()`` switch) computed by :func:`dropout`."""

    def __init__(self, p: float = 0.5, fast: bool = True):
        super().__init__(p)
        self.fast = fast

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training, self.fast)


class BertEmbeddings(nn.Module):
    """token + segment + learned position embeddings, summed, then LayerNorm and dropout (BERT §3.2)."""

    def __init__(self, config: EncoderConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob, kernels.cpu_fast_dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                packing: Packing | None = None) -> torch.Tensor:
        """(B, T) ids → (B, T, H); with ``packing``, only the real tokens → (N, H)."""
        seq_len = input_ids.shape[1]
        if seq_len > self.position_embeddings.num_embeddings:
            raise ValueError(
                f"sequence length {seq_len} exceeds max_position_embeddings "
                f"{self.position_embeddings.num_embeddings}: lower data.max_seq_length"
            )
        if packing is not None:
            # The same sum in the same order as below, on the real tokens: each keeps its own position id.
            x = self.word_embeddings(packing.gather(input_ids))  # (N, H)
            x = x + self.position_embeddings(packing.positions)
            if token_type_ids is None:
                x = x + self.token_type_embeddings.weight[0]
            else:
                x = x + self.token_type_embeddings(packing.gather(token_type_ids))
            return self.dropout(self.LayerNorm(x))
        x = self.word_embeddings(input_ids)  # (B, T, H)
        x = x + self.position_embeddings.weight[:seq_len]  # (T, H) broadcast over the batch
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]  # segment A everywhere
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
              dropout_p: float, kernels: Kernels = DEFAULT_KERNELS) -> torch.Tensor:
    """Scaled dot-product attention: q (B, nh, Tq, hd), k and v (B, nh, T, hd), mask (B, 1, 1, T) bool or None →
    (B, nh, Tq, hd). Tq is T, or fewer query rows (the [CLS] rows of the last layer: :class:`BertModel`).

    SDPA, except for dropout on CPU: softmax(q kᵀ / √hd) with masked keys at -inf, then :func:`dropout`, then
    · v, over slices of (batch, head) rows (each row attends only within itself).
    """
    if dropout_p == 0.0 or q.device.type != "cpu":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    b, nh, tq, hd = q.shape
    t = k.shape[2]
    rows = b * nh
    if kernels.cpu_attention_slice_bytes:
        rows = min(rows, max(1, kernels.cpu_attention_slice_bytes // (tq * t * q.element_size())))
    qs = q.reshape(b * nh, tq, hd).split(rows)  # slices of (rows, Tq, hd)
    ks, vs = (x.reshape(b * nh, t, hd).split(rows) for x in (k, v))  # slices of (rows, T, hd)
    masks = (mask.expand(b, nh, 1, t).reshape(b * nh, 1, t).split(rows) if mask is not None
             else (None,) * len(qs))  # (rows, 1, T)
    ctx = []
    for qi, ki, vi, mi in zip(qs, ks, vs, masks):
        scores = torch.matmul(qi, ki.transpose(1, 2)) * hd**-0.5  # (rows, Tq, T)
        if mi is not None:  # bool "may attend" (bertlab's), or additive like SDPA's float masks
            scores = scores.masked_fill(~mi, float("-inf")) if mi.dtype == torch.bool else scores + mi
        ctx.append(torch.matmul(dropout(scores.softmax(-1), dropout_p, True, kernels.cpu_fast_dropout), vi))  # (rows, Tq, hd)
    return torch.cat(ctx).view(b, nh, tq, hd)


# Attention over packed tokens (each sequence attends only to itself). Three kernels compute it:
# - "repad": q, k, v scattered into a compact (B, L, ·) layout, L the longest row of the batch (not the padded
#   T), then :func:`attention` above with a key mask, and the rows gathered back. Attention is the only product
#   that sees padding, and only up to L; it keeps the CPU slices and dropout masks of the padded path.
# - "nested": jagged nested tensors through SDPA, which on CUDA dispatches to the flash / memory-efficient
#   kernels with no mask and no padding at all.
# - "flash_attn": ``flash_attn_varlen_func`` of the flash-attn package, when it is installed (CUDA, fp16/bf16).
# "auto" picks flash_attn, then nested on CUDA, and repad elsewhere (on CPU, nested SDPA runs the math
# kernel sequence by sequence). Any other value of ``Kernels.varlen_attention`` forces that kernel.


@functools.cache
def _flash_attn_varlen():
    """``flash_attn.flash_attn_varlen_func``, or None when the package is not installed."""
    if importlib.util.find_spec("flash_attn") is None:
        return None
    from flash_attn import flash_attn_varlen_func

    return flash_attn_varlen_func


def varlen_kernel(device_type: str, dtype: torch.dtype, flash_attn_available: bool | None = None,
                  setting: str = "auto") -> str:
    """Which kernel :func:`varlen_attention` uses for q of this device type and dtype (``setting``: the
    ``Kernels.varlen_attention`` chosen; anything but ``auto`` is used as it is).

    ``flash_attn_available``: None looks the package up (only for CUDA half precision, the one case it matters).
    """
    if setting != "auto":
        return setting
    if device_type != "cuda":
        return "repad"
    if dtype in (torch.float16, torch.bfloat16):
        if flash_attn_available is None:
            flash_attn_available = _flash_attn_varlen() is not None
        if flash_attn_available:
            return "flash_attn"
    return "nested"


def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, packing: Packing,
                     dropout_p: float, kernels: Kernels = DEFAULT_KERNELS) -> torch.Tensor:
    """Attention of packed q, k, v (N, nh, hd) within each sequence of ``packing`` → (N, nh, hd)."""
    kernel = varlen_kernel(q.device.type, q.dtype, setting=kernels.varlen_attention)
    if kernel == "flash_attn":
        cu = packing.cu_seqlens
        return _flash_attn_varlen()(q, k, v, cu, cu, packing.max_len, packing.max_len, dropout_p=dropout_p)
    if kernel == "nested":
        offsets = packing.cu_seqlens.long()
        with warnings.catch_warnings():  # nested tensors are marked prototype: torch warns on each construction
            warnings.simplefilter("ignore", UserWarning)
            # The row lengths given, so SDPA need not read them back from the device.
            qn, kn, vn = (torch.nested.nested_tensor_from_jagged(x, offsets, min_seqlen=packing.min_len,
                                                                 max_seqlen=packing.max_len).transpose(1, 2)
                          for x in (q, k, v))  # (B, nh, j, hd), j jagged
            ctx = F.scaled_dot_product_attention(qn, kn, vn, dropout_p=dropout_p)  # (B, nh, j, hd) jagged
        return ctx.transpose(1, 2).values()  # (N, nh, hd)
    if kernel != "repad":
        raise ValueError(f"varlen_attention must be one of {', '.join(VARLEN_KERNELS)}, got {kernel!r}")
    return repad_attention(torch.stack((q, k, v), 1), packing, dropout_p, kernels)


def repad_attention(qkv: torch.Tensor, packing: Packing, dropout_p: float, kernels: Kernels = DEFAULT_KERNELS,
                    queries: torch.Tensor | None = None) -> torch.Tensor:
    """The ``repad`` kernel: packed q, k, v stacked (N, 3, nh, hd) → attention within each sequence (N, nh, hd).

    Per attention group of ``packing`` (rows of similar length), one scatter of the group's q, k and v into a
    (rows, L, 3, nh, hd) layout padded to the group's longest row L, :func:`attention` with the group's key mask,
    and one gather of the real rows back; the groups' outputs are contiguous in packed order.

    ``queries`` (B, nh, hd): one query per packed row instead (qkv then holds k and v only, (N, 2, nh, hd)) →
    (B, nh, hd), each row's query attending to its row's tokens.
    """
    _, parts, nh, hd = qkv.shape
    out = []
    for g in packing.groups:
        compact = qkv.new_zeros(g.rows * g.max_len, parts, nh, hd).index_copy(0, g.compact_index, qkv[g.start:g.end])
        compact = compact.view(g.rows, g.max_len, parts, nh, hd).permute(2, 0, 3, 1, 4)  # (parts, rows, nh, L, hd)
        if queries is None:
            q, k, v = compact
            ctx = attention(q, k, v, g.key_mask, dropout_p, kernels)  # (rows, nh, L, hd)
            out.append(ctx.transpose(1, 2).reshape(g.rows * g.max_len, nh, hd)[g.compact_index])  # (n_g, nh, hd)
        else:
            k, v = compact
            q = queries[g.row_start:g.row_start + g.rows, :, None]  # (rows, nh, 1, hd)
            out.append(attention(q, k, v, g.key_mask, dropout_p, kernels).squeeze(2))  # (rows, nh, hd)
    return out[0] if len(out) == 1 else torch.cat(out)


@dataclass(frozen=True)
class FirstTokens:
    """A layer's "mask" when only each row's first token ([CLS]) is wanted from it: every token is still read as
    a key and value, but queries, the attention output, the MLP, LayerNorm and dropout run on B rows, not N.

    Its attention is the ``repad`` kernel's on every device (one query per row against the row's keys, a dense
    SDPA with a key mask): with one query row the product is small, and no varlen kernel is needed."""

    packing: Packing
    rows: torch.Tensor  # (B,) int64: each packed row's first token

    @classmethod
    def of(cls, packing: Packing) -> FirstTokens:
        return cls(packing, packing.cu_seqlens[:-1].long())


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
        if all(type(lin) is nn.Linear for lin in projections):
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
        self.dropout = Dropout(config.hidden_dropout_prob, kernels.cpu_fast_dropout)

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


def padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(B, T) 1/0 mask → (B, 1, 1, T) boolean "may attend" mask, or None when nothing is padded.

    A boolean mask works under any autocast dtype, and None for unpadded batches lets SDPA take its
    unmasked kernel. It hides padded keys from every query; it is not [MASK] (input content) and not the
    loss's position selection. Every query keeps [CLS] visible, so no row is fully masked.
    """
    if attention_mask is None or bool(attention_mask.all()):
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


class BertModel(nn.Module):
    """BERT (HF's ``BertModel``): ``forward(input_ids, attention_mask, token_type_ids)`` → ``EncoderOutput``."""

    computes_first_token_only = True  # forward takes first_token_only (TaskModel passes it for [CLS] heads)

    def __init__(self, config: EncoderConfig, add_pooling_layer: bool = True, unpad: str = "auto",
                 kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.config = config
        self.unpad = unpad_mode(unpad)  # "auto" | "true" | "false": see uses_unpadded_path
        self.kernels = kernels  # chosen once here: how it computes on each device, never what
        self.embeddings = BertEmbeddings(config, kernels)
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

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

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
        hidden = self.embeddings(input_ids, token_type_ids, packing)  # (B, T, H), or (N, H) packed
        mask = packing if packing is not None else padding_mask(attention_mask)
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
        if self.unpad == "false":
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

    @classmethod
    def from_pretrained(cls, path_or_hub_id: str | Path, add_pooling_layer: bool = True) -> BertModel:
        """Load a Hugging Face BERT checkpoint (folder or hub id); the load report is logged."""
        from bertlab.models.hf_weights import load_encoder

        return load_encoder(path_or_hub_id, add_pooling_layer=add_pooling_layer)

    def save_pretrained(self, directory: str | Path) -> None:
        """Write ``config.json`` + ``model.safetensors`` that ``transformers.BertModel`` loads."""
        from bertlab.models.hf_weights import save_encoder

        save_encoder(self, directory)


def num_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


__all__ = ["BertModel", "EncoderConfig", "EncoderOutput", "Packing", "pack", "padding_mask", "num_parameters"]
