"""A model folder's ``config.json``, read for every family the same way: values checked by kind, then the family's
reader, then the sizes against the weights and this machine.

A folder from elsewhere may hold a config.json with absurd values (a negative or zero size, a hidden size no head
count divides, NaN, a number written as text, sizes of a model larger than this machine's memory, a position table
too small for a single input). Every such value ends in one :class:`CheckpointError` naming the file and the key,
never a traceback from inside a family's reader or from ``torch`` allocating a layer, and never a message that
blames a ``model.*`` setting the user did not set. :func:`read_family_config` (a family's spec, the parsed file,
its path) is the one entry, for every family (``hf_weights.encoder_config_of``, ``families.config_from_hf``); the
keys and their kinds are :data:`CONFIG_KEYS`, the keys of every family's
config.json that bertlab reads.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertlab.runtime.errors import CheckpointError, ConfigError
from bertlab.runtime.schema import (
    BOOL,
    NONNEG_INT,
    POSITIVE_FLOAT,
    POSITIVE_INT,
    PROB,
    Kind,
    S,
    Setting,
    message,
)

if TYPE_CHECKING:
    from bertlab.runtime.config import EncoderConfig

FIX = ("This config.json does not describe a model bertlab can build (a damaged or hand-edited file?): restore it "
       "from an intact copy of the folder (its weights file holds the true sizes), or use another folder")

_DEFAULT = "the family's default"
INTEGER = Kind("int", "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
_SIZE = "a size of the model"
# config.json keys (of every family's config.json, in the family's own names) → their kind. Sizes may not be
# null; other values may (null = the family's default, as transformers reads them).
CONFIG_KEYS: dict[str, Setting] = {
    **{key: S(POSITIVE_INT, "the vocabulary size") for key in ("vocab_size",)},
    **{key: S(POSITIVE_INT, "the hidden size") for key in ("hidden_size", "dim")},
    **{key: S(POSITIVE_INT, "the number of layers") for key in ("num_hidden_layers", "n_layers")},
    **{key: S(POSITIVE_INT, "the number of attention heads") for key in ("num_attention_heads", "n_heads")},
    **{key: S(POSITIVE_INT, "the feed-forward size") for key in ("intermediate_size", "hidden_dim")},
    "max_position_embeddings": S(POSITIVE_INT, "the size of the position table"),
    "embedding_size": S(POSITIVE_INT, "the embedding width", null="hidden_size"),
    "pooler_hidden_size": S(POSITIVE_INT, "the pooler's width", null="hidden_size"),
    "attention_head_size": S(POSITIVE_INT, "the width of one attention head", null="hidden_size / heads"),
    "type_vocab_size": S(NONNEG_INT, "the number of token types", null=_DEFAULT),
    **{key: S(NONNEG_INT, "a special token's id", null="none") for key in
       ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")},
    **{key: S(POSITIVE_FLOAT, "LayerNorm's epsilon", null=_DEFAULT) for key in ("layer_norm_eps", "norm_eps")},
    **{key: S(POSITIVE_FLOAT, "the initial weights' spread", null=_DEFAULT)
       for key in ("initializer_range", "initializer_cutoff_factor")},
    **{key: S(POSITIVE_FLOAT, "a rotary base (theta)", null=_DEFAULT)
       for key in ("global_rope_theta", "local_rope_theta", "rope_theta")},
    "local_attention": S(POSITIVE_INT, "the local attention window", null=_DEFAULT),
    "global_attn_every_n_layers": S(POSITIVE_INT, "every how many layers one attends globally", null=_DEFAULT),
    **{key: S(PROB, "a dropout probability", null=_DEFAULT) for key in
       ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout", "seq_classif_dropout",
        "classifier_dropout", "cls_dropout", "pooler_dropout", "mlp_dropout", "embedding_dropout")},
    **{key: S(INTEGER, "a relative-position setting", null=_DEFAULT)
       for key in ("max_relative_positions", "position_buckets")},
    **{key: S(BOOL, "a switch", null=_DEFAULT) for key in
       ("relative_attention", "position_biased_input", "share_att_key", "norm_bias", "attention_bias", "mlp_bias",
        "decoder_bias", "classifier_bias", "tie_word_embeddings")},
}
# (width, heads) pairs: the width must split evenly into heads.
_DIVISIBLE = (("hidden_size", "num_attention_heads"), ("dim", "n_heads"))
# Text or lists of text the families read.
_TEXTS = {"hidden_act": str, "hidden_activation": str, "activation": str, "position_embedding_type": str,
          "classifier_pooling": str, "classifier_activation": str, "norm_rel_ebd": str,
          "pos_att_type": (str, list), "layer_types": list, "architectures": list}


def read_family_config(spec: Any, data: Any, path: str | os.PathLike[str]) -> EncoderConfig:
    """``spec``'s ``EncoderConfig`` of a config.json already parsed (``data``, read from ``path``): the values by
    kind, the family's reader, then the sizes; every problem a :class:`CheckpointError` naming ``path`` and the key."""
    source = str(path)
    if not isinstance(data, Mapping):
        raise CheckpointError(f"{source} holds a JSON {type(data).__name__}, not an object of settings. {FIX}")
    check_values(data, source)
    try:
        config = spec.read_config(data, source)
    except CheckpointError:
        raise
    except ConfigError as err:
        raise CheckpointError(_located(str(err), source)) from None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as err:
        raise CheckpointError(f"{source}: a value the {spec.display} reader cannot use ({type(err).__name__}: {err}). "
                              f"{FIX}") from None
    check_sizes(config, Path(source))
    return config


