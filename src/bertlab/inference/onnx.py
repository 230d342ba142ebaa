"""ONNX export, int8 quantization and the quality gate that proves them on the run's own dev set.

``python -m bertlab.export RUN OUT --format onnx [--quantize int8]`` writes:

- ``model.onnx``: the trained model (encoder + head, LoRA merged in) as one graph with dynamic batch and sequence
  axes (and choices, for multiple choice), inputs ``input_ids``, ``attention_mask`` (+ ``token_type_ids`` where
  the family has segments; + an optional ``window_doc``, each row's document, for classification and regression
  trained with ``data.long_text=windows``: :func:`export_graph`), outputs ``logits`` (``start_logits`` /
  ``end_logits`` for QA; ``embedding`` for an embedding model: the pooled vector, L2-normalised where the run
  normalises), the padded path;
- ``model.int8.onnx`` with ``--quantize int8``: every weight MatMul in int8, weights with one scale per output
  channel, activations with one scale per row (token), so a text's output is the same alone or in any batch and
  the graph runs batched in the gate and in prediction alike (:mod:`bertlab.inference.onnx_int8`; the embedding
  tables and a 2-D classifier's Gemm stay fp32);
- the run's tokenizer files and ``bertlab_onnx.json`` (task, labels, the run's reading settings), so that
  ``bertlab.predict`` / ``Predictor`` predict from the folder as from the run;
- ``export_report.json``, the quality gate: fp32 ONNX against PyTorch at the family's hard shapes
  (:mod:`bertlab.inference.onnx_check`) and over the dev set (max |Δlogit|), int8 against fp32 (argmax
  agreement, the task metric of both, the drop in points, size and speed ratios; the gate's metric by kind of
  model: :func:`gate_metric`). The export fails when the fp32
  graph differs from PyTorch beyond ``FP32_TOLERANCE`` in either (always: into a new or empty folder it then
  writes only the report; an earlier export stays), and when int8 loses more than ``max_drop`` points of the
  task metric, unless forced; the int8 file is then left out, so that no one serves it by mistake.
  ``bertlab_onnx.json`` lists ``model.int8.onnx`` only with the record of its passed (or forced) check and the
  graph's SHA-256 (``int8_check``); predict serves no int8 graph without it. A check that cannot run ends the
  export with nothing written;
- ``bertlab_export.json``, written last: the folder is a complete export (the whole folder is written beside
  ``OUT`` and replaces it once complete, so no file of an earlier export survives).

``onnx`` and ``onnxruntime`` are the optional extra ``pip install bertlab[onnx]``.
"""

from __future__ import annotations

import copy
import json
import logging
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from bertlab.inference.layout import reads_windows
from bertlab.inference.onnx_check import FP32_TOLERANCE, GraphMismatchError, check_graph, mismatch_message
from bertlab.inference.onnx_int8 import quantize_int8
from bertlab.inference.onnx_session import (  # noqa: F401  (is_onnx_folder, load_onnx_folder: imported from here too)
    INFO_NAME,
    INT8_CHECK,
    INT8_NAME,
    ONNX_NAME,
    OPTIONAL_INPUTS,
    OnnxSession,
    is_onnx_folder,
    load_onnx_folder,
    require_onnx,
    runs_per_input,
)
from bertlab.inference.tasks import ONNX_FAMILIES, PREDICTION_TASKS
from bertlab.models.heads import TaskModel
from bertlab.models.lora import lora_modules, merge_lora
from bertlab.runtime.config import TaskSpec
from bertlab.runtime.errors import CheckpointError, ConfigError

if TYPE_CHECKING:
    from bertlab.training.start import RunStart
from bertlab.runtime.paths import existing_path

log = logging.getLogger(__name__)

REPORT_NAME = "export_report.json"
OPSET = 17


class QualityGateError(CheckpointError):
    """The int8 model scores too far below fp32 on the run's dev set; the message gives both and the way out."""


# ----------------------------------------------------------------------------------------------------------
# The graph


def reads_segments(model: TaskModel) -> bool:
    """Whether the encoder reads token_type_ids (a family with more than one segment row)."""
    config = model.encoder.config
    if getattr(model.encoder, "generic", False):
        return bool(getattr(model.encoder, "_types", False))
    return int(getattr(config, "type_vocab_size", 0) or 0) > 1


