"""Encoder families at their base shape: bertlab's encoder of the family (random weights, the unpadded path as
``model.unpad=auto`` runs it) against the family's ``transformers`` model (sdpa; eager for DeBERTa, which has no
sdpa path) with dynamic padding, on the same batches, weights and threads.

The measure is the encoder train step of benchmarks/unpadded.py (forward, a loss over the real positions,
backward, AdamW, zero_grad) on batches of 32 SST-2 training sentences in random order, each padded to its
longest; real (non-padding) tokens per second, sides interleaved, medians. Random weights: speed does not
depend on them, and no hub weights are needed.

    python benchmarks/families.py [--families roberta,distilbert,electra,modernbert,deberta-v2] [--threads 2] [--json out.json]
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

# The families' base shapes (as their hub configs), and what differs in each.
BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
# DeBERTa-v3's relative attention (microsoft/deberta-v3-base's config.json).
DEBERTA_V3 = dict(relative_attention=True, position_biased_input=False, pos_att_type="p2c|c2p", position_buckets=256,
                  max_relative_positions=-1, share_att_key=True, norm_rel_ebd="layer_norm", type_vocab_size=0,
                  max_position_embeddings=512, layer_norm_eps=1e-7, pad_token_id=0)
SHAPES = {
    "roberta": dict(BASE, vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                    layer_norm_eps=1e-5),
    "distilbert": dict(vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072, pad_token_id=0),
    "electra": dict(BASE, vocab_size=30522, embedding_size=768, pad_token_id=0),
    # ModernBERT-base: 22 pre-norm layers, GeGLU 1152, rotary, every third layer global, 128-token local windows.
    "modernbert": dict(vocab_size=50368, hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
                       intermediate_size=1152, local_attention=128, global_attn_every_n_layers=3,
                       pad_token_id=50283),
    "deberta-v2": dict(BASE, vocab_size=128100, **DEBERTA_V3),
}
TINY = {"roberta": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                        vocab_size=2000, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1),
        "distilbert": dict(vocab_size=2000, dim=64, n_layers=2, n_heads=4, hidden_dim=128, pad_token_id=0),
        "electra": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                        vocab_size=2000, embedding_size=32, pad_token_id=0),
        # Windows of 16 tokens: the sample's sentences cross them.
        "modernbert": dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=96,
                           vocab_size=2000, local_attention=16, global_attn_every_n_layers=2, pad_token_id=0,
                           bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2),
        "deberta-v2": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                           vocab_size=2000, **DEBERTA_V3)}
BATCH = 32
REFERENCE_ATTENTION = {"deberta-v2": "eager"}


def models(model_type: str, tiny: bool):
    """(bertlab encoder, transformers model) of the family with the same random weights, both in train mode."""
    import transformers

    from bertlab.models.families import family_spec
    from bertlab.models.hf_weights import convert_hf_state_dict, load_into
    from bertlab.models.keys import encoder_state

    config = transformers.AutoConfig.for_model(model_type, **(TINY if tiny else SHAPES)[model_type])
    torch.manual_seed(0)
    # transformers computes DeBERTa's disentangled attention in eager mode only (it has no SDPA path).
    ref = transformers.AutoModel.from_config(config, attn_implementation=REFERENCE_ATTENTION.get(model_type, "sdpa"))
    ref.train()
    spec = family_spec(model_type)
    ours = spec.build_encoder(spec.read_config(config.to_dict(), "bench"), add_pooling_layer=False).train()
    state, report = convert_hf_state_dict(ref.state_dict(), None, has_pooler=False, spec=spec)
    load_into(ours, encoder_state(state), report)
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
    p.add_argument("--families", default="roberta,distilbert,electra,modernbert,deberta-v2")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tiny", action="store_true", help="tiny shapes and the bundled sample: a smoke check")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    data_dir = args.data_dir if (args.data_dir / "sst2" / "train.tsv").is_file() else None
    report = run(args.families.split(","), args.threads, args.tiny, data_dir, args.repeats)
    emit(report, args.json)
    return report


if __name__ == "__main__":
    main()
