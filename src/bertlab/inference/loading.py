"""Loading what a ``Predictor`` predicts with, from any of the folders and files bertlab writes: a run's
checkpoint, a Hugging Face export (``export=true``) or an ONNX export, each as the model, its tokenizer, task,
labels and reading settings (:class:`PredictSettings`). PyTorch and the model code are imported by the loaders
that need them, not with this module."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

from bertlab.data.tokenizer import BertTokenizer, load_tokenizer
from bertlab.runtime.config import EncoderConfig, HeadConfig, TaskSpec
from bertlab.runtime.errors import CheckpointError

# An export folder's files (export=true, python -m bertlab.export): transformers' config and weights (the names
# models.hf_weights reads, repeated here so that this module imports no torch), bertlab's head files for a head
# without a transformers class, and the tokenizer's files.
HF_EXPORT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")
HEAD_WEIGHTS_NAME = "bertlab_head.safetensors"
HEAD_CONFIG_NAME = "bertlab_head.json"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


@dataclass
class PredictSettings:
    """What reading and windowing need, taken from the run's ``data.*`` settings (defaults for HF folders)."""

    max_seq_length: int = 512
    batch_size: int = 32
    text_column: str = "text"
    text_pair_column: str | None = None
    pair: bool | None = None  # None (a Hugging Face folder): a pair wherever the input holds two texts
    doc_stride: int = 128
    # Text longer than max_seq_length: "windows" (overlapping, data.window_stride tokens shared; None: a
    # quarter of the window) or "truncate".
    long_text: str = "windows"
    window_stride: int | None = None
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    # SQuAD 2.0: answer "" when the null score beats the best span by more than the threshold.
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0
    # Multiple choice: the choice list of a JSON input, or a table's choice columns, and a text put before
    # every choice (SWAG's sent2).
    choices_field: str = "choices"
    choice_columns: list[str] | None = None
    choice_prefix_column: str | None = None

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> PredictSettings:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names and v is not None}
        if data.get("eval_batch_size"):
            values["batch_size"] = int(data["eval_batch_size"])
        values["pair"] = data.get("text_pair_column") is not None
        return cls(**values)


class Loaded(NamedTuple):
    """A Predictor's parts, in the order of its constructor."""

    model: Any  # a TaskModel (PyTorch) or an OnnxSession
    tokenizer: BertTokenizer
    task: TaskSpec
    labels: list[str] | None
    settings: PredictSettings
    source: str


def from_checkpoint(path: Path, tokenizer: BertTokenizer | None) -> Loaded:
    """A ``.ckpt`` file or a run dir (its best checkpoint), with the run's tokenizer and reading settings."""
    from bertlab.inference.export import (
        load_checkpoint_model,
        load_recurrent_checkpoint,
        resolve_checkpoint,
    )
    from bertlab.training.checkpoint_files import read_checkpoint

    ckpt = resolve_checkpoint(path)
    hp = read_checkpoint(ckpt).get("hyper_parameters") or {}
    if (hp.get("encoder_config") or {}).get("encoder") == "recurrent":
        loaded = load_recurrent_checkpoint(ckpt)
    else:
        loaded = load_checkpoint_model(ckpt)
    if tokenizer is None:
        tok_dir = ckpt.parent.parent / "tokenizer"
        if not tok_dir.is_dir():
            raise CheckpointError(
                f"no tokenizer for {ckpt}: expected the run's tokenizer folder at {tok_dir} (train.py saves "
                "<run_dir>/tokenizer/); keep the checkpoint inside its run dir, or predict with the run's "
                "export (python -m bertlab.export)"
            )
        tokenizer = load_tokenizer(tok_dir)
    data = (loaded.hparams.get("config") or {}).get("data") or {}
    return Loaded(loaded.model, tokenizer, loaded.task, loaded.labels, PredictSettings.from_data(data), str(ckpt))