def output_names(family: str) -> list[str]:
    return PREDICTION_TASKS[family].output_names


class _Graph(nn.Module):
    """The TaskModel called with positional tensors, as a traced graph takes them (``inputs`` names them)."""

    def __init__(self, model: TaskModel, family: str, inputs: list[str]):
        super().__init__()
        self.model, self.family, self.inputs = model, family, inputs
        self.output = PREDICTION_TASKS[family].output

    def forward(self, *tensors: torch.Tensor):
        batch = dict(zip(self.inputs, tensors))
        input_ids = batch["input_ids"]
        if self.output == "choices":
            return self.model(batch, num_choices=input_ids.shape[1])  # (B, C)
        if "window_doc" in batch:  # rows are windows of documents: (N, C), one row per document
            return self.model(batch, window_doc=row_documents(batch.pop("window_doc"), input_ids.shape[0]))
        out = self.model(batch)
        if self.output == "spans":
            return out[..., 0], out[..., 1]  # (B, T) each
        return out


def row_documents(window_doc: torch.Tensor, rows: int) -> torch.Tensor:
    """The graph's ``window_doc`` input as each row's document: as given, or, empty (its default, what a graph
    fed only the standard inputs gets), every row its own document (``0 … rows-1``: the plain path's logits).
    Traced as a computation on the input's length, so the graph decides per call."""
    every_row = torch.arange(rows, device=window_doc.device)
    return torch.cat((window_doc, every_row[window_doc.shape[0]:]))


def plain_model(model: TaskModel) -> TaskModel:
    """The model with LoRA adapters merged into their base weights (one matmul per projection in the graph)."""
    if lora_modules(model):
        merge_lora(model, inplace=True)
    return model


def export_graph(model: TaskModel, task: TaskSpec, path: Path, opset: int = OPSET, windows: bool = False) -> list[str]:
    """Write ``model`` as an ONNX graph at ``path``; returns its input names.

    ``windows`` (classification and regression of long documents): the rows may be windows, and an optional
    fourth input, ``window_doc`` (rows,) int64, gives each row's document (0..N-1); the head pools each
    document's windows and ``logits`` has one row per document. A graph fed the standard inputs alone (a
    serving stack that knows nothing of bertlab) gets ``window_doc``'s default, an empty tensor, which reads
    every row as a document of its own: the plain path's logits (:func:`optional_input`)."""
    require_onnx()
    if task.family not in ONNX_FAMILIES:
        raise ConfigError(f"ONNX export covers the prediction heads ({', '.join(ONNX_FAMILIES)}), not {task.family}")
    if not hasattr(model.encoder, "static_graph") and not getattr(model.encoder, "generic", False):
        raise ConfigError(f"ONNX export needs a transformer encoder; {type(model.encoder).__name__} has no graph form")
    model = plain_model(model).eval()
    segments = reads_segments(model)
    kind = PREDICTION_TASKS[task.family]
    windows = windows and kind.windows
    choices = kind.output == "choices"
    inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if segments else []) + \
        (["window_doc"] if windows else [])
    shape = (2, 2, 8) if choices else (3 if windows else 2, 8)
    vocab = int(model.encoder.config.vocab_size)
    ids = torch.randint(min(5, vocab - 1), vocab, shape)
    mask = torch.ones_like(ids)
    mask[1, ..., 6:] = 0  # padding in the example batch
    args = (ids, mask) + ((torch.zeros_like(ids),) if segments else ()) + \
        ((torch.tensor([0, 0, 1]),) if windows else ())  # two documents, the first of two windows
    axes = {0: "batch", 1: "choices", 2: "sequence"} if choices else {0: "batch", 1: "sequence"}
    outputs = kind.output_names
    out_axes = {0: "batch", 1: "choices"} if choices else \
        ({0: "documents" if windows else "batch"} if kind.output == "row" else {0: "batch", 1: "sequence"})
    dynamic = {name: axes for name in inputs} | {name: out_axes for name in outputs}
    if windows:  # an axis of its own: empty when left out, one per row when given
        dynamic["window_doc"] = {0: "window_rows"}
    static_before = getattr(model.encoder, "static_graph", None)
    if static_before is not None:
        model.encoder.static_graph = True
    try:
        with warnings.catch_warnings(), torch.no_grad():
            # The tracer warns about shape checks it records as constants (the position-table bound) and that
            # the TorchScript exporter is the older one: both known, neither changes the graph's values.
            warnings.simplefilter("ignore")
            torch.onnx.export(_Graph(model, task.family, inputs).eval(), args, str(path), dynamo=False,
                              input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                              opset_version=opset, do_constant_folding=True)
    finally:
        if static_before is not None:
            model.encoder.static_graph = static_before
    if windows:
        optional_input(path, "window_doc")
    return inputs


