"""Does padding batches to a multiple of 8 speed up a training step? (decides ``data.pad_to_multiple_of``)

One MiniLM-L6-sized encoder (6 layers, hidden 384, 12 heads) + a linear head, forward + backward + AdamW on
batches whose longest sequence is NOT a multiple of 8 (the common case with dynamic padding), padded either
to that length or up to the next multiple of 8; float32 and bf16 autocast. The two paddings alternate step by
step (the machine is shared, so its speed drifts) and the median of each is reported.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/pad_multiple/bench.py [--steps 20] [--device cpu]

Writes a markdown table to stdout (results.md beside this file keeps the numbers from this machine).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bertlab.models.bert import BertModel
from bertlab.runtime.config import EncoderConfig


def step_time(model, head, opt, ids, mask, dtype, device) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.autocast(device, dtype=dtype, enabled=dtype != torch.float32):
        hidden = model(ids, attention_mask=mask).last_hidden_state
        loss = head(hidden).float().logsumexp(-1).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lengths", type=int, nargs="+", default=[61, 125])
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = EncoderConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
    model = BertModel(config, add_pooling_layer=False).to(args.device)
    head = torch.nn.Linear(384, 2).to(args.device)
    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-5)
    print(f"threads={torch.get_num_threads()} device={args.device} batch={args.batch} steps={args.steps}\n")
    print("| dtype | longest | padded to | median step (ms) | vs unpadded |")
    print("|---|---|---|---|---|")
    dtypes = {"float32": torch.float32, "bf16-mixed": torch.bfloat16}
    if args.device == "cuda":
        dtypes["16-mixed"] = torch.float16
    for name, dtype in dtypes.items():
        for longest in args.lengths:
            padded = -(-longest // 8) * 8
            times: dict[int, list[float]] = {longest: [], padded: []}
            for i in range(args.steps + 2):
                for t in (longest, padded) if i % 2 else (padded, longest):
                    ids = torch.randint(1000, 30000, (args.batch, t), device=args.device)
                    mask = torch.ones_like(ids)
                    mask[1:, longest - 7:] = 0  # dynamic padding: most rows end before the longest one
                    dt = step_time(model, head, opt, ids, mask, dtype, args.device)
                    if i >= 2:  # warm-up
                        times[t].append(dt)
            base = statistics.median(times[longest])
            for t in (longest, padded):
                med = statistics.median(times[t])
                print(f"| {name} | {longest} | {t} | {med * 1000:.1f} | {med / base:.3f} |")


if __name__ == "__main__":
    main()
