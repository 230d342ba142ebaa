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
from collections.abc import Mapping
from typing import Any

from bertlab.models.families.spec import HEAD_KINDS, POOLER_STYLES, FamilySpec, HeadLayout, KeyMap
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
    return family_spec(data.get("model_type") or "bert").read_config(data, source)


__all__ = ["FAMILIES", "HEAD_KINDS", "POOLER_STYLES", "FamilySpec", "HeadLayout", "KeyMap", "config_from_hf",
           "families", "family_spec", "is_encoder_type", "is_native", "spec_of", "supported_list"]
