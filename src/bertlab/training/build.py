"""Small builders from the composed Hydra config to typed objects: tokenizer, encoder, task model.

Hydra's ``DictConfig`` stops here: everything returned is a plain object or a typed dataclass.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import torch

from bertlab.data.tokenizer import BertTokenizer, holds_tokenizer, tokenizer_for
from bertlab.models.assemble import assemble, config_from_record, needs_pooler, with_head
from bertlab.models.bert import Kernels
from bertlab.models.encoder import layer_stack_path
from bertlab.models.families import family_spec, is_native, scratch_families, supported_list
from bertlab.models.families.generic import AutoEncoder, GenericEncoderConfig
from bertlab.models.families.spec import TOKEN_ID_ROLES
from bertlab.models.heads import TaskModel
from bertlab.models.hf_weights import (
    CheckpointError,
    LoadReport,
    architecture_to_head,
    bertlab_key_to_hf,
    convert_hf_state_dict,
    encoder_config_of,
    load_into,
    normalize_hf_keys,
    read_config_json,
    read_state_dict,
    resolve_checkpoint_dir,
    sentence_transformers_pooling,
    shared_head_key,
)
from bertlab.runtime.config import (
    DEFAULT_MLM_PROBABILITY,
    HEAD_POOLINGS,
    MASKED_FAMILIES,
    ConfigError,
    EncoderConfig,
    ExecutionConfig,
    HeadConfig,
    TaskSpec,
)
from bertlab.runtime.errors import TokenizerError
from bertlab.runtime.fingerprints import FINGERPRINT_KEY, RUN_ID_KEY, check_trusted
from bertlab.runtime.model_folders import package_model_dir
from bertlab.runtime.paths import existing_path
from bertlab.tasks.families import Family
from bertlab.training.checkpoints import last_checkpoint, read_checkpoint, run_dir_checkpoint

log = logging.getLogger(__name__)

PACKAGE_PREFIX = "pkg:"


def resolve_pretrained(spec: str | None) -> Path | None:
    """``pkg:<package>`` (a checkpoint shipped as a Python package, its ``model/`` folder), a local folder, or a
    hub id."""
    if spec is None:
        return None
    spec = str(spec)
    if spec.startswith(PACKAGE_PREFIX):  # found without importing the package: an import runs its code
        return package_model_dir(spec, spec[len(PACKAGE_PREFIX):])
    return resolve_checkpoint_dir(spec)


# A scratch encoder's special-token ids, by config field, from its vocabulary's roles. A field the family's config
# lacks is skipped; one model.* sets is kept.
SCRATCH_TOKEN_IDS = TOKEN_ID_ROLES


def architecture(model_cfg: dict[str, Any], tokenizer: BertTokenizer | None = None) -> EncoderConfig:
    """A scratch encoder's architecture: the config class of the family ``model.model_type`` names (BERT when
    unset), with the fields ``model.*`` sets; with ``tokenizer``, its vocabulary's size and special-token ids.
    The result goes through the family's config.json once (written, read back), so a scratch model is what
    transformers would build from that config.json: a field the family fixes (RoBERTa's positions after the
    padding row, DistilBERT's missing segment embeddings) or has no place for (BERT's embedding_size) takes the
    family's value, and the log names every ``model.*`` value that was changed so."""
    model_type = str(model_cfg.get("model_type") or "bert")
    if model_type not in scratch_families():
        raise ConfigError(f"model.model_type={model_type!r}: bertlab builds scratch encoders of its own families "
                          f"only ({supported_list()}); start from a checkpoint with model.pretrained for another")
    spec = family_spec(model_type)
    fields = {f.name for f in dataclasses.fields(spec.config_class)}
    values = {k: v for k, v in model_cfg.items() if k in fields and v is not None}
    asked = set(values)  # the keys model.* sets
    values["model_type"] = model_type
    if tokenizer is not None:
        values["vocab_size"] = tokenizer.vocab_size
        if values.get("pad_token_id", tokenizer.pad_id) != tokenizer.pad_id:
            raise ConfigError(f"model.pad_token_id={values['pad_token_id']} but the vocabulary pads with id "
                              f"{tokenizer.pad_id}: drop model.pad_token_id (a scratch encoder takes its "
                              "vocabulary's special ids)")
        for key, role in SCRATCH_TOKEN_IDS.items():
            if key in fields and key not in values:
                values[key] = getattr(tokenizer, role)
    try:
        built = spec.config_class(**values)
    except ConfigError as err:
        raise ConfigError(f"{err} (model={model_cfg.get('name')} with model.model_type={model_type}: a preset "
                          f"written for another family may set it; override it, or use a preset of this family)"
                          ) from None
    config = spec.read_config(spec.write_config(built), f"model.* (a scratch {spec.display})")
    for key in sorted(asked - {"model_type"}):  # each value as passed in (vocab_size: the trained vocabulary's)
        if getattr(config, key, values[key]) != values[key]:
            log.warning("model.%s=%r: a scratch %s has %r here (the family fixes it, or its config.json has no "
                        "such field)", key, values[key], spec.display, getattr(config, key))
    return config


