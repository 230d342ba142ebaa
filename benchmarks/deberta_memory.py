"""Memory of one DeBERTa-v3 encoder train step at B × 512 tokens (no padding): bertlab against
``transformers.DebertaV2Model`` (eager: it has no SDPA path), each side in a fresh process, same random weights.

Two figures per side: the tensors autograd keeps for the backward pass (``saved_for_backward_mib``: exact, counted
through saved-tensor hooks, parameters excluded) and the peak RSS growth over the step (``peak_step_mib``:
/proc's VmHWM after a reset, a fresh heap; the allocator makes it approximate).

    python benchmarks/deberta_memory.py [--hidden 256 --layers 4 --heads 4 --batch 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parent


def _status(key: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
    raise KeyError(key)


def side(which: str, hidden: int, layers: int, heads: int, batch: int) -> dict:
    import transformers

    sys.path.insert(0, str(BENCH))
    from families import DEBERTA_V3

    from bertlab.models.families import family_spec

    cfg = transformers.AutoConfig.for_model("deberta-v2", hidden_size=hidden, num_hidden_layers=layers,
                                            num_attention_heads=heads, intermediate_size=4 * hidden,
                                            vocab_size=8000, **DEBERTA_V3)
    torch.manual_seed(0)
    if which == "hf":
        model = transformers.AutoModel.from_config(cfg, attn_implementation="eager").train()
    else:
        spec = family_spec("deberta-v2")
        model = spec.build_encoder(spec.read_config(cfg.to_dict(), "bench"), unpad="false").train()
    ids = torch.randint(5, 8000, (batch, 512))
    mask = torch.ones_like(ids)

    def forward():
        return model(input_ids=ids, attention_mask=mask) if which == "hf" else model(ids, attention_mask=mask)

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS now
    base = _status("VmRSS")
    start = time.perf_counter()
    forward().last_hidden_state.pow(2).mean().backward()
    seconds = time.perf_counter() - start
    peak = (_status("VmHWM") - base) / 1024
    storages: dict[int, int] = {}

    def pack(x: torch.Tensor) -> torch.Tensor:
        storages[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        forward()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = sum(n for ptr, n in storages.items() if ptr not in params) / 2**20
    return {"side": which, "saved_for_backward_mib": round(saved, 1), "peak_step_mib": round(peak, 1),
            "step_seconds": round(seconds, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--side", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    shape = [a.hidden, a.layers, a.heads, a.batch]
    if a.side:
        print(json.dumps(side(a.side, *shape)))
        return
    for which in ("bertlab", "hf"):
        cmd = [sys.executable, __file__, "--side", which, "--hidden", str(a.hidden), "--layers", str(a.layers),
               "--heads", str(a.heads), "--batch", str(a.batch)]
        print(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip())


if __name__ == "__main__":
    main()
