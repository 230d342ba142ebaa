"""End-to-end fine-tuning throughput: bertlab's ``train.py`` vs ``transformers.Trainer`` (``hf_reference.py``).

Each side runs in its own process with the same threads, the same first N training examples, batch 32 and
the same number of optimizer steps (N = steps × 32, one epoch). bertlab's figure is ``train.samples_per_s``
from its ``metrics.json`` (the training loop: data loading, forward, backward, clipping, optimizer,
scheduler, logging; validation excluded); the Trainer's is steps × batch over the wall time of
``trainer.train()``. Both include data loading; neither includes tokenization (done before training), which
``preprocess_speed.py`` measures. Each process's peak resident memory comes from ``os.wait4``.

Cases: SST-2 (bertlab vs Trainer with run_glue's default padding to 128, and vs Trainer with dynamic padding),
CoNLL-2003 (run_ner, dynamic padding; both at max length 128) and SQuAD v1.1 (run_qa, 384/128 windows padded
to 384; bertlab pads windows per batch).

    python benchmarks/end_to_end.py [--quick] [--threads 2] [--only sst2,conll,squad] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, SHARED_DATA, ChildRun, emit, last_json_line, python, run_child, thread_env  # noqa: E402


@dataclass(frozen=True)
class Case:
    task: str  # hf_reference.py's name
    bertlab_task: str
    steps: int
    max_train: int  # examples (questions for SQuAD) given to both sides
    hf_pads: tuple[str, ...] = ("dynamic",)
    bertlab_overrides: tuple[str, ...] = field(default_factory=tuple)


BATCH = 32


def cases(quick: bool) -> list[Case]:
    sst_steps, conll_steps, squad_steps = (4, 4, 2) if quick else (100, 100, 20)
    return [
        # bertlab's length-grouped batches (the SST-2 and token-task presets read them in random order, for quality).
        Case("sst2", "sst2", sst_steps, sst_steps * BATCH, hf_pads=("max", "dynamic"),
             bertlab_overrides=("data.group_by_length=true",)),
        Case("conll", "conll2003", conll_steps, conll_steps * BATCH,
             bertlab_overrides=("data.max_seq_length=128", "data.group_by_length=true")),
        # Questions: every one yields at least one window, so steps × batch questions fill the steps.
        Case("squad", "squad", squad_steps, squad_steps * BATCH, hf_pads=("max",)),  # run_qa pads to 384
    ]


def run_bertlab(case: Case, data_dir: Path, threads: int, workdir: Path, extra: tuple[str, ...] = (),
                batch: int = BATCH) -> dict:
    run_dir = workdir / f"bertlab_{case.bertlab_task}_{len(list(workdir.glob('bertlab_*')))}"
    cmd = [python(), str(REPO / "train.py"), "model=minilm_l6", f"task={case.bertlab_task}", "trainer=cpu",
           "freeze=none", f"data.batch_size={batch}", f"data.max_train_samples={case.max_train}",
           "data.max_eval_samples=32", f"trainer.max_steps={case.steps}", "trainer.max_epochs=1000",
           "trainer.enable_progress_bar=false", "test=false", f"hydra.run.dir={run_dir}",
           f"paths.data_dir={data_dir}", f"paths.cache_dir={workdir / 'cache'}", f"paths.log_dir={workdir / 'logs'}",
           *case.bertlab_overrides, *extra]
    child = run_child(cmd, env=thread_env(threads)).check(f"bertlab {case.bertlab_task}")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    train = metrics["train"]
    return {"side": "bertlab", "task": case.task, "steps": train["steps"], "samples_per_s": train["samples_per_s"],
            "tokens_per_s": train["tokens_per_s"], "train_wall_s": train["wall_s"], **_process(child),
            "overrides": list(extra)}


def run_hf(case: Case, pad: str, data_dir: Path, threads: int) -> dict:
    cmd = [python(), str(REPO / "benchmarks" / "hf_reference.py"), case.task, str(data_dir),
           "--max-train", str(case.max_train), "--steps", str(case.steps), "--bs", str(BATCH), "--pad", pad,
           "--threads", str(threads)]
    child = run_child(cmd, env=thread_env(threads)).check(f"hf_reference {case.task} --pad {pad}")
    return {**last_json_line(child.stdout), **_process(child)}


def _process(child: ChildRun) -> dict[str, float]:
    return {"process_wall_s": round(child.wall_s, 2), "peak_rss_mib": round(child.peak_rss_mib, 1)}


def run(quick: bool, threads: int, only: set[str] | None, data_dir: Path, bf16: bool) -> dict[str, Any]:
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_e2e_") as tmp:
        workdir = Path(tmp)
        for case in cases(quick):
            if only and case.task not in only:
                continue
            # bertlab, then each reference: the sides alternate across cases.
            ours = run_bertlab(case, data_dir, threads, workdir)
            print(f"bertlab {case.task}: {ours['samples_per_s']:.1f} samples/s", file=sys.stderr)
            entry: dict[str, Any] = {"task": case.task, "steps": case.steps, "batch_size": BATCH,
                                     "train_examples": case.max_train, "bertlab": ours, "hf": {}, "ratios": {}}
            for pad in case.hf_pads:
                ref = run_hf(case, pad, data_dir, threads)
                entry["hf"][pad] = ref
                entry["ratios"][f"vs_trainer_{pad}_padding"] = round(ours["samples_per_s"] / ref["samples_per_s"], 3)
                print(f"hf {case.task} pad={pad}: {ref['samples_per_s']:.1f} samples/s", file=sys.stderr)
            if bf16 and case.task == "sst2":
                mixed = run_bertlab(case, data_dir, threads, workdir, extra=("trainer.precision=bf16-mixed",))
                entry["bertlab_bf16_mixed"] = mixed
                entry["ratios"]["bf16_mixed_vs_fp32"] = round(mixed["samples_per_s"] / ours["samples_per_s"], 3)
            results.append(entry)
    return {"benchmark": "end_to_end", "threads": threads, "quick": quick, "cases": results}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a few steps per case: a smoke check")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", default="", help="comma-separated subset of sst2,conll,squad")
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    p.add_argument("--bf16", action="store_true", help="also bertlab SST-2 with trainer.precision=bf16-mixed")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    if not (a.data_dir / "sst2").is_dir():
        raise SystemExit(f"no datasets under {a.data_dir}: pass --data-dir (the layout of ../shared/data)")
    only = {x for x in a.only.split(",") if x} or None
    result = run(a.quick, a.threads, only, a.data_dir.resolve(), a.bf16)
    emit(result, a.json)
    return result


if __name__ == "__main__":
    main()
