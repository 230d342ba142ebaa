"""DistilBERT (``distilbert``): BERT's post-LN layers under other names (``transformer.layer.N.attention.q_lin``,
``sa_layer_norm``, ``ffn.lin1``, ...), no segment embeddings, no pooler, no dropout after the attention's output
projection, LayerNorm eps 1e-12 fixed, and a classification head of its own (pre_classifier → ReLU → dropout →
classifier on token 0)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertlab.models.families.spec import FamilySpec, HeadLayout, KeyMap
from bertlab.runtime.config import EncoderConfig
from bertlab.runtime.errors import ConfigError

# config.json key → EncoderConfig field.
_NAMES = {"vocab_size": "vocab_size", "dim": "hidden_size", "n_layers": "num_hidden_layers",
          "n_heads": "num_attention_heads", "hidden_dim": "intermediate_size", "activation": "hidden_act",
          "dropout": "hidden_dropout_prob", "attention_dropout": "attention_probs_dropout_prob",
          "max_position_embeddings": "max_position_embeddings", "pad_token_id": "pad_token_id",
          "initializer_range": "initializer_range", "seq_classif_dropout": "classifier_dropout"}
_FIXED = {"type_vocab_size": 0, "layer_norm_eps": 1e-12, "attention_output_dropout": False}


def _read(data: Mapping[str, Any], source: str) -> EncoderConfig:
    missing = [k for k in ("dim", "n_layers", "n_heads", "vocab_size") if k not in data]
    if missing:
        raise ConfigError(f"{source}: not a distilbert config, missing keys {missing}")
    if data.get("activation", "gelu") != "gelu":
        raise ConfigError(f"{source}: activation={data['activation']!r} is not supported for distilbert (only gelu)")
    kwargs = {field: data[key] for key, field in _NAMES.items() if data.get(key) is not None}
    return EncoderConfig(model_type="distilbert", **kwargs, **_FIXED)


def _write(config: EncoderConfig) -> dict[str, Any]:
    data = {key: getattr(config, field) for key, field in _NAMES.items()}
    data.update(model_type="distilbert", sinusoidal_pos_embds=False, qa_dropout=config.hidden_dropout_prob)
    if data["seq_classif_dropout"] is None:
        data["seq_classif_dropout"] = config.hidden_dropout_prob
    return data


_LAYER = "transformer.layer.{n}."
_OURS = "encoder.layer.{n}."
_HEAD = (("pre_classifier.", "head.dense."), ("classifier.", "head.classifier."))

DISTILBERT = FamilySpec(
    model_type="distilbert", display="DistilBERT", prefix="distilbert", base_architecture="DistilBertModel",
    read_config=_read, write_config=_write, bare_roots=("embeddings.", "transformer."),
    sequence_pooler="dense_relu", choice_pooler="dense_relu",
    tiny_config=dict(vocab_size=99, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=130,
                     dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0, qa_dropout=0.0, pad_token_id=0),
    base_config=dict(vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072, pad_token_id=0),
    encoder_keys=KeyMap((
        (_LAYER + "attention.q_lin.", _OURS + "attention.self.query."),
        (_LAYER + "attention.k_lin.", _OURS + "attention.self.key."),
        (_LAYER + "attention.v_lin.", _OURS + "attention.self.value."),
        (_LAYER + "attention.out_lin.", _OURS + "attention.output.dense."),
        (_LAYER + "sa_layer_norm.", _OURS + "attention.output.LayerNorm."),
        (_LAYER + "ffn.lin1.", _OURS + "intermediate.dense."),
        (_LAYER + "ffn.lin2.", _OURS + "output.dense."),
        (_LAYER + "output_layer_norm.", _OURS + "output.LayerNorm."),
    )),
    heads={
        "sequence": HeadLayout("DistilBertForSequenceClassification", _HEAD, pooler="dense_relu"),
        "token": HeadLayout("DistilBertForTokenClassification", (("classifier.", "head.classifier."),)),
        "span": HeadLayout("DistilBertForQuestionAnswering", (("qa_outputs.", "head.qa_outputs."),)),
        "multiple_choice": HeadLayout("DistilBertForMultipleChoice", _HEAD, pooler="dense_relu"),
        "mlm": HeadLayout("DistilBertForMaskedLM",
                          (("vocab_projector.bias", "head.predictions.bias"),
                           ("vocab_transform.", "head.predictions.transform.dense."),
                           ("vocab_layer_norm.", "head.predictions.transform.LayerNorm.")),
                          tied=("vocab_projector.weight",)),
    },
)
