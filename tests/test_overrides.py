"""Unknown configuration keys end in one paragraph naming the nearest valid key; an unreachable hub is
reported in seconds with the advice to set HF_HUB_OFFLINE=1."""

from __future__ import annotations

import time

import pytest
from conftest import ROOT
from test_bad_input import cli_in_process as cli

from bertlab.runtime.config import ConfigError, DataConfig
from bertlab.runtime.overrides import build_typed, check_command_line, unknown_key_message

CONF = ROOT / "conf"


@pytest.mark.parametrize("override, guess", [
    ("data.max_train_sample=10", "data.max_train_samples"),
    ("optim.weight_decy=0.1", "optim.weight_decay"),
    ("taks=sst2", "task"),
])
def test_an_unknown_key_on_the_command_line_names_the_nearest_one(override, guess, capsys):
    with pytest.raises(SystemExit) as stop:
        check_command_line(["model=bert_tiny", override, "seed=1,2"], CONF)
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert f"unknown configuration key {override.split('=')[0]}" in err
    assert f"Did you mean {guess}?" in err and "python train.py --cfg job" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv,bad,guess", [
    (["experiment=freeze_comparsion"], "experiment=freeze_comparsion", "experiment=freeze_comparison"),
    (["-m", "freeze=none,lora,bitfitt", "seed=1,2"], "freeze=bitfitt", "freeze=bitfit"),
    (["debug=nonexistent_xyz"], "debug=nonexistent_xyz", None),
    (["task=sst3"], "task=sst3", "task=sst2"),
])
def test_a_misspelled_group_option_is_refused(argv, bad, guess, capsys):
    """Hydra applies nothing for a missing option of an optional group (experiment=, debug=): bertlab refuses."""
    with pytest.raises(SystemExit) as stop:
        check_command_line(argv, CONF)
    assert stop.value.code == 1
    err = capsys.readouterr().err
    group, value = bad.split("=")
    assert f"{bad} on the command line: there is no {group} option '{value}'" in err
    assert (f"Did you mean {guess}?" in err) if guess else "Did you mean" not in err
    assert f"The {group} options: " in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_valid_command_lines_pass_the_check():
    for argv in (["task=conll2003", "data.batch_size=8", "+logger.csv.flush_logs_every_n_steps=5"],
                 ["experiment=glue", "debug=null", "-m", "freeze=none,lora", "hparams_search=optuna"],
                 ["-m", "task=sst2,mrpc", "seed=1,2", "hydra.sweep.dir=/tmp/x", "optim.lr=interval(1e-5,1e-4)"],
                 ["--cfg", "job"], []):
        check_command_line(argv, CONF)  # returns without exiting


def test_a_key_added_with_plus_that_bertlab_does_not_read_is_refused():
    with pytest.raises(ConfigError, match=r"unknown configuration key data\.max_train_sample .*Did you mean "
                                          r"data\.max_train_samples\?"):
        build_typed(DataConfig, {"max_train_sample": 10}, "data")
    assert build_typed(DataConfig, {"batch_size": 4}, "data").batch_size == 4


def test_unknown_key_message_without_a_close_match():
    message = unknown_key_message("data.zzzz", ["data.batch_size"], "somewhere")
    assert "Did you mean" not in message and "--package data" in message


@pytest.mark.parametrize("argv", [["task=sst2", "data.hub_dataset=glue/sst2"], ["data.hub_dataset=null"]])
def test_the_retired_hub_dataset_key_is_an_unknown_key(argv, capsys):
    """data.hub_dataset was set in every task file and read by nothing: it is gone, and a stale override of it
    gets the normal unknown-key error instead of being silently accepted."""
    with pytest.raises(SystemExit) as stop:
        check_command_line(argv, CONF)
    assert stop.value.code == 1
    assert "unknown configuration key data.hub_dataset" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"unknown configuration key data\.hub_dataset"):
        build_typed(DataConfig, {"hub_dataset": "glue/sst2"}, "data")


@pytest.mark.slow
def test_the_command_line_says_it_too(tmp_path):
    out = cli(tmp_path, "model=bert_tiny", "+data.max_train_sample=10")
    assert out.returncode == 1
    assert "Did you mean data.max_train_samples?" in out.stderr and "Traceback" not in out.stderr


def test_an_unreachable_hub_fails_in_seconds_naming_hf_hub_offline(monkeypatch):
    from bertlab.data.hub import HubUnavailable, _load
    from bertlab.models.hf_weights import CheckpointError, resolve_checkpoint_dir

    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    started = time.perf_counter()
    with pytest.raises(HubUnavailable, match="HF_HUB_OFFLINE=1"):
        _load("glue", "sst2", "train")
    with pytest.raises(CheckpointError, match="HF_HUB_OFFLINE=1"):
        resolve_checkpoint_dir("someone/some-bert-that-is-not-cached")
    assert time.perf_counter() - started < 10