def from_hf_folder(path: Path, tokenizer: BertTokenizer | None) -> Loaded:
    """An export: a stock ``BertFor*`` head, or ``BertModel`` + bertlab's own head file."""
    from safetensors.torch import load_file

    from bertlab.models.assemble import assemble, needs_pooler
    from bertlab.models.families import family_spec, is_native
    from bertlab.models.hf_weights import (
        LoadReport,
        architecture_to_head,
        convert_hf_state_dict,
        load_into,
        read_encoder_config,
        read_hf_config,
        read_state_dict,
    )
    from bertlab.tasks.families import build_family

    hf = read_hf_config(path)
    if not is_native(hf.get("model_type") or "bert"):
        return from_generic_export(path, tokenizer)
    config: EncoderConfig = read_encoder_config(path)
    spec = family_spec(config.model_type)
    architecture = (hf.get("architectures") or [spec.base_architecture])[0]
    custom = path / HEAD_CONFIG_NAME
    if custom.is_file():
        info = json.loads(custom.read_text())
        task, head_cfg, labels = TaskSpec(**info["task"]), HeadConfig(**info["head"]), info.get("labels")
        head_kind, has_pooler = None, bool(info.get("encoder_has_pooler"))
    else:
        head_kind = architecture_to_head(architecture)[1]
        family = {"sequence": "sequence", "token": "token", "span": "qa",
                  "multiple_choice": "multiple_choice"}.get(head_kind or "")
        if family is None:
            raise CheckpointError(
                f"{path / 'config.json'}: architecture {architecture} has no prediction head; bertlab predicts "
                f"with {', '.join(spec.heads[k].architecture for k in ('sequence', 'token', 'span', 'multiple_choice'))} "
                f"exports (or {spec.base_architecture} with bertlab's own head file)"
            )
        regression = hf.get("problem_type") == "regression"
        id2label = hf.get("id2label") or {}
        labels = None if family in ("qa", "multiple_choice") or regression \
            else [str(id2label[str(i)]) for i in range(len(id2label))]
        task = TaskSpec(name=family, family=family, labels=labels, regression=regression)
        head_cfg = HeadConfig(pooling="pooler", dropout=hf.get("classifier_dropout"))
        has_pooler = needs_pooler(config, family, head_cfg)
    num_labels = 1 if task.regression or task.family == "multiple_choice" else len(labels or [])
    family_obj = build_family(task, num_labels, labels, None)
    model = assemble(config, head_cfg, family_obj.build_head, head_kind, add_pooling_layer=has_pooler)
    tensors, source = read_state_dict(path)
    state, report = convert_hf_state_dict(tensors, head_kind, has_pooler=has_pooler, source=source, spec=spec)
    if head_kind is None:
        state = {k: v for k, v in state.items() if k.startswith("bert.")}
        head_state = load_file(str(path / HEAD_WEIGHTS_NAME))
        state.update({"head." + k: v for k, v in head_state.items()})
        report = LoadReport(source=source, dropped=report.dropped)
    load_into(model, state, report)
    if report.newly_initialised:
        raise CheckpointError(f"{path}: the folder lacks trained tensors {report.newly_initialised[:5]}: it is "
                              "not a complete export of a fine-tuned model")
    if tokenizer is None:
        tokenizer = load_tokenizer(path)
    settings = PredictSettings(max_seq_length=min(512, config.max_sequence_length),
                               max_query_length=64, pair=None)
    if task.family == "qa":
        settings.max_seq_length = min(384, config.max_sequence_length)
    return Loaded(model, tokenizer, task, labels, settings, str(path))


def from_onnx_folder(path: Path, tokenizer: BertTokenizer | None, backend: str) -> Loaded:
    """An ONNX export (:mod:`bertlab.inference.onnx_session`): no torch is imported."""
    from bertlab.inference.onnx_session import load_onnx_folder

    model, task, labels, data = load_onnx_folder(path, backend)
    return Loaded(model, tokenizer or load_tokenizer(path), task, labels, PredictSettings.from_data(data),
                  str(model.path))


def from_generic_export(path: Path, tokenizer: BertTokenizer | None) -> Loaded:
    """An export of the generic path: the AutoModel folder transformers saved + bertlab's head file."""
    from bertlab.inference.export import load_generic_export

    model, task, labels = load_generic_export(path)
    settings = PredictSettings(max_seq_length=min(512, model.bert.config.max_sequence_length),
                               max_query_length=64, pair=None)
    return Loaded(model, tokenizer or load_tokenizer(path), task, labels, settings, str(path))
