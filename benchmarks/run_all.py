"""``make bench``: every benchmark, bertlab and the Hugging Face reference in the same run, then one results
table — ratios first, absolute numbers second, the machine last.

Each benchmark runs as its own process (threads set the same for every side) and leaves a JSON; this script
collects them into ``benchmarks/results/RESULTS.md`` and ``benchmarks/results/results.json``
(``--quick``: ``benchmarks/results/quick/``, so a smoke check never overwrites a full measurement).

    python benchmarks/run_all.py [--quick] [--threads 2]
                                 [--skip encoder,end_to_end,preprocess,unpadded,families,predict,embedding]
                                 [--ablations] [--compile] [--data-dir ../shared/data] [--update encoder]
    python benchmarks/run_all.py --update unpadded     # the unpadded-path section alone, into the existing report

Absolute times drift between machines and between runs on a shared machine: read the ratios, which are
measured side by side (encoder repeats interleaved; end-to-end processes alternating).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    RESULTS_DIR,
    SHARED_DATA,
    load_average,
    machine_description,
    markdown_table,
    python,
    run_child,
    thread_env,
    write_json,
)

BENCH = Path(__file__).resolve().parent

# (measure, where its ratio comes from, target) — the acceptance targets.
TARGETS = {
    "encoder train fp32 16x128": 1.2,
    "encoder train fp32 8x384": 1.2,
    "bertlab bf16 / fp32 train 8x384": 1.3,
    "SST-2 end-to-end vs Trainer (pad to max)": 4.0,
    "SST-2 end-to-end vs Trainer (dynamic padding)": 1.5,
    "preprocessing squad": 1.0,
    "preprocessing ner": 1.0,
    # The unpadded path (benchmarks/unpadded.py).
    "unpadded: encoder train, SST-2 random batches, vs HF sdpa": 2.5,
    "unpadded: SST-2 end-to-end random order, auto / padded": 2.0,
    "unpadded: SST-2 end-to-end random order, auto / Trainer (dynamic padding)": 2.5,
    "unpadded: SST-2 end-to-end, auto random order / padded length-grouped": 0.95,
    "unpadded: CoNLL-2003 end-to-end random order, auto / padded": 1.6,
    "unpadded: encoder train 16x128 (no padding), unpad=true / padded": 0.97,
    "unpadded: encoder train 8x384 (no padding), unpad=true / padded": 0.97,
    "unpadded: encoder train 16x128 (no padding), unpad=auto / padded": 0.97,
    "unpadded: encoder train 8x384 (no padding), unpad=auto / padded": 0.97,
    # Encoder families at their base shape (benchmarks/families.py).
    "families: roberta-base encoder train, SST-2 random batches, vs transformers": 2.0,
    "families: modernbert-base encoder train, SST-2 random batches, vs transformers": 2.0,
    "families: deberta-v2-base encoder train, SST-2 random batches, vs transformers": 1.5,
    # Prediction as whole processes against transformers.pipeline (benchmarks/predict_speed.py).
    "predict: SST-2 dev, bertlab torch vs pipeline": 2.0,
    "predict: SST-2 dev, bertlab onnx vs pipeline": 2.0,
    "predict: SST-2 dev, bertlab onnx int8 vs pipeline": 3.0,
    "predict: CoNLL-2003 testa, bertlab torch vs pipeline": 2.0,
    "predict: CoNLL-2003 testa, bertlab onnx vs pipeline": 2.0,
    "predict: CoNLL-2003 testa, bertlab onnx int8 vs pipeline": 3.0,
    # A distilled student (3 of MiniLM-L6's 6 layers) against its teacher, whole processes (docs/distillation.md).
    "predict: SST-2 dev, distilled 3-layer student vs its teacher, torch": 1.8,
    # Embedding models against sentence-transformers (benchmarks/embedding_speed.py).
    "embedding: encode SQuAD paragraphs, bertlab predict vs SentenceTransformer.encode": 2.0,
    # memory: batch 256 cached within 1.3x of batch 32's peak RSS, as a ratio where higher is better
    "embedding: peak RSS batch 32 / batch 256 cached (1/1.3 = 0.77)": 1 / 1.3,
}


def run_script(name: str, args: list[str], threads: int, out_dir: Path) -> dict[str, Any] | None:
    out = out_dir / f"{name}.json"
    cmd = [python(), str(BENCH / f"{name}.py"), "--threads", str(threads), "--json", str(out), *args]
    print(f"[bench] {name} {' '.join(args)}", file=sys.stderr, flush=True)
    measured = {"at": time.strftime("%Y-%m-%d %H:%M %Z"), "load_start": round(load_average()[0], 2)}
    child = run_child(cmd, env=thread_env(threads))
    measured.update(load_end=round(load_average()[0], 2), wall_s=round(child.wall_s, 1))
    print(f"[bench] {name}: {child.wall_s:.0f} s, exit {child.returncode}", file=sys.stderr, flush=True)
    if child.returncode != 0:
        tail = "\n".join(child.stderr.strip().splitlines()[-20:])
        print(f"[bench] {name} FAILED:\n{tail}", file=sys.stderr)
        return {"error": tail, "measured": measured}
    return {**json.loads(out.read_text()), "measured": measured}


# --------------------------------------------------------------------------------------------------------
# Report


def ratio_rows(results: dict[str, Any]) -> list[tuple[str, float | None, float | None]]:
    """(measure, ratio, target) — every ratio of the run, targets where the issue sets one."""
    rows: list[tuple[str, float | None, float | None]] = []
    enc = results.get("encoder") or {}
    by_key = {(r["mode"], r["dtype"], f"{r['batch']}x{r['seq']}"): r for r in enc.get("rows", [])}
    for (mode, dtype, shape), r in by_key.items():
        name = f"encoder {mode} {dtype} {shape}"
        rows.append((name, r["ratio"], TARGETS.get(name)))
        if "ratio_same_adamw" in r:
            rows.append((f"{name}, reference with fused AdamW too", r["ratio_same_adamw"], None))
    for shape in sorted({k[2] for k in by_key}, key=lambda s: int(s.split("x")[1])):
        fp32, bf16 = by_key.get(("train", "fp32", shape)), by_key.get(("train", "bf16", shape))
        if fp32 and bf16:
            name = f"bertlab bf16 / fp32 train {shape}"
            rows.append((name, round(bf16["bertlab_tokens_per_s"] / fp32["bertlab_tokens_per_s"], 3),
                         TARGETS.get(name)))
            rows.append((f"HF bf16 / fp32 train {shape}",
                         round(bf16["hf_tokens_per_s"] / fp32["hf_tokens_per_s"], 3), None))
    labels = {"sst2": "SST-2", "conll": "CoNLL-2003", "squad": "SQuAD v1.1"}
    for case in (results.get("end_to_end") or {}).get("cases", []):
        for key, value in case["ratios"].items():
            if key.startswith("vs_trainer_"):
                pad = "pad to max" if "_max_" in key else "dynamic padding"
                if case["task"] == "squad":
                    pad = "run_qa, windows padded to 384"
                name = f"{labels[case['task']]} end-to-end vs Trainer ({pad})"
            else:
                name = f"{labels[case['task']]} end-to-end bertlab bf16-mixed / fp32"
            rows.append((name, value, TARGETS.get(name)))
    for r in (results.get("preprocess") or {}).get("rows", []):
        name = f"preprocessing {r['task']}"
        rows.append((name, r["ratio"], TARGETS.get(name)))
    for model_type, r in ((results.get("families") or {}).get("families") or {}).items():
        name = f"families: {model_type}-base encoder train, SST-2 random batches, vs transformers"
        rows.append((name, r.get("ratio_vs_hf"), TARGETS.get(name)))
    pred = results.get("predict") or {}
    for key, label in (("sst2", "SST-2 dev"), ("conll", "CoNLL-2003 testa")):
        for side, backend in (("bertlab_torch", "torch"), ("bertlab_onnx", "onnx"), ("bertlab_onnx_int8", "onnx int8")):
            r = ((pred.get(key) or {}).get("sides") or {}).get(side)
            if r and "speed_vs_pipeline" in r:  # predict_speed.py --sides may leave the pipeline out
                name = f"predict: {label}, bertlab {backend} vs pipeline"
                rows.append((name, r["speed_vs_pipeline"], TARGETS.get(name)))
    for side, backend in (("student_torch", "torch"), ("student_onnx_int8", "onnx int8")):
        r = ((pred.get("sst2") or {}).get("sides") or {}).get(side)
        if r and "speed_vs_teacher" in r:
            name = f"predict: SST-2 dev, distilled 3-layer student vs its teacher, {backend}"
            rows.append((name, r["speed_vs_teacher"], TARGETS.get(name)))
    emb = results.get("embedding") or {}
    if (emb.get("encode") or {}).get("sides"):
        name = "embedding: encode SQuAD paragraphs, bertlab predict vs SentenceTransformer.encode"
        rows.append((name, emb["encode"]["sides"]["speed_vs_st"], TARGETS.get(name)))
    if (emb.get("memory") or {}).get("bertlab_cached_256_vs_32"):
        name = "embedding: peak RSS batch 32 / batch 256 cached (1/1.3 = 0.77)"
        rows.append((name, round(1 / emb["memory"]["bertlab_cached_256_vs_32"], 3), TARGETS.get(name)))
    return rows + unpadded_ratio_rows(results.get("unpadded") or {})


def unpadded_ratio_rows(unp: dict[str, Any]) -> list[tuple[str, float | None, float | None]]:
    names = []
    enc = unp.get("encoder") or {}
    for key, name in (("unpadded_vs_hf", "encoder train, SST-2 random batches, vs HF sdpa"),
                      ("unpadded_vs_hf_fused", "encoder train, SST-2 random batches, vs HF sdpa + fused AdamW"),
                      ("unpadded_vs_padded", "encoder train, SST-2 random batches, vs bertlab padded")):
        if key in enc.get("ratios", {}):
            names.append((name, enc["ratios"][key]))
    for key, name in (("auto_random_vs_padded_random", "SST-2 end-to-end random order, auto / padded"),
                      ("auto_random_vs_trainer_dynamic",
                       "SST-2 end-to-end random order, auto / Trainer (dynamic padding)"),
                      ("auto_random_vs_padded_grouped",
                       "SST-2 end-to-end, auto random order / padded length-grouped"),
                      ("auto_grouped_vs_padded_grouped", "SST-2 end-to-end length-grouped, auto / padded")):
        if key in (unp.get("sst2") or {}).get("ratios", {}):
            names.append((name, unp["sst2"]["ratios"][key]))
    if "auto_random_vs_padded_random" in (unp.get("conll") or {}).get("ratios", {}):
        names.append(("CoNLL-2003 end-to-end random order, auto / padded",
                      unp["conll"]["ratios"]["auto_random_vs_padded_random"]))
    for row in unp.get("fixed") or []:
        for mode in ("true", "auto"):
            names.append((f"encoder train {row['batch']}x{row['seq']} (no padding), unpad={mode} / padded",
                          row["ratios"][f"{mode}_vs_padded"]))
        if "cls_auto_vs_padded" in row["ratios"]:
            names.append((f"[CLS]-head train {row['batch']}x{row['seq']} (no padding), unpad=auto / padded",
                          row["ratios"]["cls_auto_vs_padded"]))
    for path, row in ((unp.get("compile") or {}).get("paths") or {}).items():
        names.append((f"encoder train, SST-2 random batches, {path}, model.compile=true / eager",
                      row["compiled_vs_eager"]))
    return [(f"unpadded: {name}", value, TARGETS.get(f"unpadded: {name}")) for name, value in names]


def render_unpadded(unp: dict[str, Any]) -> list[str]:
    """The "Unpadded path" section of the report: absolute figures behind the unpadded ratios."""
    out = ["", "## Unpadded path (benchmarks/unpadded.py)", ""]
    enc = unp.get("encoder")
    if enc:
        out += [f"Encoder train step, {enc['batches']} batches of 32 SST-2 sentences in random order, "
                f"{100 * enc['real_fraction']:.0f} % of the padded positions real; real tokens/s, median of "
                f"{unp['repeats']} interleaved passes ({unp['checkpoint']}).", ""]
        out.append(markdown_table(("side", "real tok/s"), list(enc["real_tokens_per_s"].items())))
        out.append("")
    rows = []
    for row in unp.get("fixed") or []:
        t = row["real_tokens_per_s"]
        rows.append((f"{row['batch']} × {row['seq']}", t["unpad_true"], t["unpad_auto"], t["padded"],
                     t.get("cls_auto", "—"), t.get("cls_padded", "—")))
    if rows:
        out += ["Fixed shapes, no padding (tokens/s); the last two columns train through the pooler alone, as a "
                "[CLS] head does (the unpadded path then runs the last layer on the [CLS] tokens only):", ""]
        out.append(markdown_table(("batch × seq", "unpad=true", "unpad=auto", "unpad=false", "[CLS] head, auto",
                                   "[CLS] head, unpad=false"), rows))
        out.append("")
    comp = unp.get("compile")
    if comp:
        out += [f"`model.compile=true` (the encoder compiled with dynamic shapes) vs eager, train steps on the "
                f"{comp['batches']} SST-2 batches above; real tokens/s:", ""]
        out.append(markdown_table(("path", "first pass s (compiling)", "eager", "compiled", "compiled / eager"),
                                  [(p, r["first_pass_s"], r["real_tokens_per_s"]["eager"],
                                    r["real_tokens_per_s"]["compiled"], r["compiled_vs_eager"])
                                   for p, r in comp["paths"].items()]))
        out.append("")
    prof = unp.get("profile")
    if prof:
        padded, unpadded = prof["ms_per_step"]["padded"], prof["ms_per_step"]["unpadded"]
        out += [f"Where the time goes: ms per train step on the SST-2 batches above, self CPU time of each op under "
                f"torch.profiler ({prof['batches']} batches; the profiler adds overhead — read the shares):", ""]
        out.append(markdown_table(("component", "padded ms", "unpadded ms"),
                                  [(k, padded[k], unpadded[k]) for k in padded]
                                  + [("total", round(sum(padded.values()), 1), round(sum(unpadded.values()), 1))]))
        out.append("")
    rows = []
    for task, label in (("sst2", "SST-2"), ("conll", "CoNLL-2003")):
        case = unp.get(task)
        for side, r in ((case or {}).get("sides") or {}).items():
            every = " / ".join(f"{x:.1f}" for x in r.get("samples_per_s_rounds", []))
            rows.append((label, side, f"{case['steps']} × {case['batch_size']}", r["samples_per_s"], every or "—",
                         r["train_wall_s"], r["process_wall_s"], r["peak_rss_mib"]))
    if rows:
        rounds = max((unp.get(t) or {}).get("rounds", 1) for t in ("sst2", "conll"))
        out += ["End to end (`auto_random` = the new default in random order; `padded_grouped` = "
                "`data.group_by_length=true model.unpad=false`; `hf_dynamic` = the Trainer, dynamic padding, "
                f"random order). Each side ran once per round, sides in turn, {rounds} round(s); the row is the "
                "run of median samples/s:", ""]
        out.append(markdown_table(("task", "side", "steps × batch", "samples/s", "every round", "train loop s",
                                   "process s", "peak RSS MiB"), rows))
        if unp.get("note"):
            out += ["", unp["note"] + "."]
    return out


def render_embedding(emb: dict[str, Any]) -> list[str]:
    out = []
    enc = emb.get("encode") or {}
    if enc.get("sides"):
        sides = enc["sides"]
        out += ["", f"## Embedding a corpus ({enc['texts']} SQuAD paragraphs, batch {enc['batch_size']}, max length "
                f"{enc['max_seq_length']}; whole processes, median)", "",
                markdown_table(("side", "wall s", "texts/s", "vs st_encode", "max abs diff to st_encode", "lowest cosine",
                                "peak RSS MiB"),
                               [(side, r["wall_s"], r["texts_per_s"], f"{r['speed_vs_st']:.2f}×" if "speed_vs_st" in r
                                 else "", f"{r['max_abs_diff_vs_st']:.1e}" if "max_abs_diff_vs_st" in r else "",
                                 f"{r['min_cosine_vs_st']:.6f}" if "min_cosine_vs_st" in r else "", r["peak_rss_mib"])
                                for side, r in sides.items() if isinstance(r, dict) and "wall_s" in r]),
                "", f"Largest |Δ| between bertlab's (torch) and sentence-transformers' matrices: "
                f"{sides['max_abs_diff']:.2e}."]
    mem = emb.get("memory") or {}
    if mem.get("cases"):
        out += ["", f"## Embedding training step memory (all-MiniLM-L6-v2, SQuAD pairs, max length "
                f"{mem['max_seq_length']}; one step per process)", "",
                markdown_table(("case", "peak RSS MiB", "RSS before the step MiB"),
                               [(name, r["peak_rss_mib"] if "killed" not in r else
                                 f"killed at {r['peak_rss_mib']} ({r['killed']})", r.get("rss_before_step_mib", "–"))
                                for name, r in mem["cases"].items()])]
    return out


def render(results: dict[str, Any], quick: bool, threads: int, load_before, load_after, started: str) -> str:
    machine = results["machine"]
    out = [
        "# bertlab vs the Hugging Face reference",
        "",
        f"`make bench{' ARGS=--quick' if quick else ''}` — {started}, {threads} torch threads per side, "
        f"load average {load_before[0]:.2f} at the start and {load_after[0]:.2f} at the end "
        f"({machine['usable_cpus']} usable CPUs). Ratios are bertlab ÷ reference measured in this run; "
        "above 1 means bertlab is faster.",
    ]
    if quick:
        out += ["", "**Quick mode** (smoke check): small shapes and a few steps; these ratios are not the "
                "acceptance measurement."]
    out += ["", "## Ratios", ""]
    rows = []
    for name, ratio, target in ratio_rows(results):
        met = "" if target is None or ratio is None else ("yes" if ratio >= target else "**no**")
        rows.append((name, "—" if ratio is None else f"{ratio:.2f}×",
                     "" if target is None else f"≥ {target:g}×", met))
    out.append(markdown_table(("measure", "ratio", "target", "met"), rows))

    enc = results.get("encoder") or {}
    if enc.get("rows"):
        out += ["", "## Encoder (tokens/s, median; MFU against the measured matmul peak)", "",
                f"all-MiniLM-L6-v2, {enc['non_embedding_params']:,} non-embedding parameters; {enc['warmup']} "
                f"warm-up + {enc['repeats']} interleaved repeats per side; matmul peak fp32 / bf16 "
                f"{enc['machine']['matmul_peak_gflops']['float32']} / "
                f"{enc['machine']['matmul_peak_gflops']['bfloat16']} GFLOP/s. AdamW: bertlab "
                f"{enc['optimizers']['bertlab']}; reference `hf` as the reference measurement "
                f"(`torch.optim.AdamW(params, lr=1e-5)`: {enc['optimizers']['hf']} on CPU) and `hf fused` with "
                "the kernel `Trainer` uses by default (`adamw_torch_fused`). Train step = forward, "
                "`last_hidden_state.float().pow(2).mean()`, backward, AdamW, zero_grad.", ""]

        out.append(markdown_table(
            ("mode", "dtype", "batch × seq", "bertlab tok/s", "HF tok/s", "HF fused tok/s", "ratio",
             "ratio vs HF fused", "MFU bertlab / HF"),
            [(r["mode"], r["dtype"], f"{r['batch']} × {r['seq']}", r["bertlab_tokens_per_s"], r["hf_tokens_per_s"],
              r.get("hf_fused_tokens_per_s", "—"), f"{r['ratio']:.2f}",
              f"{r['ratio_same_adamw']:.2f}" if "ratio_same_adamw" in r else "—",
              f"{100 * r['bertlab_mfu']:.1f} % / {100 * r['hf_mfu']:.1f} %")
             for r in enc["rows"]]))
    e2e = results.get("end_to_end") or {}
    if e2e.get("cases"):
        out += ["", "## End-to-end fine-tuning (training loop, data loading included)", "",
                "Same first N training examples, batch 32, same optimizer steps, one process per side. "
                "bertlab: `train.samples_per_s` of `metrics.json`; Trainer: steps × 32 / wall time of "
                "`trainer.train()`. Process wall time includes start-up, tokenization and (bertlab) a final "
                "validation on 32 examples; peak RSS is the whole process.", ""]
        rows = []
        for case in e2e["cases"]:
            sides = [("bertlab", case["bertlab"])]
            sides += [(f"Trainer, {pad} padding" if case["task"] != "squad" else "Trainer (run_qa, pad 384)", r)
                      for pad, r in case["hf"].items()]
            if "bertlab_bf16_mixed" in case:
                sides.append(("bertlab bf16-mixed", case["bertlab_bf16_mixed"]))
            for label, r in sides:
                rows.append((case["task"], label, f"{case['steps']} × {case['batch_size']}", r["samples_per_s"],
                             r["train_wall_s"], r["process_wall_s"], r["peak_rss_mib"]))
        out.append(markdown_table(("task", "side", "steps × batch", "samples/s", "train loop s", "process s",
                                   "peak RSS MiB"), rows))
    pre = results.get("preprocess") or {}
    if pre.get("rows"):
        out += ["", "## Preprocessing (file → training features, median of "
                f"{pre['repeats']})", ""]
        out.append(markdown_table(
            ("task", "file", "examples", "features bertlab / HF", "bertlab ex/s", "HF recipe ex/s", "ratio"),
            [(r["task"], r["file"], r["examples"], f"{r['bertlab_features']} / {r['hf_features']}",
              r["bertlab_examples_per_s"], r["hf_examples_per_s"], f"{r['ratio']:.2f}") for r in pre["rows"]]))
    if (results.get("unpadded") or {}).get("benchmark") == "unpadded":
        out += render_unpadded(results["unpadded"])
    out += render_embedding(results.get("embedding") or {})
    abl = results.get("ablations") or {}
    if abl.get("rows"):
        out += ["", "## Ablations (bertlab encoder)", ""]
        for row in abl["rows"]:
            out.append("- " + ", ".join(f"{k}={v}" for k, v in row.items()))
    failed = [k for k, v in results.items() if isinstance(v, dict) and "error" in v]
    if failed:
        out += ["", "## Failed", ""] + [f"- {k}: see results.json" for k in failed]
    out += ["", "## When each part was measured", ""]
    out.append(markdown_table(("part", "at", "load average (1 min) start → end", "wall s"), [
        (name, m["at"], f"{m['load_start']:.2f} → {m['load_end']:.2f}", m["wall_s"])
        for name in ("encoder", "preprocess", "end_to_end", "unpadded", "families", "embedding", "ablations")
        if isinstance(results.get(name), dict) and (m := results[name].get("measured"))]))
    out += ["", "## Machine", ""]
    peak = dict(machine.get("matmul_peak_gflops", {}))
    for name, value in ((results.get("encoder") or {}).get("machine", {}).get("matmul_peak_gflops") or {}).items():
        peak[name] = max(value, peak.get(name, 0.0))  # the best of this run's measurements
    out.append(markdown_table(("", ""), [
        ("CPU", f"{machine['cpu']} ({', '.join(machine['isa'])})"),
        ("CPUs", f"{machine['logical_cpus']} logical, {machine['usable_cpus']} usable"),
        ("memory", f"{machine['memory_gib']} GiB"),
        ("matmul peak 2048², fp32 / bf16", f"{peak.get('float32', '?')} / {peak.get('bfloat16', '?')} GFLOP/s"),
        ("torch threads per side", threads),
        ("python / torch / transformers / lightning / tokenizers",
         f"{machine['python']} / {machine['torch']} / {machine['transformers']} / {machine['lightning']} / "
         f"{machine['tokenizers']}"),
    ]))
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small shapes and a few steps: a smoke check")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip", default="", help="comma-separated: encoder,end_to_end,preprocess,unpadded,families,predict,"
                   "embedding")
    p.add_argument("--ablations", action="store_true", help="also the mask / AdamW studies (benchmarks/ablations.py)")
    p.add_argument("--compile", action="store_true", help="the torch.compile measurements too (minutes of compiling): model.compile on "
                   "both encoder paths in the unpadded section, and with --ablations the fixed-shape study")
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--update", default="", help="re-measure only these sections (encoder,preprocess,end_to_end,"
                   "unpadded,ablations) and keep the others of the existing results.json (e.g. after a busy "
                   "stretch)")
    a = p.parse_args(argv)
    out_dir = a.out or (RESULTS_DIR / "quick" if a.quick else RESULTS_DIR)
    quick = ["--quick"] if a.quick else []
    data = ["--data-dir", str(a.data_dir.resolve())]
    # predict trains two MiniLM runs and a distilled student first (minutes), so a --quick smoke check leaves it out.
    sections = (["encoder", "preprocess", "end_to_end", "unpadded", "families", "embedding"]
                + ([] if a.quick else ["predict"])
                + (["ablations"] if a.ablations else []))
    sections = [s for s in sections if s not in a.skip.split(",")]
    if a.update:
        results: dict[str, Any] = json.loads((out_dir / "results.json").read_text())
        sections = [s for s in a.update.split(",") if s]
    else:
        results = {"quick": a.quick, "threads": a.threads, "started": time.strftime("%Y-%m-%d %H:%M %Z"),
                   "machine": machine_description(a.threads),
                   "load_average": {"start": load_average(), "end": None}}
    unpadded_sections = ["encoder", "sst2", "conll", "fixed", "profile", "compile"]
    scripts = {
        "encoder": ("encoder_speed", quick),
        "preprocess": ("preprocess_speed", quick + data),
        "end_to_end": ("end_to_end", quick + data + ([] if a.quick else ["--bf16"])),
        "unpadded": ("unpadded", quick + data + (["--only", ",".join(unpadded_sections)] if a.compile else [])),
        "ablations": ("ablations", quick + (["--compile"] if a.compile else [])),
        "families": ("families", (["--tiny"] if a.quick else []) + data),
        "predict": ("predict_speed", ["--train", "--rounds", "3"] + data),
        "embedding": ("embedding_speed", ["--train", "--rounds", "3"] + (["--tiny"] if a.quick else []) + data),
    }
    with tempfile.TemporaryDirectory(prefix="bench_raw_") as raw:
        for section in sections:
            name, args = scripts[section]
            results[section] = run_script(name, args, results["threads"], Path(raw))
    if not a.update:
        results["load_average"]["end"] = load_average()
    write_json(out_dir / "results.json", results)
    load = results["load_average"]
    (out_dir / "RESULTS.md").write_text(render(results, results["quick"], results["threads"], load["start"],
                                               load["end"], results["started"]))
    print((out_dir / "RESULTS.md").read_text())
    print(f"[bench] wrote {out_dir / 'RESULTS.md'} and results.json", file=sys.stderr)
    return 1 if any(isinstance(v, dict) and "error" in v for v in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