def optional_input(path: Path, name: str) -> None:
    """Make the graph input ``name`` optional: an initializer of the same name, an empty int64 tensor, is its
    default (ONNX's rule for an input that is also an initializer; onnxruntime then lists it among the
    overridable initializers, not the required inputs, and uses a value fed under that name)."""
    onnx, _ = require_onnx()
    from onnx import numpy_helper

    model = onnx.load(str(path))
    model.graph.initializer.append(numpy_helper.from_array(np.zeros(0, dtype=np.int64), name))
    onnx.save(model, str(path))


class OnnxTaskModel(nn.Module):
    """An exported graph (:class:`OnnxSession`) called as a ``TaskModel`` is, for the gate: a batch dict of torch
    tensors in, a torch tensor out. CPU only; ``threads`` sets onnxruntime's intra-op pool."""

    def __init__(self, path: Path, family: str, threads: int | None = None):
        super().__init__()
        self.graph = OnnxSession(path, family, threads)

    def forward(self, batch: dict[str, torch.Tensor], num_choices: int | None = None,
                window_doc: torch.Tensor | None = None) -> torch.Tensor:
        arrays = {k: v.detach().cpu().numpy() for k, v in batch.items()
                  if k in self.graph.inputs and isinstance(v, torch.Tensor)}
        if window_doc is not None:
            arrays["window_doc"] = window_doc.detach().cpu().numpy()
        return torch.from_numpy(self.graph(arrays))


# ----------------------------------------------------------------------------------------------------------
# The gate: every model scored on the run's dev set, as training scores it


def dev_evaluator(loaded) -> Any:
    """A function that scores a model on the run's validation split exactly as training did (the task
    family's eval step and scores over the same features), returning (scores, outputs, seconds)."""
    from bertlab.data.datamodule import TaskDataModule
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.runtime.config import DataConfig
    from bertlab.runtime.fingerprints import check_trusted
    from bertlab.runtime.overrides import build_typed
    from bertlab.tasks.base import EvalState
    from bertlab.tasks.families import build_family

    config = loaded.hparams.get("config") or {}
    if not config.get("data"):
        raise CheckpointError(f"{loaded.path}: the checkpoint does not record its run's data settings")
    data_cfg = build_typed(DataConfig, dict(config["data"]), "data")
    if not data_cfg.val_file:
        raise ConfigError(f"{loaded.path}: the run has no validation file to check the export on (data.val_file)")
    tok_dir = loaded.path.parent.parent / "tokenizer"
    tokenizer = load_tokenizer(tok_dir)
    check_trusted(loaded.path, tokenizer, recorded=loaded.tokenizer_fingerprint, folder=tok_dir, run_id=loaded.run_id)
    datamodule = TaskDataModule(loaded.task, data_cfg, tokenizer, seed=int(config.get("seed", 0)))
    datamodule.setup("validate")
    family = build_family(loaded.task, datamodule.num_labels, datamodule.labels, data_cfg)
    split = datamodule.splits["val"]
    batches = list(datamodule.val_dataloader())

    def evaluate(model: nn.Module) -> tuple[dict[str, float], list[torch.Tensor], float]:
        state, outputs, seconds = EvalState(), [], 0.0
        with torch.inference_mode():
            if batches:  # one untimed batch first: every side is timed warm (allocator, thread pool, caches)
                model(batches[0], **family.head_kwargs(batches[0]))
            for batch in batches:
                started = time.perf_counter()
                out = model(batch, **family.head_kwargs(batch))
                seconds += time.perf_counter() - started
                family.eval_step(out, batch, state)
                outputs.append(out.float())
        index = torch.cat(state.index).numpy() if state.index else np.zeros(0, dtype=np.int64)
        loss = state.loss_sum / state.loss_count if state.loss_count else float("nan")
        scores = family.evaluate(index, state.outputs, split, loss, state.extra).scores
        scores.setdefault("num_examples", len(index))
        return scores, outputs, seconds

    return evaluate, batches