# ----------------------------------------------------------------------------------------------------------
# Tokenizer


def tokenizer_folder(model_cfg: dict[str, Any], init_dir: Path | None) -> Path | None:
    """Where the run's tokenizer is saved, if anywhere: ``model.tokenizer``, the tokenizer saved with
    ``model.init_from``, or the pretrained checkpoint's (a recurrent model initialised from a BERT
    checkpoint's word embeddings needs that checkpoint's ids). None: a scratch model trains one."""
    if model_cfg.get("tokenizer"):
        return existing_path(model_cfg["tokenizer"], f"model.tokenizer={model_cfg['tokenizer']}", TokenizerError)
    if init_dir is not None and holds_tokenizer(init_dir):
        return init_dir
    return resolve_pretrained(model_cfg.get("pretrained") or model_cfg.get("init_embeddings_from"))


def build_tokenizer(model_cfg: dict[str, Any], init_dir: Path | None, training_texts, cache_dir: str | None,
                    ) -> BertTokenizer:
    """The checkpoint's tokenizer, the tokenizer saved with ``init_from``, or a vocabulary of
    ``model.tokenizer_kind`` (wordpiece | bpe | unigram) trained on the training split only (cached by content
    hash)."""
    if model_cfg.get("name") == "auto" and not any(model_cfg.get(k) for k in ("pretrained", "init_from")):
        raise ConfigError("model=auto reads the family and the tokenizer from a checkpoint: give it one with "
                          "model.pretrained=<hub id | local Hugging Face folder> (e.g. model.pretrained=roberta-base)")
    return tokenizer_for(tokenizer_folder(model_cfg, init_dir), training_texts,
                         vocab_size=int(model_cfg.get("vocab_size") or 8000),
                         lowercase=bool(model_cfg.get("lowercase", True)), cache_dir=cache_dir,
                         kind=str(model_cfg.get("tokenizer_kind") or "wordpiece"))


# ----------------------------------------------------------------------------------------------------------
# Model


def _init_source(init_from: str | None) -> tuple[str | None, Path | None]:
    """``init_from`` as (kind, path): a run dir (→ its best or last checkpoint), a .ckpt, or an HF folder."""
    if init_from is None:
        return None, None
    path = existing_path(init_from, f"model.init_from={init_from}", ConfigError)
    if path.is_file() and path.suffix == ".ckpt":
        return "ckpt", path
    if path.is_dir() and ((path / "metrics.json").is_file() or last_checkpoint(path).is_file()):
        ckpt = run_dir_checkpoint(path)
        if ckpt is None:
            raise ConfigError(f"model.init_from={init_from}: the run dir has no best or last checkpoint")
        return "ckpt", ckpt
    if path.is_dir() and (path / "config.json").is_file():
        return "hf", path
    raise ConfigError(
        f"model.init_from={init_from}: not a run dir (with metrics.json), a .ckpt file or a Hugging Face folder"
    )


