"""Encoder families: what each Hugging Face ``model_type`` is to bertlab, in one registry.

A :class:`FamilySpec` says everything the rest of bertlab asks of a family: how its ``config.json`` becomes an
:class:`~bertlab.runtime.config.EncoderConfig` and back, how its checkpoint keys map to bertlab's module names
(both ways, applied before anything else touches a key), what each task head is called in its
``transformers`` classes (so exports load in ``AutoModelFor*``), which first-token transform its
classification heads use, its LoRA targets and whether it was pre-trained with next-sentence prediction.

Adding a family is one module in this package that defines its spec, and one line in :data:`FAMILIES`
(docs/models.md, "Adding a family"). The BERT-shaped families (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA) are all
computed by :class:`bertlab.models.bert.BertModel`; their differences are fields of ``EncoderConfig``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bertlab.runtime.config import EncoderConfig
from bertlab.runtime.errors import ConfigError

# Head kinds (``TaskModel.head_kind``) a family may have a transformers class for.
HEAD_KINDS = ("sequence", "token", "span", "multiple_choice", "mlm", "pretraining")
# First-token transforms of classification heads (``FamilySpec.sequence_pooler``): "encoder" reads the
# encoder's pooler (BERT: dense + tanh inside the encoder); the others are a dense layer of the head itself
# ("dense_gelu_norm": ModernBERT's prediction head, dense → GELU → LayerNorm, on [CLS] or the mean of the tokens
# as the config's ``classifier_pooling`` says; "context_pooler": DeBERTa's, its own dropout (pooler_dropout) →
# dense → GELU, then the classifier's dropout).
POOLER_STYLES = ("encoder", "dense_tanh", "dense_gelu", "dense_relu", "dense_gelu_norm", "context_pooler")


@dataclass(frozen=True)
class KeyMap:
    """Renames between a family's checkpoint keys and bertlab's, as (theirs, ours) prefix pairs; ``{n}`` stands
    for a layer number. Keys that no pair matches keep their name (an identity map is ``KeyMap()``)."""

    pairs: tuple[tuple[str, str], ...] = ()

    def _compiled(self, reverse: bool) -> list[tuple[re.Pattern, str]]:
        out = []
        for theirs, ours in self.pairs:
            src, dst = (ours, theirs) if reverse else (theirs, ours)
            pattern = re.escape(src).replace(re.escape("{n}"), r"(?P<n>\d+)")
            out.append((re.compile("^" + pattern), dst))
        return out

    def _apply(self, key: str, reverse: bool) -> str:
        for pattern, dst in self._compiled(reverse):
            m = pattern.match(key)
            if m:
                return dst.replace("{n}", m.groupdict().get("n") or "") + key[m.end():]
        return key

    def to_ours(self, key: str) -> str:
        return self._apply(key, reverse=False)

    def to_theirs(self, key: str) -> str:
        return self._apply(key, reverse=True)


@dataclass(frozen=True)
class HeadLayout:
    """One bertlab head kind as a family's transformers class names it.

    ``keys``: (HF key or prefix, bertlab key or prefix) pairs for the head's tensors, checked in order.
    ``pooler``: for sequence / multiple-choice heads, the first-token transform this class uses (a head with
    another ``head.pooling`` has no stock class). ``tied``: HF keys that alias an encoder tensor (the MLM
    decoder), never loaded on their own and written back as a copy. ``copies``: HF keys written as a copy of
    another HF key (a bias that HF lists twice).
    """

    architecture: str
    keys: tuple[tuple[str, str], ...]
    pooler: str | None = None
    tied: tuple[str, ...] = ()
    copies: tuple[tuple[str, str], ...] = ()

    def to_ours(self, key: str) -> str | None:
        for theirs, ours in self.keys:
            if key == theirs or (theirs.endswith(".") and key.startswith(theirs)):
                return ours + key[len(theirs):] if theirs.endswith(".") else ours
        return None

    def to_theirs(self, key: str) -> str | None:
        for theirs, ours in self.keys:
            if key == ours or (ours.endswith(".") and key.startswith(ours)):
                return theirs + key[len(ours):] if ours.endswith(".") else theirs
        return None


@dataclass(frozen=True)
class FamilySpec:
    """Everything bertlab asks of an encoder family (see the module docstring)."""

    model_type: str  # config.json's model_type
    display: str  # how the run header names it
    prefix: str  # the encoder's attribute in the family's task classes (``roberta.`` in RobertaForMaskedLM)
    base_architecture: str  # the bare encoder class (``RobertaModel``)
    read_config: Callable[[Mapping[str, Any], str], EncoderConfig]  # config.json dict, its path → ours
    write_config: Callable[[EncoderConfig], dict[str, Any]]  # ours → config.json dict
    heads: Mapping[str, HeadLayout]
    encoder_keys: KeyMap = KeyMap()  # encoder-relative renames (DistilBERT's transformer.layer.N...)
    bare_roots: tuple[str, ...] = ("embeddings.", "encoder.", "pooler.")  # keys of a bare encoder checkpoint
    other_heads: tuple[str, ...] = ()  # HF key prefixes of heads bertlab never loads (dropped, reported)
    sequence_pooler: str = "encoder"  # head.pooling=pooler for sequence classification (POOLER_STYLES)
    choice_pooler: str = "encoder"  # the same for multiple choice
    lora_targets: tuple[str, ...] = ("query", "value")  # freeze=lora's default targets
    # freeze.lora.target_modules role names (query, key, value, dense: BERT's module names, those of
    # conf/freeze/*.yaml) → the family's own nn.Linear names; a name that is no role is taken as it is.
    lora_roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # A transform token-level heads (token classification, span) apply at every position before their classifier
    # (None: none; "dense_gelu_norm": ModernBERT's prediction head, as in its transformers classes).
    token_transform: str | None = None
    # The config class the family's checkpoints record (``assemble.config_from_record`` rebuilds it).
    config_class: type = EncoderConfig
    mlm_probability: float = 0.15  # task=mlm's masking rate when task.mlm_probability is null
    # Encoder keys (bertlab names, prefixes) a checkpoint may hold that a model of the family need not have
    # (transformers' _keys_to_ignore_on_load_unexpected): dropped and reported where the model has no such tensor.
    optional_keys: tuple[str, ...] = ()
    nsp: bool = False  # pre-trained with next-sentence prediction (task.nsp's default)
    tokenizer_kind: str = "wordpiece"  # wordpiece | bpe | unigram: the vocabulary a scratch model trains
    max_positions: str = "max_position_embeddings"  # config.json key of the context length
    # The bertlab module that computes the family: (config, add_pooling_layer, unpad, kernels) → encoder.
    # None = bertlab.models.bert.BertModel (every BERT-shaped family).
    encoder_class: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        for style in (self.sequence_pooler, self.choice_pooler, self.token_transform or "encoder"):
            if style not in POOLER_STYLES:
                raise ValueError(f"{self.model_type}: pooler style {style!r} not in {POOLER_STYLES}")
        unknown = set(self.heads) - set(HEAD_KINDS)
        if unknown:
            raise ValueError(f"{self.model_type}: unknown head kinds {sorted(unknown)}")

    def pooler_style(self, head_kind: str | None) -> str:
        return self.choice_pooler if head_kind == "multiple_choice" else self.sequence_pooler

    def architecture(self, head_kind: str | None) -> str:
        return self.heads[head_kind].architecture if head_kind in self.heads else self.base_architecture

    def build_encoder(self, config: EncoderConfig, add_pooling_layer: bool = True, unpad: str = "auto",
                      kernels: Any = None) -> Any:
        """The family's bertlab encoder for ``config`` (random weights)."""
        if self.encoder_class is None:
            from bertlab.models.bert import DEFAULT_KERNELS, BertModel

            return BertModel(config, add_pooling_layer=add_pooling_layer, unpad=unpad,
                             kernels=kernels or DEFAULT_KERNELS)
        return self.encoder_class(config, add_pooling_layer=add_pooling_layer, unpad=unpad, kernels=kernels)

    def from_config_json(self, data: Any, source: str | Any) -> EncoderConfig:
        """The family's ``EncoderConfig`` of a model folder's config.json (``data``, read from ``source``), every
        value checked first: the one way a config.json from elsewhere is read (``config_file``)."""
        from bertlab.models.families.config_file import read_family_config

        return read_family_config(self, data, source)

    def head_kind_of(self, architecture: str | None) -> str | None:
        """The bertlab head kind of one of this family's transformers classes (None: the bare encoder, or a
        class bertlab has no head for)."""
        for kind, layout in self.heads.items():
            if layout.architecture == architecture:
                return kind
        return None


