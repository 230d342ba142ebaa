"""Encoder families at their base shape: bertlab's encoder of the family (random weights, the unpadded path as
``model.unpad=auto`` runs it) against the family's ``transformers`` model (sdpa; eager for DeBERTa, which has no
sdpa path) with dynamic padding, on the same batches, weights and threads. Every family of the registry
(bertlab.models.families), each at the shape its spec gives (``base_config``; ``tiny_config`` with --tiny).

The measure is the encoder train step of benchmarks/unpadded.py (forward, a loss over the real positions,
backward, AdamW, zero_grad) on batches of 32 SST-2 training sentences in random order, each padded to its
longest; real (non-padding) tokens per second, sides interleaved, medians. Random weights: speed does not
depend on them, and no hub weights are needed.

    python benchmarks/families.py [--families roberta,modernbert] [--threads 2] [--json out.json]   # default: all
    python benchmarks/families.py --tiny      # tiny shapes, the bundled SST-2 sample: a smoke check
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, emit, machine_description, set_threads  # noqa: E402
from unpadded import measure_encoder, random_order_batches, sst2_sentences  # noqa: E402

BATCH = 32


def models(model_type: str, tiny: bool):
    """(bertlab encoder, transformers model) of the family with the same random weights, both in train mode."""
    import transformers

    from bertlab.models.families import family_spec, tiny_config
    from bertlab.models.hf_weights import convert_hf_state_dict, load_into

    spec = family_spec(model_type)
    shape = tiny_config(model_type) if tiny else {"model_type": model_type, **spec.base_config}
    config = transformers.AutoConfig.for_model(**shape)
    torch.manual_seed(0)
    ref = transformers.AutoModel.from_config(config, attn_implementation=spec.reference_attention)
    ref.train()
    ours = spec.build_encoder(spec.read_config(config.to_dict(), "bench"), add_pooling_layer=False).train()
    state, report = convert_hf_state_dict(ref.state_dict(), None, has_pooler=False, spec=spec)
    load_into(ours, {k[len("bert."):]: v for k, v in state.items()}, report)
    return ours, ref


def batches_for(model_type: str, vocab: int, pad: int, tiny: bool, data_dir: Path | None):
    sentences = sst2_sentences(None if tiny else data_dir, 3200)
    lengths = [min(len(s.split()) + 2, 128) for s in sentences]  # word counts + <s>, </s>: the shape that matters
    out = []
    for ids, mask in random_order_batches(lengths, BATCH, 2 if tiny else 20, vocab):
        out.append((ids.masked_fill(mask == 0, pad), mask))  # padding carries the family's pad id
    return out


def run(families: list[str], threads: int, tiny: bool, data_dir: Path | None, repeats: int) -> dict[str, Any]:
    set_threads(threads)
    # A smoke run (--tiny) measures the matmul peak at a small size, as encoder_speed.py does: a 2048-wide
    # bfloat16 matmul takes minutes on a CPU without bf16 instructions.
    report: dict[str, Any] = {"machine": machine_description(threads, peak_n=256 if tiny else 2048), "families": {}}
    for model_type in families:
        ours, ref = models(model_type, tiny)
        pad = ours.config.pad_token_id
        batches = batches_for(model_type, ours.config.vocab_size, pad, tiny, data_dir)
        ours.unpad = "auto"
        r = measure_encoder(ours, ref, batches, {"bertlab": "auto", "hf": ""}, warmup=1, repeats=repeats)
        t = r["real_tokens_per_s"]
        r["ratio_vs_hf"] = round(t["bertlab"] / t["hf"], 3)
        print(f"{model_type}: bertlab {t['bertlab']:.0f} vs transformers {t['hf']:.0f} real tok/s = "
              f"{r['ratio_vs_hf']:.2f}x ({r['real_fraction']:.0%} real)", file=sys.stderr)
        report["families"][model_type] = r
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--families", default=None, help="comma-separated model_types (default: every family)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tiny", action="store_true", help="tiny shapes and the bundled sample: a smoke check")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    data_dir = args.data_dir if (args.data_dir / "sst2" / "train.tsv").is_file() else None
    from bertlab.models.families import families

    names = args.families.split(",") if args.families else list(families())
    report = run(names, args.threads, args.tiny, data_dir, args.repeats)
    emit(report, args.json)
    return report


if __name__ == "__main__":
    main()