def init_dir_for_tokenizer(init_from: str | None) -> Path | None:
    kind, path = _init_source(init_from)
    if kind == "hf":
        return path
    if kind == "ckpt":
        run_dir = path.parent.parent
        return run_dir / "tokenizer" if (run_dir / "tokenizer").is_dir() else None
    return None


def resolve_head_config(head_cfg: HeadConfig, model_cfg: dict[str, Any]) -> HeadConfig:
    """``head.pooling=auto``: the sentence vector the run's start was trained to give. A checkpoint folder: its
    sentence-transformers Pooling module where it declares one (e.g. all-MiniLM-L6-v2's mean over tokens). A
    bertlab run (``model.init_from``): the pooling its own sentence-level head read, else (a pre-training run)
    what its base checkpoint declares. BERT's pooler when nothing is declared."""
    if head_cfg.pooling != "auto":
        return head_cfg
    declared, where = None, None
    if model_cfg.get("encoder", "bert") == "bert":
        init_kind, init_path = _init_source(model_cfg.get("init_from"))
        if init_kind == "ckpt":
            declared, where = _run_start_pooling(init_path)
        else:
            pretrained = init_path if init_kind == "hf" else resolve_pretrained(model_cfg.get("pretrained"))
            if pretrained is not None:
                declared = sentence_transformers_pooling(pretrained)
                where = f"the checkpoint's sentence-transformers Pooling module in {pretrained}"
    pooling = declared or "pooler"
    log.info("head.pooling=auto → %s (%s)", pooling,
             where if declared else "nothing declared by the start: BERT's pooler")
    return dataclasses.replace(head_cfg, pooling=pooling)


_POOLING_HEADS = ("sequence", "multiple_choice")  # the task families whose head reads a sentence vector


def _run_start_pooling(ckpt_path: Path) -> tuple[str | None, str | None]:
    """What ``head.pooling=auto`` resolves to when a run starts from a bertlab checkpoint, and where it was read:
    the pooling that run's head read (recorded resolved), or its base checkpoint's declared pooling."""
    hparams = read_checkpoint(ckpt_path, "model.init_from").get("hyper_parameters") or {}
    pooling = (hparams.get("head") or {}).get("pooling")
    if (hparams.get("task") or {}).get("family") in _POOLING_HEADS and pooling in HEAD_POOLINGS:
        return pooling, f"the head of the run it starts from, {ckpt_path}"
    base = hparams.get("base_weights")
    try:  # the base checkpoint, where it can still be found here (offline: a hub id may not be)
        folder = resolve_pretrained(base) if base else None
    except (ConfigError, CheckpointError, OSError):
        folder = None
    if folder is None or not (folder / "config.json").is_file():
        return None, None
    declared = sentence_transformers_pooling(folder)
    return declared, f"the sentence-transformers Pooling module of {folder}, the base of {ckpt_path}"


def encoder_model_type(model_cfg: dict[str, Any]) -> str | None:
    """The family (``model_type``) of the encoder a run's ``model.*`` builds, read before it is built: the
    checkpoint's config.json, or the encoder config an ``init_from`` run recorded; None for a recurrent encoder
    or a scratch BERT."""
    if model_cfg.get("encoder", "bert") != "bert":
        return None
    init_kind, init_path = _init_source(model_cfg.get("init_from"))
    if init_kind == "ckpt":
        recorded = (read_checkpoint(init_path, "model.init_from").get("hyper_parameters") or {}).get("encoder_config")
        return (recorded or {}).get("model_type")
    pretrained = init_path if init_kind == "hf" else resolve_pretrained(model_cfg.get("pretrained"))
    return read_config_json(pretrained).get("model_type") if pretrained is not None else model_cfg.get("model_type")


