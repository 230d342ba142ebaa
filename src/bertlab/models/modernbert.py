"""ModernBERT (Warner et al. 2024, "Smarter, Better, Faster, Longer"), top to bottom: embeddings → layers (pre-norm
attention with rotary positions, global or sliding-window local; a GeGLU MLP) → final norm.

Not BERT-shaped, so a module of its own (``FamilySpec.encoder_class``), with Hugging Face's submodule names
(``embeddings.tok_embeddings``, ``layers.N.attn.Wqkv``, ``layers.N.mlp.Wi``, ``attn_norm``, ``mlp_norm``,
``final_norm``): the family's key map is the prefix ``model.`` alone. Outputs equal
``transformers.ModernBertModel`` on the same weights to float32 rounding:

- token embeddings → LayerNorm → dropout; no position or segment embeddings;
- each layer: ``x + Wo(attention(attn_norm(x)))`` then ``x + Wo(drop(act(a) · g))`` with ``a, g = Wi(mlp_norm(x))``
  (layer 0 has no ``attn_norm``: the embeddings' norm precedes it); norms and Linears without biases by default;
- rotary positions on q and k (in float32), theta ``global_rope_theta`` in global layers and ``local_rope_theta``
  in local ones; every ``global_attn_every_n_layers``-th layer (0, N, 2N, ...) global, the others see only the
  tokens within ``local_attention // 2`` positions (HF's ``sliding_window``);
- a final LayerNorm; no pooler (the heads pool: ``[CLS]`` or the mean, per ``classifier_pooling``).

Both execution paths of :mod:`bertlab.models.bert` exist here too: the padded path (a key mask, and a band mask in
local layers) and the unpadded one, native to ModernBERT: the real tokens are packed once before the embeddings,
every layer runs on (N, H), attention stays within each sequence (and within each token's window in local layers:
``models.kernels``), and the rows go back to (B, T) once at the end.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.models.bert import BertModel, padding_mask
from bertlab.models.encoder import ConfigSizes, EncoderOutput
from bertlab.models.kernels import (
    DEFAULT_KERNELS,
    Dropout,
    Kernels,
    attention,
    repad_attention,
    varlen_attention,
    varlen_kernel,
)
from bertlab.models.packing import Packing, pack
from bertlab.runtime.config import EncoderConfig, unpad_mode
from bertlab.runtime.errors import ConfigError

LAYER_TYPES = ("full_attention", "sliding_attention")  # transformers' names of a global / local layer


@dataclass
class ModernBertConfig(EncoderConfig):
    """ModernBERT's architecture: ``EncoderConfig``'s fields (what the heads read) with ModernBERT's defaults, and
    its own. ``hidden_dropout_prob`` is ModernBERT's ``mlp_dropout`` and ``attention_probs_dropout_prob`` its
    ``attention_dropout`` (so ``model.hidden_dropout_prob`` / ``model.attention_probs_dropout_prob`` mean the
    encoder's dropout for every family); ``layer_norm_eps`` is its ``norm_eps``."""

    model_type: str = "modernbert"
    vocab_size: int = 50368
    hidden_size: int = 768
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    intermediate_size: int = 1152
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 8192
    type_vocab_size: int = 0
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 50283
    classifier_dropout: float | None = 0.0
    embedding_dropout: float = 0.0
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    local_attention: int = 128  # the whole window: a local layer's token sees local_attention // 2 on each side
    global_attn_every_n_layers: int = 3
    layer_types: list[str] | None = None  # per layer, full_attention | sliding_attention; None: from the above
    global_rope_theta: float = 160_000.0
    local_rope_theta: float = 10_000.0
    classifier_pooling: str = "cls"  # cls | mean: what the family's heads read (head.pooling=pooler)
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    decoder_bias: bool = True
    initializer_cutoff_factor: float = 2.0
    bos_token_id: int | None = 50281
    eos_token_id: int | None = 50282
    cls_token_id: int | None = 50281
    sep_token_id: int | None = 50282

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.type_vocab_size != 0:
            raise ConfigError(f"model.type_vocab_size must be 0 for ModernBERT (no segment embeddings), got "
                              f"{self.type_vocab_size}")
        if self.layer_types is None:
            n = self.global_attn_every_n_layers
            if not isinstance(n, int) or n <= 0:
                raise ConfigError(f"global_attn_every_n_layers must be a positive integer, got {n!r}")
            self.layer_types = [LAYER_TYPES[bool(i % n)] for i in range(self.num_hidden_layers)]
        self.layer_types = list(self.layer_types)
        if len(self.layer_types) != self.num_hidden_layers or not set(self.layer_types) <= set(LAYER_TYPES):
            raise ConfigError(f"layer_types must name {self.num_hidden_layers} layers, each one of "
                              f"{', '.join(LAYER_TYPES)}; got {self.layer_types!r}")
        if not isinstance(self.local_attention, int) or self.local_attention < 2:
            raise ConfigError(f"local_attention must be an integer of at least 2, got {self.local_attention!r}")
        if self.classifier_pooling not in ("cls", "mean"):
            raise ConfigError(f"classifier_pooling must be 'cls' or 'mean', got {self.classifier_pooling!r}")
        if self.classifier_activation != "gelu":
            raise ConfigError(f"classifier_activation {self.classifier_activation!r} is not supported (only gelu)")
        if not 0.0 <= self.embedding_dropout < 1.0:
            raise ConfigError(f"embedding_dropout must be in [0, 1), got {self.embedding_dropout}")

    @property
    def window(self) -> int:
        """How far a local layer's token sees on each side (HF's ``config.sliding_window``)."""
        return self.local_attention // 2

    def is_local(self, layer: int) -> bool:
        return self.layer_types[layer] == "sliding_attention"


def modernbert_config(**fields) -> ModernBertConfig:
    """A ``ModernBertConfig`` from the recorded fields of a checkpoint (unknown keys are an error, as for BERT)."""
    known = {f.name for f in dataclasses.fields(ModernBertConfig)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ConfigError(f"unknown ModernBERT config fields {unknown}")
    return ModernBertConfig(**fields)


# ----------------------------------------------------------------------------------------------------------
# Rotary positions


def rotary_tables(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype,
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (..., hd) of the rotary embedding at ``positions`` (...,), as HF computes them: the angles in
    float32, cast to the activations' dtype."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float, device=positions.device) / head_dim))
    freqs = positions[..., None].float() * inv_freq  # (..., hd/2)
    angles = torch.cat((freqs, freqs), dim=-1)  # (..., hd)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., hd) rotated by the angles of its position (cos, sin (..., hd), broadcast), in float32 (as HF)."""
    xf = x.float()
    half = xf.shape[-1] // 2
    rotated = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    return (xf * cos + rotated * sin).to(x.dtype)


# ----------------------------------------------------------------------------------------------------------
# Modules (HF's names)


class ModernBertEmbeddings(nn.Module):
    """token embeddings → LayerNorm (no bias) → dropout."""

    def __init__(self, config: ModernBertConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.drop = Dropout(config.embedding_dropout, kernels.cpu_fast_dropout)
        self.max_length = config.max_sequence_length

    @property
    def word_embeddings(self) -> nn.Embedding:
        """The input table (what language-model heads tie their decoder to), under the name every encoder has."""
        return self.tok_embeddings

    def forward(self, input_ids: torch.Tensor, packing: Packing | None = None) -> torch.Tensor:
        """(B, T) ids → (B, T, H); with ``packing``, the real tokens only → (N, H)."""
        if input_ids.shape[1] > self.max_length:
            raise ValueError(f"sequence length {input_ids.shape[1]} exceeds the model's {self.max_length} positions "
                             "(max_position_embeddings): lower data.max_seq_length")
        ids = packing.gather(input_ids) if packing is not None else input_ids
        return self.drop(self.norm(self.tok_embeddings(ids)))


class ModernBertAttention(nn.Module):
    """Fused q/k/v (``Wqkv``), rotary positions, attention (global, or within ``window`` positions), ``Wo``."""

    def __init__(self, config: ModernBertConfig, layer: int, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.kernels = kernels
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.Wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.Wo = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.dropout_p = config.attention_probs_dropout_prob
        self.out_drop = Dropout(config.attention_probs_dropout_prob, kernels.cpu_fast_dropout)
        self.window = config.window if config.is_local(layer) else None

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | Packing | None,
                rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """hidden (B, T, H) with a key mask, or packed (N, H) with its Packing; rope: cos, sin (T or N, 1, 1, hd)."""
        p = self.dropout_p if self.training else 0.0
        qkv = self.Wqkv(hidden).view(*hidden.shape[:-1], 3, self.num_heads, self.head_dim)  # (..., 3, nh, hd)
        # q and k rotated in one product, v as it is: (..., 3, nh, hd) again, the repad kernel's layout.
        qkv = torch.cat((rotate(qkv[..., :2, :, :], *rope), qkv[..., 2:, :, :]), dim=-3)
        if isinstance(mask, Packing):
            if varlen_kernel(hidden.device.type, hidden.dtype, setting=self.kernels.varlen_attention) == "repad":
                ctx = repad_attention(qkv, mask, p, self.kernels, window=self.window)  # (N, nh, hd)
            else:
                ctx = varlen_attention(*qkv.unbind(1), mask, p, self.kernels, window=self.window)
            ctx = ctx.reshape(hidden.shape[0], -1)  # (N, H)
        else:
            b, t = hidden.shape[:2]
            q, k, v = (x.transpose(1, 2) for x in qkv.unbind(2))  # (B, nh, T, hd) each
            ctx = attention(q, k, v, mask, p, self.kernels, window=self.window)  # (B, nh, T, hd)
            ctx = ctx.transpose(1, 2).reshape(b, t, -1)  # (B, T, H)
        return self.out_drop(self.Wo(ctx))


class ModernBertMLP(nn.Module):
    """GeGLU: ``Wi`` → (a, g) → GELU(a) · g → dropout → ``Wo``."""

    def __init__(self, config: ModernBertConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        self.Wi = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=config.mlp_bias)
        self.drop = Dropout(config.hidden_dropout_prob, kernels.cpu_fast_dropout)
        self.Wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        a, gate = self.Wi(hidden).chunk(2, dim=-1)
        return self.Wo(self.drop(F.gelu(a) * gate))  # exact (erf) GELU, as HF's "gelu"


class ModernBertEncoderLayer(nn.Module):
    def __init__(self, config: ModernBertConfig, layer: int, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__()
        # Layer 0 reads the embeddings' norm directly (HF: nn.Identity, no tensors).
        self.attn_norm = (nn.Identity() if layer == 0 else
                          nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias))
        self.attn = ModernBertAttention(config, layer, kernels)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.mlp = ModernBertMLP(config, kernels)
        self.local = config.is_local(layer)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | Packing | None,
                rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        hidden = hidden + self.attn(self.attn_norm(hidden), mask, rope)  # pre-norm residuals
        return hidden + self.mlp(self.mlp_norm(hidden))


class ModernBertModel(ConfigSizes, nn.Module):
    """ModernBERT (HF's ``ModernBertModel``): ``forward(input_ids, attention_mask)`` → ``EncoderOutput`` (no pooler).

    ``add_pooling_layer`` is accepted for the encoder protocol and ignored: ModernBERT has no pooler.
    """

    layer_class = ModernBertEncoderLayer  # one transformer layer: FSDP's shard unit and activation checkpointing's

    # Where the freeze policies, layer-wise lr decay and the update-scope audit find the layers and embeddings.
    layer_stack = "layers"
    embeddings_path = "embeddings"
    computes_first_token_only = False
    # The same rule as BERT's: which batches run packed (unpad auto | true | false, left padding never).
    uses_unpadded_path = BertModel.uses_unpadded_path

    def __init__(self, config: ModernBertConfig, add_pooling_layer: bool = False, unpad: str = "auto",
                 kernels: Kernels | None = None):
        super().__init__()
        kernels = kernels or DEFAULT_KERNELS
        self.config = config
        self.unpad = unpad_mode(unpad)
        self.kernels = kernels
        self.embeddings = ModernBertEmbeddings(config, kernels)
        self.layers = nn.ModuleList(ModernBertEncoderLayer(config, i, kernels) for i in range(config.num_hidden_layers))
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.pooler = None
        self.static_graph = False  # the padded path whatever the batch (set while tracing to ONNX, as BERT's)
        self._init_weights()

    def _init_weights(self) -> None:
        """HF's initialisation: truncated normals (± cutoff · std), std ``initializer_range`` for the embeddings and
        the input projections, ``initializer_range / √(2L)`` for the output projections; unit norms."""
        cfg = self.config
        cutoff = cfg.initializer_cutoff_factor or 3.0
        out_std = cfg.initializer_range / (2.0 * cfg.num_hidden_layers) ** 0.5

        def init(module: nn.Module, std: float) -> None:
            nn.init.trunc_normal_(module.weight, mean=0.0, std=std, a=-cutoff * std, b=cutoff * std)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

        init(self.embeddings.tok_embeddings, cfg.initializer_range)
        for layer in self.layers:
            init(layer.attn.Wqkv, cfg.initializer_range)
            init(layer.attn.Wo, out_std)
            init(layer.mlp.Wi, cfg.initializer_range)
            init(layer.mlp.Wo, out_std)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, output_hidden_states: bool = False) -> EncoderOutput:
        """input_ids, attention_mask: (B, T) → last_hidden_state (B, T, H); ``token_type_ids`` are ignored
        (ModernBERT has no segment embeddings). Real positions hold the same values on either path; padded
        positions hold zeros on the unpadded one.

        ``hidden_states`` (with ``output_hidden_states``): the embeddings' output, then each layer's output, the
        last one after the final norm (= ``last_hidden_state``), as ``transformers`` returns them.
        """
        packing = None
        if self.uses_unpadded_path(input_ids, attention_mask):
            packing = pack(attention_mask if attention_mask is not None else torch.ones_like(input_ids))
        hidden = self.embeddings(input_ids, packing)  # (B, T, H), or (N, H) packed
        if packing is not None:
            mask, positions = packing, packing.positions  # (N,)
        else:
            mask = padding_mask(attention_mask, self.static_graph)
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        cfg = self.config
        ropes = {}
        for local, theta in ((False, cfg.global_rope_theta), (True, cfg.local_rope_theta)):
            cos, sin = rotary_tables(positions, cfg.head_dim, theta, hidden.dtype)
            ropes[local] = (cos[:, None, None], sin[:, None, None])  # (T or N, 1, 1, hd): over q/k and heads
        all_hidden = [hidden] if output_hidden_states else None
        for layer in self.layers:
            hidden = layer(hidden, mask, ropes[layer.local])
            if all_hidden is not None:
                all_hidden.append(hidden)
        hidden = self.final_norm(hidden)
        if all_hidden is not None:
            all_hidden[-1] = hidden  # the last entry is last_hidden_state, after the final norm (as transformers)
        if packing is not None:  # back to (B, T, H) for the heads
            hidden = packing.scatter(hidden)
            all_hidden = [packing.scatter(h) for h in all_hidden] if all_hidden is not None else None
        return EncoderOutput(hidden, None, tuple(all_hidden) if all_hidden is not None else None)


__all__ = ["ModernBertConfig", "ModernBertModel", "modernbert_config", "rotary_tables"]