def _agreement(a: list[torch.Tensor], b: list[torch.Tensor], batches, family: str) -> float | None:
    """The share of predictions (argmax over classes, tags, span ends or choices) on which two models agree."""
    kind = PREDICTION_TASKS[family]
    output = kind.output
    if kind.vector or (a and a[0].shape[-1] == 1 and output == "row"):
        return None  # regression, vectors: no argmax (vectors compare by :func:`_min_cosine`)
    same = total = 0
    for x, y, batch in zip(a, b, batches):
        if output in ("tokens", "spans"):
            keep = batch["attention_mask"].bool()  # real positions only
            eq = (x.argmax(-1) == y.argmax(-1))[keep] if output == "tokens" else \
                (x.argmax(1) == y.argmax(1)).reshape(-1)  # QA: the start and the end position of each window
        else:
            eq = x.argmax(-1) == y.argmax(-1)
        same += int(eq.sum())
        total += eq.numel()
    return round(same / total, 6) if total else None


def _min_cosine(a: list[torch.Tensor], b: list[torch.Tensor]) -> float | None:
    """Embeddings: the lowest cosine similarity between two models' vectors of the same text."""
    cos = [torch.nn.functional.cosine_similarity(x.float(), y.float(), dim=-1) for x, y in zip(a, b) if x.numel()]
    return round(float(torch.cat(cos).min()), 6) if cos else None


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor], batches, family: str) -> float:
    worst = 0.0
    per_token = PREDICTION_TASKS[family].per_token
    for x, y, batch in zip(a, b, batches):
        d = (x - y).abs()
        if per_token:
            d = d[batch["attention_mask"].bool()]
        worst = max(worst, float(d.max()) if d.numel() else 0.0)
    return worst


def gate_metric(task: TaskSpec, scores: dict[str, Any]) -> tuple[str, str]:
    """The metric the int8 gate compares, and its mode, by kind of model: the run's monitored metric
    (``task.monitor``), unless the family's table entry names its gate metrics (``gate_metrics``: the first the
    dev scores hold, mode max). An embedding model is gated on what it is served for whatever it monitors (its
    ``val/loss``, say): retrieval nDCG@10 over the run's validation retrieval set, or, where the validation file
    is a scored similarity set (STS-B), the Spearman correlation of the cosine similarity."""
    names = PREDICTION_TASKS[task.family].gate_metrics
    for name in names:
        if name in scores:
            return name, "max"
    return task.monitor.split("/", 1)[-1], task.mode


def metric_points(task: TaskSpec, fp32: float, int8: float, mode: str | None = None) -> float:
    """How many points int8 loses against fp32 on the gate's metric (SQuAD's EM/F1 are already on a 0-100 scale,
    the other metrics on 0-1); negative when int8 is better. ``mode``: the metric's (default the task's)."""
    scale = PREDICTION_TASKS[task.family].metric_scale
    drop = (fp32 - int8) if (mode or task.mode) == "max" else (int8 - fp32)
    return round(drop * scale, 4)


def _size_mb(path: Path) -> float:
    return round(path.stat().st_size / 2**20, 2)


