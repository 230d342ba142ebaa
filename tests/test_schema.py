"""Every setting is validated by its declared kind (bertlab.runtime.schema) when the configuration is composed,
and settings that make a run do nothing, never end, or fail late are refused together (bertlab.runtime.checks):
one paragraph before any work, nothing written."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, compose
from omegaconf import OmegaConf

from bertlab.runtime.checks import check_settings
from bertlab.runtime.config import ConfigError, DataConfig, FreezeConfig, OptimConfig
from bertlab.runtime.exits import user_errors
from bertlab.runtime.schema import SETTINGS, declaration, leaves
from bertlab.tasks.families import logged_metrics

GROUPS = ["model", "task", "freeze", "trainer", "logger", "callbacks", "experiment", "debug", "hparams_search"]
# A preset that needs a companion setting to make sense alone: early stopping needs more validations than its
# patience (3), and the default task (sst2) trains 2 epochs.
COMPANIONS = {("callbacks", "early_stopping"): ["trainer.max_epochs=10"]}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml"))


PRESETS = [(g, o) for g in GROUPS for o in options(g)]


def _numeric(value) -> bool:
    if isinstance(value, list):
        return any(_numeric(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_COMPOSED: dict = {}


def preset(group: str, option: str, tmp_path: Path):
    """The composed preset (with its companion settings), once per test process: two tests read every preset."""
    if (group, option) not in _COMPOSED:
        _COMPOSED[group, option] = compose([f"{group}={option}", *COMPANIONS.get((group, option), [])],
                                           tmp_path / "run")
    return copy.deepcopy(_COMPOSED[group, option])


@pytest.mark.parametrize("group,option", PRESETS)
def test_every_numeric_setting_of_every_preset_is_declared_and_the_preset_passes(tmp_path, group, option):
    cfg = preset(group, option, tmp_path)
    tree = OmegaConf.to_container(cfg, resolve=True)
    undeclared = [k for k, v in leaves(tree) if _numeric(v) and declaration(k, tree)[1] is None]
    assert not undeclared, f"declare these in bertlab.runtime.schema.SETTINGS: {undeclared}"
    check_settings(cfg, logged_metrics, gpu_count=lambda: 8)  # the GPU presets, as on a machine with GPUs


def test_the_early_stopping_preset_alone_is_refused_with_the_default_two_epochs(tmp_path):
    cfg = compose(["callbacks=early_stopping"], tmp_path / "run")
    with pytest.raises(ConfigError, match=r"callbacks\.early_stopping \(early stopping\) can never trigger: .*"
                                          r"patience=3 .*validates 2 times in all"):
        check_settings(cfg, logged_metrics)


# ----------------------------------------------------------------------------------------------------------
# One table per kind: wrong type, out of range, non-finite


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    cfg = compose(["model=bert_tiny", "callbacks=default"], tmp_path_factory.mktemp("schema") / "run")
    return OmegaConf.to_container(cfg, resolve=True)


def _with(tree: dict, **changes) -> dict:
    out = copy.deepcopy(tree)
    for dotted, value in changes.items():
        node = out
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def refused(tree: dict, match: str, gpus: int = 0, **changes) -> str:
    with pytest.raises(ConfigError, match=match) as err:
        check_settings(_with(tree, **changes), logged_metrics, gpu_count=lambda: gpus)
    message = str(err.value)
    assert "\n" not in message
    return message


NAN, INF = math.nan, math.inf
KIND_CASES = {
    "positive_int": [("data__batch_size", 0), ("data__batch_size", -3), ("data__batch_size", 2.5),
                     ("data__batch_size", "abc"), ("data__eval_batch_size", True), ("freeze__lora__r", 0),
                     ("trainer__accumulate_grad_batches", 0), ("trainer__num_nodes", 0), ("data__n_best_size", 0),
                     ("callbacks__samples_per_s__every_n_steps", 0), ("model__num_hidden_layers", 0)],
    "nonneg_int": [("data__num_workers", -1), ("head__hidden_layers", -1), ("freeze__k", -2),
                   ("data__num_workers", 1.5), ("task__max_new_tokens", -1), ("model__cpu_attention_slice_mb", "big")],
    "seed": [("seed", -1), ("seed", 2**32), ("seed", 1.5), ("seed", "abc"), ("seed", True)],
    "limit": [("data__max_train_samples", 0), ("data__max_train_samples", -2), ("data__max_train_samples", 1.5),
              ("data__max_train_samples", "all"), ("data__max_eval_samples", 0)],
    "run_length": [("trainer__max_epochs", -2), ("trainer__max_epochs", 1.5), ("trainer__max_epochs", "three"),
                   ("trainer__max_steps", -5), ("trainer__max_epochs", None)],
    "prob": [("optim__warmup_ratio", 1.5), ("optim__warmup_ratio", 1.0), ("optim__warmup_ratio", -0.1),
             ("optim__warmup_ratio", NAN), ("model__hidden_dropout_prob", 1.0), ("freeze__lora__dropout", 1.0),
             ("head__dropout", -0.5)],
    "open_prob": [("task__mlm_probability", 0), ("task__mlm_probability", 1), ("task__mlm_probability", NAN),
                  ("task__mlm_probability", "0.15"), ("task__mlm_probability", 2)],
    "decay": [("optim__layer_lr_decay", 0), ("optim__layer_lr_decay", 1.5), ("optim__layer_lr_decay", INF),
              ("optim__layer_lr_decay", -0.9), ("optim__layer_lr_decay", None)],
    "finite_positive_float": [("optim__lr", NAN), ("optim__lr", INF), ("optim__lr", 0), ("optim__lr", -1e-5),
                              ("optim__lr", "fast"), ("optim__eps", 0), ("freeze__lora__alpha", -1),
                              ("optim__head_lr", 0)],
    "finite_nonneg_float": [("optim__weight_decay", -0.01), ("optim__weight_decay", NAN),
                            ("trainer__gradient_clip_val", -1), ("trainer__gradient_clip_val", INF),
                            ("data__stream_threshold_mb", -1)],
    "betas": [("optim__betas", [1.5, 0.999]), ("optim__betas", [0.9]), ("optim__betas", [0.9, 1.0]),
              ("optim__betas", [NAN, 0.9]), ("optim__betas", "0.9")],
    "batches": [("trainer__limit_val_batches", -1), ("trainer__limit_val_batches", 1.5),
                ("trainer__limit_val_batches", "half"), ("trainer__limit_test_batches", -0.5),
                ("trainer__overfit_batches", -1)],
    "val_interval": [("trainer__val_check_interval", 0), ("trainer__val_check_interval", 0.0),
                     ("trainer__val_check_interval", 1.5), ("trainer__val_check_interval", -1),
                     ("trainer__val_check_interval", "often")],
    "devices": [("trainer__devices", 0), ("trainer__devices", -2), ("trainer__devices", "x"),
                ("trainer__devices", []), ("trainer__devices", 1.5)],
    "bool": [("data__group_by_length", "yes"), ("train", 1), ("model__compile", "no"),
             ("trainer__deterministic", 0), ("head__cache_features", None)],
    "choice": [("on_nonfinite_loss", "ignore"), ("trainer__accelerator", "tpu2"), ("trainer__precision", "8-bit"),
               ("task__mode", "maximum"), ("data__text_format", "markdown"),
               ("callbacks__lr_monitor__logging_interval", "batch")],
    "column": [("data__text_column", ""), ("data__text_column", -1), ("data__label_column", 1.5),
               ("data__text_column", None), ("data__text_pair_column", True)],
    "index_and_layers": [("data__tag_column", 1.5), ("data__tag_column", "last"), ("head__layers", "first"),
                         ("head__layers", 1.5), ("head__layers", None)],
}


@pytest.mark.parametrize("kind,key,value", [(k, key, v) for k, cases in KIND_CASES.items() for key, v in cases])
def test_a_bad_value_of_each_kind_is_refused_naming_the_key_and_the_rule(base, kind, key, value):
    dotted = key.replace("__", ".")
    message = refused(base, rf"^{dotted}=", **{key: value})
    assert " must be " in message
    if isinstance(value, float) and not math.isfinite(value):
        assert "not a finite number" in message


def test_every_kind_has_at_least_five_bad_cases():
    assert all(len(cases) >= 5 for cases in KIND_CASES.values())


@pytest.mark.parametrize("override,shown", [
    ({"seed": -1}, "seed=-1: the random seed must be an integer from 0 to 4294967295"),
    ({"optim__lr": NAN}, "optim.lr=nan: the learning rate must be a finite number above 0 (it is not a finite "
                         "number); e.g. optim.lr=5e-5"),
    ({"optim__betas": [1.5, 0.999]}, "optim.betas=[1.5,0.999]: AdamW's betas must be a pair of numbers in [0, 1)"),
    ({"data__max_train_samples": 0}, "data.max_train_samples=0: the number of training examples to read must be a "
                                     "positive integer (at most that many) or -1 for all of them (0 would leave "
                                     "nothing), or null (all of them)"),
    ({"optim__warmup_ratio": 1.5}, "optim.warmup_ratio=1.5: the fraction of the training steps spent warming the "
                                   "learning rate up must be a number in [0, 1)"),
])
def test_messages_read_as_one_sentence(base, override, shown):
    assert refused(base, ".", **override).startswith(shown)


def test_freeze_policy_defaults_are_checked_by_the_rule_of_the_key_they_set(base):
    refused(base, r"optim\.lr=0 \(freeze\.recommended in conf/freeze/none\.yaml\): the learning rate must be",
            freeze__recommended={"optim.lr": 0})


def test_the_typed_configs_use_the_same_rules():
    with pytest.raises(ConfigError, match=r"optim\.lr=nan: the learning rate"):
        OptimConfig(lr=NAN)
    with pytest.raises(ConfigError, match=r"optim\.betas=\[0\.9,1\.0\]"):
        OptimConfig(betas=(0.9, 1.0))
    with pytest.raises(ConfigError, match=r"freeze\.lora\.r=0: the LoRA rank"):
        FreezeConfig(policy="lora", lora={"r": 0})
    with pytest.raises(ConfigError, match=r"data\.max_train_samples=0"):
        DataConfig(max_train_samples=0)


def test_minus_one_means_all_never_a_slice_that_drops_the_last_example(tmp_path):
    assert DataConfig(max_train_samples=-1, max_eval_samples=-1).max_train_samples is None
    assert DataConfig(max_eval_samples=-1).max_eval_samples is None
    from bertlab.data.features import sequence_split
    from bertlab.data.tokenizer import train_wordpiece

    path = tmp_path / "train.tsv"
    path.write_text("text\tlabel\n" + "".join(f"text {i}\t{i % 2}\n" for i in range(7)))
    tokenizer = train_wordpiece(["text 0 1 2 3 4 5 6"] * 4, vocab_size=100)
    split = sequence_split("train", path, DataConfig(max_train_samples=-1), tokenizer, None, True,
                           max_examples=DataConfig(max_train_samples=-1).max_train_samples)
    assert split.num_examples == 7


def test_a_cache_folder_that_cannot_be_created(base, tmp_path, monkeypatch):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    refused(base, rf"data\.cache_dir={a_file}: .*must be a folder .*\({a_file} is a file, not a folder\)",
            data__cache_dir=str(a_file))
    refused(base, rf"\({a_file} is a file, not a folder\)", data__cache_dir=str(a_file / "cache"))
    import os

    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(tmp_path) else real(p, mode))
    refused(base, rf"this user may not write into {tmp_path}\)", data__cache_dir=str(tmp_path / "cache"))


# ----------------------------------------------------------------------------------------------------------
# Settings that are wrong together


@pytest.mark.parametrize("changes,match", [
    ({"trainer__max_epochs": 0}, r"trainer\.max_epochs=0 trains nothing.*train=false ckpt_path="),
    ({"trainer__max_steps": 0}, r"trainer\.max_steps=0 trains nothing"),
    ({"trainer__max_epochs": -1, "trainer__max_steps": -1}, r"the training would never end"),
    ({"trainer__limit_train_batches": 0}, r"trainer\.limit_train_batches=0 trains on no batch"),
    ({"trainer__limit_train_batches": 0.0}, r"trainer\.limit_train_batches=0\.0 trains on no batch"),
    ({"trainer__val_check_interval": 100, "trainer__limit_train_batches": 10}, r"past the end of an epoch"),
    ({"trainer__val_check_interval": 500, "trainer__max_steps": 100}, r"=500 batches is past the end of training"),
    ({"trainer__check_val_every_n_epoch": 5, "trainer__max_epochs": 2}, r"check_val_every_n_epoch=5 is past the end"),
    ({"train": False}, r"train=false needs ckpt_path="),
    ({"task__monitor": "val/acc"}, r"task\.monitor=val/acc: task sst2 \(family sequence\) never logs it\. It logs "
                                   r"val/loss, val/accuracy, val/f1, val/matthews_correlation"),
    ({"task__monitor": "test/accuracy"}, r"must read a validation metric"),
    ({"task__monitor": "train/loss", "task__mode": "min"}, r"must read a validation metric"),
    ({"task__monitor": "val/num_examples"}, r"it is a count, not a score"),
    ({"task__monitor": "val/loss", "task__mode": "max"}, r"loss is better when it is lower.*task\.mode=min"),
    ({"task__mode": "min"}, r"accuracy is better when it is higher"),
    ({"freeze__policy": "bottom_k", "freeze__k": 5}, r"freeze\.k=5 exceeds the encoder's 2 layers"),
    ({"head__layers": "concat_last4"}, r"head\.layers=concat_last4 reads the last 4 hidden states.*has 3"),
    ({"head__layers": 3}, r"head\.layers=3 is not a hidden state"),
    ({"data__max_seq_length": 2}, r"leaves no room for text"),
    ({"trainer__accelerator": "gpu"}, r"trainer\.accelerator=gpu .*needs a CUDA GPU.*trainer=cpu"),
    ({"trainer__accelerator": "cuda", "trainer__devices": 2}, r"needs a CUDA GPU"),
])
def test_settings_that_make_a_run_useless_or_fail_late(base, changes, match):
    refused(base, match, **changes)


def test_more_devices_than_the_machine_has(base):
    refused(base, r"trainer\.devices=4 asks for 4 GPUs, and this machine has 1 visible", gpus=1,
            trainer__accelerator="gpu", trainer__devices=4)
    refused(base, r"asks for GPU index 2", gpus=2, trainer__accelerator="gpu", trainer__devices=[0, 2])
    check_settings(_with(base, trainer__accelerator="gpu", trainer__devices=-1), logged_metrics, gpu_count=lambda: 1)


def test_early_stopping_that_can_never_trigger(base):
    early = {"_target_": "lightning.pytorch.callbacks.EarlyStopping", "monitor": "val/accuracy", "mode": "max",
             "patience": 3}
    refused(base, r"patience=3 validations .*validates 2 times", callbacks__early=early)
    refused(base, r"limit_val_batches=0 runs no validation", callbacks__early=early, trainer__max_epochs=10,
            trainer__limit_val_batches=0)
    refused(base, r"callbacks\.early\.monitor=val/acc: .*never logs it", trainer__max_epochs=10,
            callbacks__early={**early, "monitor": "val/acc"})
    refused(base, r"callbacks\.early\.mode=min: accuracy is better when it is higher", trainer__max_epochs=10,
            callbacks__early={**early, "mode": "min"})
    refused(base, r"validates 4 times", callbacks__early={**early, "patience": 4}, trainer__max_epochs=2,
            trainer__val_check_interval=0.5)
    check_settings(_with(base, callbacks__early=early, trainer__max_epochs=4), logged_metrics)


def test_legitimate_edge_settings_pass(base):
    for changes in ({"train": False, "ckpt_path": "x.ckpt", "trainer__max_epochs": 0},  # evaluate only
                    {"trainer__limit_val_batches": 0},  # no validation: the final state is the result
                    {"trainer__max_epochs": -1, "trainer__max_steps": 100},
                    {"trainer__fast_dev_run": True, "trainer__max_epochs": 0},
                    {"data__max_train_samples": -1, "data__max_eval_samples": None},
                    {"trainer__val_check_interval": 0.25}, {"head__layers": -1}, {"optim__head_lr": None},
                    {"task__monitor": "val/f1"}, {"trainer__devices": "auto"}, {"seed": 0}):
        check_settings(_with(base, **changes), logged_metrics)


@pytest.mark.parametrize("task,monitor", [("squad", "val/exact_match"), ("squad_v2", "val/HasAns_f1"),
                                          ("mlm", "val/perplexity"), ("conll2003", "val/recall"),
                                          ("stsb", "val/spearmanr"), ("swag", "val/accuracy")])
def test_each_family_knows_what_it_logs(tmp_path, task, monitor):
    cfg = compose([f"task={task}", f"task.monitor={monitor}"], tmp_path / "run")
    check_settings(cfg, logged_metrics)
    cfg = compose([f"task={task}", "task.monitor=val/matthews"], tmp_path / "run")
    with pytest.raises(ConfigError, match=rf"task {task} .*never logs it"):
        check_settings(cfg, logged_metrics)
    cfg = compose([f"task={task}", "task.monitor=val/best_f1_thresh"], tmp_path / "run")
    with pytest.raises(ConfigError, match="best_f1_thresh"):
        check_settings(cfg, logged_metrics)


# ----------------------------------------------------------------------------------------------------------
# Lightning and Hydra errors that escaped as tracebacks


def test_a_lightning_misconfiguration_is_one_paragraph(capsys):
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    with pytest.raises(SystemExit) as stop, user_errors():
        raise MisconfigurationException("No supported gpu backend found!")
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert "bertlab: error: Lightning refused a setting: No supported gpu backend found!" in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit), user_errors():
        raise ValueError(" `val_check_interval` (1000) must be less than or equal to the number of the training "
                         "batches (2).")
    assert "bertlab: error: Lightning refused a setting: `val_check_interval` (1000)" in capsys.readouterr().err
    with pytest.raises(ValueError, match="a bug"), user_errors():
        raise ValueError("a bug")  # any other error keeps its traceback


def test_a_run_dir_that_is_a_file_is_refused_before_hydra(tmp_path, capsys):
    from bertlab.runtime.overrides import check_command_line

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for argv, key in (([f"hydra.run.dir={a_file}"], "hydra.run.dir"),
                      ([f"hydra.run.dir={a_file / 'run'}", "model=bert_tiny"], "hydra.run.dir"),
                      (["-m", f"hydra.sweep.dir={a_file}", "seed=1,2"], "hydra.sweep.dir")):
        with pytest.raises(SystemExit) as stop:
            check_command_line(argv, ROOT / "conf")
        assert stop.value.code == 1
        err = capsys.readouterr().err
        assert f"bertlab: error: {key}=" in err and f"({a_file} is a file, not a folder)" in err
    check_command_line([f"hydra.run.dir={tmp_path / 'fresh' / 'run'}"], ROOT / "conf")  # passes


def test_a_refused_setting_leaves_the_run_dir_as_it_was(train_run, tmp_path):
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="the training would never end"):
        train_run("model=bert_tiny", "trainer.max_epochs=-1", "trainer.max_steps=-1")
    assert time.perf_counter() - started < 10
    run = tmp_path / "run"
    assert not any((run / name).exists() for name in (".bertlab-run.json", "metrics.json", "checkpoints",
                                                        "tokenizer"))


def test_a_validation_interval_longer_than_the_epoch_is_refused_before_anything_is_written(train_run, tmp_path):
    from bertlab.runtime.checks import check_epoch_length

    with pytest.raises(ConfigError, match=r"val_check_interval=1000 batches is past the end of an epoch: the "
                                          r"training split \(\d+ examples, data\.batch_size=32\) makes \d+ batches"):
        train_run("model=bert_tiny", "trainer.val_check_interval=1000")
    assert not any((tmp_path / "run" / n).exists() for n in ("tokenizer", "checkpoints", "metrics.json"))
    trainer = {"val_check_interval": 5, "check_val_every_n_epoch": 1}
    check_epoch_length(trainer, 160, 32, 1)  # 5 batches: validates at the last one
    with pytest.raises(ConfigError, match="makes 3 batches per epoch"):
        check_epoch_length(trainer, 160, 32, 2)  # per process: ceil(5 / 2)
    with pytest.raises(ConfigError, match="makes 2 batches per epoch"):
        check_epoch_length({**trainer, "limit_train_batches": 0.5}, 160, 32, 1)
    check_epoch_length({**trainer, "check_val_every_n_epoch": None}, 10, 32, 1)  # counts across epochs


def test_every_declared_key_is_a_key_of_some_preset_or_lightning(tmp_path):
    """No stale declaration: a key of SETTINGS is in some composed preset, or is a Lightning Trainer
    argument a user may add with +trainer.<key>."""
    import inspect

    import lightning as L

    seen: set[str] = set()
    for group, option in PRESETS:
        tree = OmegaConf.to_container(preset(group, option, tmp_path), resolve=True)
        seen |= {k for k, _ in leaves(tree)}
    trainer_args = {f"trainer.{p}" for p in inspect.signature(L.Trainer.__init__).parameters}
    from dataclasses import fields

    from bertlab.runtime.config import EncoderConfig

    encoder_fields = {f"model.{f.name}" for f in fields(EncoderConfig)}  # read from a checkpoint's config.json
    stale = set(SETTINGS) - seen - trainer_args - encoder_fields
    assert not stale, stale


# ----------------------------------------------------------------------------------------------------------
# As a user runs it


@pytest.mark.slow
@pytest.mark.parametrize("args,shown", [
    (["seed=-1"], "seed=-1: the random seed must be"),
    (["optim.lr=nan"], "optim.lr=nan: the learning rate must be a finite number above 0"),
    (["trainer=gpu"], "trainer.accelerator=gpu (trainer=gpu, ddp, fsdp and deepspeed) needs a CUDA GPU"),
    (["trainer.max_epochs=-1", "trainer.max_steps=-1"], "trainer.max_epochs=-1 with trainer.max_steps=-1: the training "
                                                        "would never end"),
    (["task.monitor=val/acc"], "task.monitor=val/acc: task sst2 (family sequence) never logs it"),
])
def test_the_command_line_prints_one_paragraph_in_seconds(tmp_path, args, shown):
    import torch

    if args == ["trainer=gpu"] and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from test_bad_input import cli_in_process as cli

    started = time.perf_counter()
    out = cli(tmp_path, "model=bert_tiny", "task=sst2", f"hydra.run.dir={tmp_path / 'run'}", *args)
    assert out.returncode == 1, out.stderr[-2000:]
    assert f"bertlab: error: {shown}" in out.stderr and "Traceback" not in out.stderr
    assert time.perf_counter() - started < 60
    assert not (tmp_path / "run" / ".bertlab-run.json").exists() and not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.slow
def test_the_declared_metrics_are_what_a_run_logs(train_run):
    metrics = train_run("model=bert_tiny", "task=sst2", "trainer.max_epochs=1")
    declared = logged_metrics({"family": "sequence"}, {})
    assert set(metrics["val"]) == set(declared)


def test_the_schema_imports_neither_torch_nor_lightning():
    out = subprocess.run([sys.executable, "-c", "import bertlab.runtime.schema, sys; "
                          "print('torch' in sys.modules, 'lightning' in sys.modules)"],
                         capture_output=True, text=True, cwd=Path(__file__).parent)
    assert out.stdout.strip() == "False False", out.stderr