def resolve_task_defaults(task: TaskSpec, model_cfg: dict[str, Any]) -> TaskSpec:
    """``task.mlm_probability=null`` (conf/task/mlm.yaml) → the masking rate of the encoder's family: 15 %, 30 % for
    ModernBERT (``FamilySpec.mlm_probability``), for every family that masks (mlm, rtd). A rate the task or the
    command line sets is kept."""
    if task.family not in MASKED_FAMILIES or task.mlm_probability is not None:
        return task
    model_type = encoder_model_type(model_cfg)
    rate = family_spec(model_type).mlm_probability if model_type and is_native(model_type) \
        else DEFAULT_MLM_PROBABILITY
    log.info("task.mlm_probability=null → %g (%s)", rate,
             f"{family_spec(model_type).display}'s masking rate" if model_type and is_native(model_type)
             else "BERT's masking rate")
    return dataclasses.replace(task, mlm_probability=rate)


def build_model(model_cfg: dict[str, Any], head_cfg: HeadConfig, family: Family, tokenizer: BertTokenizer,
                ) -> tuple[TaskModel, LoadReport | None]:
    """Encoder (pretrained, ``init_from`` or scratch) + the family's head, with a load report."""
    head_cfg = resolve_head_config(head_cfg, model_cfg)
    kind = model_cfg.get("encoder", "bert")
    if kind == "recurrent":
        return build_recurrent_model(model_cfg, head_cfg, family, tokenizer)
    if kind != "bert":
        raise ConfigError(f"model.encoder must be 'bert' or 'recurrent', got {kind!r}")
    init_kind, init_path = _init_source(model_cfg.get("init_from"))
    init_head = _init_head(model_cfg)
    # model.init_from is the start whenever it is set: it replaces the preset's checkpoint (model=minilm_l6
    # model.init_from=<a run of it> continues that run, e.g. after task-adaptive pre-training).
    pretrained = None if init_kind is not None else resolve_pretrained(model_cfg.get("pretrained"))
    if init_kind is not None and model_cfg.get("pretrained"):
        log.info("model.init_from=%s replaces model.pretrained=%s: the encoder starts from the former's weights",
                 model_cfg["init_from"], model_cfg["pretrained"])
    if init_kind == "hf":
        pretrained, init_kind = init_path, None
    if pretrained is not None:  # a bertlab export: its files and this tokenizer as the export recorded them
        check_trusted(pretrained, tokenizer, folder=pretrained, has_record=False)
    hf_config = read_config_json(pretrained) if pretrained is not None else {}  # config.json, read once
    if pretrained is not None and not is_native(hf_config.get("model_type") or "bert"):
        return build_generic_model(pretrained, head_cfg, family, tokenizer)
    if pretrained is not None or init_kind == "ckpt":
        config = (encoder_config_of(hf_config, pretrained / "config.json") if pretrained is not None
                  else _ckpt_encoder_config(init_path, tokenizer))
        # Dropout is a training setting, not part of the weights: the run's model.* decides it, whatever the
        # checkpoint was trained with (a pre-training run without dropout still fine-tunes with the preset's).
        overrides = {k: model_cfg[k] for k in ("hidden_dropout_prob", "attention_probs_dropout_prob")
                     if model_cfg.get(k) is not None and hasattr(config, k)}
        config = dataclasses.replace(config, **overrides)
    else:
        config = architecture(model_cfg, tokenizer)
    if tokenizer.vocab_size > config.vocab_size:
        raise ConfigError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the encoder's vocabulary holds "
            f"{config.vocab_size}: use the checkpoint's own tokenizer"
        )
    if head_cfg.layers in ("concat_last4", "sum_last4") and config.num_hidden_layers < 3:
        raise ConfigError(
            f"head.layers={head_cfg.layers} reads the last four hidden states, but this encoder has "
            f"{config.num_hidden_layers} layers (+ embeddings): use head.layers=last or a layer index"
        )
    if isinstance(head_cfg.layers, int) and not -config.num_hidden_layers - 1 <= head_cfg.layers <= config.num_hidden_layers:
        raise ConfigError(
            f"head.layers={head_cfg.layers} is outside 0..{config.num_hidden_layers} (0 = embeddings output)"
        )
    spec = None if isinstance(config, GenericEncoderConfig) else family_spec(config.model_type)
    if spec is not None and family.task.family == "mlm" and family.task.nsp and not spec.nsp:
        raise ConfigError(f"task.nsp=true: {spec.display} was pre-trained without next-sentence prediction and has "
                          "no NSP head in transformers; pre-train it with masked LM alone (task.nsp=false)")
    execution, kernels = _execution(model_cfg)
    model = assemble(config, head_cfg, family.build_head, family.stock_head_kind(head_cfg),
                     add_pooling_layer=needs_pooler(config, family.task.family, head_cfg, family.task.nsp),
                     unpad=execution.unpad, kernels=kernels)
    bert = model.bert
    report = None
    if pretrained is not None:
        state, source = read_state_dict(pretrained)
        # Load a checkpoint's head only when it is the same kind of head (fine-tuned → same task).
        ckpt_type, ckpt_head = architecture_to_head((hf_config.get("architectures") or [None])[0])
        same_head = ckpt_head == model.head_kind and ckpt_type == config.model_type
        head_kind = model.head_kind if same_head and init_head == "auto" else None
        state, report = convert_hf_state_dict(state, head_kind, has_pooler=bert.pooler is not None, source=source,
                                              spec=spec, new_head=None if same_head else model.head_kind)
        load_into(model, state, report)
    elif init_kind == "ckpt":
        report = _load_from_lightning_ckpt(model, init_path, family, head_cfg, keep_head=init_head == "auto")
    if report is not None:
        log.info("weights: %s", report.summary())
    if execution.compile:
        # In place (nn.Module.compile): parameter names, checkpoints and exports stay those of the eager module.
        # dynamic=True: batch size and sequence length change from batch to batch.
        bert.compile(dynamic=True)
    return model, report


