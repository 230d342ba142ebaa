"""ModernBERT (``model_type`` ``modernbert``): its own encoder (:mod:`bertlab.models.modernbert`: rotary positions,
pre-norm layers without biases, fused q/k/v, GeGLU, global and sliding-window local layers, 8,192 positions), and
heads that all start with ModernBERT's prediction head (``head.dense`` → GELU → ``head.norm``, no biases) on
``[CLS]`` or the mean of the tokens (``classifier_pooling``) for sequence and choice heads, on every token for token
and span heads; masked LM pre-training masks 30 % of the tokens.

Checkpoint keys: the encoder under ``model.`` (``model.layers.N.attn.Wqkv.weight``: bertlab's module names are HF's,
so the key map is that prefix alone), the heads at the top (``head.*``, ``classifier.*``, ``decoder.*``). Both
collide with what bertlab strips or names itself (``model.`` of Lightning checkpoints, bertlab's own ``head.``):
``hf_weights.normalize_hf_keys`` reads the family's prefix first and the head layouts below map ``head.*`` by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertlab.models.families.spec import FamilySpec, HeadLayout
from bertlab.models.modernbert import LAYER_TYPES, ModernBertConfig, ModernBertModel, modernbert_config
from bertlab.runtime.errors import ConfigError

# config.json key → ModernBertConfig field, where the names differ.
_RENAMED = {"norm_eps": "layer_norm_eps", "mlp_dropout": "hidden_dropout_prob",
            "attention_dropout": "attention_probs_dropout_prob", "hidden_activation": "hidden_act"}
# config.json keys read under their own name.
_SAME = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
         "max_position_embeddings", "initializer_range", "initializer_cutoff_factor", "norm_bias", "pad_token_id",
         "eos_token_id", "bos_token_id", "cls_token_id", "sep_token_id", "attention_bias", "local_attention",
         "embedding_dropout", "mlp_bias", "decoder_bias", "classifier_pooling", "classifier_dropout",
         "classifier_bias", "classifier_activation", "global_attn_every_n_layers", "layer_types",
         "global_rope_theta", "local_rope_theta")
REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def _rope_thetas(data: Mapping[str, Any], source: str) -> dict[str, float]:
    """The two rotary thetas, from transformers ≥ 5's ``rope_parameters`` or the older ``*_rope_theta`` keys;
    scaled rotary embeddings (another ``rope_type``) are refused."""
    if data.get("rope_scaling"):
        raise ConfigError(f"{source}: rope_scaling={data['rope_scaling']!r} is not supported for modernbert")
    thetas = {}
    params = data.get("rope_parameters") or {}
    for layer_type, key in (("full_attention", "global_rope_theta"), ("sliding_attention", "local_rope_theta")):
        entry = params.get(layer_type) or {}
        if entry.get("rope_type", "default") != "default":
            raise ConfigError(f"{source}: rope_parameters.{layer_type}.rope_type={entry['rope_type']!r} is not "
                              "supported for modernbert (only default)")
        value = entry.get("rope_theta", data.get(key))
        if value is not None:
            thetas[key] = float(value)
    return thetas


def _read(data: Mapping[str, Any], source: str) -> ModernBertConfig:
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ConfigError(f"{source}: not a modernbert config, missing keys {missing}")
    if data.get("hidden_activation", "gelu") != "gelu":
        raise ConfigError(f"{source}: hidden_activation={data['hidden_activation']!r} is not supported for "
                          "modernbert (only gelu)")
    if data.get("tie_word_embeddings") is False:
        raise ConfigError(f"{source}: tie_word_embeddings=false is not supported for modernbert (bertlab ties the "
                          "masked-LM decoder to the token embeddings)")
    kwargs = {field: data[key] for key, field in _RENAMED.items() if data.get(key) is not None}
    kwargs.update({key: data[key] for key in _SAME if data.get(key) is not None})
    kwargs.update(_rope_thetas(data, source))
    try:
        return modernbert_config(**kwargs)
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None


def _write(config: ModernBertConfig) -> dict[str, Any]:
    """config.json for transformers ≥ 5 (``layer_types``, ``rope_parameters``) and older (the period of the
    global layers and the two thetas under their own keys)."""
    data = {key: getattr(config, field) for key, field in _RENAMED.items()}
    data["hidden_activation"] = config.hidden_act
    data.update({key: getattr(config, key) for key in _SAME})
    data.update(model_type="modernbert", tie_word_embeddings=True,
                rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": config.global_rope_theta},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": config.local_rope_theta}})
    period = config.global_attn_every_n_layers
    if config.layer_types != [LAYER_TYPES[bool(i % period)] for i in range(config.num_hidden_layers)]:
        del data["global_attn_every_n_layers"]  # another pattern: layer_types alone says it
    return data


_TRANSFORM = (("head.dense.", "head.dense."), ("head.norm.", "head.norm."))
_CLASSIFIER = _TRANSFORM + (("classifier.", "head.classifier."),)

MODERNBERT = FamilySpec(
    model_type="modernbert", display="ModernBERT", prefix="model", base_architecture="ModernBertModel",
    read_config=_read, write_config=_write, bare_roots=("embeddings.", "layers.", "final_norm."),
    sequence_pooler="dense_gelu_norm", choice_pooler="dense_gelu_norm", token_transform="dense_gelu_norm",
    tokenizer_kind="bpe", encoder_class=ModernBertModel, rtd_generator="shared_projection",
    config_class=ModernBertConfig, mlm_probability=0.30,
    layer_subset_refusal="ModernBERT, whose layers are global or local by their position",
    # A local window (3 tokens each side) shorter than test rows, global layers 0 and 2 of 3, a global theta other
    # than the local one, biases in the head (classifier_bias) as some checkpoints have.
    tiny_config=dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37,
                     max_position_embeddings=130, local_attention=6, global_attn_every_n_layers=2,
                     global_rope_theta=1000.0, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
                     sep_token_id=2, classifier_bias=True, embedding_dropout=0.0, mlp_dropout=0.0,
                     attention_dropout=0.0, classifier_dropout=0.0),
    # ModernBERT-base: 22 pre-norm layers, GeGLU 1152, rotary, every third layer global, 128-token local windows.
    base_config=dict(vocab_size=50368, hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
                     intermediate_size=1152, local_attention=128, global_attn_every_n_layers=3, pad_token_id=50283),
    # freeze=lora's role names (conf/freeze/lora.yaml: [query, value]) → ModernBERT's fused projections.
    lora_roles={"query": ("Wqkv",), "key": ("Wqkv",), "value": ("Wqkv",), "dense": ("Wo", "Wi")},
    heads={
        "sequence": HeadLayout("ModernBertForSequenceClassification", _CLASSIFIER, pooler="dense_gelu_norm"),
        "token": HeadLayout("ModernBertForTokenClassification", _CLASSIFIER),
        "span": HeadLayout("ModernBertForQuestionAnswering", _TRANSFORM + (("classifier.", "head.qa_outputs."),)),
        "multiple_choice": HeadLayout("ModernBertForMultipleChoice", _CLASSIFIER, pooler="dense_gelu_norm"),
        "mlm": HeadLayout("ModernBertForMaskedLM",
                          (("head.dense.", "head.predictions.transform.dense."),
                           ("head.norm.", "head.predictions.transform.LayerNorm."),
                           ("decoder.bias", "head.predictions.bias")),
                          tied=("decoder.weight",)),
    },
)
