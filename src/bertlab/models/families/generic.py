"""Any other encoder of the hub, through ``transformers.AutoModel`` (the generic path).

A checkpoint whose ``model_type`` is not a native family (``camembert``, ``mpnet``, ``xlm``, ...) but is an encoder
runs as the ``AutoModel`` transformers builds for it, wrapped so that it looks like a bertlab encoder: the same
``EncoderOutput``, its top-level submodules registered under their own names (``embeddings``, ``encoder.layer.N``,
... whatever the model calls them), so every head, the freeze policies (by those names), the audit, sweeps,
predict and export work. It runs the padded path only (no packing: transformers computes it), and needs
``transformers`` installed. Checkpoints record the model's config.json, so a run reloads without the hub.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertlab.models.encoder import ConfigSizes, EncoderOutput
from bertlab.runtime.errors import CheckpointError, ConfigError
from bertlab.runtime.model_folders import auto_from_pretrained, check_folder, model_from_config

GENERIC = "hf_auto"  # EncoderConfig-like records of this path say encoder="hf_auto"


@dataclass
class GenericEncoderConfig:
    """What bertlab's heads read of an encoder, for an AutoModel, plus its whole config.json (``hf_config``)."""

    model_type: str
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int
    hf_config: dict[str, Any] = field(default_factory=dict)
    hidden_dropout_prob: float = 0.1
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    classifier_dropout: float | None = None
    pad_token_id: int = 0
    max_position_embeddings: int = 512
    encoder: str = GENERIC

    @property
    def embedding_width(self) -> int:
        return self.hidden_size

    @property
    def max_sequence_length(self) -> int:
        return self.max_position_embeddings

    @classmethod
    def from_hf(cls, data: Mapping[str, Any], source: str = "config.json") -> GenericEncoderConfig:
        def first(*keys: str, default: Any = None) -> Any:
            for key in keys:
                if data.get(key) is not None:
                    return data[key]
            return default

        hidden = first("hidden_size", "dim", "d_model", "emb_dim", "n_embd")
        layers = first("num_hidden_layers", "n_layers", "num_layers", "n_layer")
        vocab = first("vocab_size", "n_words")
        if not all(isinstance(v, int) for v in (hidden, layers, vocab)):
            raise ConfigError(f"{source}: model_type {data.get('model_type')!r} does not name its hidden size, layer "
                              "count and vocabulary size in a way bertlab knows (hidden_size / num_hidden_layers / "
                              "vocab_size); it cannot run through the generic path")
        return cls(
            model_type=str(data.get("model_type")), hidden_size=hidden, num_hidden_layers=layers, vocab_size=vocab,
            hf_config=dict(data),
            hidden_dropout_prob=float(first("hidden_dropout_prob", "dropout", default=0.1)),
            initializer_range=float(first("initializer_range", "init_std", default=0.02)),
            layer_norm_eps=float(first("layer_norm_eps", "layer_norm_epsilon", default=1e-12)),
            classifier_dropout=first("classifier_dropout"),
            pad_token_id=int(first("pad_token_id", "pad_index", default=0)),
            max_position_embeddings=int(first("max_position_embeddings", "n_positions", default=512)),
        )


def _hf_logging():
    """transformers' logging module; a ConfigError saying to install transformers when it is missing (checked
    before anything else, so that its absence is not taken for an unknown model)."""
    try:
        import transformers.utils.logging as hf_logging
    except ImportError as err:
        raise ConfigError("the generic encoder path (a model_type that is not a native bertlab family) runs the "
                          "model through transformers.AutoModel: `pip install transformers`, or use a native "
                          "family") from err
    return hf_logging


def _refuse_non_encoder(data: Mapping[str, Any], source: str) -> None:
    """The generic path runs encoders only (models/families: known_encoder_types and the decoder flags)."""
    from bertlab.models.families import encoder_refusal

    refusal = encoder_refusal(str(data.get("model_type")), data, source)
    if refusal is not None:
        raise ConfigError(refusal)