def check_generic(data: Mapping[str, Any], path: Path, config_class: Any) -> None:
    """A config.json of the generic path (a model_type that is no native family), checked before transformers
    builds the model from it: the values by kind (a head count need not divide the width: such models may name
    their head size) and, where its sizes are named the usual way (``config_class.from_hf``: the generic path's
    ``GenericEncoderConfig``, passed in so that this module imports no family), the sizes as a native family's."""
    check_values(data, str(path), divisible=False)
    try:
        config = config_class.from_hf(data, str(path))
    except (ConfigError, TypeError, ValueError, OverflowError):
        return  # sizes named otherwise: transformers reads them (its errors name the folder)
    check_sizes(config, path)


def check_values(data: Mapping[str, Any], source: str, divisible: bool = True) -> None:
    """Every key of :data:`CONFIG_KEYS` the file holds, by its kind; widths that no head count divides; text keys
    that are no text."""
    for key, setting in CONFIG_KEYS.items():
        if key not in data:
            continue
        value = data[key]
        if value is None and setting.null is None:
            raise CheckpointError(f"{source}: {key}=null: {setting.meaning} must be {setting.kind.rule}. {FIX}")
        if value is not None and not setting.kind.accepts(value):
            shown = f'"{value}"' if isinstance(value, str) else value
            raise CheckpointError(f"{message(f'{source}: {key}', shown, setting)}"
                                  f"{' (a JSON string, not a number)' if isinstance(value, str) else ''}. {FIX}")
    for width, heads in _DIVISIBLE if divisible else ():
        w, h = data.get(width), data.get(heads)
        if isinstance(w, int) and isinstance(h, int) and h > 0 and w % h:
            raise CheckpointError(f"{source}: {width}={w} is not divisible by {heads}={h}: each attention head "
                                  f"takes an equal share of the width. {FIX}")
    for key, kind in _TEXTS.items():
        value = data.get(key)
        if value is not None and (not isinstance(value, kind) or
                                  (isinstance(value, list) and not all(isinstance(v, str) for v in value))):
            raise CheckpointError(f"{source}: {key}={value!r}: a {'list of names' if kind is list else 'name'} is "
                                  f"expected here, not a JSON {type(value).__name__}. {FIX}")


def _located(text: str, source: str) -> str:
    """A family reader's ConfigError as an error of the file: its path in front, ``model.<field>=`` (a setting's
    name, which the user did not set here) without the ``model.``, and the fix."""
    text = re.sub(r"\(e\.g\. model\.[\w.]+=[^)]*\)", "", text)
    text = re.sub(r"\bmodel\.(\w+)=", r"\1=", text).rstrip(" .")
    text = text if text.startswith(source) else f"{source}: {text}"
    # A value bertlab does not compute (another activation, scaled rotary positions) is no damage: no fix to add.
    return text if "not supported" in text else f"{text}. {FIX}"


