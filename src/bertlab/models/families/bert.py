"""BERT (``model_type`` ``bert``), and the reading and writing of config.json that the BERT-shaped families share."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bertlab.models.families.spec import FamilySpec, HeadLayout
from bertlab.runtime.config import EncoderConfig
from bertlab.runtime.errors import ConfigError

# config.json values that describe a computation bertlab's BERT-shaped encoder does not reproduce exactly.
UNSUPPORTED_VALUES = {"position_embedding_type": {"absolute"}, "hidden_act": {"gelu"}}
REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
# EncoderConfig fields that are bertlab's own description of a family, not keys of the families' config.json.
OWN_FIELDS = ("model_type", "position_style", "attention_output_dropout", "embedding_size")


def bert_like_config(data: Mapping[str, Any], source: str, model_type: str, **fixed: Any) -> EncoderConfig:
    """A BERT-shaped family's config.json (BERT's key names) → ``EncoderConfig``; ``fixed`` are the family's own
    settings (``position_style``, ...). Refuses values bertlab would compute differently."""
    for key, allowed in UNSUPPORTED_VALUES.items():
        if data.get(key) is not None and data[key] not in allowed:
            raise ConfigError(f"{source}: {key}={data[key]!r} is not supported for {model_type} (only "
                              f"{sorted(allowed)})")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ConfigError(f"{source}: not a {model_type} config, missing keys {missing}")
    known = {f.name for f in dataclasses.fields(EncoderConfig)} - set(OWN_FIELDS)
    kwargs = {k: v for k, v in data.items() if k in known and v is not None}
    return EncoderConfig(model_type=model_type, **kwargs, **fixed)


def bert_like_hf_dict(config: EncoderConfig, **extra: Any) -> dict[str, Any]:
    """``EncoderConfig`` → a BERT-shaped family's config.json (BERT's key names, the family's model_type)."""
    data = {k: v for k, v in dataclasses.asdict(config).items() if k not in OWN_FIELDS}
    data.update(model_type=config.model_type, position_embedding_type="absolute", **extra)
    return data


def _read(data: Mapping[str, Any], source: str) -> EncoderConfig:
    return bert_like_config(data, source, "bert")


def _write(config: EncoderConfig) -> dict[str, Any]:
    return bert_like_hf_dict(config)


# A tiny BERT (FamilySpec.tiny_config) and BERT-base (bert-base-uncased's config.json): the BERT-shaped families
# start from these two.
TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=130, type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            layer_norm_eps=1e-12, pad_token_id=0)
BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
            max_position_embeddings=512, type_vocab_size=2, pad_token_id=0)

_CLASSIFIER = (("classifier.", "head.classifier."),)
_MLM_KEYS = (("cls.predictions.bias", "head.predictions.bias"),
             ("cls.predictions.decoder.bias", "head.predictions.bias"),
             ("cls.predictions.transform.", "head.predictions.transform."))
_MLM = {"tied": ("cls.predictions.decoder.weight",),
        "copies": (("cls.predictions.decoder.bias", "cls.predictions.bias"),)}

BERT = FamilySpec(
    model_type="bert", display="BERT", prefix="bert", base_architecture="BertModel",
    read_config=_read, write_config=_write, nsp=True, tiny_config=TINY, base_config=BASE,
    heads={
        "sequence": HeadLayout("BertForSequenceClassification", _CLASSIFIER, pooler="encoder"),
        "token": HeadLayout("BertForTokenClassification", _CLASSIFIER),
        "span": HeadLayout("BertForQuestionAnswering", (("qa_outputs.", "head.qa_outputs."),)),
        "multiple_choice": HeadLayout("BertForMultipleChoice", _CLASSIFIER, pooler="encoder"),
        "mlm": HeadLayout("BertForMaskedLM", _MLM_KEYS, **_MLM),
        "pretraining": HeadLayout("BertForPreTraining",
                                  _MLM_KEYS + (("cls.seq_relationship.", "head.seq_relationship."),), **_MLM),
    },
)