# ----------------------------------------------------------------------------------------------------------
# The registry


def _registry() -> dict[str, FamilySpec]:
    from bertlab.models.families import bert, deberta, distilbert, electra, modernbert, roberta

    specs = [  # one line per family
        bert.BERT,
        roberta.ROBERTA,
        roberta.XLM_ROBERTA,
        distilbert.DISTILBERT,
        electra.ELECTRA,
        modernbert.MODERNBERT,
        deberta.DEBERTA_V2,
    ]
    return {spec.model_type: spec for spec in specs}


FAMILIES: dict[str, FamilySpec] = {}

# model_types of the hub that are not encoders (decoder-only, encoder-decoder): refused with the families list.
NOT_ENCODERS = re.compile(r"^(gpt|llama|mistral|mixtral|qwen|gemma|phi|opt|bloom|falcon|t5|mt5|bart|mbart|"
                          r"pegasus|marian|whisper|olmo|mamba|rwkv|codegen|starcoder|gptj|gpt_neox|"
                          r"encoder-decoder|blenderbot|led|longt5|prophetnet|xglm|ctrl|transfo-xl|jamba|"
                          r"granite|cohere|stablelm|persimmon|deepseek|internlm|baichuan|chatglm)")


def families() -> dict[str, FamilySpec]:
    if not FAMILIES:
        FAMILIES.update(_registry())
    return FAMILIES


def supported_list() -> str:
    return ", ".join(f"{spec.display} ({name})" for name, spec in families().items())


def family_spec(model_type: str | None) -> FamilySpec:
    """The spec of a native family; a ConfigError naming the supported families otherwise."""
    spec = families().get(model_type or "bert")
    if spec is None:
        raise ConfigError(f"model_type {model_type!r} is not a native bertlab family (native: {supported_list()})")
    return spec


def is_native(model_type: str | None) -> bool:
    return (model_type or "bert") in families()


def is_encoder_type(model_type: str) -> bool:
    """False for model_types known to be decoder-only or encoder-decoder models."""
    return NOT_ENCODERS.match(model_type.lower()) is None


def spec_of(config: EncoderConfig) -> FamilySpec:
    return family_spec(config.model_type)


def config_from_hf(data: Mapping[str, Any], source: str = "config.json") -> EncoderConfig:
    """A native family's config.json → ``EncoderConfig`` (the family from its model_type; BERT if it has none)."""
    return family_spec(data.get("model_type") or "bert").from_config_json(data, source)


__all__ = ["FAMILIES", "HEAD_KINDS", "POOLER_STYLES", "FamilySpec", "HeadLayout", "KeyMap", "config_from_hf",
           "families", "family_spec", "is_encoder_type", "is_native", "spec_of", "supported_list"]