def export_onnx(ckpt_path: str | Path, out_dir: str | Path, quantize: str | None = None, max_drop: float = 1.0,
                force: bool = False, check_dev: bool = True, tokenizer_dir: str | Path | None = None,
                overwrite: bool = False, run_dir: Path | None = None, start: RunStart | None = None) -> dict[str, Any]:
    """Export a bertlab checkpoint (or run dir) to ``out_dir`` as ONNX (module docstring); returns the report.
    ``start``: the writing run's start, already resolved (``export=onnx``), for a LoRA checkpoint's base.
    ``out_dir`` must be new or empty unless ``overwrite``, and never inside the run but ``<run>/onnx``. The
    folder is written beside ``out_dir`` and replaces it whole once complete (nothing stale survives; a failed
    check or a killed export leaves ``out_dir`` as it was), and ``bertlab_onnx.json`` lists the int8 graph only
    with the record of its passed (or forced) check (``int8_check``: passed or forced, the SHA-256 of the graph
    checked), which predict requires (:func:`bertlab.inference.onnx_session.unchecked_int8`)."""
    from bertlab.inference.export import (
        TOKENIZER_FILES,
        check_export_folder,
        load_checkpoint_model,
        resolve_checkpoint,
    )
    from bertlab.runtime.files import replaced_folder, writing
    from bertlab.runtime.fingerprints import RECORD_NAME

    require_onnx()
    if quantize not in (None, "int8"):
        raise ConfigError(f"--quantize must be int8 (or left out), got {quantize!r}")
    if quantize and not check_dev and not force:
        raise ConfigError("--quantize int8 with --no-dev-check would ship an int8 graph nobody checked, and predict "
                          "serves int8 first: drop --no-dev-check (the int8 graph is then scored against fp32 on the "
                          "run's dev set), or add --force to ship it unchecked (recorded as forced)")
    ckpt = resolve_checkpoint(ckpt_path)
    out_dir = Path(out_dir)
    tok_dir = existing_path(tokenizer_dir, "--tokenizer", CheckpointError) if tokenizer_dir else ckpt.parent.parent / "tokenizer"
    check_export_folder(out_dir, ckpt, tok_dir, overwrite,
                        [ONNX_NAME, INT8_NAME, INFO_NAME, REPORT_NAME, RECORD_NAME, *TOKENIZER_FILES],
                        run_subdir="onnx", run_dir=run_dir)
    loaded = load_checkpoint_model(ckpt, start)
    fresh = not out_dir.is_dir() or not any(out_dir.iterdir())
    with writing(out_dir, "the ONNX export", "export to a folder on a disk with room"), \
            replaced_folder(out_dir) as tmp:
        report, error = _write_onnx(loaded, ckpt, tmp, tok_dir, quantize, max_drop, force, check_dev)
        if isinstance(error, GraphMismatchError) and not fresh:
            raise error  # a graph that is a bug of the export: an earlier export in out_dir stays as it was
    if error is not None:  # in place: the fp32 export without int8, or (a new folder) the report alone
        raise type(error)(str(error).replace("{out_dir}", str(out_dir)))
    return report


