"""What a family is to bertlab: :class:`FamilySpec` (its config reader and writer, two-way checkpoint key map,
heads' transformers names, poolers, LoRA roles, encoder and layer class, tiny and base shapes) and the small types it
is made of. The registry of families is :mod:`bertlab.models.families`; each family module builds one spec from
these types. Everything that differs between families is a field here: code elsewhere reads the spec (or iterates
the registry) and never names a family."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bertlab.runtime.config import EncoderConfig

# Head kinds (``TaskModel.head_kind``) a family may have a transformers class for.
HEAD_KINDS = ("sequence", "token", "span", "multiple_choice", "mlm", "pretraining")
# First-token transforms of classification heads (``FamilySpec.sequence_pooler``): "encoder" reads the
# encoder's pooler (BERT: dense + tanh inside the encoder); the others are a dense layer of the head itself
# ("dense_gelu_norm": ModernBERT's prediction head, dense → GELU → LayerNorm, on [CLS] or the mean of the tokens
# as the config's ``classifier_pooling`` says; "context_pooler": DeBERTa's, its own dropout (pooler_dropout) →
# dense → GELU, then the classifier's dropout).
POOLER_STYLES = ("encoder", "dense_tanh", "dense_gelu", "dense_relu", "dense_gelu_norm", "context_pooler")
# config.json's special-token ids → the vocabulary role that sets them (a scratch encoder's, a tiny test model's;
# ModernBERT records its [CLS] / [SEP] as bos / eos too). A config without the key is left so.
TOKEN_ID_ROLES = {"pad_token_id": "pad_id", "cls_token_id": "cls_id", "sep_token_id": "sep_id",
                  "bos_token_id": "cls_id", "eos_token_id": "sep_id"}


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
    # A tiny random model of the family as config.json keys (model_type aside): a few layers of width 32, a
    # vocabulary of 99, ≥ 128 positions, dropout off, and the family's own layout (relative buckets, local windows,
    # narrow embeddings) small enough that the test rows reach it. The parity tests, every test that needs a model
    # of each family and ``benchmarks/families.py --tiny`` build it (``families.tiny_config``).
    tiny_config: Mapping[str, Any]
    # The family's base-size checkpoint as config.json keys (model_type aside): the shape benchmarks/families.py
    # measures against transformers, with ``reference_attention`` as transformers' attention implementation.
    base_config: Mapping[str, Any]
    reference_attention: str = "sdpa"
    encoder_keys: KeyMap = KeyMap()  # encoder-relative renames (DistilBERT's transformer.layer.N...)
    bare_roots: tuple[str, ...] = ("embeddings.", "encoder.", "pooler.")  # keys of a bare encoder checkpoint
    other_heads: tuple[str, ...] = ()  # HF key prefixes of heads bertlab never loads (dropped, reported)
    sequence_pooler: str = "encoder"  # head.pooling=pooler for sequence classification (POOLER_STYLES)
    choice_pooler: str = "encoder"  # the same for multiple choice
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
    # How task=rtd's smaller generator shares this family's embeddings: "own_projection" (the encoder projects
    # shared embeddings to its own width itself: BertModel's embeddings_project), "shared_projection" (an
    # embeddings module that maps ids to vectors of the encoder's width with nothing else in it, projected for
    # the generator by rtd.SharedEmbeddings), or None (the family cannot be an RTD discriminator).
    rtd_generator: str | None = "own_projection"
    scratch: bool = True  # model.model_type may build a scratch encoder of it (model.pretrained null)
    # Why distill.student_layers cannot copy a subset of a teacher's layers into a student (None: it can).
    layer_subset_refusal: str | None = None

    def __post_init__(self) -> None:
        for style in (self.sequence_pooler, self.choice_pooler, self.token_transform or "encoder"):
            if style not in POOLER_STYLES:
                raise ValueError(f"{self.model_type}: pooler style {style!r} not in {POOLER_STYLES}")
        if self.rtd_generator not in (None, "own_projection", "shared_projection"):
            raise ValueError(f"{self.model_type}: rtd_generator {self.rtd_generator!r} is not one of None, "
                             "'own_projection', 'shared_projection'")
        unknown = set(self.heads) - set(HEAD_KINDS)
        if unknown:
            raise ValueError(f"{self.model_type}: unknown head kinds {sorted(unknown)}")

    def pooler_style(self, head_kind: str | None) -> str:
        return self.choice_pooler if head_kind == "multiple_choice" else self.sequence_pooler

    def architecture(self, head_kind: str | None) -> str:
        return self.heads[head_kind].architecture if head_kind in self.heads else self.base_architecture

    @property
    def encoder_type(self) -> type:
        """The class of the family's bertlab encoder."""
        if self.encoder_class is None:
            from bertlab.models.bert import BertModel

            return BertModel
        return self.encoder_class

    @property
    def layer_class(self) -> type:
        """One transformer layer of the family's encoder (FSDP's shard unit, activation checkpointing's)."""
        return self.encoder_type.layer_class

    def build_encoder(self, config: EncoderConfig, add_pooling_layer: bool = True, unpad: str = "auto",
                      kernels: Any = None) -> Any:
        """The family's bertlab encoder for ``config`` (random weights)."""
        if self.encoder_class is None:
            from bertlab.models.bert import DEFAULT_KERNELS, BertModel

            return BertModel(config, add_pooling_layer=add_pooling_layer, unpad=unpad,
                             kernels=kernels or DEFAULT_KERNELS)
        return self.encoder_class(config, add_pooling_layer=add_pooling_layer, unpad=unpad, kernels=kernels)

    def head_kind_of(self, architecture: str | None) -> str | None:
        """The bertlab head kind of one of this family's transformers classes (None: the bare encoder, or a
        class bertlab has no head for)."""
        for kind, layout in self.heads.items():
            if layout.architecture == architecture:
                return kind
        return None


__all__ = ["HEAD_KINDS", "POOLER_STYLES", "TOKEN_ID_ROLES", "FamilySpec", "HeadLayout", "KeyMap"]
