"""GPU check of the unpadded encoder path: the same outputs as the padded path, and its speed, per precision.

For float32, bf16 autocast (what ``trainer.precision=bf16-mixed`` runs) and fp16 autocast (``16-mixed``, with a
gradient scaler), on batches of 32 SST-2 training sentences in random order (each padded to its longest):

- outputs: the encoder in eval mode on the same batch, padded vs unpadded: the largest difference on real
  positions of ``last_hidden_state`` and of the pooler output, and each path against the float32 padded output
  (half precision differs from float32 by its rounding; the two paths should differ from each other by no more);
- speed: the encoder train step (forward under autocast, a float32 loss over real positions, backward, AdamW)
  in real tokens/s, for the padded path (SDPA with a key mask: the memory-efficient kernel) and the unpadded path
  with each variable-length attention kernel: ``nested`` under SDPA's default choice and forced to the flash and
  the memory-efficient backends, ``repad``, and ``flash_attn`` when the flash-attn package is installed.

    python experiments/gpu_check/unpad_check.py [--data-dir DIR] [--steps 20] [--out unpad.md] [--json unpad.json]
    python experiments/gpu_check/unpad_check.py --dry    # CPU, a tiny random BERT, one step: checks the script
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from encoder_speed import checkpoint_dir  # noqa: E402
from unpadded import random_order_batches, sst2_sentences, token_lengths  # noqa: E402

from bertlab.models import bert as encoder_module  # noqa: E402
from bertlab.models.bert import BertModel  # noqa: E402
from bertlab.models.hf_weights import load_encoder  # noqa: E402

PRECISIONS = {"32-true": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def sdpa_backend(name: str | None):
    """A context forcing SDPA's backend (flash / efficient), or nothing."""
    if name is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}[name])


def sides(device: str) -> dict[str, tuple[str, str, str | None]]:
    """name → (unpad, varlen attention kernel (model.varlen_attention), forced SDPA backend)."""
    out = {"padded": ("false", "auto", None), "unpadded repad": ("true", "repad", None)}
    if device == "cuda":
        out.update({"padded, efficient SDPA": ("false", "auto", "efficient"),
                    "unpadded nested (SDPA default)": ("true", "nested", None),
                    "unpadded nested, flash SDPA": ("true", "nested", "flash"),
                    "unpadded nested, efficient SDPA": ("true", "nested", "efficient")})
        if encoder_module._flash_attn_varlen() is not None:
            out["unpadded flash_attn varlen"] = ("true", "flash_attn", None)
    return out


