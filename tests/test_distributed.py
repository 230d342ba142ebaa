"""Scale: DDP on CPU through the real CLI (one run folder, rank-0 files, exact evaluation equal to a
single-process evaluation of the same checkpoint), multirun + DDP, precision checks, bf16-mixed on CPU for
every task family, and the batch-size / step arithmetic of bertlab's samplers."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import FIXTURE_DATA, ROOT, compose, run_train

from bertlab.data.batching import EvalBatchSampler, TrainBatchSampler
from bertlab.models.bert import BertModel
from bertlab.models.heads import TaskModel
from bertlab.runtime.config import ConfigError, EncoderConfig, HeadConfig, TaskSpec
from bertlab.runtime.launch import job_argv
from bertlab.tasks.families import build_family
from bertlab.training.distributed import build_strategy, check_precision, resolve_pad_multiple

TINY = ("model=bert_tiny", "trainer.max_epochs=1", "data.batch_size=8", "logger=csv")

# ----------------------------------------------------------------------------------------------------------
# Precision


def test_16_mixed_needs_a_gpu():
    with pytest.raises(ConfigError, match=r"16-mixed needs a GPU.*bf16-mixed on CPU"):
        check_precision("16-mixed", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="bf16-mixed"):
            check_precision("16-mixed", "auto")
    for ok in ("32-true", "bf16-mixed", 32):
        check_precision(ok, "cpu")
    check_precision("16-mixed", "gpu")  # the GPU itself is checked by Lightning


def test_16_mixed_on_cpu_fails_before_any_work(train_run, tmp_path):
    with pytest.raises(ConfigError, match="trainer.precision=16-mixed needs a GPU"):
        train_run(*TINY, "task=sst2", "trainer.precision=16-mixed")
    assert not (tmp_path / "cache").exists()  # nothing was read or tokenized


def test_pad_multiple_default():
    assert resolve_pad_multiple(None, "32-true", "cpu") is None
    assert resolve_pad_multiple(None, "bf16-mixed", "cpu") is None  # measured slower on CPU
    assert resolve_pad_multiple(None, "bf16-mixed", "gpu") == 8
    assert resolve_pad_multiple(None, "16-mixed", "cuda") == 8
    assert resolve_pad_multiple(None, "32-true", "gpu") is None
    assert resolve_pad_multiple(16, "32-true", "cpu") == 16  # an explicit value wins
    assert resolve_pad_multiple(1, "bf16-mixed", "gpu") is None  # 1 switches it off


@pytest.mark.parametrize("family", ["sequence", "token", "qa", "mlm"])
def test_logits_and_losses_are_float32_under_bf16_autocast(family):
    torch.manual_seed(0)
    config = EncoderConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64)
    task = TaskSpec(name="t", family=family, labels=["O", "B-X", "I-X"] if family == "token" else None)
    labels = task.labels or (["0", "1"] if family == "sequence" else None)
    fam = build_family(task, len(labels or []), labels, data_cfg=None)
    bert = BertModel(config, add_pooling_layer=family == "sequence")
    model = TaskModel(bert, fam.build_head(config, HeadConfig(), bert.embeddings.word_embeddings), None)
    ids = torch.randint(5, 50, (3, 12))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
             "index": torch.arange(3)}
    if family == "sequence":
        batch["labels"] = torch.tensor([0, 1, 1])
    elif family == "token":
        batch["labels"] = torch.randint(0, 3, (3, 12))
    elif family == "qa":
        batch["start_positions"], batch["end_positions"] = torch.tensor([1, 2, 3]), torch.tensor([2, 4, 3])
    else:
        batch["labels"] = torch.where(torch.rand(3, 12) < 0.3, ids, torch.full_like(ids, -100))
        batch["labels"][:, 0] = ids[:, 0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(batch, **fam.head_kwargs(batch))
        loss = fam.loss(out, batch)
    logits = out[0] if isinstance(out, tuple) else out
    assert logits.dtype == torch.float32 and loss.dtype == torch.float32 and torch.isfinite(loss)


@pytest.mark.parametrize("task", ["sst2", "conll2003", "squad", "mlm"])
def test_bf16_mixed_on_cpu_runs_every_task(train_run, task):
    m = train_run(*TINY, f"task={task}", "trainer.precision=bf16-mixed", "trainer.max_steps=2")
    assert m["train"]["steps"] == 2 and math.isfinite(m["val"]["loss"])
    assert m["val"]["num_examples"] == m["data"]["val_examples"] > 0


# ----------------------------------------------------------------------------------------------------------
# Samplers: every rank the same number of training batches; every evaluation example exactly once


@pytest.mark.parametrize("world", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("n,batch", [(40, 8), (13, 3), (5, 4), (1, 2)])
def test_train_batches_split_evenly_across_ranks(world, n, batch):
    lengths = np.random.default_rng(0).integers(3, 40, n)
    samplers = [TrainBatchSampler(lengths, batch, seed=1, rank=r, world_size=world) for r in range(world)]
    batches = [list(s) for s in samplers]
    expected = math.ceil(math.ceil(n / batch) / world)
    assert all(len(s) == expected == len(b) for s, b in zip(samplers, batches))
    seen = [i for rank in batches for b in rank for i in b]
    assert set(seen) == set(range(n))  # the epoch covers every example (cycled batches repeat a few)


@pytest.mark.parametrize("world", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("batch", [1, 3, 5, 64])
def test_eval_batches_cover_every_example_exactly_once(world, batch):
    lengths = np.random.default_rng(1).integers(3, 40, 13)
    seen = [i for r in range(world) for b in EvalBatchSampler(lengths, batch, rank=r, world_size=world) for i in b]
    assert sorted(seen) == list(range(13))


def test_steps_follow_per_device_batch_and_accumulation(train_run, tmp_path):
    # 40 examples / 8 per batch = 5 batches; accumulate 2 → ceil(5 / 2) = 3 optimizer steps per epoch.
    m = train_run("model=bert_tiny", "task=sst2", "data.batch_size=8", "trainer.max_epochs=2",
                  "trainer.accumulate_grad_batches=2", "trainer.log_every_n_steps=1", "logger=csv")
    assert m["train"]["steps"] == 6
    _check_lr_schedule_ends_at_last_step(tmp_path / "run", steps=6)


def _check_lr_schedule_ends_at_last_step(run_dir: Path, steps: int, lr: float = 5e-5, warmup_ratio: float = 0.1):
    """The schedule's length is Lightning's estimated_stepping_batches: the lr logged at the last step is
    that of linear decay reaching 0 exactly one step after the last optimizer step."""
    rows = list(csv.DictReader(open(run_dir / "csv" / "metrics.csv")))
    column = next(c for c in rows[0] if c.startswith("lr-"))
    logged = [(int(r["step"]), float(r[column])) for r in rows if r.get(column)]
    step, value = max(logged)
    warmup = math.ceil(steps * warmup_ratio)
    assert step == steps - 1
    assert value == pytest.approx(lr * (steps - step) / (steps - warmup), rel=1e-6)


# ----------------------------------------------------------------------------------------------------------
# Trainer presets (the GPU ones are only composed here: Lightning refuses FSDP/DeepSpeed on CPU)


def test_trainer_presets_compose(tmp_path):
    from lightning.pytorch.strategies import FSDPStrategy
    from omegaconf import OmegaConf

    def trainer(name):
        return OmegaConf.to_container(compose([f"trainer={name}"], tmp_path / name).trainer, resolve=True)

    assert trainer("ddp_cpu")["devices"] == 2 and trainer("ddp_cpu")["strategy"] == "ddp"
    assert trainer("ddp")["strategy"] == "ddp" and trainer("deepspeed")["strategy"] == "deepspeed_stage_2"
    for name in ("default", "cpu", "gpu", "ddp", "ddp_cpu", "fsdp", "deepspeed"):
        t = trainer(name)
        assert t["num_nodes"] == 1 and t["precision"] == "32-true", name
    fsdp = build_strategy(trainer("fsdp")["strategy"])
    assert isinstance(fsdp, FSDPStrategy) and fsdp.kwargs["use_orig_params"] is True
    assert fsdp._state_dict_type == "full"  # checkpoints stay single files: eval, init_from, export read them
    assert build_strategy("ddp") == "ddp"


def test_fsdp_wraps_the_layer_of_every_native_family():
    """The shard unit comes from the registry: each family's encoder layer (DeBERTa's and ModernBERT's too),
    and the class is the one a built encoder of that family holds."""
    import torch.nn as nn

    from bertlab.models.families import families
    from bertlab.training.distributed import fsdp_strategy

    strategy = fsdp_strategy(activation_checkpointing=True)
    wrapped = strategy.kwargs["auto_wrap_policy"]._module_classes
    checkpointed = strategy._activation_checkpointing_kwargs["auto_wrap_policy"]._module_classes
    from bertlab.models.families import tiny_config

    for name, spec in families().items():
        assert spec.layer_class in wrapped and spec.layer_class in checkpointed, name
        assert issubclass(spec.layer_class, nn.Module) and spec.layer_class.__name__.endswith("Layer"), name
        # A built encoder of the family (its tiny model) is made of exactly those units, one per layer.
        config = spec.read_config(tiny_config(name), "test")
        units = [m for m in spec.build_encoder(config, add_pooling_layer=False).modules()
                 if isinstance(m, spec.layer_class)]
        assert len(units) == config.num_hidden_layers, name
    assert len({spec.layer_class for spec in families().values()}) >= 3  # BERT-shaped, DeBERTa, ModernBERT


# ----------------------------------------------------------------------------------------------------------
# Multirun + DDP: the command line a rank re-runs


def _init_one_process_group(store_file: Path) -> None:
    store = torch.distributed.FileStore(str(store_file), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)


def test_a_finished_job_destroys_its_process_group(tmp_path, monkeypatch):
    """A gloo group left to interpreter shutdown can abort a finished rank (exit -6 under torchrun)."""
    from bertlab.runtime.launch import HydraDDPJob

    monkeypatch.setenv("LOCAL_RANK", "0")  # a rank some launcher started
    _init_one_process_group(tmp_path / "store")
    with HydraDDPJob():
        torch.distributed.barrier()
    assert not torch.distributed.is_initialized()

    _init_one_process_group(tmp_path / "store2")  # a failed run keeps it: peers may still be in a collective
    with pytest.raises(RuntimeError), HydraDDPJob():
        raise RuntimeError("rank failed")
    assert torch.distributed.is_initialized()
    torch.distributed.destroy_process_group()


def test_job_argv_recreates_one_job():
    argv = ["/x/train.py", "-m", "--config-dir", "/extra", "task=sst2,rte", "seed=1,2", "trainer=ddp_cpu",
            "hydra.sweep.dir=/s"]
    out = job_argv(argv, task_overrides=["task=rte", "seed=2", "trainer=ddp_cpu"],
                   hydra_overrides=["hydra.mode=MULTIRUN", "hydra.sweep.dir=/s", "hydra.verbose=true",
                                    "hydra/sweeper=bertlab_optuna"])
    assert out == ["/x/train.py", "--config-dir", "/extra", "hydra.verbose=true", "task=rte", "seed=2",
                   "trainer=ddp_cpu", "hydra.mode=RUN"]


# ----------------------------------------------------------------------------------------------------------
# DDP through the real command line (Lightning re-runs train.py for rank 1)

RANK0_FILES = {".hydra", ".bertlab-run.json", ".bertlab-run.lock", "checkpoints", "csv", "metrics.json", "tokenizer",
               "train.log", "update_scope.json"}
RANK1_LOG = "train_ddp_process_1.log"  # each extra rank's own log (Lightning names its Hydra job so)


def _cli(args: list[str], cwd: Path, multirun: bool = False, launcher: tuple[str, ...] = ()
         ) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HYDRA_FULL_ERROR": "1"}
    for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_PORT", "SLURM_PROCID"):
        env.pop(key, None)
    cmd = [*(launcher or [sys.executable]), str(ROOT / "train.py"), *(["-m"] if multirun else []), "model=bert_tiny", "trainer=ddp_cpu", "logger=csv",
           f"paths.data_dir={FIXTURE_DATA}", "trainer.enable_progress_bar=false", "trainer.max_epochs=1",
           "data.batch_size=8", *args]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


def _check_run_dir(run_dir: Path, extra: set[str] = frozenset()) -> dict:
    assert {p.name for p in run_dir.iterdir()} == RANK0_FILES | {RANK1_LOG} | set(extra)
    ckpts = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert "last.ckpt" in ckpts and len(ckpts) <= 3 and not any("-v" in c for c in ckpts), ckpts
    assert [p.name for p in (run_dir / "csv").iterdir()] == ["metrics.csv"]  # one logger folder, no versions
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["val"]["num_examples"] == m["data"]["val_examples"]
    return m


def _single_process_eval(m: dict, task_args: list[str], run_dir: Path) -> dict:
    """The best checkpoint of a DDP run, evaluated by one process with another eval batch size."""
    return run_train(["model=bert_tiny", "logger=csv", *task_args, "train=false", "trainer=cpu",
                      f"ckpt_path={m['best_checkpoint']}", "data.eval_batch_size=5"], run_dir)


def _same_metrics(ddp: dict, single: dict) -> None:
    assert ddp.keys() == single.keys()
    assert ddp["num_examples"] == single["num_examples"]
    for k in ddp:
        assert ddp[k] == pytest.approx(single[k], rel=1e-5, abs=1e-6), k


@pytest.mark.slow
def test_ddp_multirun_sequence_and_token(tmp_path):
    """Multirun + DDP: one folder per job, each job trained by both ranks with that job's overrides."""
    sweep = tmp_path / "sweep"
    _cli(["task=sst2,conll2003", "data.eval_batch_size=3", f"hydra.sweep.dir={sweep}"], cwd=tmp_path,
         multirun=True)
    assert {p.name for p in tmp_path.iterdir()} == {"sweep", ".cache"}  # no logs/, no outputs/
    # The jobs, Hydra's record, and the comparison every multirun writes at its end (bertlab.compare).
    assert {p.name for p in sweep.iterdir() if not p.name.startswith("comparison.")} == {"0", "1", "multirun.yaml"}
    assert (sweep / "comparison.md").is_file()
    for job, task in (("0", "sst2"), ("1", "conll2003")):
        run_dir = sweep / job
        m = _check_run_dir(run_dir)
        assert m["task"] == task and m["val"]["num_examples"] == 16  # 16 = 3 × 5 + 1: uneven shards
        assert "[rank: 1] Seed set to 42" in (run_dir / RANK1_LOG).read_text()
        single = _single_process_eval(m, [f"task={task}"], tmp_path / f"eval{job}")
        _same_metrics(m["val"], single["val"])


