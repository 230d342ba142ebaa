"""Which implementation choices pay on this CPU: measured on bertlab's encoder (MiniLM-L6), train step and
inference, at the benchmark shapes. Repeats are interleaved across the variants of one study; medians.

- ``mask``: the SDPA attention mask as a boolean (B, 1, 1, T) "may attend" mask, as an additive float mask
  (0 / -inf, the encoder's dtype) or no mask (what bertlab passes when nothing is padded), on an unpadded
  batch so every variant computes the same thing;
- ``host_check``: the cost of ``bool(attention_mask.all())`` (the host sync ``padding_mask`` does to drop
  the mask of unpadded batches) next to a train step;
- ``adamw``: the train step with AdamW's for-loop, foreach and fused kernels;
- ``cpu_dropout``: the encoder's CPU training attention switched piece by piece — one SDPA call with torch's
  dropout (the encoder before), (batch, head) slices (``model.cpu_attention_slice_mb``), bertlab's CPU dropout
  masks (``model.cpu_fast_dropout``, on the attention probabilities and the hidden-state dropouts);
- ``attn_dropout``: the train step with the checkpoint's attention dropout (SDPA's math path on CPU) vs
  attention dropout 0 (its flash kernel) — what ``model.attention_probs_dropout_prob=0`` would buy;
- ``prepack``: inference (prediction's forward) with the encoder's plain ``nn.Linear`` layers against
  :class:`~bertlab.models.kernels.PrepackedLinear` (oneDNN on a weight reordered once), at prediction's batch of
  32 short sentences and at the benchmark shapes;
- ``compile`` (``--compile``): ``torch.compile`` of the encoder — first-call (compile) time and the steady
  train step, against eager.

    python benchmarks/ablations.py [--quick] [--threads 2] [--studies mask,adamw,...] [--compile] [--clock cpu]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, interleaved, median, set_threads, time_once  # noqa: E402
from encoder_speed import FULL_SHAPES, QUICK_SHAPES, checkpoint_dir  # noqa: E402

import bertlab.models.bert as encoder_module  # noqa: E402

CLOCK = "wall"  # --clock


def timed(fns, warmup: int, repeats: int) -> dict[str, list[float]]:
    return interleaved(fns, warmup, repeats, CLOCK)


def mask_variant(kind: str) -> Callable[[torch.Tensor | None], torch.Tensor | None]:
    def build(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
        if attention_mask is None or kind == "none":
            return None
        keep = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        if kind == "bool":
            return keep
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32
        return torch.zeros(keep.shape, dtype=dtype).masked_fill(~keep, float("-inf"))  # additive

    return build


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor, mask: torch.Tensor):
    def step() -> None:
        loss = model(input_ids=ids, attention_mask=mask).last_hidden_state.float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def infer_step(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor):
    def step() -> None:
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask)

    return step


def batch(shape: tuple[int, int], vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(shape[0] * 1000 + shape[1])
    ids = torch.randint(min(1000, vocab // 2), vocab, shape, generator=gen)
    return ids, torch.ones_like(ids)


def study_mask(model, shapes, warmup, repeats) -> list[dict[str, Any]]:
    rows = []
    original = encoder_module.padding_mask
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    try:
        for shape in shapes:
            ids, mask = batch(shape, model.config.vocab_size)
            for mode in ("infer", "train"):
                model.train(mode == "train")
                fns = {}
                for kind in ("none", "bool", "float"):
                    inner = infer_step(model, ids, mask) if mode == "infer" else train_step(model, opt, ids, mask)

                    def run(kind=kind, inner=inner) -> None:
                        encoder_module.padding_mask = mask_variant(kind)
                        inner()

                    fns[kind] = run
                times = timed(fns, warmup, repeats)
                tokens = shape[0] * shape[1]
                rows.append({"study": "mask", "mode": mode, "shape": f"{shape[0]}x{shape[1]}",
                             **{f"{k}_tokens_per_s": round(tokens / median(v), 1) for k, v in times.items()}})
                print(rows[-1], file=sys.stderr)
    finally:
        encoder_module.padding_mask = original
    return rows


def study_host_check(model, shapes, warmup, repeats) -> list[dict[str, Any]]:
    rows = []
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    model.train()
    for shape in shapes:
        ids, mask = batch(shape, model.config.vocab_size)
        check = [time_once(lambda m=mask: bool(m.all())) for _ in range(200)]
        step = timed({"step": train_step(model, opt, ids, mask)}, warmup, repeats)["step"]
        rows.append({"study": "host_check", "shape": f"{shape[0]}x{shape[1]}",
                     "check_us": round(median(check) * 1e6, 2), "train_step_ms": round(median(step) * 1e3, 1),
                     "share": f"{median(check) / median(step):.1e}"})
        print(rows[-1], file=sys.stderr)
    return rows


def study_adamw(model, shapes, warmup, repeats) -> list[dict[str, Any]]:
    rows = []
    model.train()
    kernels = {"for_loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
    opts = {k: torch.optim.AdamW(model.parameters(), lr=1e-5, **kw) for k, kw in kernels.items()}
    for shape in shapes:
        ids, mask = batch(shape, model.config.vocab_size)
        times = timed({k: train_step(model, o, ids, mask) for k, o in opts.items()}, warmup, repeats)
        tokens = shape[0] * shape[1]
        rows.append({"study": "adamw", "shape": f"{shape[0]}x{shape[1]}",
                     **{f"{k}_tokens_per_s": round(tokens / median(v), 1) for k, v in times.items()}})
        print(rows[-1], file=sys.stderr)
    # The optimizer step alone, on the gradients the last step left (kept here: no zero_grad).
    loss = model(input_ids=ids, attention_mask=mask).last_hidden_state.pow(2).mean()
    loss.backward()
    alone = timed({k: o.step for k, o in opts.items()}, warmup, repeats)
    model.zero_grad(set_to_none=True)
    rows.append({"study": "adamw_step_only", **{f"{k}_ms": round(median(v) * 1e3, 1) for k, v in alone.items()}})
    print(rows[-1], file=sys.stderr)
    return rows


def study_compile(model, shapes, warmup, repeats) -> list[dict[str, Any]]:
    rows = []
    model.train()
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    for shape in shapes[:1]:
        ids, mask = batch(shape, model.config.vocab_size)
        t0 = time.perf_counter()
        train_step(compiled, opt, ids, mask)()
        first = time.perf_counter() - t0
        times = timed({"eager": train_step(model, opt, ids, mask),
                             "compiled": train_step(compiled, opt, ids, mask)}, warmup, repeats)
        eager, comp = median(times["eager"]), median(times["compiled"])
        rows.append({"study": "compile", "shape": f"{shape[0]}x{shape[1]}", "first_call_s": round(first, 1),
                     "eager_step_s": round(eager, 3), "compiled_step_s": round(comp, 3),
                     "speedup": round(eager / comp, 3),
                     "break_even_steps": round(first / (eager - comp)) if eager > comp else None})
        print(rows[-1], file=sys.stderr)
    return rows


def _sdpa_attention(q, k, v, mask, dropout_p, kernels=None):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


def _with_kernels(model, kernels):
    """A copy of ``model`` (same weights) built with other kernel choices (``model.cpu_fast_dropout``, ...)."""
    copy = encoder_module.BertModel(model.config, add_pooling_layer=model.pooler is not None, unpad=model.unpad,
                                    kernels=kernels)
    copy.load_state_dict(model.state_dict())
    return copy.train()


def study_cpu_dropout(model, shapes, warmup, repeats) -> list[dict[str, Any]]:
    """Train step with the encoder's CPU dropout/attention choices switched one by one.

    ``sdpa_torch``: one SDPA call with torch's dropout — the encoder before; ``slices_torch``: attention in
    (batch, head) slices of at most ``model.cpu_attention_slice_mb`` (32 MiB), torch's dropout masks;
    ``slices_fast``: the same with bertlab's CPU masks (the default); ``slices8MiB_fast``: smaller slices;
    ``whole_fast``: one slice (the manual attention without slicing).
    """
    rows = []
    Kernels = encoder_module.Kernels
    saved = encoder_module.attention
    variants = {"sdpa_torch": (_sdpa_attention, Kernels(cpu_fast_dropout=False)),
                "slices_torch": (saved, Kernels(cpu_fast_dropout=False)), "slices_fast": (saved, Kernels()),
                "slices8MiB_fast": (saved, Kernels(cpu_attention_slice_mb=8)),
                "whole_fast": (saved, Kernels(cpu_attention_slice_mb=0))}
    models = {name: _with_kernels(model, kernels) for name, (_, kernels) in variants.items()}
    opts = {name: torch.optim.AdamW(m.parameters(), lr=1e-5, fused=True) for name, m in models.items()}
    try:
        for shape in shapes:
            ids, mask = batch(shape, model.config.vocab_size)
            fns = {}
            faults: dict[str, list[int]] = {name: [] for name in variants}
            for name, (fn, _) in variants.items():
                inner = train_step(models[name], opts[name], ids, mask)

                def run(name=name, fn=fn, inner=inner, faults=faults) -> None:
                    encoder_module.attention = fn
                    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                    inner()
                    faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)

                fns[name] = run
            times = timed(fns, warmup, repeats)
            tokens = shape[0] * shape[1]
            # Minor page faults per step: fresh mmap'd buffers are faulted in page by page on every step.
            rows.append({"study": "cpu_dropout", "mode": "train", "shape": f"{shape[0]}x{shape[1]}",
                         **{f"{k}_tokens_per_s": round(tokens / median(v), 1) for k, v in times.items()},
                         **{f"{k}_page_faults": int(median(v)) for k, v in faults.items()}})
            print(rows[-1], file=sys.stderr)
    finally:
        encoder_module.attention = saved
    return rows


def study_attn_dropout(model, shapes, warmup, repeats) -> list[dict[str, Any]]:
    """What attention dropout costs on CPU: p from the checkpoint (math path) vs p = 0 (SDPA's flash kernel)."""
    rows = []
    layers = [layer.attention.self for layer in model.encoder.layer]
    p = layers[0].dropout_p
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    model.train()
    try:
        for shape in shapes:
            ids, mask = batch(shape, model.config.vocab_size)
            fns = {}
            for value in (p, 0.0):
                inner = train_step(model, opt, ids, mask)

                def run(value=value, inner=inner) -> None:
                    for attn in layers:
                        attn.dropout_p = value
                    inner()

                fns[f"p{value:g}"] = run
            times = timed(fns, warmup, repeats)
            tokens = shape[0] * shape[1]
            rows.append({"study": "attn_dropout", "mode": "train", "shape": f"{shape[0]}x{shape[1]}",
                         **{f"{k}_tokens_per_s": round(tokens / median(v), 1) for k, v in times.items()}})
            print(rows[-1], file=sys.stderr)
    finally:
        for attn in layers:
            attn.dropout_p = p
    return rows


PREPACK_SHAPES = ((32, 24), (32, 64))  # prediction's batches: 32 sentences of a tagging or classification file


def study_prepack(model, shapes, warmup, repeats) -> list[dict[str, Any]]:
    """Inference with plain Linears vs prepacked ones (same weights; equal within float rounding)."""
    import copy

    from bertlab.models.kernels import prepack_linears

    model.eval()
    packed = copy.deepcopy(model)
    if not prepack_linears(packed):
        print("prepack: this torch has no oneDNN linear; study skipped", file=sys.stderr)
        return []
    rows = []
    for shape in (*PREPACK_SHAPES, *shapes):
        ids, mask = batch(shape, model.config.vocab_size)
        times = timed({"linear": infer_step(model, ids, mask), "prepacked": infer_step(packed, ids, mask)},
                      warmup, repeats)
        tokens = shape[0] * shape[1]
        rows.append({"study": "prepack", "shape": f"{shape[0]}x{shape[1]}",
                     **{f"{k}_tokens_per_s": round(tokens / median(v), 1) for k, v in times.items()},
                     "speedup": round(median(times["linear"]) / median(times["prepacked"]), 3)})
        print(rows[-1], file=sys.stderr)
    return rows


STUDIES = {"mask": study_mask, "host_check": study_host_check, "adamw": study_adamw,
           "cpu_dropout": study_cpu_dropout, "attn_dropout": study_attn_dropout, "prepack": study_prepack, "compile": study_compile}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tiny", action="store_true", help="a random tiny BERT (tests)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--studies", default="mask,host_check,adamw,cpu_dropout,attn_dropout,prepack")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="cpu: this process's CPU time (A/B on a busy machine, with --threads 1)")
    p.add_argument("--compile", action="store_true", help="add the torch.compile study (minutes of compiling)")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    global CLOCK
    CLOCK = a.clock
    set_threads(a.threads)
    import tempfile

    from bertlab.models.hf_weights import load_encoder

    with tempfile.TemporaryDirectory(prefix="bench_tiny_") as tmp:
        model = load_encoder(checkpoint_dir(a.tiny, Path(tmp)))
    shapes = ((2, 16),) if a.tiny else QUICK_SHAPES if a.quick else FULL_SHAPES
    repeats = a.repeats or (2 if a.quick or a.tiny else 5)
    warmup = 1
    names = [s for s in a.studies.split(",") if s] + (["compile"] if a.compile else [])
    rows = []
    for name in names:
        torch.manual_seed(0)
        rows += STUDIES[name](model, shapes, warmup, repeats)
    result = {"benchmark": "ablations", "threads": a.threads, "repeats": repeats, "clock": a.clock, "rows": rows}
    emit(result, a.json)
    return result


if __name__ == "__main__":
    main()
