"""Hugging Face checkpoints of every native family ↔ bertlab, through each family's explicit key map.

bertlab's canonical names are ``encoder.<encoder key>`` for the encoder (BERT's module names for every BERT-shaped
family, which ``bertlab.models.bert.BertModel`` computes; a family with a module of its own, ModernBERT, its HF
names) and ``head.<leaf>`` for the task head (:mod:`bertlab.models.keys`). A family's :class:`~bertlab.models.families.FamilySpec` holds the
whole map, applied before anything else touches a key: its encoder prefix (``bert.``, ``roberta.``,
``distilbert.``, ``electra.``, ModernBERT's ``model.``, kept although Lightning's wrapper prefix is stripped
otherwise) or a bare encoder's keys, its
encoder renames (DistilBERT's ``transformer.layer.N.attention.q_lin`` ↔ ``encoder.layer.N.attention.self.query``)
and, per head kind, its head's names. For BERT:

=====================================================  ==========================================
HF checkpoint key                                        bertlab
=====================================================  ==========================================
``bert.{rest}`` or ``{rest}`` (bare ``BertModel``)       ``encoder.{rest}``
``classifier.*``                                         ``head.classifier.*`` (sequence / token / choice)
``qa_outputs.*``                                         ``head.qa_outputs.*`` (span)
``cls.predictions.transform.*``                          ``head.predictions.transform.*`` (MLM)
``cls.predictions.bias`` / ``...decoder.bias``           ``head.predictions.bias``
``cls.predictions.decoder.weight``                       dropped: tied to the word embeddings
``cls.seq_relationship.*``                               ``head.seq_relationship.*`` (pre-training)
``bert.embeddings.position_ids``                         dropped (a stale buffer, HF issue #25330)
``model.`` + ``encoder.*`` / ``head.*`` (a bertlab .ckpt)  ``encoder.*`` / ``head.*`` (an older run's ``bert.*`` too)
``*LayerNorm.gamma`` / ``*LayerNorm.beta``               ``*LayerNorm.weight`` / ``*LayerNorm.bias``
=====================================================  ==========================================

Keys of a head the target model does not have (an NSP head when fine-tuning, a pooler for NER) are dropped
and reported; keys that match nothing are errors naming the key; shape mismatches on the encoder are
errors naming the key and both shapes. Loading never uses ``strict=False``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertlab.models.families import FamilySpec, encoder_refusal, family_spec, is_native, supported_list
from bertlab.models.families.bert import BERT
from bertlab.models.families.config_file import check_generic, read_family_config
from bertlab.models.keys import (
    ENCODER_PREFIX,
    HEAD_PREFIX,
    MODULE_PREFIX,
    encoder_key,
    encoder_name,
    encoder_of,
    encoder_state,
    is_encoder_key,
    is_task_model_key,
    migrate_key,
)
from bertlab.runtime.config import EncoderConfig
from bertlab.runtime.errors import CheckpointError
from bertlab.runtime.files import writing
from bertlab.runtime.model_folders import check_folder
from bertlab.runtime.paths import missing_message, typed_path
from bertlab.runtime.records import read_record

log = logging.getLogger(__name__)

SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TORCH_NAME = "pytorch_model.bin"
CONFIG_NAME = "config.json"

# Every native family's transformers class → (model_type, bertlab head kind).
def architecture_to_head(architecture: str | None) -> tuple[str | None, str | None]:
    """(model_type, head kind) of a transformers class name of a native family; (None, None) when unknown."""
    from bertlab.models.families import families

    for spec in families().values():
        if architecture == spec.base_architecture:
            return spec.model_type, None
        kind = spec.head_kind_of(architecture)
        if kind is not None:
            return spec.model_type, kind
    return None, None

# Prefixes stripped on purpose: our LightningModule attribute inside .ckpt files and torch.compile's wrapper.
_STRIP_PREFIXES = (MODULE_PREFIX, "_orig_mod.")
_LEGACY_LN = re.compile(r"(LayerNorm)\.(gamma|beta)$")



@dataclass
class LoadReport:
    source: str
    loaded: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # on disk, deliberately not used (e.g. NSP head for NER)
    renamed: list[str] = field(default_factory=list)  # legacy names normalised (gamma/beta, prefixes)
    newly_initialised: list[str] = field(default_factory=list)  # in the model, not on disk (new heads)

    def summary(self) -> str:
        parts = [f"loaded {len(self.loaded)} tensors from {self.source}"]
        if self.dropped:
            parts.append(f"dropped {len(self.dropped)} ({_abbrev(self.dropped)})")
        if self.renamed:
            parts.append(f"renamed {len(self.renamed)} legacy keys")
        if self.newly_initialised:
            parts.append(f"newly initialised {len(self.newly_initialised)} ({_abbrev(self.newly_initialised)})")
        return "; ".join(parts)


def _abbrev(names: list[str], n: int = 4) -> str:
    return ", ".join(names[:n]) + (f", … {len(names) - n} more" if len(names) > n else "")


# ----------------------------------------------------------------------------------------------------------
# Reading files


def resolve_checkpoint_dir(path_or_hub_id: str | Path) -> Path:
    """A local folder, or a hub id fetched through huggingface_hub when it is installed and online."""
    path = typed_path(path_or_hub_id)
    if path.is_dir():
        return path
    if path.exists():
        raise CheckpointError(f"{path} is a file; pass the checkpoint folder that holds config.json")
    looks_local = str(path_or_hub_id).startswith((".", "/", "~")) or str(path_or_hub_id).count("/") > 1
    if looks_local:
        raise CheckpointError(missing_message(path, "the checkpoint folder"))
    try:
        from huggingface_hub import snapshot_download
    except ImportError as err:
        raise CheckpointError(
            f"{path_or_hub_id!r} is not a local folder, and huggingface_hub is not installed to fetch it from the "
            "hub: pass a local checkpoint folder (config.json + model.safetensors) or `pip install huggingface_hub`"
        ) from err
    from bertlab.runtime.network import OFFLINE_ADVICE, hub_unreachable_reason

    unreachable = hub_unreachable_reason()  # offline: the local hub cache only, at once instead of retrying
    try:
        return Path(
            snapshot_download(
                str(path_or_hub_id),
                allow_patterns=["*.json", "*.safetensors", "*.txt", "spm.model", TORCH_NAME],
                local_files_only=unreachable is not None,
            )
        )
    except Exception as err:  # offline, unknown id, gated repo: one message for the user
        why = f"the hub was not asked ({unreachable}) and it is not in the local hub cache" if unreachable else \
            f"the Hugging Face hub did not provide it ({type(err).__name__}: {err})"
        raise CheckpointError(
            f"could not get {path_or_hub_id!r}: it is not a local folder and {why}. Download it elsewhere and "
            f"pass the folder path. {OFFLINE_ADVICE if unreachable else ''}".rstrip()
        ) from err


def read_encoder_config(directory: Path) -> EncoderConfig:
    """A native family's config.json → ``EncoderConfig`` (the family from its model_type)."""
    return encoder_config_of(read_config_json(directory), directory / CONFIG_NAME)