# The bytes of one parameter in the most compact weights bertlab reads (float16 / bfloat16).
_MIN_BYTES_PER_PARAM = 2
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def parameter_count(config: EncoderConfig) -> int:
    """A lower bound of the encoder's parameters: the embedding tables and each layer's attention and feed-forward
    matrices (biases, norms and heads left out), in Python integers (no overflow)."""
    width, hidden = int(config.embedding_width), int(config.hidden_size)
    types = int(getattr(config, "type_vocab_size", 0) or 0)
    tables = (int(config.vocab_size) + int(config.max_position_embeddings) + types) * width
    project = width * hidden if width != hidden else 0
    # The generic path's config names no feed-forward size bertlab reads: none counted (a lower bound still).
    layer = 4 * hidden * hidden + 2 * hidden * int(getattr(config, "intermediate_size", 0) or 0)
    return tables + project + int(config.num_hidden_layers) * layer


def _weights_bytes(folder: Path) -> int | None:
    """The size of the weights a folder holds (a single file, or the shards of ``model.safetensors.index.json``
    that exist); None when it holds none to compare with."""
    sizes = [(folder / name).stat().st_size for name in _WEIGHT_FILES if (folder / name).is_file()]
    shards = [p for p in folder.glob("model-*-of-*.safetensors") if p.is_file()]
    if shards:
        sizes.append(sum(p.stat().st_size for p in shards))
    return max(sizes) if sizes else None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_sizes(config: EncoderConfig, path: Path) -> None:
    """Sizes that describe no model bertlab could build here: a position table with no room for an input, more
    parameters than the folder's weights hold, or float32 weights larger than this machine's memory. Checked before
    anything is allocated (a huge size would otherwise fail deep in ``torch``, or swap for minutes)."""
    if config.max_sequence_length < 3:
        offset = getattr(config, "position_offset", 0)
        raise CheckpointError(
            f"{path}: max_position_embeddings={config.max_position_embeddings} leaves room for "
            f"{max(config.max_sequence_length, 0)} token(s)"
            + (f" (this family's positions start at pad_token_id + 1 = {offset})" if offset else "")
            + f"; an input needs at least 3 (a special token, a word and another special token). {FIX}")
    params = parameter_count(config)
    sizes = ", ".join(f"{key}={getattr(config, key)}" for key in ("vocab_size", "hidden_size", "num_hidden_layers",
                                                                   "intermediate_size", "max_position_embeddings")
                      if hasattr(config, key))
    held = _weights_bytes(path.parent) if path.name == "config.json" else None
    if held is not None and params * _MIN_BYTES_PER_PARAM > held * 1.05 + (1 << 20):
        raise CheckpointError(
            f"{path}: its sizes ({sizes}) describe an encoder of at least {_count(params)} parameters, but the "
            f"folder's weights ({_gib(held)}) hold at most {_count(held // _MIN_BYTES_PER_PARAM)}: config.json and "
            "the weights are not those of one model (a damaged or hand-edited config.json, or incomplete weights: "
            "an interrupted download, a git-lfs pointer). Restore the folder from an intact copy")
    memory = _memory_bytes()
    if memory is not None and params * 4 > memory:
        raise CheckpointError(
            f"{path}: its sizes ({sizes}) describe an encoder of at least {_count(params)} parameters, "
            f"{_gib(params * 4)} of float32 weights, more than this machine's memory ({_gib(memory)}). {FIX}")


def _count(n: int) -> str:
    if n >= 1e12:
        return f"{n:.3g}"
    return f"{n / 1e9:.2f} billion" if n >= 1e9 else f"{n / 1e6:.1f} million" if n >= 1e6 else f"{n:,}"


def _gib(n: float) -> str:
    if not math.isfinite(n):
        return "∞"
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.3g} MiB"
