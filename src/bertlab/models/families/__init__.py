"""Encoder families: what each Hugging Face ``model_type`` is to bertlab, in one registry.

A :class:`FamilySpec` says everything the rest of bertlab asks of a family: how its ``config.json`` becomes an
:class:`~bertlab.runtime.config.EncoderConfig` and back, how its checkpoint keys map to bertlab's module names
(both ways, applied before anything else touches a key), what each task head is called in its
``transformers`` classes (so exports load in ``AutoModelFor*``), which first-token transform its
classification heads use, its LoRA roles, its encoder and layer classes (FSDP's shard unit), whether it can be
an RTD discriminator or a scratch encoder, a tiny model of it for tests and its base shape for benchmarks.

Adding a family is one module in this package that defines its spec, one line in :func:`_registry` and a preset
in conf/model/ (docs/models.md, "Adding a family"): the rest of bertlab, its tests and benchmarks read the spec or
iterate :func:`families`, and never name a family (``tests/test_add_family.py`` proves it with a new one). The BERT-shaped families (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA) are all
computed by :class:`bertlab.models.bert.BertModel`; their differences are fields of ``EncoderConfig``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertlab.models.families.spec import (
    HEAD_KINDS,
    POOLER_STYLES,
    TOKEN_ID_ROLES,
    FamilySpec,
    HeadLayout,
    KeyMap,
)
from bertlab.runtime.config import EncoderConfig
from bertlab.runtime.errors import ConfigError

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

# config.json keys with which a model says it reads only the tokens before each position, or generates.
DECODER_FLAGS = ("is_decoder", "is_encoder_decoder", "add_cross_attention", "is_causal", "causal")  # causal: XLM's CLM


def known_encoder_types() -> frozenset[str]:
    """The model_types known to be bidirectional encoders: the native families, and those transformers has a
    masked-LM class for (a masked-LM objective needs every position to see the whole text) and no
    sequence-to-sequence class (BART, mBART: encoder-decoders). A causal-LM class beside the masked-LM one
    (BERT's BertLMHeadModel) is the same encoder run with is_decoder=true, which :func:`encoder_refusal` refuses
    by that flag. Without transformers: the native families only."""
    if not _ENCODER_TYPES:
        names = set(families())
        try:
            from transformers.models.auto import modeling_auto as auto
        except ImportError:
            auto = None
        if auto is not None:
            seq2seq = set(auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES) | set(
                auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES)
            names |= set(auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES) - seq2seq
        _ENCODER_TYPES.append(frozenset(names))
    return _ENCODER_TYPES[0]


_ENCODER_TYPES: list[frozenset[str]] = []


def encoder_refusal(model_type: str, config: Mapping[str, Any] | None = None, source: str = "config.json",
                    ) -> str | None:
    """Why a model_type (and its config.json, when given) is not accepted as an encoder, as the paragraph a user
    reads (``source`` names the file); None when it is one (:func:`known_encoder_types`, no :data:`DECODER_FLAGS`
    set). Every check of an encoder (the generic path, a native config's message) reads this one."""
    why = None
    if model_type not in known_encoder_types():
        why = (f"model_type {model_type!r} is not an encoder bertlab knows: only a bidirectional encoder is "
               "accepted, and transformers has no masked-LM class for this one (a decoder-only, encoder-decoder "
               "or other model)")
    else:
        flag = next((key for key in DECODER_FLAGS if (config or {}).get(key)), None)
        if flag is not None:
            why = (f"its key '{flag}' is true: this {model_type} model reads only the tokens before each position "
                   "or generates text, so it is not used as a bidirectional encoder")
    if why is None:
        return None
    return (f"{source}: {why}; bertlab fine-tunes bidirectional encoders. Native families: {supported_list()}; "
            "any other encoder transformers ships with a masked-LM class (albert, convbert, mpnet, ...) runs "
            "through its AutoModel (model=auto, with transformers installed)")


def is_encoder_type(model_type: str, config: Mapping[str, Any] | None = None) -> bool:
    """Whether bertlab accepts the model_type (and config) as an encoder: see :func:`encoder_refusal`."""
    return encoder_refusal(model_type, config) is None


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


def spec_of(config: EncoderConfig) -> FamilySpec:
    return family_spec(config.model_type)


def scratch_families() -> tuple[str, ...]:
    """The families ``model.model_type`` may build a scratch encoder of (``FamilySpec.scratch``)."""
    return tuple(name for name, spec in families().items() if spec.scratch)


def tiny_config(model_type: str, tokenizer: Any = None, **overrides: Any) -> dict[str, Any]:
    """config.json of a tiny random model of the family (``FamilySpec.tiny_config`` with its model_type), as
    ``transformers.AutoConfig.for_model(**it)`` or the family's ``read_config`` take it. With ``tokenizer`` (a
    bertlab vocabulary): its size, and its special-token ids for the keys the tiny config has
    (:data:`TOKEN_ID_ROLES`); ``overrides`` last."""
    data: dict[str, Any] = {"model_type": model_type, **family_spec(model_type).tiny_config}
    if tokenizer is not None:
        data["vocab_size"] = tokenizer.vocab_size
        data.update({key: getattr(tokenizer, role) for key, role in TOKEN_ID_ROLES.items() if key in data})
    data.update(overrides)
    return data


def config_from_hf(data: Mapping[str, Any], source: str = "config.json") -> EncoderConfig:
    """A native family's config.json → ``EncoderConfig`` (the family from its model_type; BERT if it has none)."""
    from bertlab.models.families.config_file import read_family_config

    return read_family_config(family_spec(data.get("model_type") or "bert"), data, source)


__all__ = ["FAMILIES", "HEAD_KINDS", "POOLER_STYLES", "FamilySpec", "HeadLayout", "KeyMap", "config_from_hf",
           "encoder_refusal", "families", "family_spec", "is_encoder_type", "is_native", "known_encoder_types",
           "scratch_families", "spec_of", "supported_list", "tiny_config"]
