"""Where a run starts, worked out once: :func:`resolve_start` turns ``model.*`` and ``ckpt_path`` into one
:class:`RunStart` that every consumer receives (the tokenizer, the model, ``head.pooling=auto``, the masking rate,
the checkpoint's base record, the resume, the prediction-only exit). Nothing after it resolves a path again.

The kinds of start:

- ``scratch``: a randomly initialised encoder (``model=bert_tiny``, ``model=bilstm``);
- ``folder``: a Hugging Face folder, named by ``model.pretrained`` (a hub id, a local folder or
  ``pkg:<package>``) or by ``model.init_from`` (a local folder);
- ``checkpoint``: a bertlab run (its best or last checkpoint) or a ``.ckpt`` file, by ``model.init_from``;
- ``teacher``: the student is built from a distillation teacher's layers (``distill.student_layers``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertlab.data.tokenizer import holds_tokenizer
from bertlab.models.families import families, family_spec
from bertlab.models.hf_weights import read_config_json, resolve_checkpoint_dir
from bertlab.models.recurrent import RecurrentConfig
from bertlab.runtime.config import RECURRENT, TRANSFORMER, ModelConfig
from bertlab.runtime.errors import CheckpointError, ConfigError, TokenizerError
from bertlab.runtime.fingerprints import FINGERPRINT_KEY, RUN_ID_KEY
from bertlab.runtime.model_folders import package_model_dir
from bertlab.runtime.overrides import build_typed
from bertlab.runtime.paths import existing_path
from bertlab.training.checkpoint_files import last_checkpoint, read_checkpoint, run_dir_checkpoint

log = logging.getLogger(__name__)

PACKAGE_PREFIX = "pkg:"
START_KINDS = ("scratch", "folder", "checkpoint", "teacher")


def resolve_pretrained(spec: str | None) -> Path | None:
    """``pkg:<package>`` (a checkpoint shipped as a Python package, its ``model/`` folder), a local folder, or a
    hub id."""
    if spec is None:
        return None
    spec = str(spec)
    if spec.startswith(PACKAGE_PREFIX):  # found without importing the package: an import runs its code
        return package_model_dir(spec, spec[len(PACKAGE_PREFIX):])
    return resolve_checkpoint_dir(spec)


def architecture_keys() -> frozenset[str]:
    """The ``model.*`` keys ModelConfig has no field for that still name an architecture: the other fields of a
    native family's config (DeBERTa's ``position_buckets``, ModernBERT's ``global_rope_theta``, ...)."""
    names = {f.name for f in dataclasses.fields(RecurrentConfig)}
    for model_type in families():
        names |= {f.name for f in dataclasses.fields(family_spec(model_type).config_class)}
    return frozenset(names - {f.name for f in dataclasses.fields(ModelConfig)})


def model_config(values: ModelConfig | Mapping[str, Any]) -> ModelConfig:
    """The ``model`` group as its typed config; an unknown key is refused as in every other group."""
    if isinstance(values, ModelConfig):
        return values
    return build_typed(ModelConfig, values, "model", extra=architecture_keys())


@dataclass(frozen=True)
class RunStart:
    """Where one run starts, resolved once (:func:`resolve_start`)."""

    kind: str = "scratch"  # scratch | folder | checkpoint | teacher (START_KINDS)
    encoder: str = TRANSFORMER  # model.encoder as its kind: transformer | recurrent
    # The start as the user named it (model.pretrained's or model.init_from's value) and by which key: what a LoRA
    # checkpoint records as the base of its frozen weights.
    source: str | None = None
    setting: str | None = None
    folder: Path | None = None  # folder: the Hugging Face folder (a hub id or pkg: fetched / found)
    config_json: Mapping[str, Any] = field(default_factory=dict)  # folder: its config.json, read once
    checkpoint: Path | None = None  # checkpoint: the .ckpt (a run dir's best, else last)
    record: Mapping[str, Any] = field(default_factory=dict)  # checkpoint: its hyper_parameters
    fingerprint: str | None = None  # checkpoint: the tokenizer fingerprint it was trained with
    run_id: str | None = None  # checkpoint: the run that wrote it
    run_tokenizer: Path | None = None  # checkpoint: its run's tokenizer/ folder, when there is one
    model_type: str | None = None  # the family of the encoder the run builds (None: recurrent or the teacher's)
    embeddings: Path | None = None  # recurrent: model.init_embeddings_from's folder
    tokenizer: Path | None = None  # the folder the run's tokenizer is loaded from; None: one is trained
    resume: Path | None = None  # ckpt_path: the checkpoint this run resumes, evaluates or predicts with

    def __post_init__(self) -> None:
        assert self.kind in START_KINDS, self.kind

    @property
    def base(self) -> str | None:
        """What the run records as the base of its weights (``base_weights``): the start as the user named it."""
        return self.source if self.kind in ("folder", "checkpoint") else None


