"""The unpadded encoder path (``model.unpad``): what computing only on real tokens buys, in four measurements.

1. ``encoder``: the encoder train step (forward, a loss over the real positions, backward, AdamW, zero_grad) on
   batches of 32 SST-2 training sentences in random order, each batch padded to its longest sentence: bertlab
   unpadded, bertlab padded (``model.unpad=false``) and ``transformers.BertModel`` (sdpa) on the same batches,
   weights and threads; real (non-padding) tokens per second. The reference runs with
   ``torch.optim.AdamW(params, lr=1e-5)`` (``hf``, as encoder_speed.py's reference) and with the fused kernel
   (``hf_fused``). Each repeat is one pass over the same batches; sides interleaved; medians.
2. ``sst2``: end-to-end SST-2 fine-tuning (each side one process per round, sides in turn, ``--rounds`` rounds,
   medians) (``train.py``), the same first 3,200 training examples, batch 32, one
   epoch: random order with the new default (``model.unpad=auto``), random order padded (``model.unpad=false``),
   today's length-grouped run (``data.group_by_length=true model.unpad=false``), the length-grouped run with
   ``auto`` (does its padding threshold choose well?), and the Hugging Face Trainer with dynamic padding
   (``hf_reference.py``, random order).
3. ``conll``: end-to-end CoNLL-2003, random order, batch 16, the first 2,000 sentences: auto vs padded.
4. ``fixed``: the encoder train step on fixed 16 × 128 and 8 × 384 random batches (no padding): ``unpad=true``
   (packed even without padding) and ``unpad=auto`` (which keeps such batches padded) vs ``unpad=false``; and
   through the pooler alone, as a [CLS] head trains (``first_token_only``: ``auto`` packs on CPU, the last
   layer then runs on the [CLS] tokens), ``cls_auto`` vs ``cls_padded``.
5. ``compile`` (opt-in: ``--only ...,compile``; minutes of compiling): ``model.compile=true`` as train.py applies
   it (``nn.Module.compile(dynamic=True)`` on the encoder) against eager, on the batches of (1), with each path:
   the first pass (compiling) and the steady-state real tokens/s, medians of interleaved passes.
6. ``profile``: where the time goes: the batches of (1) under ``torch.profiler``, padded and unpadded, each op's
   own CPU time summed into components (matrix products, attention softmax, LayerNorm, GELU, dropout masks,
   packing, embeddings, AdamW, the rest), per train step. The profiler adds overhead: read the shares.

    python benchmarks/unpadded.py [--quick] [--threads 2] [--only encoder,sst2,conll,fixed,profile,compile] [--json out.json]
    python benchmarks/unpadded.py --tiny --only encoder,fixed,profile   # random tiny BERT, no datasets: a smoke check

``--quick`` keeps the real model and data with a few batches/steps; ``--tiny`` takes a random tiny BERT and
sentence lengths from the bundled SST-2 sample (no ``../shared/data`` needed). Neither is a measurement.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import end_to_end  # noqa: E402
from common import (  # noqa: E402
    REPO,
    SHARED_DATA,
    emit,
    interleaved,
    machine_description,
    median,
    pyplot,
    set_threads,
)
from encoder_speed import checkpoint_dir, make_adamw  # noqa: E402

SECTIONS = ("encoder", "sst2", "conll", "fixed", "profile", "compile")
DEFAULT_SECTIONS = ("encoder", "sst2", "conll", "fixed", "profile")
BATCH = 32
SST2_EXAMPLES = 3200
CONLL_BATCH, CONLL_SENTENCES = 16, 2000
FULL_FIXED, QUICK_FIXED, TINY_FIXED = ((16, 128), (8, 384)), ((4, 128), (2, 384)), ((2, 16),)
SAMPLE_SST2 = REPO / "src" / "bertlab" / "samples" / "sst2" / "train.tsv"


# --------------------------------------------------------------------------------------------------------
# Batches


def sst2_sentences(data_dir: Path | None, limit: int) -> list[str]:
    path = data_dir / "sst2" / "train.tsv" if data_dir is not None else SAMPLE_SST2
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["sentence"] for r in rows[:limit]]


def token_lengths(sentences: list[str], tiny: bool, model_dir: Path) -> list[int]:
    """Tokens per sentence with [CLS] and [SEP], truncated at 128 as the preset does."""
    if tiny:  # no tokenizer for the random model: whitespace words stand in for word pieces
        return [min(len(s.split()) + 2, 128) for s in sentences]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()  # the packaged tokenizer.json pads to 128 (see the project's pitfalls)
    tok.enable_truncation(128)
    return [len(e.ids) for e in tok.encode_batch(sentences)]


def random_order_batches(lengths: list[int], batch: int, n_batches: int, vocab: int,
                         seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(ids, mask) batches of ``batch`` sentences drawn in random order, each padded to its longest."""
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for start in range(0, min(len(order), batch * n_batches), batch):
        rows = [lengths[i] for i in order[start:start + batch]]
        t = max(rows)
        lens = torch.tensor(rows)
        mask = (torch.arange(t)[None, :] < lens[:, None]).long()  # (B, T)
        ids = torch.randint(min(1000, vocab // 2), vocab, (len(rows), t), generator=gen) * mask
        out.append((ids, mask))
    return out


# --------------------------------------------------------------------------------------------------------
# Encoder train steps


def train_pass(model: torch.nn.Module, opt: torch.optim.Optimizer,
               batches: list[tuple[torch.Tensor, torch.Tensor]], cls_head: bool = False) -> Callable[[], None]:
    """One pass of train steps over ``batches``; the loss reads the real positions only, or with ``cls_head``
    the pooler alone, as a sequence-classification head does (``first_token_only``)."""

    def run() -> None:
        for ids, mask in batches:
            if cls_head:
                loss = model(input_ids=ids, attention_mask=mask, first_token_only=True).pooler_output.float().pow(2).mean()
            else:
                hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, H)
                loss = hidden[mask.bool()].float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    return run


def load_models(tiny: bool, workdir: Path):
    from transformers import BertModel

    from bertlab.models.hf_weights import load_encoder

    directory = checkpoint_dir(tiny, workdir)
    ours = load_encoder(directory).train()
    ref = BertModel.from_pretrained(str(directory), attn_implementation="sdpa").train()
    return ours, ref, directory


def measure_encoder(ours, ref, batches, sides: dict[str, str], warmup: int, repeats: int) -> dict[str, Any]:
    """Real tokens/s per side: bertlab sides are ``unpad`` values; ``hf`` and ``hf_fused`` the reference. A side
    named ``cls_*`` trains through the pooler alone (a [CLS] head)."""
    real_tokens = sum(int(mask.sum()) for _, mask in batches)
    padded_tokens = sum(mask.numel() for _, mask in batches)
    opts = {"bertlab": make_adamw(ours, "bertlab"), "hf": make_adamw(ref, "hf"),
            "hf_fused": make_adamw(ref, "hf_fused")}
    fns = {}
    for side, mode in sides.items():
        if side.startswith("hf"):
            fns[side] = train_pass(ref, opts[side], batches)
        else:
            step = train_pass(ours, opts["bertlab"], batches, cls_head=side.startswith("cls_"))

            def run(mode: str = mode, step: Callable[[], None] = step) -> None:
                ours.unpad = mode
                step()

            fns[side] = run
    torch.manual_seed(0)
    times = interleaved(fns, warmup=warmup, repeats=repeats)
    tps = {side: real_tokens / median(ts) for side, ts in times.items()}
    return {"batches": len(batches), "real_tokens": real_tokens, "padded_tokens": padded_tokens,
            "real_fraction": round(real_tokens / padded_tokens, 3),
            "real_tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
            "seconds": {k: [round(t, 4) for t in ts] for k, ts in times.items()}}


def sst2_batches(vocab: int, model_dir: Path, data_dir: Path | None, tiny: bool, quick: bool):
    n_batches = 2 if tiny or quick else 20
    sentences = sst2_sentences(None if tiny else data_dir, SST2_EXAMPLES)
    return random_order_batches(token_lengths(sentences, tiny, model_dir), BATCH, n_batches, vocab)


def encoder_section(ours, ref, model_dir: Path, data_dir: Path | None, tiny: bool, quick: bool,
                    warmup: int, repeats: int) -> dict[str, Any]:
    batches = sst2_batches(ours.config.vocab_size, model_dir, data_dir, tiny, quick)
    sides = {"unpadded": "true", "padded": "false", "hf": "", "hf_fused": ""}
    r = measure_encoder(ours, ref, batches, sides, warmup, repeats)
    r["_batches"] = batches
    t = r["real_tokens_per_s"]
    r["ratios"] = {"unpadded_vs_hf": round(t["unpadded"] / t["hf"], 3),
                   "unpadded_vs_hf_fused": round(t["unpadded"] / t["hf_fused"], 3),
                   "unpadded_vs_padded": round(t["unpadded"] / t["padded"], 3)}
    print(f"encoder SST-2 random batches ({r['real_fraction']:.0%} real): "
          + ", ".join(f"{k} {v:.0f}" for k, v in t.items()) + " real tok/s", file=sys.stderr)
    return r


def fixed_section(ours, ref, shapes, warmup: int, repeats: int) -> list[dict[str, Any]]:
    rows = []
    vocab = ours.config.vocab_size
    for batch, seq in shapes:
        gen = torch.Generator().manual_seed(batch * 1000 + seq)
        ids = torch.randint(min(1000, vocab // 2), vocab, (batch, seq), generator=gen)
        batches = [(ids, torch.ones_like(ids))]
        r = measure_encoder(ours, ref, batches, {"unpad_true": "true", "unpad_auto": "auto", "padded": "false",
                                                 "cls_auto": "auto", "cls_padded": "false"}, warmup, repeats)
        t = r["real_tokens_per_s"]
        row = {"batch": batch, "seq": seq, **r,
               "ratios": {"true_vs_padded": round(t["unpad_true"] / t["padded"], 3),
                          "auto_vs_padded": round(t["unpad_auto"] / t["padded"], 3),
                          "cls_auto_vs_padded": round(t["cls_auto"] / t["cls_padded"], 3)}}
        rows.append(row)
        print(f"fixed {batch}x{seq}: " + ", ".join(f"{k} {v:.0f}" for k, v in t.items()) + " tok/s",
              file=sys.stderr)
    return rows


def compile_section(ours, batches: list[tuple[torch.Tensor, torch.Tensor]], warmup: int,
                    repeats: int) -> dict[str, Any]:
    """Eager vs ``model.compile=true`` on each path: first-pass seconds and steady real tokens/s."""
    import copy
    import time

    real_tokens = sum(int(mask.sum()) for _, mask in batches)
    out: dict[str, Any] = {"batches": len(batches), "real_tokens": real_tokens, "paths": {}}
    for path, mode in (("unpadded", "true"), ("padded", "false")):
        eager = copy.deepcopy(ours)
        compiled = copy.deepcopy(ours)
        compiled.compile(dynamic=True)  # what train.py does for model.compile=true
        eager.unpad = compiled.unpad = mode
        steps = {"eager": train_pass(eager, make_adamw(eager, "bertlab"), batches),
                 "compiled": train_pass(compiled, make_adamw(compiled, "bertlab"), batches)}
        start = time.perf_counter()
        steps["compiled"]()  # compiles every graph the batches need
        first = time.perf_counter() - start
        times = interleaved(steps, warmup=warmup, repeats=repeats)
        tps = {side: real_tokens / median(ts) for side, ts in times.items()}
        out["paths"][path] = {"first_pass_s": round(first, 1),
                              "real_tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
                              "compiled_vs_eager": round(tps["compiled"] / tps["eager"], 3)}
        print(f"compile, {path}: first pass {first:.0f} s; eager {tps['eager']:.0f}, compiled "
              f"{tps['compiled']:.0f} real tok/s", file=sys.stderr)
    return out


# Components of a train step, by the op names torch.profiler reports (self CPU time, forward and backward).
COMPONENTS = {
    "matrix products (Linear layers, attention q·kᵀ and ·v)": ("aten::addmm", "aten::mm", "aten::bmm"),
    "attention softmax / SDPA": ("aten::_softmax", "aten::_softmax_backward_data", "aten::masked_fill",
                                 "aten::_scaled_dot_product_flash_attention_for_cpu",
                                 "aten::_scaled_dot_product_flash_attention_for_cpu_backward"),
    "LayerNorm": ("aten::native_layer_norm", "aten::native_layer_norm_backward"),
    "GELU": ("aten::gelu", "aten::gelu_backward"),
    "dropout masks": ("aten::random_", "aten::where", "aten::bernoulli_", "aten::native_dropout",
                      "aten::native_dropout_backward"),
    "packing (gather / scatter)": ("aten::nonzero", "aten::index", "aten::index_select", "aten::index_copy",
                                   "aten::index_add_", "aten::index_put_", "aten::_index_put_impl_"),
    "embeddings": ("aten::embedding", "aten::embedding_dense_backward", "aten::embedding_backward"),
    "AdamW": ("aten::_fused_adamw_",),
}


def profile_section(ours, batches_fn: Callable[[], list[tuple[torch.Tensor, torch.Tensor]]]) -> dict[str, Any]:
    """ms per train step in each component, padded and unpadded, from one profiled pass each."""
    from torch.profiler import ProfilerActivity, profile

    batches = batches_fn()
    opt = make_adamw(ours, "bertlab")
    out: dict[str, Any] = {"batches": len(batches), "ms_per_step": {}}
    for side, mode in (("padded", "false"), ("unpadded", "true")):
        ours.unpad = mode
        step = train_pass(ours, opt, batches)
        step()  # warm-up outside the profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        totals = dict.fromkeys([*COMPONENTS, "other"], 0.0)
        for event in prof.key_averages():
            name = next((c for c, ops in COMPONENTS.items() if event.key in ops), "other")
            totals[name] += event.self_cpu_time_total / 1000.0 / len(batches)  # µs → ms per step
        out["ms_per_step"][side] = {k: round(v, 2) for k, v in totals.items()}
    print("profile ms/step (padded → unpadded): " + ", ".join(
        f"{k.split(' (')[0]} {out['ms_per_step']['padded'][k]:.1f} → {out['ms_per_step']['unpadded'][k]:.1f}"
        for k in out["ms_per_step"]["padded"]), file=sys.stderr)
    return out


def plot_profile(profile: dict[str, Any], out: str | Path, title: str = "") -> Path:
    """Where the time goes: one horizontal bar per path (padded, unpadded), ms per train step, stacked by
    component in the order of ``COMPONENTS``."""
    plt = pyplot()
    ms = profile["ms_per_step"]
    paths = [p for p in ("padded", "unpadded") if p in ms]
    fig, ax = plt.subplots(figsize=(7.5, 2.6))
    left = [0.0] * len(paths)
    for component in ms[paths[0]]:
        widths = [ms[p][component] for p in paths]
        ax.barh(paths, widths, left=left, label=component.split(" (")[0])
        left = [a + w for a, w in zip(left, widths)]
    for i, total in enumerate(left):
        ax.text(total, i, f" {total:.0f} ms", va="center", fontsize=8)
    ax.set_xlabel("ms per train step (self CPU time under torch.profiler)")
    ax.set_xlim(0, max(left) * 1.15)
    ax.invert_yaxis()
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.35), frameon=False)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return Path(out)


# --------------------------------------------------------------------------------------------------------
# End to end (train.py and the Trainer, one process per run)


def median_rounds(runs: dict[str, Callable[[], dict[str, Any]]], rounds: int, label: str) -> dict[str, Any]:
    """Each side once per round, sides in turn, ``rounds`` rounds: per side the run of median samples/s (the
    lower middle for an even count), with every round's figure under ``samples_per_s_rounds``. The first
    process of a series tends to start cold; rounds keep that from landing on one side."""
    seen: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    for r in range(rounds):
        for name, fn in runs.items():
            seen[name].append(fn())
            print(f"{label} {name} (round {r + 1}/{rounds}): {seen[name][-1]['samples_per_s']:.1f} samples/s",
                  file=sys.stderr)
    out = {}
    for name, results in seen.items():
        ranked = sorted(results, key=lambda x: x["samples_per_s"])
        out[name] = {**ranked[(len(ranked) - 1) // 2], "samples_per_s_rounds": [x["samples_per_s"] for x in results]}
    return out


def sst2_section(data_dir: Path, threads: int, quick: bool, workdir: Path, rounds: int) -> dict[str, Any]:
    steps = 4 if quick else SST2_EXAMPLES // BATCH
    case = end_to_end.Case("sst2", "sst2", steps, steps * BATCH)
    runs = {
        "auto_random": ("data.group_by_length=false", "model.unpad=auto"),
        "padded_random": ("data.group_by_length=false", "model.unpad=false"),
        "padded_grouped": ("data.group_by_length=true", "model.unpad=false"),
        # auto on grouped batches: most stay padded (< UNPAD_AUTO_MIN_PADDING), the rest pack; checks that rule.
        "auto_grouped": ("data.group_by_length=true", "model.unpad=auto"),
    }
    fns: dict[str, Callable[[], dict[str, Any]]] = {  # one process per run
        name: (lambda o=overrides: end_to_end.run_bertlab(case, data_dir, threads, workdir, extra=o))
        for name, overrides in runs.items()}
    fns["hf_dynamic"] = lambda: end_to_end.run_hf(case, "dynamic", data_dir, threads)
    sides = median_rounds(fns, rounds, "sst2")
    s = {k: v["samples_per_s"] for k, v in sides.items()}
    return {"steps": steps, "batch_size": BATCH, "train_examples": steps * BATCH, "rounds": rounds, "sides": sides,
            "ratios": {"auto_random_vs_padded_random": round(s["auto_random"] / s["padded_random"], 3),
                       "auto_random_vs_trainer_dynamic": round(s["auto_random"] / s["hf_dynamic"], 3),
                       "auto_random_vs_padded_grouped": round(s["auto_random"] / s["padded_grouped"], 3),
                       "auto_grouped_vs_padded_grouped": round(s["auto_grouped"] / s["padded_grouped"], 3)}}


def conll_section(data_dir: Path, threads: int, quick: bool, workdir: Path, rounds: int) -> dict[str, Any]:
    steps = 4 if quick else CONLL_SENTENCES // CONLL_BATCH
    case = end_to_end.Case("conll", "conll2003", steps, steps * CONLL_BATCH)
    fns = {name: (lambda u=unpad: end_to_end.run_bertlab(case, data_dir, threads, workdir, batch=CONLL_BATCH,
                                                         extra=("data.group_by_length=false", f"model.unpad={u}")))
           for name, unpad in (("auto_random", "auto"), ("padded_random", "false"))}
    sides = median_rounds(fns, rounds, "conll")
    return {"steps": steps, "batch_size": CONLL_BATCH, "train_examples": steps * CONLL_BATCH, "rounds": rounds,
            "sides": sides,
            "ratios": {"auto_random_vs_padded_random":
                       round(sides["auto_random"]["samples_per_s"] / sides["padded_random"]["samples_per_s"], 3)}}


# --------------------------------------------------------------------------------------------------------


def run(sections: list[str], threads: int, quick: bool, tiny: bool, data_dir: Path,
        rounds: int = 3) -> dict[str, Any]:
    set_threads(threads)
    result: dict[str, Any] = {"benchmark": "unpadded", "threads": threads, "quick": quick, "tiny": tiny,
                              "machine": machine_description(threads, peak=False)}
    warmup, repeats = (0, 1) if tiny else (1, 2) if quick else (1, 5)
    with tempfile.TemporaryDirectory(prefix="bench_unpad_") as tmp:
        workdir = Path(tmp)
        if {"encoder", "fixed", "profile", "compile"} & set(sections):
            ours, ref, model_dir = load_models(tiny, workdir / "tiny")
            result["checkpoint"] = "tiny-random" if tiny else "all-MiniLM-L6-v2"
            result["warmup"], result["repeats"] = warmup, repeats
            batches: list[tuple[torch.Tensor, torch.Tensor]] = []
            if "encoder" in sections:
                result["encoder"] = encoder_section(ours, ref, model_dir, data_dir, tiny, quick, warmup, repeats)
                batches = result["encoder"].pop("_batches")
            if "profile" in sections:
                result["profile"] = profile_section(ours, lambda: batches or sst2_batches(
                    ours.config.vocab_size, model_dir, data_dir, tiny, quick))
            if "compile" in sections:
                result["compile"] = compile_section(ours, batches or sst2_batches(
                    ours.config.vocab_size, model_dir, data_dir, tiny, quick), warmup, repeats)
            if "fixed" in sections:
                shapes = TINY_FIXED if tiny else QUICK_FIXED if quick else FULL_FIXED
                result["fixed"] = fixed_section(ours, ref, shapes, warmup, repeats)
        if "sst2" in sections:
            result["sst2"] = sst2_section(data_dir, threads, quick, workdir, 1 if quick else rounds)
        if "conll" in sections:
            result["conll"] = conll_section(data_dir, threads, quick, workdir, 1 if quick else rounds)
    return result


def profile_title(report: dict[str, Any]) -> str:
    enc = report.get("encoder") or {}
    real = f", {100 * enc['real_fraction']:.0f} % of positions real" if "real_fraction" in enc else ""
    return (f"Train step, batches of {BATCH} SST-2 sentences in random order{real}\n"
            f"({report.get('checkpoint', '')}, {report.get('threads', '')} threads)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the real model and data, a few batches: a smoke check")
    p.add_argument("--tiny", action="store_true", help="a random tiny BERT, no datasets (tests)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", default="", help=f"comma-separated subset of {','.join(SECTIONS)}")
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    p.add_argument("--json", default=None)
    p.add_argument("--plot", default=None, help="draw the profile section (where the time goes) to this PNG")
    p.add_argument("--plot-from", default=None, help="draw --plot from a saved report (results.json or --json "
                   "output) instead of measuring")
    p.add_argument("--rounds", type=int, default=3,
                   help="end-to-end sections: rounds of one run per side, medians reported (1 with --quick)")
    a = p.parse_args(argv)
    if a.plot_from:
        saved = json.loads(Path(a.plot_from).read_text())
        saved = saved.get("unpadded", saved)  # run_all's results.json holds this report under "unpadded"
        if not a.plot or "profile" not in saved:
            raise SystemExit("--plot-from needs --plot PATH and a report with the profile section")
        print(plot_profile(saved["profile"], a.plot, profile_title(saved)), file=sys.stderr)
        return saved
    sections = [s for s in a.only.split(",") if s] or list(DEFAULT_SECTIONS)
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise SystemExit(f"--only: unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    if a.tiny and {"sst2", "conll"} & set(sections):
        raise SystemExit("--tiny measures the encoder only: add --only encoder,fixed,profile,compile")
    needs_data = {"sst2", "conll"} & set(sections) or ({"encoder", "profile", "compile"} & set(sections)
                                                        and not a.tiny)
    if needs_data and not (a.data_dir / "sst2").is_dir():
        raise SystemExit(f"no datasets under {a.data_dir}: pass --data-dir (the layout of ../shared/data)")
    result = run(sections, a.threads, a.quick, a.tiny, a.data_dir.resolve(), a.rounds)
    emit(result, a.json)
    if a.plot and "profile" in result:
        print(plot_profile(result["profile"], a.plot, profile_title(result)), file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
