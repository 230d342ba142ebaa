"""What a head needs from an encoder: the ``Encoder`` protocol and its output, ``EncoderOutput``.

Every encoder implements it: the native families (:class:`bertlab.models.bert.BertModel` and the families built
on it, ModernBERT's and DeBERTa's own modules), the generic AutoModel path and the recurrent baselines
(:class:`bertlab.models.recurrent.RecurrentEncoder`). ``TaskModel`` holds any of them under the name ``encoder``,
and heads, freeze policies and the update-scope audit only use what this protocol names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor  # (B, T, H)
    pooler_output: torch.Tensor | None  # (B, H), None without a pooler
    hidden_states: tuple[torch.Tensor, ...] | None = None  # L + 1 tensors (B, T, H): embeddings, then each layer


@runtime_checkable
class Encoder(Protocol):
    """An encoder a ``TaskModel`` can hold: token ids (B, T) in, :class:`EncoderOutput` out."""

    config: Any  # its settings; ``hidden_size`` and ``initializer_range`` are read by the heads
    embeddings: nn.Module  # ``embeddings.word_embeddings`` is the input table (tied by language-model heads)

    @property
    def hidden_size(self) -> int: ...

    @property
    def num_layers(self) -> int: ...

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 token_type_ids: torch.Tensor | None = None, output_hidden_states: bool = False,
                 ) -> EncoderOutput: ...

    # Optional: ``layer_stack`` and ``embeddings_path``, the dotted names of its nn.ModuleList of layers and of its
    # embeddings module (default ``encoder.layer`` and ``embeddings``, BERT's), where the freeze policies, the
    # layer-wise learning-rate decay and the update-scope audit find them (ModernBERT: ``layers``).
    #
    # Optional: an encoder whose class sets ``computes_first_token_only = True`` also takes
    # ``first_token_only=True`` (last_hidden_state (B, 1, H), position 0 only), which ``TaskModel`` passes when
    # its head reads nothing else (``reads_first_token_only``); BERT's unpadded path then skips the rest of its
    # last layer. Encoders without it are called as above.


DEFAULT_LAYER_STACK = "encoder.layer"
DEFAULT_EMBEDDINGS = "embeddings"


def layer_stack_path(encoder: nn.Module) -> str:
    """The dotted name of the encoder's stack of layers (``encoder.layer.N`` for BERT, ``layers.N`` for ModernBERT)."""
    return getattr(encoder, "layer_stack", DEFAULT_LAYER_STACK)


def embeddings_path(encoder: nn.Module) -> str:
    """The dotted name of the encoder's embeddings module."""
    return getattr(encoder, "embeddings_path", DEFAULT_EMBEDDINGS)


class ConfigSizes:
    """``hidden_size`` and ``num_layers`` of an encoder read from its ``config`` (the two sizes the Encoder protocol
    names), for the encoders whose config holds them under Hugging Face's names."""

    config: Any

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers
