"""The fp32 check of an ONNX export: the graph against the run's PyTorch model at the family's hard lengths.

A traced graph is the computation of one example batch; whatever that batch decided in Python (a window it was
shorter than, a cached index of its length, the absence of padding) is a constant of the graph. The dev set
may never reach the lengths where such a constant is wrong (a dev set of short sentences, a window longer than
them), so every export is run, before anything else is written, on inputs built to cross every boundary of the
encoder (:func:`hard_lengths`): one token, the traced example's length and its neighbours, each local window,
relative-position bucket and table size of the config (one below, at, one above, twice plus three), and the run's
longest input; each length as a batch of one and as a padded batch of two (a pair where the family reads
segments); for a classifier that pools long documents, documents of several full windows. Any output beyond
:data:`FP32_TOLERANCE` of PyTorch fails the export (:class:`GraphMismatchError`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from bertlab.inference.tasks import PREDICTION_TASKS
from bertlab.runtime.errors import CheckpointError

# The largest |Δ| allowed between the fp32 graph's outputs (logits, span logits, choice scores) and PyTorch's.
# Float32 rounding of the same function in another kernel order stays near 1e-6 on a trained model's logits.
FP32_TOLERANCE = 1e-4
# The length of the example batch the graph is traced with (its own boundary: a constant of the trace shows there).
TRACE_LENGTH = 8
# Config fields that are lengths an encoder computes differently below and above: local attention windows
# (ModernBERT's local_attention and its per-side window; sliding_window / attention_window of other encoders),
# relative-position buckets (DeBERTa: exact below half of position_buckets, log-spaced beyond) and relative
# tables. A generic (transformers) encoder's config.json is read for the same names.
LENGTH_FIELDS = ("window", "local_attention", "sliding_window", "attention_window", "position_buckets",
                 "max_relative_positions", "relative_attention_num_buckets", "relative_attention_max_distance")


class GraphMismatchError(CheckpointError):
    """The fp32 graph does not compute what the run computes; the message says where and how far."""


def length_boundaries(config: Any) -> list[int]:
    """Every length field of an encoder config (:data:`LENGTH_FIELDS`) and half of it, positive ones only."""
    values: list[int] = []
    sources = [config, getattr(config, "hf_config", None) or {}]
    for name in LENGTH_FIELDS:
        for source in sources:
            value = source.get(name) if isinstance(source, dict) else getattr(source, name, None)
            for v in value if isinstance(value, list | tuple) else [value]:
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    values += [v, v // 2]
    return sorted({v for v in values if v > 0})


def hard_lengths(config: Any, max_len: int) -> list[int]:
    """The lengths the check runs (module docstring), each within 1..``max_len``, ``max_len`` included."""
    lengths = {1, 2, max_len}
    for b in [TRACE_LENGTH, *length_boundaries(config)]:
        lengths |= {b - 1, b, b + 1, 2 * b + 3}
    return sorted(n for n in lengths if 1 <= n <= max_len)


def _ids(rows: int, length: int, real: list[int], vocab: int, pad: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Random ids (never the pad id) with ``real[i]`` real tokens in row i, padded with the pad id after."""
    low = min(5, vocab - 1)
    ids = torch.randint(low, vocab, (rows, length), generator=g)
    ids[ids == pad] = low if low != pad else low + 1
    mask = (torch.arange(length)[None, :] < torch.tensor(real)[:, None]).long()
    ids[mask == 0] = pad
    return {"input_ids": ids, "attention_mask": mask}


def check_batches(model: nn.Module, family: str, max_len: int, segments: bool, windows: bool,
                  seed: int = 0) -> Iterator[tuple[str, dict[str, torch.Tensor], dict[str, Any]]]:
    """(what the case is, the batch, the head's keyword arguments) for every case of the check."""
    config = model.bert.config
    vocab, pad = int(config.vocab_size), int(getattr(config, "pad_token_id", 0) or 0)
    g = torch.Generator().manual_seed(seed)
    choices = 2 if PREDICTION_TASKS[family].output == "choices" else 1

    def batch(length: int, real: list[int]) -> dict[str, torch.Tensor]:
        rows = [n for n in real for _ in range(choices)]  # each example's choices share its length
        b = _ids(len(rows), length, rows, vocab, pad, g)
        if segments:  # a pair: the second half of each row's real tokens is segment 1
            half = torch.tensor(rows)[:, None] // 2
            b["token_type_ids"] = ((torch.arange(length)[None, :] >= half) & b["attention_mask"].bool()).long()
        if choices > 1:
            b = {k: v.view(len(real), choices, length) for k, v in b.items()}
        return b

    kwargs = {"num_choices": choices} if choices > 1 else {}
    for length in hard_lengths(config, max_len):
        yield f"{length} tokens, a batch of one", batch(length, [length]), kwargs
        if length > 1:
            yield f"{length} tokens, padded beside {length // 2}", batch(length, [length, length // 2]), kwargs
    if windows:  # long documents: three full windows and a short last one, a document of one window, two of two
        real = [max_len] * 3 + [max(1, max_len // 3), max(1, max_len // 2), max_len, max(1, max_len - 1)]
        docs = torch.tensor([0, 0, 0, 0, 1, 2, 2])
        yield (f"documents of 4, 1 and 2 windows of up to {max_len} tokens", batch(max_len, real),
               {"window_doc": docs})


def _real(out: torch.Tensor, batch: dict[str, torch.Tensor], family: str) -> torch.Tensor:
    """The outputs that mean something: a token or span head's at real positions (padding is free to differ)."""
    if PREDICTION_TASKS[family].per_token:
        return out[batch["attention_mask"].bool()]
    return out


def check_graph(reference: nn.Module, graph: nn.Module, family: str, max_len: int, segments: bool,
                windows: bool) -> dict[str, Any]:
    """Run ``reference`` (the run's PyTorch model) and ``graph`` (the export, called as a model) on every case;
    the report: the lengths, the largest |Δ| and its case, the tolerance and whether the graph passed."""
    worst, worst_case, cases = 0.0, None, 0
    with torch.inference_mode():
        for case, batch, kwargs in check_batches(reference, family, max_len, segments, windows):
            want = reference(dict(batch), **kwargs).float()
            try:
                got = graph(dict(batch), **kwargs).float()
            except Exception as err:  # noqa: BLE001  (a graph that cannot run a shape fails the check with it)
                got, case = None, f"{case}: the graph failed, {str(err).strip().splitlines()[0][:300]}"
            if got is None or want.shape != got.shape:
                diff = float("inf")
            else:
                diff = float((_real(want, batch, family) - _real(got, batch, family)).abs().max())
            cases += 1
            if not diff <= worst:  # NaN counts as the worst
                worst, worst_case = diff, case
    return {"lengths": hard_lengths(reference.bert.config, max_len), "cases": cases, "max_abs_diff": worst,
            "worst_case": worst_case, "tolerance": FP32_TOLERANCE, "passed": worst <= FP32_TOLERANCE}


def mismatch_message(where: str, diff: float, case: str | None, model_type: str | None, family: str) -> str:
    return (f"the exported fp32 ONNX graph does not compute what the run computes: its outputs differ from "
            f"PyTorch's by up to {diff:.2e} (the limit is {FP32_TOLERANCE:g}) {where}"
            f"{f' ({case})' if case else ''}, for a {model_type or 'bert'} {family} model. The export was "
            "discarded (no model.onnx and no bertlab_onnx.json are left; export_report.json says what was "
            "measured). Nothing in your run is wrong: this is a bug of bertlab's ONNX export (or, on the generic "
            "transformers path, a model whose code does not trace to a graph); report it with export_report.json, "
            "and serve the run itself (python -m bertlab.predict RUN) or its Hugging Face export "
            "(python -m bertlab.export RUN OUT) meanwhile")


__all__ = ["FP32_TOLERANCE", "GraphMismatchError", "check_batches", "check_graph", "hard_lengths",
           "length_boundaries", "mismatch_message"]