def resolve_start(model: ModelConfig | Mapping[str, Any] | None, ckpt_path: str | None = None,
                  run_dir: Path | None = None, *, from_teacher: bool = False, predict_only: bool = False,
                  ) -> RunStart:
    """The run's :class:`RunStart`, from ``model.*``, ``ckpt_path`` (``last``: ``run_dir``'s last.ckpt) and
    whether the student is built from a distillation teacher's layers. ``predict_only``: a prediction run that
    only reads its checkpoint (``ckpt_path``); nothing of ``model.*`` is looked at."""
    resume = resolve_resume(ckpt_path, run_dir)
    if predict_only:
        return RunStart(kind="checkpoint", source=ckpt_path, setting="ckpt_path", checkpoint=resume, resume=resume)
    model = model_config(model if model is not None else {})
    if from_teacher:  # distill.student_layers: model.* names no start (its checkpoint is not read)
        return RunStart(kind="teacher", encoder=model.kind, resume=resume)
    if model.name == "auto" and not (model.pretrained or model.init_from):
        raise ConfigError("model=auto reads the family and the tokenizer from a checkpoint: give it one with "
                          "model.pretrained=<hub id | local Hugging Face folder> (e.g. model.pretrained=roberta-base)")
    pretrained, embeddings = _Once(model.pretrained), _Once(model.init_embeddings_from)
    start = _weights_start(model, pretrained)
    # The tokenizer: model.tokenizer, else the one saved with model.init_from (or beside the checkpoint resumed or
    # evaluated: a scratch vocabulary trained again could differ, as the trainer breaks ties at random), else the
    # pretrained checkpoint's (a recurrent model: the one whose word embeddings it takes). None: one is trained.
    if model.init_from:
        saved = _saved_tokenizer(start)
    else:
        saved = _run_tokenizer(resume) if resume is not None and resume.suffix == ".ckpt" else None
    if model.tokenizer:
        tokenizer = existing_path(model.tokenizer, f"model.tokenizer={model.tokenizer}", TokenizerError)
    elif saved is not None and holds_tokenizer(saved):
        tokenizer = saved
    else:
        tokenizer = pretrained.get() if model.pretrained else embeddings.get()
    return dataclasses.replace(start, tokenizer=tokenizer, resume=resume,
                               embeddings=embeddings.get() if model.kind == RECURRENT else None)


class _Once:
    """A checkpoint spec resolved on first use, then kept (the tokenizer and the weights share it)."""

    def __init__(self, spec: str | None) -> None:
        self.spec, self._done, self._path = spec, False, None

    def get(self) -> Path | None:
        if not self._done:
            self._path, self._done = resolve_pretrained(self.spec), True
        return self._path


def _weights_start(model: ModelConfig, pretrained: _Once) -> RunStart:
    """Where the encoder's weights come from: model.init_from whenever it is set (it replaces the preset's
    checkpoint: model=minilm_l6 model.init_from=<a run of it> continues that run), else model.pretrained."""
    if model.kind == RECURRENT and model.pretrained:
        raise ConfigError("model.pretrained loads a BERT encoder; a recurrent model takes a BERT checkpoint's "
                          "word embeddings (and tokenizer) with model.init_embeddings_from=<checkpoint>")
    if model.init_from is not None:
        start = init_start(model.init_from)
        if model.kind == RECURRENT and start.kind == "folder":
            raise ConfigError(f"model.init_from={start.folder} is a BERT checkpoint; a recurrent model starts from a "
                              "bertlab run (dir or .ckpt), or takes BERT word embeddings with "
                              "model.init_embeddings_from")
        if model.pretrained and model.kind == TRANSFORMER:
            log.info("model.init_from=%s replaces model.pretrained=%s: the encoder starts from the former's "
                     "weights", model.init_from, model.pretrained)
    elif model.pretrained is not None and model.kind == TRANSFORMER:
        folder = pretrained.get()
        start = _folder_start(folder, str(model.pretrained), "model.pretrained")
    else:
        start = RunStart(kind="scratch", model_type=model.model_type if model.kind == TRANSFORMER else None)
    if model.kind == RECURRENT:
        start = dataclasses.replace(start, encoder=RECURRENT, model_type=None)
    return start