def encoder_config_of(data: dict, path: Path) -> EncoderConfig:
    """A native family's config.json already read (``data``, from ``path``) → ``EncoderConfig``."""
    model_type = data.get("model_type") or "bert"
    if not is_native(model_type):
        raise CheckpointError(not_native_message(model_type, str(path), data))
    return read_family_config(family_spec(model_type), data, path)


def read_config_json(directory: Path) -> dict:
    """A checkpoint folder's config.json as a dict (a CheckpointError when missing or unreadable, or when a file
    of the folder names code of its own to run: bertlab.runtime.model_folders)."""
    path = directory / CONFIG_NAME
    if not path.is_file():
        raise CheckpointError(f"{path} is missing: a Hugging Face checkpoint folder needs config.json")
    # A folder whose model is its own code is not the model bertlab would build (the keys only: transformers is
    # not imported here; the generic path checks the classes too, before calling it).
    check_folder(directory, classes=False)
    data = read_record(path, "the model's config.json", "Restore it from an intact copy of the folder (or download "
                       "the model again)", error=CheckpointError)
    if not isinstance(data.get("model_type", ""), str):
        raise CheckpointError(f"{path}: model_type={data['model_type']!r} is a JSON {type(data['model_type']).__name__}"
                              " where the name of the model's family is expected (e.g. \"bert\"): restore config.json "
                              "from an intact copy of the folder")
    model_type = data.get("model_type") or "bert"
    if not is_native(model_type) and encoder_refusal(model_type, data) is None:
        from bertlab.models.families.generic import GenericEncoderConfig

        check_generic(data, path, GenericEncoderConfig)  # before transformers allocates what it describes
    return data