def autocast(device: str, dtype: torch.dtype | None):
    return torch.autocast(device, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def set_varlen(model: BertModel, setting: str) -> None:
    """The unpadded path's attention kernel (``model.varlen_attention``) of every layer of ``model``."""
    kernels = dataclasses.replace(model.kernels, varlen_attention=setting)
    model.kernels = kernels
    for module in model.modules():
        if isinstance(module, encoder_module.BertSelfAttention):
            module.kernels = kernels


def set_side(model: BertModel, side: tuple[str, str, str | None]) -> None:
    model.unpad = side[0]
    set_varlen(model, side[1])


def compare_outputs(model: BertModel, batch, device: str, dtype) -> dict[str, float]:
    ids, mask = batch
    real = mask.bool()
    model.eval()
    outs = {}
    with torch.no_grad():
        for name, unpad, dt in (("fp32_padded", "false", None), ("padded", "false", dtype),
                                ("unpadded", "true", dtype)):
            model.unpad = unpad
            set_varlen(model, "auto")
            with autocast(device, dt):
                o = model(ids, attention_mask=mask)
            outs[name] = (o.last_hidden_state.float()[real], o.pooler_output.float())
    model.train()

    def diff(a: str, b: str, i: int) -> float:
        return float((outs[a][i] - outs[b][i]).abs().max())

    return {"unpadded_vs_padded_hidden": diff("unpadded", "padded", 0),
            "unpadded_vs_padded_pooler": diff("unpadded", "padded", 1),
            "padded_vs_fp32_hidden": diff("padded", "fp32_padded", 0),
            "unpadded_vs_fp32_hidden": diff("unpadded", "fp32_padded", 0)}


def time_side(model: BertModel, batches, device: str, dtype, side, steps: int) -> float | str:
    """Real tokens/s of train steps over ``batches`` (after one warm-up pass), or why the side could not run."""
    set_side(model, side)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    scaler = torch.amp.GradScaler(device) if dtype == torch.float16 else None

    def step(ids, mask) -> None:
        with sdpa_backend(side[2]), autocast(device, dtype):
            hidden = model(ids, attention_mask=mask).last_hidden_state
        loss = hidden[mask.bool()].float().pow(2).mean()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    try:
        for ids, mask in batches:
            step(ids, mask)
        if device == "cuda":
            torch.cuda.synchronize()
        start, tokens = time.perf_counter(), 0
        for i in range(steps):
            ids, mask = batches[i % len(batches)]
            step(ids, mask)
            tokens += int(mask.sum())
        if device == "cuda":
            torch.cuda.synchronize()
        return round(tokens / (time.perf_counter() - start), 1)
    except RuntimeError as err:  # e.g. the flash backend refuses float32
        return f"n/a ({str(err).splitlines()[0][:80]})"


def run(dry: bool, data_dir: Path | None, steps: int) -> dict[str, Any]:
    device = "cpu" if dry else "cuda"
    if not dry and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --dry to check the script on CPU")
    with tempfile.TemporaryDirectory() as tmp:
        directory = checkpoint_dir(dry, Path(tmp))
        model = load_encoder(directory).to(device).train()
    has_data = data_dir is not None and (data_dir / "sst2" / "train.tsv").is_file()
    sentences = sst2_sentences(data_dir if has_data else None, 3200)
    lengths = token_lengths(sentences, tiny=dry, model_dir=directory)
    batches = [(ids.to(device), mask.to(device))
               for ids, mask in random_order_batches(lengths, 32, 2 if dry else 10, model.config.vocab_size)]
    precisions = {k: v for k, v in PRECISIONS.items() if not (dry and v == torch.float16)}
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (dry run)",
                              "torch": torch.__version__, "data": "sst2 train" if has_data else "bundled sample",
                              "real_fraction": round(sum(int(m.sum()) for _, m in batches)
                                                     / sum(m.numel() for _, m in batches), 3),
                              "precisions": {}}
    saved = model.kernels.varlen_attention
    try:
        for precision, dtype in precisions.items():
            entry = {"outputs": compare_outputs(model, batches[0], device, dtype), "real_tokens_per_s": {}}
            for name, side in sides(device).items():
                entry["real_tokens_per_s"][name] = time_side(model, batches, device, dtype, side, steps)
                print(f"{precision} {name}: {entry['real_tokens_per_s'][name]}", file=sys.stderr)
            result["precisions"][precision] = entry
    finally:
        set_varlen(model, saved)
    return result


def render(result: dict[str, Any]) -> str:
    out = [f"# Unpadded path on {result['device']} (torch {result['torch']})", "",
           f"Batches of 32 sentences ({result['data']}) in random order, {100 * result['real_fraction']:.0f} % of "
           "the padded positions real. Outputs: largest absolute difference on real positions.", "",
           "| precision | unpadded − padded (hidden / pooler) | padded − fp32 | unpadded − fp32 |",
           "|---|---|---|---|"]
    for precision, entry in result["precisions"].items():
        o = entry["outputs"]
        out.append(f"| {precision} | {o['unpadded_vs_padded_hidden']:.2e} / {o['unpadded_vs_padded_pooler']:.2e} | "
                   f"{o['padded_vs_fp32_hidden']:.2e} | {o['unpadded_vs_fp32_hidden']:.2e} |")
    names = list(next(iter(result["precisions"].values()))["real_tokens_per_s"])
    out += ["", "Train step, real tokens/s:", "", "| side | " + " | ".join(result["precisions"]) + " |",
            "|---|" + "---|" * len(result["precisions"])]
    for name in names:
        out.append(f"| {name} | " + " | ".join(str(e["real_tokens_per_s"][name])
                                             for e in result["precisions"].values()) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry", action="store_true", help="CPU, tiny random BERT, one step: checks the script")
    p.add_argument("--data-dir", type=Path, default=None, help="the datasets' root (sst2/train.tsv)")
    p.add_argument("--steps", type=int, default=None, help="timed train steps per side (default 20; dry 1)")
    p.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args(argv)
    result = run(a.dry, a.data_dir, a.steps or (1 if a.dry else 20))
    text = render(result)
    print(text)
    if a.out:
        a.out.write_text(text)
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
