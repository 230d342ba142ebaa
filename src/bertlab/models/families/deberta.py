"""DeBERTa-v2/v3 (``deberta-v2``): computed by :class:`bertlab.models.deberta.DebertaModel` under transformers'
module names (the key map is an identity); no encoder pooler: the classification heads own DeBERTa's ContextPooler
(dropout → ``pooler.dense`` → GELU on token 0, then dropout → ``classifier``). Hub folders of DeBERTa-v3 carry
keys transformers ignores: absolute position embeddings (read only by the original enhanced mask decoder) and the
replaced-token-detection head (``mask_predictions.*``); both are dropped and reported."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bertlab.models.deberta import DebertaConfig, DebertaModel
from bertlab.models.families.spec import FamilySpec, HeadLayout
from bertlab.runtime.errors import ConfigError

REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
# config.json keys and transformers' defaults when a key is absent (DebertaV2Config / getattr defaults).
_HF_DEFAULTS: dict[str, Any] = {
    "vocab_size": 128100, "hidden_size": 1536, "num_hidden_layers": 24, "num_attention_heads": 24,
    "intermediate_size": 6144, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 0,
    "initializer_range": 0.02, "layer_norm_eps": 1e-7, "relative_attention": False, "max_relative_positions": -1,
    "pad_token_id": 0, "position_biased_input": True, "pos_att_type": None, "pooler_dropout": 0.0,
    "legacy": True, "position_buckets": -1, "share_att_key": False, "norm_rel_ebd": "none",
    "embedding_size": None,
}
# Values of a computation bertlab does not reproduce (refused with the key, rather than computed differently).
_REFUSED = {"conv_kernel_size": "DeBERTa-v2-xlarge's convolution layer", "pooler_hidden_act": "a pooler activation",
            "attention_head_size": "a head size other than hidden_size / num_attention_heads"}


def _read(data: Mapping[str, Any], source: str) -> DebertaConfig:
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ConfigError(f"{source}: not a deberta-v2 config, missing keys {missing}")
    if data.get("conv_kernel_size", 0):
        raise ConfigError(f"{source}: conv_kernel_size={data['conv_kernel_size']} ({_REFUSED['conv_kernel_size']}) "
                          "is not supported: bertlab computes DeBERTa-v2/v3 without it")
    if data.get("pooler_hidden_act", "gelu") != "gelu":
        raise ConfigError(f"{source}: pooler_hidden_act={data['pooler_hidden_act']!r} is not supported (only gelu)")
    heads = data["num_attention_heads"]
    if data.get("attention_head_size") not in (None, data["hidden_size"] // heads):
        raise ConfigError(f"{source}: attention_head_size={data['attention_head_size']} "
                          f"({_REFUSED['attention_head_size']}) is not supported")
    if data.get("pooler_hidden_size", data["hidden_size"]) != data["hidden_size"]:
        raise ConfigError(f"{source}: pooler_hidden_size must equal hidden_size")
    values = {k: (data[k] if data.get(k) is not None else default) for k, default in _HF_DEFAULTS.items()}
    terms = values.pop("pos_att_type")
    if isinstance(terms, str):
        terms = terms.split("|")
    values["pos_att_type"] = "|".join(t.strip().lower() for t in (terms or ()))
    values["classifier_dropout"] = data.get("cls_dropout")  # the classifier's dropout (None: hidden dropout)
    if values["embedding_size"] == values["hidden_size"]:
        values["embedding_size"] = None
    values["norm_rel_ebd"] = "|".join(t.strip() for t in str(values["norm_rel_ebd"]).lower().split("|"))
    if values["norm_rel_ebd"] not in ("none", "layer_norm"):
        raise ConfigError(f"{source}: norm_rel_ebd={data.get('norm_rel_ebd')!r} is not supported (none, layer_norm)")
    return DebertaConfig(**values)


def _write(config: DebertaConfig) -> dict[str, Any]:
    data = {k: v for k, v in dataclasses.asdict(config).items()
            if k not in ("position_style", "attention_output_dropout", "embedding_size", "classifier_dropout")}
    data.update(model_type="deberta-v2", pos_att_type=list(config.position_terms) or None,
                embedding_size=config.embedding_width, pooler_hidden_size=config.hidden_size,
                pooler_hidden_act="gelu", pooler_dropout=config.pooler_dropout, cls_dropout=config.classifier_dropout)
    return data


# DeBERTa-v3's layout (microsoft/deberta-v3-base's config.json): relative attention over log buckets, no absolute
# positions, no segments. The tiny model has 8 buckets, so that rows of 11 tokens reach the log-spaced ones.
_V3 = dict(relative_attention=True, position_biased_input=False, pos_att_type=["p2c", "c2p"], share_att_key=True,
           norm_rel_ebd="layer_norm", type_vocab_size=0, layer_norm_eps=1e-7)

_CLASSIFIER = (("classifier.", "head.classifier."),)
_POOLED = (("pooler.dense.", "head.dense."), ("classifier.", "head.classifier."))
# Two names of the MLM head: transformers' default (legacy=True, BERT's) and the original checkpoints' (legacy=False).
# Exports write the first.
_MLM_KEYS = (("cls.predictions.bias", "head.predictions.bias"),
             ("cls.predictions.decoder.bias", "head.predictions.bias"),
             ("cls.predictions.transform.", "head.predictions.transform."),
             ("lm_predictions.lm_head.bias", "head.predictions.bias"),
             ("lm_predictions.lm_head.dense.", "head.predictions.transform.dense."),
             ("lm_predictions.lm_head.LayerNorm.", "head.predictions.transform.LayerNorm."))

DEBERTA_V2 = FamilySpec(
    model_type="deberta-v2", display="DeBERTa-v2/v3", prefix="deberta", base_architecture="DebertaV2Model",
    read_config=_read, write_config=_write, encoder_class=DebertaModel, rtd_generator=None,
    bare_roots=("embeddings.", "encoder."), other_heads=("mask_predictions.",),
    optional_keys=("embeddings.position_embeddings.",),
    sequence_pooler="context_pooler", choice_pooler="context_pooler",
    tiny_config=dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                     max_position_embeddings=130, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     pad_token_id=0, **_V3, position_buckets=8, max_relative_positions=64, pooler_dropout=0.0,
                     cls_dropout=0.0),
    base_config=dict(vocab_size=128100, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=512, pad_token_id=0, **_V3, position_buckets=256,
                     max_relative_positions=-1),
    reference_attention="eager",  # transformers computes the disentangled attention in eager mode only
    lora_roles={"query": ("query_proj",), "key": ("key_proj",), "value": ("value_proj",)},
    config_class=DebertaConfig,
    tokenizer_kind="unigram",
    heads={
        "sequence": HeadLayout("DebertaV2ForSequenceClassification", _POOLED, pooler="context_pooler"),
        "token": HeadLayout("DebertaV2ForTokenClassification", _CLASSIFIER),
        "span": HeadLayout("DebertaV2ForQuestionAnswering", (("qa_outputs.", "head.qa_outputs."),)),
        "multiple_choice": HeadLayout("DebertaV2ForMultipleChoice", _POOLED, pooler="context_pooler"),
        "mlm": HeadLayout("DebertaV2ForMaskedLM", _MLM_KEYS, tied=("cls.predictions.decoder.weight",),
                          copies=(("cls.predictions.decoder.bias", "cls.predictions.bias"),)),
    },
)