class AutoEncoder(ConfigSizes, nn.Module):
    """An ``AutoModel`` as a bertlab encoder (see the module docstring). ``forward`` as ``BertModel``'s."""

    generic = True

    def __init__(self, model: nn.Module, config: GenericEncoderConfig):
        super().__init__()
        _refuse_non_encoder(config.hf_config, f"{config.model_type} (generic path)")
        self.config = config
        # The model's own children, registered here under their names: parameter names are the model's
        # (``embeddings.word_embeddings.weight``, ``encoder.layer.0...``), and transformers' forward uses them.
        for name, child in model.named_children():
            self.add_module(name, child)
        self._model = (model,)  # not a child: its parameters are registered above, once
        self.pooler = getattr(model, "pooler", None)
        params = inspect.signature(model.forward).parameters
        self._types = "token_type_ids" in params and int(config.hf_config.get("type_vocab_size") or 0) > 1
        self._root_params = [n for n, _ in model.named_parameters(recurse=False)]
        if self._root_params:
            raise ConfigError(f"{config.model_type}: the model holds parameters outside its submodules "
                              f"({self._root_params[:3]}); the generic path cannot wrap it")
        self.train(self.training)  # one mode for the wrapper and the whole model (from_pretrained returns it in eval)

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self._model[0].get_input_embeddings()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, output_hidden_states: bool = False) -> EncoderOutput:
        kwargs: dict[str, Any] = {"attention_mask": attention_mask, "output_hidden_states": output_hidden_states,
                                  "return_dict": True}
        if self._types and token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        out = self._model[0](input_ids=input_ids, **kwargs)
        hidden = out.last_hidden_state  # (B, T, H)
        pooled = getattr(out, "pooler_output", None)
        states = tuple(out.hidden_states) if output_hidden_states and out.hidden_states is not None else None
        return EncoderOutput(hidden, pooled, states)

    def train(self, mode: bool = True) -> AutoEncoder:
        """Train / eval mode for the wrapped model too: its children are registered here, but the model itself is
        not (``_model``), and transformers reads ``self.training`` at its top level as well. The one place this
        wrapper's mode is set: ``eval()`` comes here."""
        super().train(mode)
        self._model[0].train(mode)
        return self

    @classmethod
    def from_config(cls, config: GenericEncoderConfig) -> AutoEncoder:
        """Random weights of the architecture ``config.hf_config`` describes (checkpoints then load into it);
        refused, before transformers sees it, if that config names code of its own (runtime/model_folders)."""
        _hf_logging()
        _refuse_non_encoder(config.hf_config, f"{config.model_type} (a recorded generic-path config)")
        model = model_from_config(config.hf_config, f"the recorded config.json of a {config.model_type} encoder")
        return cls(model, config)

    @classmethod
    def from_pretrained(cls, directory: Path) -> AutoEncoder:
        """transformers' AutoModel of a local folder: an encoder (refused otherwise, before any weights are read)
        whose files name no code of their own (runtime/model_folders.auto_from_pretrained)."""
        hf_logging = _hf_logging()
        check_folder(directory)
        _refuse_non_encoder(_read_json(directory / "config.json"), str(directory / "config.json"))
        progress = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # bertlab logs what it loaded, once
        try:
            model = auto_from_pretrained("AutoModel", directory)
        except (CheckpointError, ConfigError):
            raise
        except Exception as err:  # an unknown model_type for this transformers version, missing weights, ...
            raise CheckpointError(f"{directory}: transformers.AutoModel could not load it ({type(err).__name__}: "
                                  f"{err})") from err
        finally:
            if progress:
                hf_logging.enable_progress_bar()
        config = GenericEncoderConfig.from_hf(model.config.to_dict(), str(directory / "config.json"))
        return cls(model, config)

    def save_pretrained(self, directory: str | Path) -> None:
        self._model[0].save_pretrained(str(directory))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path} could not be read as JSON ({type(err).__name__}: {err}): a Hugging Face "
                              "checkpoint folder needs its config.json") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} does not hold a JSON object")
    return data


def is_generic_record(encoder_config: Mapping[str, Any]) -> bool:
    return encoder_config.get("encoder") == GENERIC


def generic_config_from_record(encoder_config: Mapping[str, Any]) -> GenericEncoderConfig:
    names = {f.name for f in dataclasses.fields(GenericEncoderConfig)}
    return GenericEncoderConfig(**{k: v for k, v in encoder_config.items() if k in names})
