"""Running an ONNX export (``python -m bertlab.export RUN OUT --format onnx``): its folder read back as a model,
task, labels and reading settings, and its graph run by onnxruntime on numpy arrays.

Nothing here imports torch: ``Predictor`` on an ONNX folder (``--backend onnx`` / ``onnx-int8``) needs
onnxruntime, tokenizers and numpy only, so a prediction process does not pay torch's start-up. Writing the
export, quantizing it and its quality gate are :mod:`bertlab.inference.onnx`.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bertlab.runtime.config import TaskSpec
from bertlab.runtime.errors import CheckpointError, ConfigError
from bertlab.runtime.outputs import ONNX_INFO
from bertlab.runtime.records import read_record, record_object

log = logging.getLogger(__name__)

ONNX_NAME = "model.onnx"
INT8_NAME = "model.int8.onnx"
INFO_NAME = ONNX_INFO
INT8_CHECK = "int8_check"  # the int8 graph's check record in INFO_NAME (inference.onnx writes it)
# Graph inputs with a default (see ``bertlab.inference.onnx.optional_input``): bertlab feeds them, a plain
# onnxruntime session may leave them out.
OPTIONAL_INPUTS = ("window_doc",)


def require_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as err:
        raise ConfigError("ONNX prediction needs onnxruntime: `pip install bertlab[onnx]` (or `pip install "
                          "onnxruntime`)") from err
    return onnxruntime


def require_onnx() -> tuple[Any, Any]:
    """onnx and onnxruntime (the export and the int8 quantizer need both), or a ConfigError saying how to install
    them."""
    try:
        import onnx
        import onnxruntime
    except ImportError as err:
        raise ConfigError("ONNX export and prediction need onnx and onnxruntime: `pip install bertlab[onnx]` "
                          "(or `pip install onnx onnxruntime`)") from err
    return onnx, onnxruntime


def session_options(threads: int | None = None) -> Any:
    """onnxruntime's session options for prediction: ``threads`` intra-op threads (default: ``OMP_NUM_THREADS``,
    the variable that sets PyTorch's pool, so both backends compute on as many cores; unset: onnxruntime's own
    default, the physical cores), one inter-op thread and sequential execution (a BERT graph is a chain: a
    second pool would only compete for the same cores), every graph optimization (fusions included), errors
    logged, not warnings."""
    ort = require_onnxruntime()
    options = ort.SessionOptions()
    threads = threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Errors only: onnxruntime warns on every load that an optional input (window_doc, whose default is an
    # initializer of its name) is not folded as a constant, which is what it is meant to be.
    options.log_severity_level = 3
    return options


class OnnxSession:
    """An exported graph run by onnxruntime on the CPU: a batch of int64 arrays in (``input_ids``,
    ``attention_mask``, ``token_type_ids``, ``window_doc``: the ones the graph takes), the family's logits out as
    float32, shaped as ``TaskModel`` gives them (QA's two outputs stacked into (B, T, 2); one row per document
    for a graph that pools windows)."""

    def __init__(self, path: str | Path, family: str, threads: int | None = None) -> None:
        ort = require_onnxruntime()
        self.path = Path(path)
        self.family = family
        self.session = ort.InferenceSession(str(path), session_options(threads), providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        # Optional inputs (an initializer of the input's name is its default): window_doc of a classifier that
        # pools long documents, fed by bertlab, left out by a plain serving stack.
        defaults = {i.name for i in self.session.get_overridable_initializers()}
        self.optional = [name for name in OPTIONAL_INPUTS if name in defaults]
        self.inputs += self.optional
        self.per_input = runs_per_input(self.path)

    @property
    def reads_windows(self) -> bool:
        """Whether the graph pools long documents' windows (its ``window_doc`` input: each row's document)."""
        return "window_doc" in self.inputs

    def __call__(self, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        feed = {}
        for name in self.inputs:
            value = batch.get(name)
            if value is None and name in self.optional:
                continue  # the graph's default
            # No segments given: zeros; no documents for a graph whose window_doc has no default (exported before
            # it had one): every row its own document.
            if value is None:
                value = np.arange(len(batch["input_ids"])) if name == "window_doc" else \
                    np.zeros_like(batch["input_ids"])
            feed[name] = np.asarray(value, dtype=np.int64)
        return self._per_input(feed) if self.per_input else self._run(feed)

    def _run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        out = self.session.run(None, feed)
        return np.stack(out, -1) if len(out) > 1 else out[0]  # QA's start and end logits: (B, T, 2)

    def _per_input(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """A graph whose activations are quantized per run (:func:`runs_per_input`), run once per input, each
        cut to its own length, so that nothing else of the batch moves its activation scales: a row (one text,
        a QA window, an embedding's text); a choice (multiple choice scores each choice on its own); a
        document's windows together (the graph pools them, so they are one input). The batch's results are then
        put together as one run gives them, per-token outputs at padded positions -1e4 (a masked position: no
        argmax or softmax over positions picks it; every reader crops them away anyway)."""
        mask = feed["attention_mask"]
        if not len(mask):
            return self._run(feed)
        if mask.ndim == 3:  # multiple choice (B, C, T) -> (B, C): each choice one input, a (1, 1, t) run
            b, c, _ = mask.shape
            feed = {k: v.reshape(b * c, 1, -1) for k, v in feed.items()}
            return self._each(feed, [np.asarray([i]) for i in range(b * c)]).reshape(b, c)
        docs = feed.get("window_doc")
        if docs is not None and len(docs):  # long documents: one run per document, its windows together
            units = [np.flatnonzero(docs == d) for d in range(int(docs.max()) + 1)]
        else:
            units = [np.asarray([i]) for i in range(len(mask))]
        return self._each(feed, units)

    def _each(self, feed: dict[str, np.ndarray], units: list[np.ndarray]) -> np.ndarray:
        """One run per unit (the batch rows of one input), its results put back as one batched run gives them."""
        mask = feed["attention_mask"]
        outs = []
        for unit in units:
            part = _cropped(feed, unit, mask[unit])
            if "window_doc" in part:
                part["window_doc"] = np.zeros(len(unit), dtype=np.int64)  # the unit's windows: one document
            outs.append(self._run(part))
        if outs[0].ndim <= 2:  # a row per input: (1, C), (1, D) or a choice's (1, 1) each
            return np.concatenate(outs)
        full = np.full((len(mask), mask.shape[1], *outs[0].shape[2:]), -1e4, dtype=outs[0].dtype)
        for unit, out in zip(units, outs):
            full[unit, :out.shape[1]] = out
        return full


# The op onnxruntime's dynamic quantization puts before every quantized MatMul (fused: DynamicQuantizeMatMul,
# DynamicQuantizeLSTM): it takes ONE activation scale and zero point per tensor per run, from the whole batch.
DYNAMIC_QUANTIZE = b"DynamicQuantize"


def runs_per_input(path: Path) -> bool:
    """Whether the graph at ``path`` quantizes activations with one scale per tensor per run (onnxruntime's
    dynamic int8: the int8 graphs of exports made before bertlab's per-row int8, or a graph quantized elsewhere),
    and is therefore run one input at a time by :class:`OnnxSession`. One batched run would give a text other scores
    next to other texts, or padded further (its scale is the whole batch's), so the dev-set gate, batched as
    the dev loader batches, and ``bertlab.predict``, batched by length, would score the same graph differently.
    Found in the file itself (the op's name, as the graph stores it), so whoever quantized the graph and
    whichever path loads it, it runs the same way. An fp32 graph, and bertlab's int8 graph (one activation scale
    per row: :mod:`bertlab.inference.onnx_int8`), compute each row alone at any batch."""
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(DYNAMIC_QUANTIZE) >= 0


def _cropped(feed: dict[str, np.ndarray], unit: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """The rows ``unit`` of a batch, cut after the last position any of them attends to (``mask``: theirs)."""
    length = int(np.flatnonzero(mask.reshape(-1, mask.shape[-1]).any(0)).max(initial=0)) + 1
    return {k: (v[unit][..., :length] if v.ndim >= 2 else v[unit]) for k, v in feed.items()}


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def unchecked_int8(path: Path, info: dict[str, Any]) -> str | None:
    """Why the folder's int8 graph may not be served (None: it may): not listed, listed without the record of
    a passed (or forced) dev-set check, or not the file that was checked (its SHA-256 differs)."""
    files = info.get("files") or {}
    if "int8" not in files:
        return "no int8 graph in this export (export it with --quantize int8)"
    check = info.get(INT8_CHECK)
    if not isinstance(check, dict) or not (check.get("passed") is True or check.get("forced") is True):
        return (f"{INFO_NAME} lists an int8 graph ({files['int8']}) without the record of a passed dev-set check "
                f"({INT8_CHECK}): an export lists int8 only once its check passed or --force kept it, so this one "
                "was never checked (an export from before the record, a failed check, or a hand edit)")
    graph = path / str(files["int8"])
    if not graph.is_file():
        return f"{INFO_NAME} lists an int8 graph {graph} that is not there"
    if check.get("sha256") != file_sha256(graph):
        return (f"{graph} is not the int8 graph that was checked (its SHA-256 differs from the one {INFO_NAME} "
                "recorded with the check): the file was replaced after the export")
    return None


def load_onnx_folder(path: Path, backend: str = "auto", threads: int | None = None) -> tuple[
        OnnxSession, TaskSpec, list[str] | None, dict[str, Any]]:
    """An ONNX export folder as (session, task, labels, the run's data settings); ``backend``: onnx (fp32),
    onnx-int8, or auto (int8 when the folder has an int8 graph whose check passed or was forced, else fp32).
    An int8 graph without that record (:func:`unchecked_int8`) is never served: auto takes fp32 and says why,
    onnx-int8 is refused."""
    fix = "Export the run again (python -m bertlab.export <run> <folder> --format onnx), or restore the folder"
    info = read_record(path / INFO_NAME, "the ONNX folder's manifest", fix, error=CheckpointError, required=("task",),
                       shape={"task": dict, "files": dict, "labels": (list, type(None)), "data": (dict, type(None))})
    files = info.get("files") or {}
    if not all(isinstance(v, str) for v in files.values()):
        raise CheckpointError(f"{path / INFO_NAME}: key 'files' names a graph by something else than a file name. "
                              f"{fix}")
    name = files.get("fp32", ONNX_NAME)
    if backend in ("onnx-int8", "auto"):
        why = unchecked_int8(path, info)
        if why is None:
            name = files["int8"]
        elif backend == "onnx-int8":
            raise CheckpointError(f"{path}: {why}. Predict with the fp32 graph (--backend onnx), or export again "
                                  "with --quantize int8 to have the int8 graph checked on the run's dev set")
        elif "int8" in files:
            log.warning("%s: %s; predicting with the fp32 graph %s", path, why, name)
    task = record_object(TaskSpec, info, "task", path / INFO_NAME, fix, CheckpointError)
    session = OnnxSession(path / name, task.family, threads)
    if session.per_input and "per_input" not in (info.get(INT8_CHECK) or {}):
        log.warning("%s: its int8 graph was checked in batches (an export from before bertlab ran int8 graphs one "
                    "input at a time), so the dev score it recorded may differ slightly from what is served now; "
                    "export again to have it checked as it is served", path)
    return session, task, info.get("labels"), info.get("data") or {}


def is_onnx_folder(path: Path) -> bool:
    return path.is_dir() and (path / INFO_NAME).is_file()
