"""How the encoders compute attention and dropout: the kernels, apart from the networks that use them.

Every kernel here computes the same function as its textbook form (SDPA, ``F.dropout``); they differ in how
(CPU slices, 16-bit dropout masks, packed tokens). An encoder family's modules call them with its own
q, k, v; a family that needs more (an additive score bias, a sliding window: ``window``) passes it here rather
than writing its own attention.
"""

from __future__ import annotations

import functools
import importlib.util
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.models.packing import Packing
from bertlab.runtime.errors import ConfigError

# SDPA has no CPU kernel with attention dropout, so training on CPU takes its math path, which allocates
# several (B, nh, T, T) tensors per layer. Past glibc's mmap threshold (≤ 32 MiB) each one is a fresh mmap,
# page-faulted in and unmapped again on every step. Computing attention over slices of (batch, head) rows whose
# scores stay under a budget keeps those buffers on the reused heap (benchmarks/ablations.py, "cpu_dropout",
# measures the effect). The price is RSS: freed heap memory is kept for reuse, so a large batch peaks higher
# than one SDPA call. ``Kernels.cpu_attention_slice_bytes`` is the budget; 0 = one slice.
DEFAULT_ATTENTION_SLICE_BYTES = 32 * 2**20
# An additive attention-score bias as a function of q (n, h, Tq, hd), k (n, h, T, hd) of n batch rows and the
# heads they are (a slice of 0..nh-1) → a fresh (n, h, Tq, T) tensor (its caller may change it in place).
ScoreBias = Callable[[torch.Tensor, torch.Tensor, slice], torch.Tensor]
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


def tracing() -> bool:
    """Whether this forward is being traced into a graph (the ONNX export, ``torch.jit.trace``).

    A traced graph keeps the Python branches the example batch took as constants: a shortcut chosen from a
    shape or a value (no padding in this batch, every row shorter than the sliding window, this length's cached
    relative index) would hold in the graph for every batch and length. Every such shortcut of the encoders asks
    this first and takes the general computation while tracing, which gives the same numbers for any input."""
    return torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()