def _write_onnx(loaded, ckpt: Path, out_dir: Path, tok_dir: Path, quantize: str | None, max_drop: float,
                force: bool, check_dev: bool) -> tuple[dict[str, Any], Exception | None]:
    """The ONNX export into ``out_dir`` (a new folder); returns the report and the error to raise once the folder
    is in place, if any: the int8 graph failed the gate and was not forced (the fp32 export stands), or the fp32
    graph failed its check (the folder then holds only the report: :func:`_discard`)."""
    from bertlab.inference.export import _copy_tokenizer, seal_export, write_export_marker
    from bertlab.inference.onnx_session import file_sha256

    task = loaded.task
    out_dir.mkdir(parents=True, exist_ok=True)
    _copy_tokenizer(tok_dir, out_dir, loaded)
    # PyTorch as the run evaluates it: a copy, since the graph's model gets its LoRA adapters merged in place.
    reference = copy.deepcopy(loaded.model).eval()
    fp32_path = out_dir / ONNX_NAME
    data = (loaded.hparams.get("config") or {}).get("data") or {}
    windows = reads_windows(task, data)
    inputs = export_graph(loaded.model, task, fp32_path, windows=windows)
    report: dict[str, Any] = {"checkpoint": str(ckpt), "task": task.name, "metric": task.monitor,
                              "sizes_mb": {"pytorch_fp32": round(sum(p.numel() * 4 for p in reference.parameters())
                                                                 / 2**20, 2), "onnx_fp32": _size_mb(fp32_path)}}
    # The fp32 check, before anything else is written: the graph at the family's hard lengths (onnx_check).
    model_type = getattr(reference.encoder.config, "model_type", None)
    max_len = min(int(data.get("max_seq_length") or 512), int(reference.encoder.config.max_sequence_length))
    check = report["onnx_fp32_check"] = check_graph(
        reference, OnnxTaskModel(fp32_path, task.family), task.family, max_len, "token_type_ids" in inputs, windows)
    if not check["passed"]:
        _discard(out_dir, report)
        return report, GraphMismatchError(mismatch_message(
            f"on inputs of {check['lengths']} tokens", check["max_abs_diff"], check["worst_case"], model_type,
            task.family))
    info = {"format": "bertlab-onnx", "task": asdict(task), "head": asdict(loaded.head), "labels": loaded.labels,
            "data": data, "inputs": inputs, "optional_inputs": [n for n in inputs if n in OPTIONAL_INPUTS],
            "outputs": output_names(task.family), "opset": OPSET, "source": str(ckpt), "model_type": model_type,
            "files": {"fp32": ONNX_NAME}}  # int8 only once its check passed (or was forced), below
    int8_path = out_dir / INT8_NAME
    if quantize == "int8":
        quantize_int8(fp32_path, int8_path)
        report["sizes_mb"]["onnx_int8"] = _size_mb(int8_path)
    if check_dev:  # a check that cannot run raises here: nothing of this export is put in place
        evaluate, batches = dev_evaluator(loaded)
        sides = {"pytorch": reference, "onnx_fp32": OnnxTaskModel(fp32_path, task.family)}
        if quantize == "int8":
            sides["onnx_int8"] = OnnxTaskModel(int8_path, task.family)
        results = {name: evaluate(model) for name, model in sides.items()}
        report["dev"] = {name: {"scores": r[0], "seconds": round(r[2], 3)} for name, r in results.items()}
        torch_out, fp32_out = results["pytorch"][1], results["onnx_fp32"][1]
        dev_diff = _max_diff(torch_out, fp32_out, batches, task.family)
        report["onnx_fp32_vs_pytorch"] = {
            "max_abs_logit_diff": dev_diff,
            "agreement": _agreement(torch_out, fp32_out, batches, task.family),
            **({"min_cosine": _min_cosine(torch_out, fp32_out)} if PREDICTION_TASKS[task.family].vector else {}),
            "speed_ratio": round(results["pytorch"][2] / max(results["onnx_fp32"][2], 1e-9), 3),
            "tolerance": FP32_TOLERANCE, "passed": dev_diff <= FP32_TOLERANCE}
        if not dev_diff <= FP32_TOLERANCE:
            _discard(out_dir, report)
            return report, GraphMismatchError(mismatch_message("on the run's dev set", dev_diff, None, model_type,
                                                               task.family))
        if quantize == "int8":
            fp32_scores, int8_scores = results["onnx_fp32"][0], results["onnx_int8"][0]
            metric, mode = gate_metric(task, fp32_scores)
            drop = metric_points(task, float(fp32_scores[metric]), float(int8_scores[metric]), mode)
            report["onnx_int8_vs_fp32"] = {
                "agreement": _agreement(fp32_out, results["onnx_int8"][1], batches, task.family),
                **({"min_cosine": _min_cosine(fp32_out, results["onnx_int8"][1])}
                   if PREDICTION_TASKS[task.family].vector else {}),
                "metric": metric, "fp32": fp32_scores[metric], "int8": int8_scores[metric], "drop_points": drop,
                "max_drop_points": max_drop, "passed": drop <= max_drop,
                "size_ratio": round(report["sizes_mb"]["onnx_fp32"] / report["sizes_mb"]["onnx_int8"], 3),
                "speed_ratio": round(results["onnx_fp32"][2] / max(results["onnx_int8"][2], 1e-9), 3),
                "speed_ratio_vs_pytorch": round(results["pytorch"][2] / max(results["onnx_int8"][2], 1e-9), 3)}
    gate = report.get("onnx_int8_vs_fp32")
    refused = None
    if quantize == "int8":
        passed = bool(gate and gate["passed"])
        if passed or force:
            if not passed:
                log.warning("int8 %s: kept because forced", f"loses {gate['drop_points']:.2f} points of "
                            f"{gate['metric']} (more than {max_drop:.2f})" if gate else "was not checked")
            info["files"]["int8"] = INT8_NAME
            # per_input: whether the graph runs one input at a time (runs_per_input: a graph with per-tensor
            # activation scales); either way the gate ran it as prediction runs it, so the score it recorded is
            # the score bertlab.predict gives on the same file at any batch size.
            info[INT8_CHECK] = {"passed": passed, "forced": not passed, "sha256": file_sha256(int8_path),
                                "checked_on": "the run's dev set" if gate else None, "report": REPORT_NAME,
                                "per_input": runs_per_input(int8_path),
                                **({k: gate[k] for k in ("metric", "drop_points", "max_drop_points")} if gate else {})}
            report[INT8_CHECK] = {k: v for k, v in info[INT8_CHECK].items() if k != "report"}
        else:
            int8_path.unlink(missing_ok=True)
            refused = QualityGateError(
                f"int8 quantization loses {gate['drop_points']:.2f} points of {gate['metric']} on the run's dev set "
                f"({gate['fp32']:.4f} fp32 → {gate['int8']:.4f} int8; the limit is {max_drop:g}): {INT8_NAME} was "
                f"removed, the fp32 graph and {REPORT_NAME} are in {{out_dir}}. Serve the fp32 graph, raise the limit "
                "with --max-drop, or keep the int8 file anyway with --force")
    (out_dir / REPORT_NAME).write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / INFO_NAME).write_text(json.dumps(info, indent=2) + "\n")  # lists only what passed (or was forced)
    seal_export(out_dir, (INFO_NAME, *info["files"].values()))  # the graphs it serves, as written
    write_export_marker(out_dir, "onnx", ckpt)  # last: the folder is an export once everything else is in it
    return report, refused


