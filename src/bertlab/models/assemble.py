"""One assembler of encoder + head, for every place that builds a model (training, export, prediction).

The encoder comes from its family's spec (``bertlab.models.families``); the head from a builder the caller
passes (the task family's ``build_head``, which this part cannot import). Whether the encoder keeps its pooler
follows from the head: only a head that reads the encoder's pooler (BERT's ``pooling=pooler``) or NSP needs it.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from bertlab.models.families import family_spec
from bertlab.models.heads import TaskModel, pooler_style
from bertlab.runtime.config import EncoderConfig, HeadConfig

HeadBuilder = Callable[[EncoderConfig, HeadConfig, nn.Embedding], nn.Module]


def needs_pooler(config: EncoderConfig, task_family: str, head: HeadConfig, nsp: bool = False) -> bool:
    """Whether a model of this task family and head reads the encoder's pooler."""
    if task_family in ("sequence", "multiple_choice"):
        kind = "multiple_choice" if task_family == "multiple_choice" else "sequence"
        return head.pooling == "pooler" and pooler_style(config, kind) == "encoder"
    return task_family == "mlm" and nsp


def assemble(config: EncoderConfig, head_cfg: HeadConfig, build_head: HeadBuilder, head_kind: str | None,
             add_pooling_layer: bool, unpad: str = "auto", kernels=None) -> TaskModel:
    """A ``TaskModel`` of the family's encoder (random weights) and the head ``build_head`` makes."""
    encoder = family_spec(config.model_type).build_encoder(config, add_pooling_layer=add_pooling_layer,
                                                           unpad=unpad, kernels=kernels)
    head = build_head(config, head_cfg, encoder.embeddings.word_embeddings)
    return TaskModel(encoder, head, head_kind, output_hidden_states=head_cfg.reads_all_layers)