def build_generic_model(directory: Path, head_cfg: HeadConfig, family: Family, tokenizer: BertTokenizer,
                        ) -> tuple[TaskModel, LoadReport | None]:
    """Any other encoder of the hub (a model_type that is not a native family) through transformers' AutoModel:
    its weights as transformers loads them, bertlab's heads on top (exported as the encoder + bertlab's head
    file: no stock class is assumed for it)."""
    encoder = AutoEncoder.from_pretrained(directory)  # refuses a model that is no encoder, or names code to run
    if tokenizer.vocab_size > encoder.config.vocab_size:
        raise ConfigError(f"the tokenizer has {tokenizer.vocab_size} tokens but {directory}'s vocabulary holds "
                          f"{encoder.config.vocab_size}: use the checkpoint's own tokenizer")
    model = with_head(encoder, head_cfg, family.build_head, None)
    report = LoadReport(source=str(directory), loaded=[f"bert.{k}" for k in encoder.state_dict()])
    log.info("weights: %s (transformers.AutoModel)", report.summary())
    return model, report


def build_recurrent_model(model_cfg: dict[str, Any], head_cfg: HeadConfig, family: Family,
                          tokenizer: BertTokenizer) -> tuple[TaskModel, LoadReport | None]:
    """``model.encoder=recurrent`` (model=bilstm|gru|lstm): embeddings (random, or a BERT checkpoint's word
    embeddings with ``model.init_embeddings_from``) + a (bi)LSTM/GRU, the family's head, and ``init_from``."""
    from bertlab.models.recurrent import RecurrentConfig, RecurrentEncoder, check_head_layers

    if model_cfg.get("pretrained"):
        raise ConfigError("model.pretrained loads a BERT encoder; a recurrent model takes a BERT checkpoint's "
                          "word embeddings (and tokenizer) with model.init_embeddings_from=<checkpoint>")
    names = {f.name for f in dataclasses.fields(RecurrentConfig)}
    values = {k: v for k, v in model_cfg.items() if k in names and v is not None}
    values["vocab_size"] = tokenizer.vocab_size
    report, embeddings = None, None
    source = resolve_pretrained(values.get("init_embeddings_from"))
    if source is not None:
        state, path = read_state_dict(source)
        key = "bert.embeddings.word_embeddings.weight"
        embeddings = normalize_hf_keys(state)[0].get(key)
        if embeddings is None:
            raise CheckpointError(f"{path}: no {key} (not a BERT checkpoint)")
        if values.get("embedding_dim") != embeddings.shape[1]:
            log.info("model.embedding_dim=%s replaced by the width of the checkpoint's word embeddings, %d",
                     values.get("embedding_dim"), embeddings.shape[1])
        values.update(vocab_size=embeddings.shape[0], embedding_dim=embeddings.shape[1])
        report = LoadReport(source=path, loaded=["bert.embeddings.word_embeddings.weight"])
    config = RecurrentConfig(**values)
    if tokenizer.vocab_size > config.vocab_size:
        raise ConfigError(f"the tokenizer has {tokenizer.vocab_size} tokens but the checkpoint's embeddings hold "
                          f"{config.vocab_size}: use the checkpoint's own tokenizer (model.tokenizer=null)")
    check_head_layers(config, head_cfg.layers)
    task = family.task.family
    if task == "sequence" and head_cfg.pooling == "cls" and not config.bidirectional:
        raise ConfigError("head.pooling=cls reads the state at [CLS], which a left-to-right encoder computes "
                          "before reading any text: use head.pooling=pooler (model.pooling picks the vector)")
    if task == "mlm" and config.embedding_dim != config.output_size:
        raise ConfigError(f"task=mlm ties its decoder to the word embeddings: model.embedding_dim "
                          f"({config.embedding_dim}) must equal model.hidden_size × directions ({config.output_size})")
    encoder = RecurrentEncoder(config)
    if embeddings is not None:
        encoder.load_word_embeddings(embeddings)
    head = family.build_head(encoder.config, head_cfg, encoder.embeddings.word_embeddings)
    # No head has a transformers layout here (head_kind None): there is no HF recurrent encoder to export to.
    model = TaskModel(encoder, head, None, output_hidden_states=head_cfg.reads_all_layers)
    init_kind, init_path = _init_source(model_cfg.get("init_from"))
    if init_kind == "hf":
        raise ConfigError(f"model.init_from={init_path} is a BERT checkpoint; a recurrent model starts from a "
                          "bertlab run (dir or .ckpt), or takes BERT word embeddings with model.init_embeddings_from")
    if init_kind == "ckpt":
        report = _load_from_lightning_ckpt(model, init_path, family, head_cfg,
                                           keep_head=_init_head(model_cfg) == "auto")
    if report is not None:
        log.info("weights: %s", report.summary())
    return model, report