def _discard(out_dir: Path, report: dict[str, Any]) -> None:
    """A graph that failed the fp32 check: its files and the folder's bertlab record go (so that nothing reads
    the folder as an export), the report stays to say what was measured."""
    for name in (ONNX_NAME, INT8_NAME, INFO_NAME):
        (out_dir / name).unlink(missing_ok=True)
    (out_dir / REPORT_NAME).write_text(json.dumps(report, indent=2) + "\n")


# train.py's ``export`` setting: what each value writes (``true`` is "hf", as before ONNX existed).
EXPORT_FORMATS = {None: None, False: None, True: "hf", "hf": "hf", "onnx": "onnx"}


def export_format(export: Any, quantize: Any = None) -> str | None:
    """train.py's ``export`` as None, "hf" or "onnx". Each value's own kind is the schema's check
    (``runtime/schema.py``); this one is what the two settings mean together: int8 quantizes an ONNX export."""
    known = isinstance(export, bool | str | None) and export in EXPORT_FORMATS  # 1 is not true here
    if not known or quantize not in (None, "int8"):
        raise ConfigError(f"export must be false, true (= hf), hf or onnx and export_quantize null or int8, got "
                          f"export={export!r} export_quantize={quantize!r}")
    if quantize is not None and EXPORT_FORMATS[export] != "onnx":
        raise ConfigError(f"export_quantize={quantize} quantizes an ONNX export: add export=onnx")
    return EXPORT_FORMATS[export]


def gate_line(report: dict[str, Any]) -> str:
    """The gate in one paragraph, as the command line prints it."""
    fp32 = []
    if "onnx_fp32_vs_pytorch" in report:
        fp32.append(f"max |Δlogit| {report['onnx_fp32_vs_pytorch']['max_abs_logit_diff']:.2e} on the dev set")
    check = report.get("onnx_fp32_check")
    if check:
        fp32.append(f"{'' if fp32 else 'max |Δ| '}{check['max_abs_diff']:.2e} at {check['cases']} hard shapes "
                    f"(up to {max(check['lengths'])} tokens)")
    parts = [f"ONNX fp32 vs PyTorch: {', '.join(fp32)}"] if fp32 else []
    gate = report.get("onnx_int8_vs_fp32")
    if gate:
        alike = f"lowest cosine to fp32 {gate['min_cosine']}" if "min_cosine" in gate else \
            f"agreement {gate['agreement']}"
        parts.append(f"int8 vs fp32 on the dev set: {gate['metric']} {gate['fp32']:.4f} → {gate['int8']:.4f} "
                     f"({gate['drop_points']:+.2f} points lost, limit {gate['max_drop_points']:g}), {alike}, "
                     f"{gate['size_ratio']:.2f}× smaller, {gate['speed_ratio']:.2f}× faster than fp32 ONNX "
                     f"({gate['speed_ratio_vs_pytorch']:.2f}× PyTorch)")
    return "; ".join(parts)


__all__ = ["INFO_NAME", "INT8_NAME", "ONNX_NAME", "REPORT_NAME", "GraphMismatchError", "OnnxTaskModel",
           "QualityGateError",
           "gate_line", "export_graph", "export_onnx", "is_onnx_folder", "load_onnx_folder", "quantize_int8"]
