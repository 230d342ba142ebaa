"""One assembler of encoder + head, for every place that builds a model (training, export, prediction).

The encoder comes from its family's spec (``bertlab.models.families``); the head from a builder the caller
passes (the task family's ``build_head``, which this part cannot import). Whether the encoder keeps its pooler
follows from the head: only a head that reads the encoder's pooler (BERT's ``pooling=pooler``) or NSP needs it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from torch import nn

from bertlab.models.families import family_spec, is_native
from bertlab.models.families.generic import (
    AutoEncoder,
    GenericEncoderConfig,
    generic_config_from_record,
    is_generic_record,
)
from bertlab.models.heads import TaskModel, pooler_style
from bertlab.runtime.config import EncoderConfig, HeadConfig

log = logging.getLogger(__name__)

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
    if isinstance(config, GenericEncoderConfig):
        encoder = AutoEncoder.from_config(config)
    else:
        encoder = family_spec(config.model_type).build_encoder(config, add_pooling_layer=add_pooling_layer,
                                                               unpad=unpad, kernels=kernels)
    return with_head(encoder, head_cfg, build_head, head_kind)


def with_head(encoder: nn.Module, head_cfg: HeadConfig, build_head: HeadBuilder, head_kind: str | None) -> TaskModel:
    """A ``TaskModel`` of this encoder and the head ``build_head`` makes for it (tied to its input embeddings).
    Training, prediction and export all build through here, so the head they build is one decision."""
    head_cfg = head_for_encoder(encoder, head_cfg)
    table = encoder.word_embeddings if getattr(encoder, "generic", False) else encoder.embeddings.word_embeddings
    head = build_head(encoder.config, head_cfg, table)
    if hasattr(head, "attach"):  # a head sharing more than the word embeddings with the encoder (RTD's generator)
        head.attach(encoder)
    return TaskModel(encoder, head, head_kind, output_hidden_states=head_cfg.reads_all_layers)


def head_for_encoder(encoder: nn.Module, head_cfg: HeadConfig) -> HeadConfig:
    """The head settings this encoder can serve: ``head.pooling=pooler`` on a generic-path encoder that
    transformers builds without a pooler (ConvBERT, ...) reads the [CLS] vector (``cls``) instead. Decided from
    the encoder alone, on every build of the model (training, a run's checkpoint, an export, ONNX), so what
    trained is what predicts; the run's record keeps ``pooler``, which every rebuild resolves the same way."""
    if head_cfg.pooling == "pooler" and getattr(encoder, "generic", False) and encoder.pooler is None:
        log.info("head.pooling=pooler → cls: the %s encoder has no pooler of its own (generic path)",
                 encoder.config.model_type)
        return dataclasses.replace(head_cfg, pooling="cls")
    return head_cfg


def config_from_record(encoder_config: dict) -> EncoderConfig | GenericEncoderConfig:
    """The encoder config a checkpoint's hyper-parameters recorded (``encoder_config``): a native family's
    (checkpoints from before families existed are BERT's) or the generic path's."""
    if is_generic_record(encoder_config):
        return generic_config_from_record(encoder_config)
    return family_spec(encoder_config.get("model_type") or "bert").config_class(**encoder_config)


def describe_encoder(encoder: nn.Module) -> str:
    """How the run header names the encoder: its family, or the generic path with its model_type."""
    config = getattr(encoder, "config", None)
    if getattr(encoder, "generic", False):
        return f"{config.model_type}, generic transformers AutoModel path: padded only"
    model_type = getattr(config, "model_type", None)
    if model_type and is_native(model_type):
        return family_spec(model_type).display
    return type(encoder).__name__
