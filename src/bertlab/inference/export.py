"""Export a bertlab checkpoint as a Hugging Face folder (``python -m bertlab.export CKPT OUT``, ``export=true``).

The folder holds ``config.json`` (``architectures``, ``id2label`` / ``label2id`` with the labels exactly as in
the data files), ``model.safetensors`` and the run's tokenizer files, so that
``transformers.AutoModelFor<Task>.from_pretrained(OUT)`` and ``AutoTokenizer.from_pretrained(OUT)`` predict
what bertlab predicts. LoRA adapters are merged into the base weights first (``W + B A · alpha / r``).

Heads with no stock transformers class (raw-[CLS] pooling, MLP probes, features from several layers, attention
over a long document's windows) are written as a ``BertModel`` encoder folder plus the head's own tensors in
``bertlab_head.safetensors`` and its settings in ``bertlab_head.json``; the export says so. A classification or
regression export also holds ``bertlab_long_text.json``: how the run read text longer than its window and what a
plain ``transformers`` pipeline does instead (it cuts such text at the window; bertlab pools windows).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bertlab.data.tokenizer import holds_tokenizer, load_tokenizer
from bertlab.inference.layout import (
    HEAD_CONFIG_NAME,
    HEAD_WEIGHTS_NAME,
    LONG_TEXT_NAME,
    TOKENIZER_FILES,
    reads_windows,
)
from bertlab.inference.tasks import pools_windows
from bertlab.models.assemble import assemble, config_from_record
from bertlab.models.families import family_spec
from bertlab.models.families.generic import GENERIC, GenericEncoderConfig
from bertlab.models.heads import TaskModel
from bertlab.models.hf_weights import (
    CONFIG_NAME,
    SAFETENSORS_NAME,
    CheckpointError,
    export_state_dict,
)
from bertlab.models.lora import (
    ADAPTER_PARAMETER_NAMES,
    base_changed_message,
    base_fingerprint,
    inject_lora,
    merge_lora,
)
from bertlab.runtime.config import FreezeConfig, HeadConfig, TaskSpec
from bertlab.runtime.errors import ConfigError
from bertlab.runtime.files import refuse_writing_over, replaced_folder, writing
from bertlab.runtime.fingerprints import FINGERPRINT_KEY, RECORD_NAME, RUN_ID_KEY, check_trusted, write_record
from bertlab.runtime.outputs import (
    EXPORT_MARKER,
    ONNX_INFO,
    is_export_folder,
    refuse_folder_in_bertlab_folders,
)
from bertlab.runtime.paths import existing_path
from bertlab.runtime.records import read_record, record_object
from bertlab.tasks.families import build_family
from bertlab.training.checkpoint_files import read_checkpoint, run_dir_checkpoint

log = logging.getLogger(__name__)



@dataclass
class CheckpointModel:
    """A bertlab checkpoint rebuilt as a plain module (eval mode, CPU) with what described it."""

    model: TaskModel
    hparams: dict[str, Any]
    task: TaskSpec
    head: HeadConfig
    labels: list[str] | None
    path: Path
    tokenizer_fingerprint: str | None = None  # the vocabulary it was trained with (None: an older checkpoint)
    run_id: str | None = None  # the run that wrote it (None: an older checkpoint)


def resolve_checkpoint(path: str | Path) -> Path:
    """A ``.ckpt`` file, or a run dir (→ the best checkpoint its metrics.json names, else ``last.ckpt``)."""
    path = existing_path(path, "the checkpoint or run dir", CheckpointError)
    if path.is_file():
        return path
    found = run_dir_checkpoint(path) if path.is_dir() else None
    if found is None:
        raise CheckpointError(f"{path}: not a checkpoint file or a run dir with checkpoints/")
    return found


def load_checkpoint_model(ckpt_path: str | Path) -> CheckpointModel:
    """Rebuild the ``TaskModel`` of a bertlab checkpoint from its hyper-parameters and load it strictly.

    LoRA adapters (``lora_A`` / ``lora_B`` keys) are re-injected first so the tensors load by name; the
    returned model still carries them (``merge_lora`` folds them in for export).
    """
    path = Path(ckpt_path)
    ckpt = read_checkpoint(path)  # weights_only: a checkpoint from elsewhere cannot run code
    hp = ckpt.get("hyper_parameters") or {}
    missing = [k for k in ("encoder_config", "task", "head", "head_kind") if k not in hp]
    if missing:
        raise CheckpointError(f"{path}: hyper_parameters lack {missing} (not a bertlab checkpoint?)")
    if hp["encoder_config"].get("encoder", "bert") not in ("bert", GENERIC):
        raise CheckpointError(f"{path}: a {hp['encoder_config']['encoder']} encoder; only transformer encoders have a "
                              "Hugging Face layout to export to")
    state = {k[len("model."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    config = config_from_record(hp["encoder_config"])
    task = TaskSpec(**hp["task"])
    head_cfg = HeadConfig(**hp["head"])
    labels = hp.get("labels")
    num_labels = 1 if task.regression else len(labels or [])
    family = build_family(task, num_labels, labels, data_cfg=None)
    # The pooler exists exactly when the trained model had one (pooler head, or NSP). A slim LoRA checkpoint
    # leaves the frozen pooler out of its tensors, so the hyper-parameters say it.
    model = assemble(config, head_cfg, family.build_head, hp["head_kind"],
                     add_pooling_layer=hp.get("has_pooler", "bert.pooler.dense.weight" in state))
    base = ckpt.get("bertlab_base_weights")
    if base is not None:  # a LoRA checkpoint: frozen base weights come from the referenced checkpoint
        _load_base_weights(model, base, path)
    if any(k.rsplit(".", 1)[-1] in ADAPTER_PARAMETER_NAMES for k in state):
        inject_lora(model.bert, FreezeConfig(**hp["freeze"]).lora)
    recorded = ckpt.get("bertlab_base_fingerprint")
    if base is not None and recorded is not None and recorded != base_fingerprint(model, set(state)):
        raise CheckpointError(f"{path}: {base_changed_message(base)}")
    try:
        if base is not None:
            unknown = set(state) - set(model.state_dict())
            if unknown:
                raise RuntimeError(f"unexpected keys {sorted(unknown)[:5]}")
            model.load_state_dict(state, strict=False)
        else:
            model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"{path}: its tensors do not match the model its hyper-parameters describe: {err}") \
            from err
    model.eval()
    return CheckpointModel(model, hp, task, head_cfg, labels, path, ckpt.get(FINGERPRINT_KEY), ckpt.get(RUN_ID_KEY))


def _load_base_weights(model: TaskModel, base: str, ckpt_path: Path) -> None:
    """The frozen encoder tensors of a LoRA checkpoint, from the base it names: a checkpoint package or hub
    id, a Hugging Face folder, or a bertlab run dir / ``.ckpt`` (itself perhaps a LoRA run: merged first)."""
    from bertlab.models.hf_weights import LoadReport, convert_hf_state_dict, load_into, read_state_dict
    from bertlab.training.build import _init_source, resolve_pretrained

    kind, path = _init_source(base) if Path(str(base)).expanduser().exists() else (None, None)
    if kind == "ckpt":
        inner = load_checkpoint_model(path)
        tensors = {f"bert.{k}": v for k, v in merge_lora(inner.model.bert).items()}
        report = load_into(model, {k: v for k, v in tensors.items() if k in model.state_dict()},
                           LoadReport(source=str(path)))
    else:
        directory = path if kind == "hf" else resolve_pretrained(base)
        if directory is None:
            raise CheckpointError(f"{ckpt_path}: a LoRA checkpoint whose base weights ({base!r}) cannot be found")
        tensors, source = read_state_dict(directory)
        converted, report = convert_hf_state_dict(tensors, None, has_pooler=model.bert.pooler is not None,
                                                  source=source, spec=family_spec(model.bert.config.model_type))
        load_into(model, {k: v for k, v in converted.items() if k.startswith("bert.")}, report)
    log.info("LoRA base weights: %s", report.summary())


def _hf_config(loaded: CheckpointModel, architecture: str) -> dict[str, Any]:
    encoder_config = loaded.model.bert.config
    config = dict(encoder_config.hf_config) if isinstance(encoder_config, GenericEncoderConfig) else \
        family_spec(encoder_config.model_type).write_config(encoder_config)
    config["architectures"] = [architecture]
    if loaded.task.regression:
        config.update(num_labels=1, problem_type="regression")
    elif loaded.labels:
        # Labels exactly as in the data files (SST-2: "0", "1"); JSON object keys are strings, as in HF.
        config["id2label"] = {str(i): label for i, label in enumerate(loaded.labels)}
        config["label2id"] = {label: i for i, label in enumerate(loaded.labels)}
        config["num_labels"] = len(loaded.labels)
    if loaded.head.dropout is not None and loaded.model.head_kind == "sequence":
        config["classifier_dropout"] = loaded.head.dropout
    if loaded.task.rerank:  # sentence_transformers.CrossEncoder.predict returns the raw score, as bertlab's
        config["sentence_transformers"] = {"activation_fn": "torch.nn.modules.linear.Identity"}
    return config


def _copy_tokenizer(tokenizer_dir: Path | None, out_dir: Path, loaded: CheckpointModel) -> list[str]:
    """The one place an export writes its tokenizer files: the run's tokenizer, once it is checked to be the one
    the checkpoint was trained with (an export ships no other model's tokenizer), written as transformers must
    read it to tokenize exactly as bertlab does
    (:meth:`~bertlab.data.tokenizer.EncoderTokenizer.save_for_transformers`): for a model that reads pre-split
    words (token classification) the words' pipeline, each word read with its leading space;
    ``model_input_names`` without ``token_type_ids`` for an encoder without segment embeddings."""
    ckpt_path = loaded.path
    if tokenizer_dir is None or not tokenizer_dir.is_dir():
        raise CheckpointError(
            f"no tokenizer for {ckpt_path}: expected the run's tokenizer folder at {tokenizer_dir} "
            "(train.py saves <run_dir>/tokenizer/); pass --tokenizer DIR"
        )
    if not any((tokenizer_dir / name).is_file() for name in TOKENIZER_FILES) and not holds_tokenizer(tokenizer_dir):
        raise CheckpointError(f"{tokenizer_dir} holds none of {list(TOKENIZER_FILES)}")
    tokenizer = load_tokenizer(tokenizer_dir)
    check_trusted(ckpt_path, tokenizer, recorded=loaded.tokenizer_fingerprint, folder=tokenizer_dir,
                  run_id=loaded.run_id)
    tokenizer.save_for_transformers(out_dir, words=loaded.task.family == "token",
                                    token_types=takes_token_types(loaded.model.bert.config))
    return [name for name in TOKENIZER_FILES if (out_dir / name).is_file()]


def takes_token_types(config: Any) -> bool:
    """Whether an encoder has segment embeddings to choose among (two rows or more: its transformers class then
    reads ``token_type_ids``). One row (RoBERTa's) is read for every token whatever the ids say in bertlab, so the
    export's tokenizer leaves them out as RoBERTa's tokenizers do: a pair template's 1s (a WordPiece vocabulary
    beside a RoBERTa-shaped model) would index past that row in transformers."""
    hf = getattr(config, "hf_config", None)  # the generic path: the checkpoint's own config.json
    size = hf.get("type_vocab_size") if isinstance(hf, dict) else getattr(config, "type_vocab_size", 0)
    return int(size or 0) > 1


# Every name an export writes (HF and ONNX; the ONNX names repeated from inference.onnx_session, which this
# module does not import): a folder holding only these (or what its bertlab_export.json lists) is an export.
ONNX_FILES = ("model.onnx", "model.int8.onnx", ONNX_INFO, "export_report.json")
EXPORT_FILES = (CONFIG_NAME, SAFETENSORS_NAME, HEAD_CONFIG_NAME, HEAD_WEIGHTS_NAME, LONG_TEXT_NAME, *TOKENIZER_FILES,
                *ONNX_FILES, RECORD_NAME, EXPORT_MARKER)


def foreign_files(folder: Path) -> list[str]:
    """The entries of ``folder`` no export wrote: not one of :data:`EXPORT_FILES`, not listed in its
    ``bertlab_export.json``, not named ``bertlab_*`` (bertlab's own records), or a subfolder not listed there
    with every file in it."""
    listed: set[str] = set()
    try:
        listed = set(json.loads((folder / EXPORT_MARKER).read_text()).get("files") or [])
    except (OSError, ValueError, AttributeError, TypeError):
        pass

    def listed_dir(p: Path) -> bool:  # a subfolder the export wrote, with every file in it
        return p.name + "/" in listed and all(
            f.relative_to(folder).as_posix() + ("/" if f.is_dir() else "") in listed for f in p.rglob("*"))

    return sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()
                  if not (p.is_file() and (p.name in EXPORT_FILES or p.name in listed or p.name.startswith("bertlab_"))
                          or p.is_dir() and not p.is_symlink() and listed_dir(p)))


def check_export_folder(out_dir: Path, ckpt_path: Path, tok_dir: Path, overwrite: bool,
                        written: list[str] | None = None, run_subdir: str = "export",
                        run_dir: Path | None = None) -> None:
    """An export writes a folder of its own, whole (:func:`bertlab.runtime.files.replaced_folder`): never inside a
    run or an export folder (except ``<run>/<run_subdir>`` of the run it exports, what ``export=true`` /
    ``export=onnx`` writes), never over the files it reads, and over a folder that is not empty only when asked
    to (``overwrite``: ``--overwrite``) and only when that folder is an export (:func:`foreign_files`: nothing
    else in it), which it then replaces whole. ``written``: the file names it writes; ``run_dir``: the run
    this export belongs to when that is not the checkpoint's (``train=false ckpt_path=<another run's>
    export=true``: its own ``<run_dir>/export``)."""
    run = ckpt_path.parent.parent if ckpt_path.parent.name == "checkpoints" else None
    own = [folder / run_subdir for folder in (run, run_dir) if folder is not None]
    refuse_folder_in_bertlab_folders(
        out_dir, f"the export folder {out_dir}", "Export to a folder outside runs and exports" +
        (f", or to {run / run_subdir} (what export={'true' if run_subdir == 'export' else run_subdir} writes)"
         if run is not None else ""), allow=own, may_be=("export",))
    written = written or [CONFIG_NAME, SAFETENSORS_NAME, HEAD_CONFIG_NAME, HEAD_WEIGHTS_NAME, LONG_TEXT_NAME,
                          RECORD_NAME, *TOKENIZER_FILES]
    for name in written:
        refuse_writing_over(out_dir / name, [(ckpt_path, "the checkpoint"), (tok_dir, "a file of the tokenizer")],
                            f"the export's {out_dir / name}", "Export to another folder")
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} is a file, not a folder: give the export a folder to write")
    present = sorted(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else []
    if not present:
        return
    shown = ", ".join(present[:4]) + (f", … ({len(present)} in all)" if len(present) > 4 else "")
    foreign = foreign_files(out_dir)
    # An export, or what a failed ONNX export left (its report and the tokenizer files: onnx._discard).
    if foreign or not (is_export_folder(out_dir) or (out_dir / "export_report.json").is_file()):
        what = (f"{', '.join(foreign[:4])}{f', … ({len(foreign)} in all)' if len(foreign) > 4 else ''}, which no "
                "export writes" if foreign else f"{shown}, but no export's record ({EXPORT_MARKER}, {ONNX_INFO}) "
                "and no weights beside a config.json")
        raise ConfigError(
            f"{out_dir} is not empty and is not an export: it holds {what}. An export replaces its folder whole, "
            "so it would delete them; --overwrite replaces only an earlier export. Export to a new or empty folder")
    if not overwrite:
        raise ConfigError(
            f"{out_dir} is not empty: it holds an earlier export ({shown}). Export to a new or empty folder, or "
            "pass --overwrite to replace that export whole (none of its files is kept)")


def write_export_marker(folder: Path, kind: str, source: Path) -> None:
    """``bertlab_export.json``, written last: the folder is a complete export of ``source``, holding these files
    (what ``--overwrite`` may replace, and what no other output may write over: runtime.outputs)."""
    # Files by their path in the folder, subfolders as "name/" (a sentence-transformers export's 1_Pooling/).
    files = sorted(p.relative_to(folder).as_posix() + ("/" if p.is_dir() else "") for p in folder.rglob("*")
                   if p.is_file() or p.is_dir()) + [EXPORT_MARKER]
    record = {"format": "bertlab-export", "kind": kind, "source": str(source), "files": files}
    (folder / EXPORT_MARKER).write_text(json.dumps(record, indent=2) + "\n")


def export_checkpoint(ckpt_path: str | Path, out_dir: str | Path, tokenizer_dir: str | Path | None = None,
                      overwrite: bool = False, run_dir: Path | None = None) -> Path:
    """Write ``ckpt_path`` (a bertlab ``.ckpt`` or run dir) to ``out_dir`` as a Hugging Face folder.

    ``tokenizer_dir`` defaults to ``<run_dir>/tokenizer`` with run_dir = the checkpoint's parent's parent.
    ``out_dir`` must be new or empty unless ``overwrite`` (see :func:`check_export_folder`). The export is
    written into a new folder beside ``out_dir`` that replaces it whole once complete: nothing of an earlier
    export survives, and a failed or killed export leaves ``out_dir`` as it was. Returns ``out_dir``.
    """
    ckpt_path = resolve_checkpoint(ckpt_path)
    out_dir = Path(out_dir).expanduser()
    tok_dir = (existing_path(tokenizer_dir, "--tokenizer", CheckpointError) if tokenizer_dir is not None
               else ckpt_path.parent.parent / "tokenizer")
    check_export_folder(out_dir, ckpt_path, tok_dir, overwrite, run_dir=run_dir)  # before the work: refused at once
    loaded = load_checkpoint_model(ckpt_path)
    if loaded.task.family == "rtd":
        raise ConfigError(
            f"{ckpt_path}: a replaced-token-detection pre-training run (task=rtd), whose generator only serves "
            "training and whose discriminator has no transformers class to export to; fine-tune its encoder with "
            f"model.init_from={ckpt_path.parent.parent} (docs/pretraining.md) and export that run")
    with writing(out_dir, "the export folder", "export to a folder on a disk with room"), \
            replaced_folder(out_dir) as tmp:
        _write_export(loaded, ckpt_path, tmp, tok_dir)
        write_export_marker(tmp, "hf", ckpt_path)
        check_export(loaded, tok_dir, tmp, shown=out_dir)  # before the swap: a failing export replaces nothing
    log.info("export: %s → %s", ckpt_path, out_dir)
    return out_dir


def check_export(loaded: CheckpointModel, tok_dir: Path, out_dir: Path, shown: Path | None = None):
    """The gate of every Hugging Face export (``python -m bertlab.export`` and ``export=true`` alike):
    transformers, loading ``out_dir`` the standard way, predicts what the run predicts, or a CheckpointError
    (:mod:`bertlab.inference.hf_check`) naming ``shown`` (the folder the user asked for, when ``out_dir`` is its
    temporary twin). Returns the report (``checked`` False when it could not run)."""
    from bertlab.inference.hf_check import check_transformers_parity

    return check_transformers_parity(loaded, tok_dir, out_dir, shown=shown)


def _write_export(loaded: CheckpointModel, ckpt_path: Path, out_dir: Path, tok_dir: Path) -> None:
    from safetensors.torch import save_file

    model = loaded.model
    state = merge_lora(model)  # plain keys, adapters folded in (a no-op without LoRA)
    head_kind = model.head_kind
    out_dir.mkdir(parents=True, exist_ok=True)
    _copy_tokenizer(tok_dir, out_dir, loaded)

    if getattr(model.bert, "generic", False):
        # The generic path: the AutoModel's own names, as transformers saves the base model.
        architecture = type(model.bert._model[0]).__name__
        tensors = {k[len("bert."):]: v.detach().contiguous().cpu() for k, v in state.items() if k.startswith("bert.")}
    else:
        spec = family_spec(model.bert.config.model_type)
        architecture = spec.architecture(head_kind)
    if head_kind is not None:
        tensors = export_state_dict(state, head_kind, spec)
    else:
        if not getattr(model.bert, "generic", False):
            # No stock class computes this head: the encoder alone as <Family>Model (no prefix, as HF saves it).
            prefix = spec.prefix + "."
            tensors = {k[len(prefix):]: v for k, v in export_state_dict(state, None, spec).items()}
        head_tensors = {k[len("head."):]: v.detach().contiguous().cpu() for k, v in state.items()
                        if k.startswith("head.")}
        save_file(head_tensors, str(out_dir / HEAD_WEIGHTS_NAME), metadata={"format": "pt"})
        head_info = {
            "format": "bertlab-head",
            "head_class": type(model.head).__name__,
            "task": asdict(loaded.task),
            "head": asdict(loaded.head),
            "labels": loaded.labels,
            "encoder_has_pooler": model.bert.pooler is not None,
            "note": f"no transformers class computes this head: load the encoder as {architecture} and apply the "
                    "head tensors as bertlab's heads.py does (or bertlab.export.load_checkpoint_model)",
        }
        (out_dir / HEAD_CONFIG_NAME).write_text(json.dumps(head_info, indent=2) + "\n")
        log.info("export: head %s (pooling=%s, layers=%s, hidden_layers=%d) has no stock transformers class: "
                 "wrote the encoder as %s and the head to %s + %s", type(model.head).__name__,
                 getattr(model.head, "pooling", loaded.head.pooling), loaded.head.layers, loaded.head.hidden_layers,
                 architecture, HEAD_WEIGHTS_NAME, HEAD_CONFIG_NAME)
    save_file(tensors, str(out_dir / SAFETENSORS_NAME), metadata={"format": "pt"})
    (out_dir / CONFIG_NAME).write_text(json.dumps(_hf_config(loaded, architecture), indent=2) + "\n")
    long_text = long_text_record(loaded)
    if long_text is not None:
        (out_dir / LONG_TEXT_NAME).write_text(json.dumps(long_text, indent=2) + "\n")
    head_files = (HEAD_WEIGHTS_NAME, HEAD_CONFIG_NAME) if head_kind is None else ()
    st_files: tuple[str, ...] = ()
    if loaded.task.family == "embedding":  # the encoder folder + sentence-transformers' module files
        from bertlab.inference.sentence_transformers import write_sentence_transformers_modules

        data = (loaded.hparams.get("config") or {}).get("data") or {}
        st_files = write_sentence_transformers_modules(out_dir, model.bert.config.hidden_size, model.head.pooling,
                                                       model.head.normalize, data.get("max_seq_length"))
    # Sealed inside the folder being written (export_checkpoint's temporary one), before it is swapped in; the
    # sentence-transformers files too (their pooling and normalisation change what the folder computes).
    seal_export(out_dir, (CONFIG_NAME, SAFETENSORS_NAME, *head_files, *((LONG_TEXT_NAME,) if long_text else ()),
                          *st_files))
    log.info("export: %s (%s, %d tensors)", ckpt_path, architecture, len(tensors))


def seal_export(out_dir: Path, files: tuple[str, ...]) -> None:
    """The export's fingerprint record (bertlab.runtime.fingerprints), written once its files are: the
    vocabulary of the tokenizer it ships (checked against the checkpoint's) and the digests of the tokenizer's
    files and of ``files``, the ones this export wrote (never a stale file of an earlier export there)."""
    from bertlab.data.tokenizer import load_tokenizer

    write_record(out_dir, load_tokenizer(out_dir), files)


def long_text_record(loaded: CheckpointModel) -> dict[str, Any] | None:
    """What an export of a classification / regression run says about text longer than its window: how the run
    read it (``data.long_text``, the window, the stride, the pooling) and what a plain ``transformers``
    pipeline does instead. None for other tasks."""
    if not pools_windows(loaded.task.family):
        return None
    data = (loaded.hparams.get("config") or {}).get("data") or {}
    mode, window = "windows" if reads_windows(loaded.task, data) else "truncate", data.get("max_seq_length")
    if mode == "windows":
        note = (f"bertlab reads a text longer than {window} tokens (special tokens included) in overlapping windows "
                f"and pools them ({loaded.head.window_pooling} pooling) into one answer per document, as the model was "
                "trained. A plain transformers pipeline or AutoModelForSequenceClassification does not: it cuts the "
                "text at the tokenizer's model_max_length and classifies the start alone, so on longer texts its "
                "answer can differ. Predict with `python -m bertlab.predict <this folder>` (or bertlab.Predictor) "
                "to read long texts whole.")
    else:
        note = (f"The model was trained on texts cut at {window} tokens (data.long_text=truncate); a transformers "
                "pipeline cuts at the tokenizer's model_max_length instead, and bertlab.predict on this folder too.")
    return {"format": "bertlab-long-text", "long_text": mode, "max_seq_length": window,
            "window_stride": data.get("window_stride"), "max_windows_per_batch": data.get("max_windows_per_batch"),
            "window_pooling": loaded.head.window_pooling, "note": note}


EXPORT_FIX = "Export the run again (python -m bertlab.export <run> <folder>), or restore the folder from a copy"


def _long_text_record(path: Path) -> dict[str, Any]:
    file = path / LONG_TEXT_NAME
    if not file.is_file():
        return {}
    return read_record(file, "the export's long-text record", EXPORT_FIX, error=CheckpointError,
                       shape={"long_text": str, "max_seq_length": (int, type(None)), "window_pooling": str,
                              "window_stride": (int, type(None)), "max_windows_per_batch": (int, type(None))})


def _head_record(file: Path) -> tuple[TaskSpec, HeadConfig, list[str] | None, dict[str, Any]]:
    """bertlab's head file of an export (task, head settings, labels), every problem naming the file and key."""
    info = read_record(file, "the export's head file", EXPORT_FIX, error=CheckpointError, required=("task", "head"),
                       shape={"task": dict, "head": dict, "labels": (list, type(None)), "encoder_has_pooler": bool})
    task = record_object(TaskSpec, info, "task", file, EXPORT_FIX, CheckpointError)
    head = record_object(HeadConfig, info, "head", file, EXPORT_FIX, CheckpointError)
    return task, head, info.get("labels"), info


def long_text_settings(path: Path) -> dict[str, Any]:
    """The prediction settings an export's long-text record gives: windows as the run read them (its window,
    stride and batch cap); nothing for a run that truncated or a folder without the record."""
    record = _long_text_record(path)
    if record.get("long_text") != "windows" or not record.get("max_seq_length"):
        return {}
    return {"long_text": "windows", "max_seq_length": int(record["max_seq_length"]),
            "window_stride": record.get("window_stride"), "max_windows_per_batch": record.get("max_windows_per_batch")}


def load_native_export(path: Path) -> tuple[TaskModel | None, TaskSpec | None, list[str] | None, Any]:
    """An export folder of a native family (a stock ``<Family>For*`` head, or ``<Family>Model`` + bertlab's own
    head file) as (model in eval mode, task, labels, encoder config); (None, ...) for a generic-path folder."""
    from safetensors.torch import load_file

    from bertlab.models.assemble import needs_pooler
    from bertlab.models.families import is_native
    from bertlab.models.hf_weights import (
        LoadReport,
        architecture_to_head,
        convert_hf_state_dict,
        load_into,
        read_encoder_config,
        read_hf_config,
        read_state_dict,
    )

    hf = read_hf_config(path)
    if not is_native(hf.get("model_type") or "bert"):
        return None, None, None, None
    config = read_encoder_config(path)
    spec = family_spec(config.model_type)
    architecture = (hf.get("architectures") or [spec.base_architecture])[0]
    custom = path / HEAD_CONFIG_NAME
    if custom.is_file():
        task, head_cfg, labels, info = _head_record(custom)
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
        head_cfg = HeadConfig(pooling="pooler", dropout=hf.get("classifier_dropout"),
                              window_pooling=_long_text_record(path).get("window_pooling", "max"))
        has_pooler = needs_pooler(config, family, head_cfg)
    num_labels = 1 if task.regression or task.family == "multiple_choice" else len(labels or [])
    model = assemble(config, head_cfg, build_family(task, num_labels, labels, None).build_head, head_kind,
                     add_pooling_layer=has_pooler)
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
    return model.eval(), task, labels, config


def load_generic_export(path: Path) -> tuple[TaskModel, TaskSpec, list[str] | None]:
    """An export of the generic path (the AutoModel folder transformers saved + bertlab's head file) as a
    ``TaskModel`` in eval mode, with its task and labels."""
    from safetensors.torch import load_file

    from bertlab.models.assemble import with_head
    from bertlab.models.families.generic import AutoEncoder

    if not (path / HEAD_CONFIG_NAME).is_file():
        raise CheckpointError(f"{path}: a generic-path folder without bertlab's head file ({HEAD_CONFIG_NAME}): "
                              "bertlab predicts with exports of its own runs")
    task, head_cfg, labels, _ = _head_record(path / HEAD_CONFIG_NAME)
    num_labels = 1 if task.regression or task.family == "multiple_choice" else len(labels or [])
    model = with_head(AutoEncoder.from_pretrained(path), head_cfg,
                      build_family(task, num_labels, labels, None).build_head, None)
    head_state = {"head." + k: v for k, v in load_file(str(path / HEAD_WEIGHTS_NAME)).items()}
    missing, unexpected = model.load_state_dict(head_state, strict=False)
    if unexpected or any(k.startswith("head.") for k in missing):
        raise CheckpointError(f"{path}: {HEAD_WEIGHTS_NAME} does not match the head {HEAD_CONFIG_NAME} describes")
    return model.eval(), task, labels


def load_recurrent_checkpoint(path: Path) -> CheckpointModel:
    """A ``model=bilstm|gru|lstm`` checkpoint rebuilt from its hyper-parameters and loaded strictly (bertlab's
    export covers BERT encoders only, as transformers has no recurrent layout)."""
    from dataclasses import fields

    from bertlab.models.recurrent import RecurrentConfig, RecurrentEncoder

    ckpt = read_checkpoint(path)
    hp = ckpt["hyper_parameters"]
    state = {k[len("model."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    names = {f.name for f in fields(RecurrentConfig)}
    values = {k: v for k, v in ((hp.get("config") or {}).get("model") or {}).items() if k in names and v is not None}
    # The vocabulary and embedding sizes are the trained ones (a checkpoint's embeddings may have replaced
    # model.embedding_dim), and the embeddings are in the checkpoint: the BERT checkpoint they came from is
    # not read again.
    vocab_size, embedding_dim = state["bert.embeddings.word_embeddings.weight"].shape
    values.update(vocab_size=int(vocab_size), embedding_dim=int(embedding_dim), init_embeddings_from=None)
    config = RecurrentConfig(**values)
    task, head_cfg, labels = TaskSpec(**hp["task"]), HeadConfig(**hp["head"]), hp.get("labels")
    family = build_family(task, 1 if task.regression else len(labels or []), labels, None)
    encoder = RecurrentEncoder(config)
    head = family.build_head(encoder.config, head_cfg, encoder.embeddings.word_embeddings)
    model = TaskModel(encoder, head, None, output_hidden_states=head_cfg.reads_all_layers)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"{path}: its tensors do not match the model its hyper-parameters describe: {err}") \
            from err
    return CheckpointModel(model.eval(), hp, task, head_cfg, labels, path, ckpt.get(FINGERPRINT_KEY),
                           ckpt.get(RUN_ID_KEY))