@pytest.mark.slow
def test_ddp_question_answering_windows_split_across_ranks(tmp_path):
    # Short windows: one question has several features, and the rank shards cut between them.
    args = ["task=squad", "data.max_seq_length=64", "data.max_query_length=24", "data.doc_stride=16",
            "data.eval_batch_size=3"]
    _cli([*args, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"run", ".cache"}
    m = _check_run_dir(tmp_path / "run", extra={"predictions"})
    assert m["val"]["num_examples"] == 10
    preds = json.loads((tmp_path / "run" / "predictions" / "val_predictions.json").read_text())
    assert len(preds) == 10
    single = _single_process_eval(m, args[:4], tmp_path / "eval")
    log = (tmp_path / "run" / "train.log").read_text()
    features = int(re.search(r"val: 10 examples → (\d+) features", log).group(1))
    assert features >= 20  # several windows per question, so the boundary between shards cuts a question
    _same_metrics(m["val"], single["val"])


@pytest.mark.slow
def test_ddp_mlm_uneven_split_and_step_arithmetic(tmp_path):
    # 13 evaluation sequences over 2 ranks × 3 per batch; 2 examples per device, accumulation 2 under DDP.
    args = ["task=mlm", "data.max_eval_samples=13", "data.max_seq_length=32"]
    _cli([*args, "data.eval_batch_size=3", "data.batch_size=2", "trainer.accumulate_grad_batches=2",
          "trainer.log_every_n_steps=1", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    run_dir = tmp_path / "run"
    m = _check_run_dir(run_dir)
    assert m["val"]["num_examples"] == 13
    # Steps: ceil(batches / 2 ranks) batches per rank, then ceil(/ 2 accumulation) optimizer steps.
    log = (run_dir / "train.log").read_text()
    sequences = int(re.search(r"train: \d+ examples → (\d+) features", log).group(1))
    steps = math.ceil(math.ceil(math.ceil(sequences / 2) / 2) / 2)
    assert steps >= 5, steps  # enough steps for the lr check below to tell schedule lengths apart
    assert m["train"]["steps"] == steps
    planned = re.search(r"lr schedule spans (\d+) optimizer steps", log)
    assert planned and int(planned.group(1)) == steps
    _check_lr_schedule_ends_at_last_step(run_dir, steps=steps, lr=5e-4, warmup_ratio=0.06)
    single = _single_process_eval(m, args, tmp_path / "eval")
    _same_metrics(m["val"], single["val"])


@pytest.mark.slow
def test_torchrun_launches_the_ranks(tmp_path):
    """An outside launcher (torchrun; srun alike): every rank is a Hydra run of its own in the same folder."""
    torchrun = (str(Path(sys.executable).with_name("torchrun")), "--standalone", "--nproc_per_node=2")
    _cli(["task=sst2", "predict=true", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, launcher=torchrun)
    assert {p.name for p in tmp_path.iterdir()} == {"run", ".cache"}
    run_dir = tmp_path / "run"
    assert {p.name for p in run_dir.iterdir()} == RANK0_FILES | {"train_rank1.log", "predictions"}
    rows = [json.loads(r) for r in (run_dir / "predictions" / "predict_predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and len({r["text"] for r in rows}) == 8  # each test row once (rank 0 predicts)
    assert "GLOBAL_RANK: 1" in (run_dir / "train_rank1.log").read_text()
    assert "GLOBAL_RANK: 1" not in (run_dir / "train.log").read_text()
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["val"]["num_examples"] == 16 and m["train"]["steps"] == 3  # ceil(ceil(40 / 8) / 2)
    # Started together, the ranks still tokenized once: one cache entry per split and one tokenizer.
    cache = tmp_path / ".cache" / "bertlab"
    assert len(list((cache / "features").glob("*.safetensors"))) == 2  # train, val (predictions read the file itself)
    assert len([p for p in (cache / "tokenizers").iterdir() if p.is_dir()]) == 1


@pytest.mark.slow
def test_ddp_sigkill_mid_epoch_then_resume_matches_the_uninterrupted_run(tmp_path):
    """Each rank restores its own RNG state: dropout masks after a DDP resume are the uninterrupted run's."""
    from test_resume import assert_same_training

    from bertlab.training.debug_hooks import KILL_AT_STEP_ENV

    # sst2 fixture: 40 examples, 2 ranks × batch 4 → 5 steps per epoch; last.ckpt every 2 steps; killed at 8.
    args = ["task=sst2", "trainer.max_epochs=2", "data.batch_size=4", "save_every_n_steps=2", "seed=3",
            "trainer.deterministic=true", f"paths.cache_dir={tmp_path / 'cache'}"]
    a, b = tmp_path / "a", tmp_path / "b"
    _cli([*args, f"hydra.run.dir={a}"], cwd=tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", KILL_AT_STEP_ENV: "8"}
    for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_PORT"):
        env.pop(key, None)
    killed = subprocess.run([sys.executable, str(ROOT / "train.py"), "model=bert_tiny", "trainer=ddp_cpu",
                             "logger=csv", f"paths.data_dir={FIXTURE_DATA}", "trainer.enable_progress_bar=false",
                             *args, f"hydra.run.dir={b}"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert killed.returncode != 0 and not (b / "metrics.json").exists()
    assert torch.load(b / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 6
    _cli([*args, f"hydra.run.dir={b}", "ckpt_path=last"], cwd=tmp_path)
    assert_same_training(a, b)