def traced_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean key mask as the additive float mask a traced graph takes: 0 where a key may be attended, the
    dtype's lowest value where not. The ONNX exporter writes SDPA with a boolean mask as softmax over ``-inf``
    followed by a pass that replaces NaN (a row with every key masked) by 0 over the whole (B, nh, Tq, T) score
    tensor, one of the costliest steps of an encoder's graph; an additive mask needs no such pass. A row whose
    keys are all masked (a padding position outside every sliding window, an input with no token) then attends
    evenly to them instead of to nothing; no real position ever reads such a row (its keys are masked), so every
    output a reader keeps is the same. (The export traces in fp32; in fp16 the lowest value plus a score could
    overflow to −inf.)"""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)


def window_mask(mask: torch.Tensor | None, tq: int, t: int, window: int | None,
                device: torch.device) -> torch.Tensor | None:
    """A key mask (B, 1, 1, T) bool or None, narrowed to a sliding window: query i (0..Tq-1) may attend to key j
    only when |i - j| <= ``window`` (ModernBERT's local layers). None when no query's window misses a key.

    A query that is itself padding keeps every real key: with the band alone a padded query far past its row's
    end would see no key at all, and its softmax (NaN) would poison the real rows' gradients through k and v.

    While :func:`tracing`, the band is always built: the length of the example batch says nothing of the lengths
    the graph will be given (a graph traced at 8 tokens with no band attended globally at every length).
    """
    if window is None or (max(tq, t) - 1 <= window and not tracing()):
        return mask
    rows = torch.arange(tq, device=device)[:, None]
    band = (rows - torch.arange(t, device=device)[None, :]).abs() <= window  # (Tq, T)
    if mask is None:
        return band[None, None]  # (1, 1, Tq, T)
    real_query = mask[..., :tq].transpose(-1, -2)  # (B, 1, Tq, 1): queries are positions 0..Tq-1 of the rows
    return mask & (band | ~real_query)  # (B, 1, Tq, T)


def _mask_rows(mask: torch.Tensor, start: int, rows: int, nh: int) -> torch.Tensor:
    """The (batch, head) rows start..start + rows of a mask broadcastable to (B, nh, Tq, T), as (rows or 1, ·, T):
    a slice's own rows, never a (B·nh, Tq, T) copy of the whole mask."""
    if mask.shape[0] == 1 and mask.shape[1] == 1:
        return mask[0]  # (1, Tq or 1, T): the same for every row
    idx = torch.arange(start, start + rows, device=mask.device)
    return mask[idx // nh if mask.shape[0] > 1 else 0, idx % nh if mask.shape[1] > 1 else 0]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
              dropout_p: float, kernels: Kernels = DEFAULT_KERNELS, window: int | None = None,
              bias: ScoreBias | None = None, scale: float | None = None) -> torch.Tensor:
    """Scaled dot-product attention: q (B, nh, Tq, hd), k and v (B, nh, T, hd), mask (B, 1, 1, T) bool or None →
    (B, nh, Tq, hd). Tq is T, or fewer query rows (the [CLS] rows of the last layer: :class:`BertModel`).

    ``window``: a sliding window (:func:`window_mask`: query i sees keys within ``window`` positions), None for
    global attention (ModernBERT's local layers). ``bias``: an additive score bias (DeBERTa's relative-position
    scores) as a function of q and k of some batch rows and a range of heads (:data:`ScoreBias`), added after the
    scaling; ``scale``: the factor of q kᵀ (None: 1/√hd).

    SDPA, except for dropout on CPU: softmax(q kᵀ · scale + bias) with masked keys at -inf, then :func:`dropout`,
    then · v, over slices of (batch, head) rows (each row attends only within itself). The bias is computed per
    slice there, so that neither it nor the tensors it is made of exceed the slice budget at once.
    """
    b, nh, tq, hd = q.shape
    t = k.shape[2]
    mask = window_mask(mask, tq, t, window, q.device)  # (B or 1, 1, 1 or Tq, T)
    if dropout_p == 0.0 or q.device.type != "cpu":
        if bias is not None:  # one additive float mask: the bias (a fresh tensor) with masked keys at -inf
            full = bias(q, k, slice(0, nh))
            mask = full if mask is None else full.masked_fill_(~mask, float("-inf"))
        elif mask is not None and mask.dtype == torch.bool and tracing():
            mask = traced_mask(mask, q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
    rows = b * nh
    if kernels.cpu_attention_slice_bytes:
        rows = min(rows, max(1, kernels.cpu_attention_slice_bytes // (tq * t * q.element_size())))
    if bias is not None:  # slices of whole batch rows, or of heads within one batch row
        rows = rows // nh * nh if rows >= nh else max(d for d in range(1, rows + 1) if nh % d == 0)
    qs = q.reshape(b * nh, tq, hd).split(rows)  # slices of (rows, Tq, hd)
    ks, vs = (x.reshape(b * nh, t, hd).split(rows) for x in (k, v))  # slices of (rows, T, hd)
    scale = hd**-0.5 if scale is None else scale
    ctx = []
    for i, (start, qi, ki, vi) in enumerate(zip(range(0, b * nh, rows), qs, ks, vs)):
        scores = torch.matmul(qi, ki.transpose(1, 2)) * scale  # (rows, Tq, T)
        if bias is not None:
            n, h = (qi.shape[0] // nh, nh) if rows >= nh else (1, qi.shape[0])
            first = 0 if rows >= nh else i * rows % nh
            scores = scores + bias(qi.view(n, h, tq, hd), ki.view(n, h, t, hd), slice(first, first + h)).view_as(scores)
        if mask is not None:  # bool "may attend" (bertlab's), or additive like SDPA's float masks
            mi = _mask_rows(mask, start, len(qi), nh)  # (rows or 1, 1 or Tq, T)
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
                     dropout_p: float, kernels: Kernels = DEFAULT_KERNELS, window: int | None = None) -> torch.Tensor:
    """Attention of packed q, k, v (N, nh, hd) within each sequence of ``packing`` → (N, nh, hd).

    ``window``: a sliding window within each sequence (token i sees tokens within ``window`` positions of it);
    None for global attention. Nested SDPA takes no mask: a window that some row is longer than runs through the
    ``repad`` kernel instead (flash-attn has windows of its own)."""
    kernel = varlen_kernel(q.device.type, q.dtype, setting=kernels.varlen_attention)
    if window is not None and packing.max_len - 1 <= window and not tracing():
        window = None  # every row fits in its window: global attention computes the same
    if kernel == "flash_attn":
        cu = packing.cu_seqlens
        extra = {"window_size": (window, window)} if window is not None else {}  # keys i-w..i+w, inclusive
        return _flash_attn_varlen()(q, k, v, cu, cu, packing.max_len, packing.max_len, dropout_p=dropout_p, **extra)
    if kernel == "nested" and window is None:
        offsets = packing.cu_seqlens.long()
        with warnings.catch_warnings():  # nested tensors are marked prototype: torch warns on each construction
            warnings.simplefilter("ignore", UserWarning)
            # The row lengths given, so SDPA need not read them back from the device. Nested SDPA takes only
            # contiguous values (q, k, v may be views of one fused projection: ModernBERT's Wqkv).
            qn, kn, vn = (torch.nested.nested_tensor_from_jagged(x.contiguous(), offsets, min_seqlen=packing.min_len,
                                                                 max_seqlen=packing.max_len).transpose(1, 2)
                          for x in (q, k, v))  # (B, nh, j, hd), j jagged
            ctx = F.scaled_dot_product_attention(qn, kn, vn, dropout_p=dropout_p)  # (B, nh, j, hd) jagged
        return ctx.transpose(1, 2).values()  # (N, nh, hd)
    if kernel not in ("repad", "nested"):
        raise ValueError(f"varlen_attention must be one of {', '.join(VARLEN_KERNELS)}, got {kernel!r}")
    return repad_attention(torch.stack((q, k, v), 1), packing, dropout_p, kernels, window=window)


def repad_attention(qkv: torch.Tensor, packing: Packing, dropout_p: float, kernels: Kernels = DEFAULT_KERNELS,
                    queries: torch.Tensor | None = None, window: int | None = None,
                    score_bias: ScoreBias | None = None, scale: float | None = None) -> torch.Tensor:
    """The ``repad`` kernel: packed q, k, v stacked (N, 3, nh, hd) → attention within each sequence (N, nh, hd).

    Per attention group of ``packing`` (rows of similar length), one scatter of the group's q, k and v into a
    (rows, L, 3, nh, hd) layout padded to the group's longest row L, :func:`attention` with the group's key mask,
    and one gather of the real rows back; the groups' outputs are contiguous in packed order.

    ``queries`` (B, nh, hd): one query per packed row instead (qkv then holds k and v only, (N, 2, nh, hd)) →
    (B, nh, hd), each row's query (its first token) attending to its row's tokens.

    ``window``: a sliding window within each row (:func:`window_mask`, per group: the band of its layout).
    ``score_bias``: :func:`attention`'s ``bias`` for a group, each row's tokens at positions 0..L-1 of the compact
    layout (DeBERTa's relative positions); ``scale`` as in :func:`attention`. Not with ``queries``.
    """
    _, parts, nh, hd = qkv.shape
    out = []
    for g in packing.groups:
        compact = qkv.new_zeros(g.rows * g.max_len, parts, nh, hd).index_copy(0, g.compact_index, qkv[g.start:g.end])
        compact = compact.view(g.rows, g.max_len, parts, nh, hd).permute(2, 0, 3, 1, 4)  # (parts, rows, nh, L, hd)
        if queries is None:
            q, k, v = compact
            ctx = attention(q, k, v, g.key_mask, dropout_p, kernels, window, bias=score_bias,
                            scale=scale)  # (rows, nh, L, hd)
            out.append(ctx.transpose(1, 2).reshape(g.rows * g.max_len, nh, hd)[g.compact_index])  # (n_g, nh, hd)
        else:
            k, v = compact
            q = queries[g.row_start:g.row_start + g.rows, :, None]  # (rows, nh, 1, hd)
            out.append(attention(q, k, v, g.key_mask, dropout_p, kernels, window).squeeze(2))  # (rows, nh, hd)
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


# Linear layers for CPU inference. torch's ``F.linear`` on CPU hands the weight to the BLAS as it is stored, every
# call. oneDNN's linear reads a weight reordered once into its own blocked layout, which multiplies faster at
# the widths of these encoders (benchmarks/predict_speed.py measures prediction with it). The reordered copy is
# made on the first call without autograd and kept until the weight changes (its version or storage); anything
# else (training, autograd, another device or dtype, autocast) computes ``F.linear`` as ``nn.Linear`` does. The
# numbers are float32 products in another summation order: equal to ``nn.Linear`` within float rounding.
PREPACK_ROWS_HINT = 1024  # the batch-rows hint oneDNN picks the weight's layout for


@functools.cache
def onednn_linear_available() -> bool:
    """Whether this torch build has oneDNN's prepacked linear (the ops exist and oneDNN is enabled)."""
    ops = torch.ops.mkldnn
    try:
        return (torch.backends.mkldnn.is_available() and hasattr(ops, "_reorder_linear_weight")
                and hasattr(ops, "_linear_pointwise"))
    except (AttributeError, RuntimeError):
        return False


class PrepackedLinear(nn.Linear):
    """``nn.Linear`` (same parameters, same state dict) that computes CPU float32 inference with oneDNN on a
    reordered copy of its weight; :func:`prepack_linears` turns a model's plain Linears into these."""

    def _prepacked(self, x: torch.Tensor) -> torch.Tensor | None:
        w = self.weight
        if (x.device.type != "cpu" or x.dtype != torch.float32 or w.dtype != torch.float32 or x.dim() < 2
                or torch.is_grad_enabled() or torch.is_autocast_enabled("cpu")):
            return None
        key = (w.data_ptr(), w._version)
        cached = self.__dict__.get("_prepacked_weight")
        if cached is None or cached[0] != key:
            cached = (key, torch.ops.mkldnn._reorder_linear_weight(w.detach(), PREPACK_ROWS_HINT))
            self.__dict__["_prepacked_weight"] = cached
        return cached[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self._prepacked(x)
        if packed is None:
            return F.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, packed, self.bias, "none", [], "")

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()  # the reordered copy is a cache, rebuilt on the next call
        state.pop("_prepacked_weight", None)
        return state


def prepack_linears(model: nn.Module) -> int:
    """Make every plain ``nn.Linear`` of ``model`` a :class:`PrepackedLinear` in place (wrapped or subclassed
    Linears, such as LoRA's, stay as they are); the number changed, 0 where this torch has no oneDNN linear."""
    if not onednn_linear_available():
        return 0
    plain = [m for m in model.modules() if type(m) is nn.Linear]
    for m in plain:
        m.__class__ = PrepackedLinear
    return len(plain)


def is_plain_linear(module: nn.Module) -> bool:
    """A Linear that computes ``x Wᵀ + b`` and nothing else (not LoRA's or another wrapper)."""
    return type(module) in (nn.Linear, PrepackedLinear)
