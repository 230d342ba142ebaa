"""Loading what a ``Predictor`` predicts with, from any of the folders and files bertlab writes: a run's
checkpoint, a Hugging Face export (``export=true``) or an ONNX export, each as the model, its tokenizer, task,
labels and reading settings (:class:`PredictSettings`). PyTorch and the model code are imported by the loaders
that need them, not with this module."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from bertlab.data.tokenizer import BertTokenizer, load_tokenizer
from bertlab.inference.layout import reads_windows
from bertlab.inference.onnx_session import is_onnx_folder, load_onnx_folder
from bertlab.inference.settings import PredictSettings
from bertlab.inference.tasks import pools_windows, prediction_task
from bertlab.inference.text import BACKENDS
from bertlab.runtime.config import TaskSpec
from bertlab.runtime.errors import CheckpointError, ConfigError
from bertlab.runtime.fingerprints import check_trusted
from bertlab.runtime.paths import existing_path


def _classifier_windows(settings: PredictSettings, task: TaskSpec, recorded: bool) -> PredictSettings:
    """A classification / regression model pools a long document's windows only when its run or folder says it
    was trained so (``recorded``); otherwise (a run from before windows, a folder without bertlab's long-text
    record, a graph without ``window_doc``) it reads texts cut at the window, as it was trained."""
    if pools_windows(task.family) and not recorded:
        settings.long_text = "truncate"
    return settings


class Loaded(NamedTuple):
    """A Predictor's parts, in the order of its constructor."""

    model: Any  # a TaskModel (PyTorch) or an OnnxSession
    tokenizer: BertTokenizer
    task: TaskSpec
    labels: list[str] | None
    settings: PredictSettings
    source: str


def load(path: str | Path, tokenizer: BertTokenizer | None = None, backend: str = "auto") -> Loaded:
    """What ``path`` holds, by its kind: an ONNX export (unless ``backend`` is torch), an exported Hugging Face
    folder, or a run dir / ``.ckpt`` file (``backend``: :data:`~bertlab.inference.text.BACKENDS`)."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    path = existing_path(path, "the model to predict with", CheckpointError)
    is_run = path.is_dir() and ((path / "checkpoints").is_dir() or (path / "metrics.json").is_file())
    onnx = is_onnx_folder(path)
    if backend.startswith("onnx") and not onnx:
        raise ConfigError(f"--backend {backend}: {path} is not an ONNX export (python -m bertlab.export RUN OUT "
                          "--format onnx writes one)")
    if onnx and backend != "torch":
        return from_onnx_folder(path, tokenizer, backend)
    if onnx and not is_run:
        raise ConfigError(onnx_with_torch_message(path))
    if path.is_dir() and (path / "config.json").is_file() and not is_run:
        return from_hf_folder(path, tokenizer)
    if (path.is_file() and path.suffix == ".ckpt") or is_run:
        return from_checkpoint(path, tokenizer)
    raise CheckpointError(
        f"{path}: not a bertlab run dir (with checkpoints/), a .ckpt file or an exported Hugging Face "
        "folder (with config.json): pass one of those to predict with"
    )


def onnx_with_torch_message(path: Path) -> str:
    """What ``--backend torch`` on an ONNX export is told: what the folder is, and what runs it."""
    import json

    from bertlab.inference.onnx_session import INFO_NAME

    try:
        source = json.loads((path / INFO_NAME).read_text()).get("source")
    except (OSError, ValueError):
        source = None
    origin = f" (exported from {source})" if source else ""
    return (f"--backend torch: {path} is an ONNX export{origin}, a graph that onnxruntime runs, not a PyTorch "
            f"model. Predict with it as it is: python -m bertlab.predict {path} ... --backend onnx (or leave "
            "--backend out: auto picks the folder's graph; onnx-int8 for its int8 graph). For PyTorch, pass the run "
            "dir or .ckpt it was exported from" + (f" ({source})" if source else "") + ", or a Hugging Face "
            "export of that run (python -m bertlab.export RUN OUT)")


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
    else:
        tok_dir = None
    # The tokenizer (and the run's tokenizer/ files) must be the ones the checkpoint was trained with.
    check_trusted(ckpt, tokenizer, recorded=loaded.tokenizer_fingerprint, folder=tok_dir, run_id=loaded.run_id)
    data = (loaded.hparams.get("config") or {}).get("data") or {}
    settings = _classifier_windows(PredictSettings.from_data(data), loaded.task, reads_windows(loaded.task, data))
    return Loaded(loaded.model, tokenizer, loaded.task, loaded.labels, settings, str(ckpt))


def from_hf_folder(path: Path, tokenizer: BertTokenizer | None) -> Loaded:
    """An export: a stock ``BertFor*`` head, or ``BertModel`` + bertlab's own head file, read as its run read
    text (the export's long-text record; a folder without one truncates at min(512, the position table))."""
    from bertlab.inference.export import load_native_export

    tokenizer = _trusted_tokenizer(path, tokenizer)
    model, task, labels, config = load_native_export(path)
    if model is None:
        return from_generic_export(path, tokenizer)
    kind = prediction_task(task.family)  # a family without prediction is refused by the Predictor
    window = min(kind.default_window if kind else 512, config.max_sequence_length)
    return Loaded(model, tokenizer, task, labels, _export_settings(path, task, window), str(path))


def from_onnx_folder(path: Path, tokenizer: BertTokenizer | None, backend: str) -> Loaded:
    """An ONNX export (:mod:`bertlab.inference.onnx_session`): no torch is imported."""
    tokenizer = _trusted_tokenizer(path, tokenizer)
    model, task, labels, data = load_onnx_folder(path, backend)
    # A classifier's graph pools windows when it takes window_doc (exported from a windows run).
    settings = _classifier_windows(PredictSettings.from_data(data), task, model.reads_windows)
    return Loaded(model, tokenizer, task, labels, settings, str(model.path))


def from_generic_export(path: Path, tokenizer: BertTokenizer | None) -> Loaded:
    """An export of the generic path: the AutoModel folder transformers saved + bertlab's head file."""
    from bertlab.inference.export import load_generic_export

    tokenizer = _trusted_tokenizer(path, tokenizer)
    model, task, labels = load_generic_export(path)
    window = min(512, model.bert.config.max_sequence_length)
    return Loaded(model, tokenizer, task, labels, _export_settings(path, task, window), str(path))


def _trusted_tokenizer(path: Path, tokenizer: BertTokenizer | None) -> BertTokenizer:
    """An export folder's tokenizer (or the one given), once the folder's files and that tokenizer are checked
    against the fingerprints the export recorded, before its weights are read."""
    tokenizer = tokenizer or load_tokenizer(path)
    check_trusted(path, tokenizer, folder=path)
    return tokenizer


def _export_settings(path: Path, task: TaskSpec, max_seq_length: int) -> PredictSettings:
    """An export folder's reading settings: ``max_seq_length`` (what its position table allows), replaced by
    the window its long-text record gives (a classifier trained on windows), else a classifier truncates."""
    from bertlab.inference.export import long_text_settings

    settings = PredictSettings(max_seq_length=max_seq_length, max_query_length=64, pair=None)
    recorded = long_text_settings(path)
    for key, value in recorded.items():
        setattr(settings, key, value)
    return _classifier_windows(settings, task, bool(recorded))