def not_native_message(model_type: str, source: str, config: Mapping[str, Any] | None = None) -> str:
    refusal = encoder_refusal(model_type, config, source)
    if refusal is not None:
        return refusal
    return (f"{source}: model_type {model_type!r} is not a native bertlab family ({supported_list()}); with "
            "transformers installed, model=auto runs it through the generic AutoModel path")


def sentence_transformers_pooling(directory: Path) -> str | None:
    """How a sentence-transformers checkpoint was trained to be read: ``"mean"`` or ``"cls"``, from its Pooling
    module (``modules.json`` → ``<path>/config.json``). None for a plain BERT folder, another pooling (max,
    weighted mean) or files that do not parse."""
    modules = directory / "modules.json"
    if not modules.is_file():
        return None
    try:
        entries = json.loads(modules.read_text(encoding="utf-8"))
        module = next(e for e in entries if str(e.get("type", "")).endswith(".Pooling"))
        config = json.loads((directory / module.get("path", "") / CONFIG_NAME).read_text(encoding="utf-8"))
    except (OSError, StopIteration, AttributeError, TypeError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(config, dict):
        return None
    chosen = [k for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
    if len(chosen) != 1:
        return None  # none, or a concatenation of several poolings
    return {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}.get(chosen[0])


def read_hf_config(directory: Path) -> dict:
    """An export folder's config.json ({} without one), read and refused as :func:`read_config_json` does."""
    if not (directory / CONFIG_NAME).is_file():
        check_folder(directory, classes=False)
        return {}
    return read_config_json(directory)


def read_state_dict(directory: Path) -> tuple[dict[str, torch.Tensor], str]:
    """Tensors of a checkpoint folder: safetensors first, else ``pytorch_model.bin`` (weights_only)."""
    single = directory / SAFETENSORS_NAME
    index = directory / SAFETENSORS_INDEX
    if single.is_file():
        return _read_safetensors(single), str(single)
    if index.is_file():
        return _read_sharded(directory, index), str(index)
    legacy = directory / TORCH_NAME
    if legacy.is_file():
        try:
            # weights_only: a pickled checkpoint from elsewhere must not be able to run code.
            state = torch.load(legacy, map_location="cpu", weights_only=True)
        except Exception as err:
            raise CheckpointError(f"{legacy} could not be read as a weights-only torch file: {err}") from err
        if not isinstance(state, Mapping):
            raise CheckpointError(f"{legacy} does not hold a state dict (found {type(state).__name__})")
        return dict(state), str(legacy)
    raise CheckpointError(
        f"no weights in {directory}: looked for {SAFETENSORS_NAME}, {SAFETENSORS_INDEX} and {TORCH_NAME}"
    )


_SHARDS_FIX = ("Download the checkpoint again (an interrupted download leaves a folder with some shards), or restore "
               "the folder from an intact copy")


def _read_sharded(directory: Path, index: Path) -> dict[str, torch.Tensor]:
    """The tensors of a sharded checkpoint: every shard ``model.safetensors.index.json`` names, each a file of the
    folder, and every tensor the index lists found in its shard (an incomplete folder is an error naming the index
    and what it lacks, not a ``KeyError`` or a model loaded with holes)."""
    record = read_record(index, "the index of the sharded weights", _SHARDS_FIX, required=("weight_map",),
                         shape={"weight_map": dict}, error=CheckpointError)
    weight_map: dict[str, Any] = record["weight_map"]
    odd = [key for key, shard in weight_map.items()
           if not isinstance(shard, str) or not shard or Path(shard).name != shard]
    if not weight_map or odd:
        what = "names no tensor" if not weight_map else \
            f"gives tensor {odd[0]!r} the shard {weight_map[odd[0]]!r}, which is not a file name of this folder"
        raise CheckpointError(f"{index}: key 'weight_map' {what}. {_SHARDS_FIX}")
    shards = sorted(set(weight_map.values()))
    absent = [shard for shard in shards if not (directory / shard).is_file()]
    if absent:
        raise CheckpointError(f"{index} names {len(absent)} of its {len(shards)} shard files that {directory} lacks "
                              f"({', '.join(absent[:3])}{', …' if len(absent) > 3 else ''}). {_SHARDS_FIX}")
    state: dict[str, torch.Tensor] = {}
    for shard in shards:
        state.update(_read_safetensors(directory / shard))
    lacking = [key for key in weight_map if key not in state]
    if lacking:
        raise CheckpointError(f"{index} lists {len(lacking)} tensors its shards do not hold ({lacking[0]!r} in "
                              f"{weight_map[lacking[0]]}{', …' if len(lacking) > 1 else ''}): a shard is incomplete "
                              f"or from another download. {_SHARDS_FIX}")
    return state


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as err:  # truncated or corrupt file
        raise CheckpointError(f"{path} is not a readable safetensors file: {err}") from err


# ----------------------------------------------------------------------------------------------------------
# The key map


def normalize_hf_keys(state: Mapping[str, torch.Tensor], spec: FamilySpec = BERT,
                      ) -> tuple[dict[str, torch.Tensor], list[str], list[str]]:
    """A family's checkpoint keys → encoder keys as ``encoder.<bertlab name>`` (the family's prefix or a bare encoder's
    keys, then its encoder renames), head keys as they are; wrapper prefixes stripped, legacy LayerNorm keys renamed.
    A bertlab Lightning checkpoint's keys (``model.`` + a TaskModel key) are bertlab's already: only migrated.

    Returns (the state in that form, renamed keys, dropped stale buffers).
    """
    out: dict[str, torch.Tensor] = {}
    renamed: list[str] = []
    dropped: list[str] = []
    own_prefix = spec.prefix + "."
    for key, tensor in state.items():
        ours = _task_model_key(key, spec)
        if ours is not None:
            out[ours] = tensor
            continue
        new = _strip_wrappers(key, own_prefix)
        new = _LEGACY_LN.sub(lambda m: f"{m.group(1)}.{'weight' if m.group(2) == 'gamma' else 'bias'}", new)
        if new != key:
            renamed.append(key)  # a legacy LayerNorm name or a wrapper prefix
        if new.startswith(own_prefix):
            new = encoder_key(spec.encoder_keys.to_ours(new[len(own_prefix):]))
        elif new.startswith(spec.bare_roots):
            new = encoder_key(spec.encoder_keys.to_ours(new))  # a bare encoder checkpoint
        if new.endswith("embeddings.position_ids") or new.endswith("embeddings.token_type_ids"):
            dropped.append(key)  # buffers, not weights; stale in older checkpoints
            continue
        out[new] = tensor
    return out, renamed, dropped


def _task_model_key(key: str, spec: FamilySpec) -> str | None:
    """The TaskModel key (migrated) of a bertlab Lightning checkpoint's ``model.<root>.…`` key, else None. Where
    our encoder root is also a root of the family's bare encoder (BERT's ``encoder.layer.…`` wrapped in ``model.``),
    ours is the one followed by a root again (``encoder.encoder.layer.…``, ``encoder.embeddings.…``)."""
    rest = key.removeprefix("_orig_mod.")
    if not rest.startswith(MODULE_PREFIX) or not is_task_model_key(rest[len(MODULE_PREFIX):]):
        return None
    written = rest[len(MODULE_PREFIX):]
    ours = migrate_key(written)
    if written != ours or not is_encoder_key(ours) or ENCODER_PREFIX not in spec.bare_roots \
            or encoder_name(ours).startswith(spec.bare_roots):
        return ours
    return None


def _strip_wrappers(key: str, own_prefix: str) -> str:
    """``key`` without the wrapper prefixes of :data:`_STRIP_PREFIXES`, read before the family's own prefix: a
    family whose encoder prefix is itself one of them (ModernBERT's ``model.``) keeps it."""
    for prefix in _STRIP_PREFIXES:
        if key.startswith(prefix) and prefix != own_prefix:
            key = key[len(prefix):]
    return key


def hf_key_to_bertlab(key: str, head_kind: str | None, spec: FamilySpec = BERT) -> str | None:
    """Map one normalised key (:func:`normalize_hf_keys`) to bertlab's name; None = deliberately dropped for this
    head kind (another head of the family, a tied decoder weight)."""
    if is_encoder_key(key):
        return key
    layout = spec.heads.get(head_kind) if head_kind is not None else None
    if layout is not None and key not in layout.tied:
        ours = layout.to_ours(key)
        if ours is not None:
            return ours
    if key.startswith(spec.other_heads) or any(
            key in other.tied or other.to_ours(key) is not None for other in spec.heads.values()):
        return None
    raise CheckpointError(f"unknown checkpoint key {key!r}: not a {spec.display} encoder or {spec.display} head key")


def bertlab_key_to_hf(key: str, head_kind: str | None, spec: FamilySpec = BERT) -> str | None:
    """Inverse map for export; None = not part of the family's layout (e.g. our pooler in a token model)."""
    if is_encoder_key(key):
        return spec.prefix + "." + spec.encoder_keys.to_theirs(encoder_name(key))
    if not key.startswith(HEAD_PREFIX) or head_kind not in spec.heads:
        return None
    return spec.heads[head_kind].to_theirs(key)


def shared_head_key(hf_key: str | None, new_head: str | None, spec: FamilySpec = BERT) -> str | None:
    """bertlab's name, in a new head of kind ``new_head``, of a checkpoint tensor (its transformers name) that
    belongs to the family's pre-training prediction head *and* that ``new_head``'s transformers class holds under
    the same name (ModernBERT: ``head.dense`` / ``head.norm``, the prediction head every ModernBERT task class
    starts with); None for any other key. transformers' ``AutoModelFor<Task>.from_pretrained`` of a masked-LM
    checkpoint loads such tensors by name, so bertlab carries them into a head that otherwise starts new too.
    Families whose task heads share nothing with their masked-LM head (BERT's ``cls.predictions`` vs
    ``classifier``) get None for every key."""
    target = spec.heads.get(new_head or "")
    if hf_key is None or target is None or new_head in ("mlm", "pretraining"):
        return None
    for pretraining in ("mlm", "pretraining"):
        layout = spec.heads.get(pretraining)
        if layout is None or hf_key in layout.tied or layout.to_ours(hf_key) is None:
            continue
        if any(hf_key == theirs or (theirs.endswith(".") and hf_key.startswith(theirs))
               for theirs, _ in layout.keys if any(theirs == t for t, _ in target.keys)):
            return target.to_ours(hf_key)
    return None


def convert_hf_state_dict(
    state: Mapping[str, torch.Tensor], head_kind: str | None, has_pooler: bool, source: str = "checkpoint",
    spec: FamilySpec = BERT, new_head: str | None = None,
) -> tuple[dict[str, torch.Tensor], LoadReport]:
    """A family's checkpoint tensors → bertlab names for a model with this head kind (None = encoder only).
    ``new_head``: the kind of the model's head when it starts new (the checkpoint's head is another task's): the
    checkpoint's prediction-head tensors that head shares by name are carried (:func:`shared_head_key`)."""
    normalized, renamed, dropped = normalize_hf_keys(state, spec)
    report = LoadReport(source=source, renamed=renamed, dropped=list(dropped))
    out: dict[str, torch.Tensor] = {}
    for key, tensor in normalized.items():
        ours = hf_key_to_bertlab(key, head_kind, spec)
        if head_kind is None and ours is None:
            ours = shared_head_key(key, new_head, spec)
        if ours is not None and ours.startswith(encoder_key("pooler.")) and not has_pooler:
            ours = None  # NER/QA/MLM models have no pooler (HF builds them with add_pooling_layer=False)
        if ours is None:
            report.dropped.append(key)
            continue
        if ours in out and not torch.equal(out[ours], tensor):
            raise CheckpointError(f"{source}: {key!r} and another key both map to {ours!r} with different values")
        out[ours] = tensor
    return out, report


def load_into(model: nn.Module, state: dict[str, torch.Tensor], report: LoadReport, prefix: str = "") -> LoadReport:
    """Copy converted tensors into ``model`` (strict on names and shapes); fills the report's loaded/new lists.

    Encoder keys must exist with the same shapes; head keys whose shape differs (another label count) are left
    newly initialised and reported, as a checkpoint of another task's head is not an error.
    """
    own = model.state_dict()
    tied = _tied_aliases(model)
    optional = _optional_keys(model)
    to_load: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        name = key[len(prefix):] if prefix and key.startswith(prefix) else key
        if name not in own and encoder_name(name).startswith(optional):
            report.dropped.append(key)  # a tensor the family's checkpoints carry and this model does not use
            continue
        if name not in own:
            raise CheckpointError(
                f"{report.source}: key {key!r} has no place in the model "
                f"({type(model).__name__} has no parameter {name!r}); check the architecture in config.json"
            )
        if own[name].shape != tensor.shape:
            if name.startswith(HEAD_PREFIX):
                report.dropped.append(f"{key} (shape {tuple(tensor.shape)} ≠ model {tuple(own[name].shape)})")
                continue
            raise CheckpointError(
                f"{report.source}: shape mismatch for {key!r}: checkpoint {tuple(tensor.shape)} vs model "
                f"{tuple(own[name].shape)}; the checkpoint's config.json does not describe these weights"
            )
        to_load[name] = tensor
    missing = [k for k in own if k not in to_load and k not in tied]
    encoder_missing = [k for k in missing if _is_encoder_key(k)]
    if encoder_missing:
        raise CheckpointError(
            f"{report.source}: the checkpoint lacks encoder tensors {_abbrev(encoder_missing)}; "
            "it is not a complete BERT checkpoint"
        )
    with torch.no_grad():
        for name, tensor in to_load.items():
            own[name].copy_(tensor.to(own[name].dtype))
    report.loaded = sorted(to_load)
    report.newly_initialised = sorted(missing)
    return report


def _optional_keys(model: nn.Module) -> tuple[str, ...]:
    """The encoder keys of the model's family that a checkpoint may hold without the model having them."""
    config = getattr(encoder_of(model), "config", None)
    model_type = getattr(config, "model_type", None)
    return family_spec(model_type).optional_keys if model_type and is_native(model_type) else ()


def _is_encoder_key(name: str) -> bool:
    # A pooler may be absent from a checkpoint (token/QA/MLM models have none): it is then newly
    # initialised, as in transformers. Every other encoder tensor must be on disk.
    return not name.startswith(HEAD_PREFIX) and ".pooler." not in f".{name}"


def _tied_aliases(model: nn.Module) -> set[str]:
    """state_dict names that alias a parameter listed under another name (the tied MLM decoder)."""
    seen: dict[int, str] = {}
    aliases: set[str] = set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        ident = id(tensor)
        if ident in seen:
            aliases.add(name)
        else:
            seen[ident] = name
    return aliases


# ----------------------------------------------------------------------------------------------------------
# Encoder-level API (BertModel.from_pretrained / save_pretrained)


def load_encoder(path_or_hub_id: str | Path, add_pooling_layer: bool = True):
    """A native family's checkpoint folder (or hub id) as a bertlab encoder; the load report is logged."""
    directory = resolve_checkpoint_dir(path_or_hub_id)
    config = read_encoder_config(directory)
    spec = family_spec(config.model_type)
    state, source = read_state_dict(directory)
    encoder = spec.build_encoder(config, add_pooling_layer=add_pooling_layer)
    converted, report = convert_hf_state_dict(state, head_kind=None, has_pooler=encoder.pooler is not None,
                                              source=source, spec=spec)
    load_into(encoder, encoder_state(converted), report)
    log.info("%s.from_pretrained: %s", spec.base_architecture, report.summary())
    encoder.load_report = report
    return encoder


def save_encoder(encoder: nn.Module, directory: str | Path) -> None:
    """config.json + model.safetensors of the encoder alone, in its family's names (``<Family>Model`` loads it)."""
    from safetensors.torch import save_file

    directory = Path(directory)
    spec = family_spec(encoder.config.model_type)
    config = spec.write_config(encoder.config)
    config["architectures"] = [spec.base_architecture]
    tensors = {spec.encoder_keys.to_theirs(k): v.detach().contiguous().cpu() for k, v in encoder.state_dict().items()}
    with writing(directory, "the encoder folder", "save it to a folder on a disk with room"):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n")
        save_file(tensors, str(directory / SAFETENSORS_NAME), metadata={"format": "pt"})


def export_state_dict(model_state: Mapping[str, torch.Tensor], head_kind: str | None,
                      spec: FamilySpec = BERT) -> dict[str, torch.Tensor]:
    """bertlab TaskModel tensors → the family's ``<Family>For*`` tensors (a tied decoder weight written once, as the
    word embeddings; a bias HF lists twice written twice)."""
    out: dict[str, torch.Tensor] = {}
    for key, tensor in model_state.items():
        hf = bertlab_key_to_hf(key, head_kind, spec)
        if hf is not None:
            out[hf] = tensor.detach().contiguous().cpu()
    layout = spec.heads.get(head_kind) if head_kind is not None else None
    for target, source in (layout.copies if layout is not None else ()):
        if source in out:
            out[target] = out[source].clone()
    return out
