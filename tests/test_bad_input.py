"""The bad-input matrix: every row gets one clear message (where, what is wrong, what to do) before any
training step, or — where ``data.on_bad_example=skip`` allows it — a counted and reported skip.

Most rows run the real recipe in-process (``pytest.raises(match=...)``); a few run ``train.py`` as a user
would, to check that the message reaches the terminal as one paragraph with exit status 1.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_DATA, ROOT, main_in_process
from hydra.errors import MissingConfigException
from torch import nn

from bertlab.data.readers import DataError
from bertlab.models.bert import BertModel
from bertlab.models.hf_weights import CheckpointError
from bertlab.runtime.config import ConfigError, EncoderConfig, FreezeConfig
from bertlab.training.freeze import apply_freeze

TINY = ("model=bert_tiny", "trainer.max_epochs=1")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    # A missing preset file falls back to the hub: tests must never download.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def data_dir(tmp_path: Path, task_dir: str, files: dict[str, str | bytes] | None = None) -> Path:
    """A copy of the fixture folder ``task_dir`` with ``files`` (name → content) written over it."""
    root = tmp_path / "data"
    shutil.copytree(FIXTURE_DATA / task_dir, root / task_dir, dirs_exist_ok=True)
    for name, content in (files or {}).items():
        path = root / task_dir / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def cli(tmp_path: Path, *overrides: str, data: Path = FIXTURE_DATA, env: dict[str, str] | None = None,
        timeout: int = 300, script: Path | None = None) -> subprocess.CompletedProcess:
    """``python train.py <overrides>`` as a user runs it (exit status, stdout, stderr); ``script`` replaces
    train.py with a wrapper that patches something first."""
    run_env = {**os.environ, "BERTLAB_DATA_DIR": str(data), "TOKENIZERS_PARALLELISM": "false",
               "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline", **(env or {})}
    run_env.pop("HYDRA_FULL_ERROR", None)
    cmd = [sys.executable, str(script or ROOT / "train.py"), "logger=csv", "trainer.enable_progress_bar=false",
           f"paths.cache_dir={tmp_path / 'cache'}", *overrides]
    return subprocess.run(cmd, cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=timeout)


def cli_in_process(tmp_path: Path, *overrides: str, data: Path = FIXTURE_DATA, env: dict[str, str] | None = None,
                   script: Path | None = None) -> subprocess.CompletedProcess:
    """:func:`cli` run in this process (conftest.main_in_process): the same command, what it prints and its exit
    status, without a python launch's seconds of imports. :func:`cli` stays for what needs the process itself
    (test_cli_prints_one_paragraph_and_exits_1 here, signals and kills in test_resume / test_stop_endings)."""
    run_env = {"BERTLAB_DATA_DIR": str(data), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
               "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": None, **(env or {})}
    return main_in_process(["logger=csv", "trainer.enable_progress_bar=false", f"paths.cache_dir={tmp_path / 'cache'}",
                            *overrides], script=script, env=run_env)


# ----------------------------------------------------------------------------------------------------------
# Files


def test_missing_file_names_the_path_and_the_ways_to_get_the_data(train_run, tmp_path):
    empty = tmp_path / "nodata"
    empty.mkdir()
    with pytest.raises(DataError) as err:
        train_run(*TINY, "task=sst2", data_dir=empty)
    message = str(err.value)
    assert f"data.train_file=sst2/train.tsv: the file does not exist: {empty / 'sst2' / 'train.tsv'}" in message
    assert "paths.data_dir" in message and "$BERTLAB_DATA_DIR" in message
    assert "hub" in message and "data.source=sample" in message


def test_empty_file(train_run, tmp_path):
    root = data_dir(tmp_path, "sst2", {"dev.tsv": ""})
    with pytest.raises(DataError, match=r"sst2/dev\.tsv: the file is empty; point the data\.\*_file setting"):
        train_run(*TINY, "task=sst2", data_dir=root)


def test_non_utf8_bytes_name_the_line(train_run, tmp_path):
    root = data_dir(tmp_path, "sst2", {"dev.tsv": b"sentence\tlabel\ngood film .\t1\ncaf\xe9 au lait .\t0\n"})
    with pytest.raises(DataError, match=r"sst2/dev\.tsv:3: bytes that are not UTF-8 .*re-encode the file as UTF-8"):
        train_run(*TINY, "task=sst2", data_dir=root)


def test_wrong_column_count_names_the_line(train_run, tmp_path):
    root = data_dir(tmp_path, "sst2", {"dev.tsv": "sentence\tlabel\ngood film .\t1\nbad\tfilm .\t0\n"})
    with pytest.raises(DataError, match=r"sst2/dev\.tsv:3: 3 columns where the header has 2 "
                                        r"\(set data\.on_bad_example=skip"):
        train_run(*TINY, "task=sst2", data_dir=root)


def test_missing_column_names_the_header(train_run, tmp_path):
    root = data_dir(tmp_path, "sst2", {"dev.tsv": "text\tlabel\ngood film .\t1\n"})
    with pytest.raises(DataError, match=r"sst2/dev\.tsv: no column 'sentence' \(data\.text_column\); the header "
                                        r"has \['text', 'label'\]\. Set data\.text_column to one of them"):
        train_run(*TINY, "task=sst2", data_dir=root)


def test_bad_rows_skipped_are_counted_and_warned(train_run, tmp_path, caplog):
    train = (FIXTURE_DATA / "sst2" / "train.tsv").read_text() + "a\tb\tc\n"
    dev = (FIXTURE_DATA / "sst2" / "dev.tsv").read_text() + "\t1\n"  # an empty text
    root = data_dir(tmp_path, "sst2", {"train.tsv": train, "dev.tsv": dev})
    with caplog.at_level(logging.WARNING):
        metrics = train_run(*TINY, "task=sst2", "data.on_bad_example=skip", "trainer.limit_train_batches=1",
                            data_dir=root)
    assert metrics["data"]["skipped_examples"] == 2
    assert metrics["data"]["train_examples"] == 40 and metrics["data"]["val_examples"] == 16
    warned = caplog.text
    assert "skipping bad example" in warned and "3 columns where the header has 2" in warned
    assert "skipped 1 bad examples (data.on_bad_example=skip" in warned


# ----------------------------------------------------------------------------------------------------------
# Labels


def test_unknown_label_in_dev_of_a_preset_task(train_run, tmp_path):
    dev = (FIXTURE_DATA / "sst2" / "dev.tsv").read_text() + "an odd film .\t2\n"
    root = data_dir(tmp_path, "sst2", {"dev.tsv": dev})
    with pytest.raises(DataError, match=r"sst2/dev\.tsv:18: label '2' is not in the task's label set "
                                        r"\['0', '1'\].*fix the file"):
        train_run(*TINY, "task=sst2", data_dir=root)


def test_unknown_label_in_test_of_a_generic_task_fails_before_training(train_run, tmp_path, monkeypatch):
    root = data_dir(tmp_path, "sst2", {"test.tsv": "sentence\tlabel\ngood film .\t1\nodd film .\tneutral\n"})
    fits = []
    monkeypatch.setattr("lightning.Trainer.fit", lambda *a, **k: fits.append(1))
    with pytest.raises(DataError, match=r"sst2/test\.tsv:3: label 'neutral' is not in the task's label set "
                                        r"\['0', '1'\]"):
        train_run(*TINY, "task=text_classification", "data.text_column=sentence", "data.train_file=sst2/train.tsv",
                  "data.val_file=sst2/dev.tsv", "data.test_file=sst2/test.tsv", data_dir=root)
    assert fits == []  # found while reading the data, not after training


# ----------------------------------------------------------------------------------------------------------
# SQuAD


def _squad_with(tmp_path: Path, edit) -> Path:
    squad = json.loads((FIXTURE_DATA / "squad_v1.1" / "dev.json").read_text())
    edit(squad["data"][0]["paragraphs"][0])
    return data_dir(tmp_path, "squad_v1.1", {"dev.json": json.dumps(squad)})


def test_squad_missing_key(train_run, tmp_path):
    root = _squad_with(tmp_path, lambda p: p["qas"][1].pop("question"))
    with pytest.raises(DataError, match=r"squad_v1\.1/dev\.json: data\[0\]\.paragraphs\[0\]\.qas\[1\]: no field "
                                        r"'question' \(expected text \(a JSON string\)\); it has \['answers', 'id'\] "
                                        r"\(set data\.on_bad_example=skip"):
        train_run(*TINY, "task=squad", data_dir=root)


def test_squad_wrong_answer_start_says_where_the_text_is(train_run, tmp_path):
    def shift(paragraph):
        paragraph["qas"][0]["answers"][0]["answer_start"] += 3

    root = _squad_with(tmp_path, shift)
    with pytest.raises(DataError, match=r"QA example 'af77c79141b2a947dc073352': answer 0 text 'the county of "
                                        r"Keldshire' is not at answer_start 38 .*set answer_start to 35"):
        train_run(*TINY, "task=squad", data_dir=root)


def test_squad_empty_context(train_run, tmp_path):
    root = _squad_with(tmp_path, lambda p: p.update(context="  "))
    with pytest.raises(DataError, match=r"QA example 'af77c79141b2a947dc073352': the context is empty; give it a "
                                        r"passage or remove the example"):
        train_run(*TINY, "task=squad", data_dir=root)


def test_squad_skip_counts_bad_questions(tmp_path, caplog):
    from bertlab.data.features import qa_split
    from bertlab.data.tokenizer import train_wordpiece
    from bertlab.runtime.config import DataConfig

    root = _squad_with(tmp_path, lambda p: p["qas"][0].pop("id"))
    tokenizer = train_wordpiece(["a small vocabulary for a test"] * 4, vocab_size=200)
    cfg = DataConfig(on_bad_example="skip", max_seq_length=128, doc_stride=32, max_query_length=16)
    with caplog.at_level(logging.WARNING):
        split = qa_split("val", root / "squad_v1.1" / "dev.json", cfg, tokenizer, train=False)
    assert split.skipped == 1 and split.num_examples == 9
    assert "qas[0]: no field 'id'" in caplog.text


def test_question_longer_than_the_window_is_cut_and_reported(tmp_path, caplog):
    from bertlab.data.features import qa_split
    from bertlab.data.tokenizer import train_wordpiece
    from bertlab.runtime.config import DataConfig

    long_question = " ".join(["which"] * 300) + " region?"
    root = _squad_with(tmp_path, lambda p: p["qas"][0].update(question=long_question))
    tokenizer = train_wordpiece(["which region market town county river"] * 4, vocab_size=200)
    cfg = DataConfig(max_seq_length=64, doc_stride=16, max_query_length=24)
    with caplog.at_level(logging.WARNING):
        split = qa_split("val", root / "squad_v1.1" / "dev.json", cfg, tokenizer, train=False)
    assert split.num_examples == 10
    assert max(len(f["input_ids"]) for f in split.features) <= 64
    assert "1 questions longer than data.max_query_length=24 tokens were cut to that length" in caplog.text


def test_window_too_small_for_the_question_is_a_config_error(train_run):
    with pytest.raises(ConfigError, match=r"data\.doc_stride 128 must be smaller than the smallest context "
                                          r"window, max_seq_length - max_query_length - 3 = -3: lower "
                                          r"data\.doc_stride or data\.max_query_length, or raise "
                                          r"data\.max_seq_length"):
        train_run(*TINY, "task=squad", "data.max_seq_length=64")


# ----------------------------------------------------------------------------------------------------------
# CoNLL


def test_conll_i_after_o_in_iob2_input(train_run, tmp_path):
    bad = "the\tO\nBrewmax\tI-product\nworks\tO\n\n"
    dev = bad + (FIXTURE_DATA / "wnut17" / "emerging.dev.conll").read_text()
    root = data_dir(tmp_path, "wnut17", {"emerging.dev.conll": dev})
    with pytest.raises(DataError) as err:
        train_run(*TINY, "task=wnut17", data_dir=root)
    message = str(err.value)
    assert "wnut17/emerging.dev.conll:1" in message
    assert "I-product" in message and "is the file IOB1? set data.tag_scheme=iob1" in message


# ----------------------------------------------------------------------------------------------------------
# Configuration


def test_unknown_task_on_the_command_line(tmp_path):
    out = cli_in_process(tmp_path, "task=sst3", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.returncode == 1
    assert "task=sst3 on the command line: there is no task option 'sst3'" in out.stderr
    assert "Did you mean task=sst2?" in out.stderr and "The task options: " in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("override, group", [("model=bert_huge", "model"), ("freeze=everything", "freeze")])
def test_unknown_model_or_freeze(train_run, override, group):
    with pytest.raises(MissingConfigException, match=rf"Could not find '{group}/"):
        train_run(*TINY, override)


def test_unknown_freeze_policy_value(train_run):
    with pytest.raises(ConfigError, match=r"freeze\.policy must be one of none, encoder, .*got 'most'"):
        train_run(*TINY, "freeze.policy=most")


def test_freeze_encoder_with_nothing_left_to_train():
    class NoParameters(nn.Module):
        def forward(self, x):
            return x

    encoder = BertModel(EncoderConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=16, max_position_embeddings=16))
    with pytest.raises(ConfigError, match=r"freeze=encoder leaves nothing to train: no encoder tensor trains and "
                                          r"the head \(NoParameters\) has no trainable parameters"):
        apply_freeze(encoder, NoParameters(), FreezeConfig(policy="encoder"))


def test_max_seq_length_larger_than_the_position_table(train_run):
    with pytest.raises(ConfigError, match=r"data\.max_seq_length=128 is larger than the model's position table "
                                          r"\(max_position_embeddings=64\): set data\.max_seq_length to 64 or less"):
        train_run(*TINY, "task=sst2", "model.max_position_embeddings=64")


# ----------------------------------------------------------------------------------------------------------
# Checkpoints


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    from conftest import run_train

    base = tmp_path_factory.mktemp("ckpt")
    metrics = run_train([*TINY, "task=sst2", "trainer.limit_train_batches=1"], base / "run")
    return Path(metrics["best_checkpoint"])


def test_checkpoint_from_another_architecture(train_run, tiny_checkpoint):
    with pytest.raises(CheckpointError) as err:
        train_run(*TINY, "task=sst2", f"ckpt_path={tiny_checkpoint}", "model.hidden_size=64",
                  "model.intermediate_size=256")
    message = str(err.value)
    assert f"ckpt_path={tiny_checkpoint} was saved from a different architecture than this run builds" in message
    assert "hidden_size=128 (checkpoint) vs 64 (this run)" in message
    assert "tensors differ in shape" in message and "model.init_from=<that .ckpt>" in message


def test_checkpoint_of_another_task_head(train_run, tiny_checkpoint):
    with pytest.raises(CheckpointError, match=r"different architecture.*tensors differ in shape \(e\.g\. "
                                              r"model\.head\..*\(2,.*\) vs \(13,"):
        train_run(*TINY, "task=wnut17", "train=false", f"ckpt_path={tiny_checkpoint}",
                  f"model.tokenizer={tiny_checkpoint.parent.parent / 'tokenizer'}")


def test_unreadable_checkpoint(train_run, tmp_path):
    broken = tmp_path / "broken.ckpt"
    broken.write_bytes(b"PK\x03\x04 half a checkpoint")
    with pytest.raises(CheckpointError, match=r"broken\.ckpt: not a readable bertlab checkpoint .*Pass a \.ckpt "
                                              r"file written by bertlab"):
        train_run(*TINY, "task=sst2", f"ckpt_path={broken}")


def test_hf_folder_of_another_architecture(train_run, tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "hidden_size": 32}))
    torch.save({}, folder / "pytorch_model.bin")
    with pytest.raises((CheckpointError, ConfigError), match=r"gpt2/config\.json: model_type 'gpt2' is not an "
                                                            r"encoder .*Native families: BERT \(bert\)"):
        train_run(*TINY, "task=sst2", f"model.init_from={folder}")


# ----------------------------------------------------------------------------------------------------------
# What the user sees


def test_cli_prints_one_paragraph_and_exits_1(tmp_path):
    dev = (FIXTURE_DATA / "sst2" / "dev.tsv").read_text() + "an odd film .\tpositive\n"
    root = data_dir(tmp_path, "sst2", {"dev.tsv": dev})
    out = cli(tmp_path, "model=bert_tiny", "task=sst2", f"hydra.run.dir={tmp_path / 'run'}", data=root)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("bertlab: error:")]
    assert len(lines) == 1
    assert "sst2/dev.tsv:18: label 'positive' is not in the task's label set ['0', '1']" in lines[0]
    # No training step was taken: the folder made for the run is gone, lock and log included (the error is
    # on the terminal), so that failed attempts do not pile up as run folders.
    assert not (tmp_path / "run").exists()