def init_start(init_from: str, setting: str = "model.init_from", read: bool = True) -> RunStart:
    """A path to start from: a run dir (→ its best or last checkpoint), a .ckpt, or a Hugging Face folder.
    ``read``: the checkpoint's record or the folder's config.json is read (False: the paths only)."""
    path = existing_path(init_from, f"{setting}={init_from}", ConfigError)
    if path.is_file() and path.suffix == ".ckpt":
        return _checkpoint_start(path, setting, str(init_from), read)
    if path.is_dir() and ((path / "metrics.json").is_file() or last_checkpoint(path).is_file()):
        ckpt = run_dir_checkpoint(path)
        if ckpt is None:
            raise ConfigError(f"{setting}={init_from}: the run dir has no best or last checkpoint")
        return _checkpoint_start(ckpt, setting, str(init_from), read)
    if path.is_dir() and (path / "config.json").is_file():
        return _folder_start(path, str(init_from), setting, read)
    raise ConfigError(
        f"{setting}={init_from}: not a run dir (with metrics.json), a .ckpt file or a Hugging Face folder"
    )


def resolve_base(base: str) -> RunStart:
    """The start a LoRA checkpoint names as the base of its frozen weights (its ``bertlab_base_weights``): a
    path that exists as :func:`init_start` reads it, else a checkpoint package or hub id."""
    if Path(str(base)).expanduser().exists():
        return init_start(base, read=False)  # the export reads what it needs of it
    return _folder_start(resolve_pretrained(base), base, "model.pretrained", read_config=False)


def _folder_start(folder: Path, source: str, setting: str, read_config: bool = True) -> RunStart:
    config = read_config_json(folder) if read_config else {}
    return RunStart(kind="folder", source=source, setting=setting, folder=folder, config_json=config,
                    model_type=config.get("model_type"))


def _checkpoint_start(path: Path, setting: str, source: str, read: bool = True) -> RunStart:
    """A bertlab checkpoint as a start: read once, its record kept (not its tensors)."""
    ckpt = read_checkpoint(path, setting) if read else {}
    record = ckpt.get("hyper_parameters") or {}
    return RunStart(kind="checkpoint", source=source, setting=setting, checkpoint=path, record=record,
                    fingerprint=ckpt.get(FINGERPRINT_KEY), run_id=ckpt.get(RUN_ID_KEY),
                    run_tokenizer=_run_tokenizer(path),
                    model_type=(record.get("encoder_config") or {}).get("model_type"))


def _run_tokenizer(ckpt: Path) -> Path | None:
    """The tokenizer/ folder of the run a checkpoint file belongs to (<run>/checkpoints/x.ckpt), if it has one."""
    folder = ckpt.parent.parent / "tokenizer"
    return folder if folder.is_dir() else None


def _saved_tokenizer(start: RunStart) -> Path | None:
    """The tokenizer folder saved with a start: a Hugging Face folder's own, a checkpoint's run's."""
    return start.folder if start.kind == "folder" else start.run_tokenizer


def resolve_resume(ckpt_path: str | None, run_dir: Path | None) -> Path | None:
    """``ckpt_path``: the checkpoint to resume, evaluate or predict with (``last``: ``run_dir``'s last.ckpt)."""
    if ckpt_path is None:
        return None
    if ckpt_path == "last":
        last = last_checkpoint(run_dir or Path("."))
        if not last.is_file():
            raise CheckpointError(
                f"ckpt_path=last: {last} does not exist; pass hydra.run.dir=<the run dir to resume> (its "
                "checkpoints/last.ckpt is resumed) or ckpt_path=<a .ckpt file>"
            )
        return last
    path = existing_path(ckpt_path, f"ckpt_path={ckpt_path}", CheckpointError)
    if not path.is_file():
        raise CheckpointError(f"ckpt_path={ckpt_path}: {path} is not a file; pass a .ckpt file (a run dir's "
                              "checkpoints/last.ckpt, or ckpt_path=last with hydra.run.dir=<the run dir>)")
    return Path(str(ckpt_path))