def _ckpt_encoder_config(path: Path, tokenizer: BertTokenizer | None = None) -> EncoderConfig:
    ckpt = read_checkpoint(path, "model.init_from")
    if tokenizer is not None:  # the tokenizer beside a checkpoint must be the one it was trained with
        check_trusted(path, tokenizer, recorded=ckpt.get(FINGERPRINT_KEY), folder=init_dir_for_tokenizer(str(path)),
                      run_id=ckpt.get(RUN_ID_KEY))
    encoder = (ckpt.get("hyper_parameters") or {}).get("encoder_config")
    if encoder is None:
        raise CheckpointError(f"{path}: no encoder_config in its hyper_parameters (not a bertlab checkpoint?)")
    if encoder.get("encoder") == "recurrent":
        raise ConfigError(f"model.init_from={path} holds a recurrent encoder: start from it with the same "
                          "recurrent model (model=bilstm|gru|lstm and its sizes)")
    return config_from_record(encoder)


def _init_head(model_cfg: dict[str, Any]) -> str:
    """``model.init_head`` (checked with every setting when a run starts, runtime/schema.py): ``auto`` keeps the
    start's head when it is this run's, ``new`` always starts a new one."""
    return model_cfg.get("init_head") or "auto"


def _head_signature(task: dict[str, Any], labels: Any, head: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two runs' heads the same head: the task family, regression or not, the label list in its order,
    and the head settings that decide what the classifier reads (pooling, layers, hidden layers)."""
    return (task.get("family"), bool(task.get("regression")), list(labels or []),
            head.get("pooling"), head.get("layers"), head.get("hidden_layers"))


def _same_head(hparams: dict[str, Any], family: Family, head_cfg: HeadConfig,
               ckpt_head: dict[str, torch.Tensor], own_head: dict[str, torch.Tensor]) -> str | None:
    """None when a checkpoint's head is this run's head (same signature, same tensor names and shapes), else why
    not, in words."""
    if not own_head:
        return "this run's head has no weights"
    theirs = _head_signature(hparams.get("task") or {}, hparams.get("labels"), hparams.get("head") or {})
    ours = _head_signature(dataclasses.asdict(family.task), family.labels, dataclasses.asdict(head_cfg))
    names = ("task family", "regression", "labels", "head.pooling", "head.layers", "head.hidden_layers")
    for name, a, b in zip(names, theirs, ours):
        if a != b:
            return f"{name} {a!r} there, {b!r} here"
    # The window pooling's own weights (model.window_pooling=attention) are not the classifier: a start trained on
    # texts of one window, or with another pooling, still has this run's classifier.
    ckpt_core, own_core = _without_window_pooling(ckpt_head), _without_window_pooling(own_head)
    if set(ckpt_core) != set(own_core) or any(ckpt_core[k].shape != own_core[k].shape for k in own_core):
        return "its head tensors differ from this run's"
    return None


def _is_window_pooling(key: str) -> bool:
    """A tensor of a head's WindowPooling (models/heads.py: ``head.windows``), not of its classifier."""
    return key.startswith("head.windows.")


def _without_window_pooling(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in tensors.items() if not _is_window_pooling(k)}


def _load_from_lightning_ckpt(model: TaskModel, path: Path, family: Family, head_cfg: HeadConfig,
                              keep_head: bool = True) -> LoadReport:
    """Encoder tensors of a bertlab checkpoint (pre-training or another task), and its head too when
    ``keep_head`` and it is the same head for the same labels (:func:`_same_head`); otherwise the head is dropped
    and this run's starts new. The log says which, and why."""
    ckpt = read_checkpoint(path, "model.init_from")
    state = {k[len("model."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    report = LoadReport(source=str(path))
    own = model.state_dict()
    ckpt_head = {k: v for k, v in state.items() if k.startswith("head.")}
    take_head = False
    if ckpt_head and keep_head:
        why_not = _same_head(ckpt.get("hyper_parameters") or {}, family, head_cfg, ckpt_head,
                             {k: v for k, v in own.items() if k.startswith("head.")})
        take_head = why_not is None
        if take_head:
            # Window-pooling weights come along only where both heads have them alike; else this run's start new.
            ckpt_head = {k: v for k, v in ckpt_head.items() if not _is_window_pooling(k)
                         or (k in own and own[k].shape == v.shape)}
            new_pooling = sorted(k for k in own if _is_window_pooling(k) and k not in ckpt_head)
            log.info("model.init_from: the checkpoint's head is this run's (same task family, labels and head "
                     "settings): it is loaded too (model.init_head=new starts a new one)%s",
                     f"; its window pooling ({', '.join(new_pooling)}) starts new" if new_pooling else "")
        else:
            log.info("model.init_from: the checkpoint's head is not this run's (%s): a new head", why_not)
    keep = {}
    shared = {} if take_head else _shared_head_tensors(model, ckpt.get("hyper_parameters") or {}, ckpt_head)
    for k, v in state.items():
        if (k.startswith("bert.") or (take_head and k in ckpt_head)) and k in own:
            keep[k] = v
        elif k in shared:
            keep[shared[k][0]] = shared[k][1]
        else:
            report.dropped.append(k)
    return load_into(model, keep, report)


def _shared_head_tensors(model: TaskModel, hp: dict[str, Any], ckpt_head: dict[str, Any]) -> dict[str, tuple]:
    """The tensors of a bertlab checkpoint's head (another task's) that this run's new head takes as
    transformers would from the same checkpoint exported (``hf_weights.shared_head_key``: ModernBERT's
    prediction head ``head.dense`` / ``head.norm`` of a masked-LM run): checkpoint key → (our key, tensor)."""
    model_type = getattr(model.bert.config, "model_type", None)
    if not ckpt_head or not is_native(model_type) or getattr(model.bert, "generic", False) \
            or hp.get("head_kind") == model.head_kind:  # a head of this kind that is not taken: all of it new
        return {}
    spec, own = family_spec(model_type), model.state_dict()
    out = {}
    for key, tensor in ckpt_head.items():
        ours = shared_head_key(bertlab_key_to_hf(key, hp.get("head_kind"), spec), model.head_kind, spec)
        if ours is not None and ours in own and own[ours].shape == tensor.shape:
            out[key] = (ours, tensor)
    return out


def _execution(model_cfg: dict[str, Any]) -> tuple[ExecutionConfig, Kernels]:
    """How the encoder ``model.*`` asks for runs: the execution settings and the kernels they choose."""
    execution = ExecutionConfig.from_model_cfg(model_cfg)
    return execution, Kernels(cpu_fast_dropout=execution.cpu_fast_dropout, varlen_attention=execution.varlen_attention,
                              cpu_attention_slice_bytes=execution.cpu_attention_slice_mb * 2**20)


def build_student(teacher: TaskModel, layers: list[int], model_cfg: dict[str, Any], head_cfg: HeadConfig,
                  family: Family) -> TaskModel:
    """``distill.student_layers`` (DistilBERT's initialisation): the teacher's family and width with the chosen
    layers, renumbered 0.. in the order given; the embeddings (and pooler) copied, and the head too when it is
    the teacher's (same tensors: the labels were checked equal). ``model.*`` still chooses how it runs."""
    config = teacher.bert.config
    spec = None if isinstance(config, GenericEncoderConfig) else family_spec(config.model_type)
    why = ("the generic path's encoders" if spec is None else spec.layer_subset_refusal
           or ("LoRA teachers (export the teacher first: python -m bertlab.export merges the adapters)"
               if any("lora_" in k for k in teacher.state_dict()) else None))
    if why is not None:
        raise ConfigError(f"distill.student_layers: copying a teacher's layers is not supported for {why}; build "
                          "the student with model= instead and remove distill.student_layers")
    if max(layers) >= config.num_hidden_layers:
        raise ConfigError(f"distill.student_layers={layers}: the teacher has layers 0..{config.num_hidden_layers - 1}"
                          " only; choose among them (e.g. every other one)")
    execution, kernels = _execution(model_cfg)
    student = assemble(dataclasses.replace(config, num_hidden_layers=len(layers)), head_cfg, family.build_head,
                       family.stock_head_kind(head_cfg), add_pooling_layer=getattr(teacher.bert, "pooler", None)
                       is not None, unpad=execution.unpad, kernels=kernels)
    stack = f"bert.{layer_stack_path(teacher.bert)}."
    new_index = {old: new for new, old in enumerate(layers)}
    state: dict[str, torch.Tensor] = {}
    for key, value in teacher.state_dict().items():
        if key.startswith(stack):
            old, rest = key[len(stack):].split(".", 1)
            if int(old) in new_index:
                state[f"{stack}{new_index[int(old)]}.{rest}"] = value
        else:
            state[key] = value
    own = student.state_dict()
    own_head = {k: v.shape for k, v in own.items() if k.startswith("head.")}
    same_head = own_head == {k: v.shape for k, v in state.items() if k.startswith("head.")}
    keep = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape
            and (k.startswith("bert.") or same_head)}
    report = load_into(student, keep, LoadReport(source="distill.teacher"))
    log.info("distill.student_layers=%s: the student is the teacher's %s with %d of its %d layers (%s); the head "
             "%s. %s", layers, config.model_type, len(layers), config.num_hidden_layers,
             ", ".join(f"{old}→{new}" for old, new in new_index.items()),
             "is the teacher's" if same_head else "starts new (not the teacher's head)", report.summary())
    if execution.compile:
        student.bert.compile(dynamic=True)
    return student
