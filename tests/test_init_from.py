"""Pre-train → fine-tune: ``task=mlm`` then ``task=sst2 model.init_from=<run dir | .ckpt | HF export folder>``.

The fine-tuning run must use the pre-training run's tokenizer and encoder architecture, load every encoder
tensor unchanged, drop the pre-training heads with a logged report, and initialise the pooler afresh when
the pre-training had no NSP (and load it when it had).
"""

from __future__ import annotations

import json
import logging

import pytest
import torch
from conftest import compose, run_train
from omegaconf import OmegaConf

from bertlab.data.tokenizer import load_tokenizer
from bertlab.runtime.checks import check_settings
from bertlab.runtime.config import HeadConfig, TaskSpec
from bertlab.tasks.families import build_family
from bertlab.training.build import build_model, build_tokenizer
from bertlab.training.start import model_config, resolve_start

QUICK = ("trainer.max_epochs=1", "trainer.limit_train_batches=2")


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """MLM runs of bert_tiny on the wikitext2 fixture: nsp → run dir (with export/)."""
    root = tmp_path_factory.mktemp("pretrain")
    cache = {}

    def get(nsp: bool):
        if nsp not in cache:
            run_dir = root / f"mlm_nsp_{nsp}"
            run_train(["model=bert_tiny", "task=mlm", f"task.nsp={str(nsp).lower()}", "export=true", *QUICK],
                      run_dir)
            cache[nsp] = run_dir
        return cache[nsp]

    return get


def _best_encoder_tensors(run_dir) -> dict[str, torch.Tensor]:
    best = json.loads((run_dir / "metrics.json").read_text())["best_checkpoint"]
    state = torch.load(best, map_location="cpu", weights_only=False)["state_dict"]
    return {k[len("model."):]: v for k, v in state.items() if k.startswith("model.encoder.")}


def _build_sst2(init_from, tmp_path, model="bert_tiny", extra=(), task="sst2"):
    """What train.run builds for a fine-tuning run (tokenizer, model, load report), without training."""
    cfg = compose([f"model={model}", f"task={task}", f"model.init_from={init_from}", *extra], tmp_path / "compose")
    model_cfg = model_config(OmegaConf.to_container(cfg.model, resolve=True))
    start = resolve_start(model_cfg)  # once, as train.run does

    def scratch_texts():
        raise AssertionError("a scratch tokenizer was about to be trained instead of using init_from's")

    tokenizer = build_tokenizer(model_cfg, start, scratch_texts, None)
    task = TaskSpec(**OmegaConf.to_container(cfg.task, resolve=True))
    family = build_family(task, len(task.labels), task.labels, None)
    head = HeadConfig(**OmegaConf.to_container(cfg.head, resolve=True))
    model, report = build_model(model_cfg, head, family, tokenizer, start)
    return tokenizer, model, report


@pytest.mark.parametrize("nsp", [False, True])
def test_init_from_run_dir_loads_the_pretrained_encoder(pretrained, tmp_path, nsp):
    mlm_dir = pretrained(nsp)
    # model=bert_mini on purpose: the architecture comes from the checkpoint, not from the model group.
    tokenizer, model, report = _build_sst2(mlm_dir, tmp_path, model="bert_mini")
    assert tokenizer.fingerprint() == load_tokenizer(mlm_dir / "tokenizer").fingerprint()
    mlm_config = json.loads((mlm_dir / "export" / "config.json").read_text())
    assert model.encoder.config.hidden_size == mlm_config["hidden_size"] == 128
    assert model.encoder.config.num_hidden_layers == mlm_config["num_hidden_layers"] == 2

    encoder = _best_encoder_tensors(mlm_dir)
    own = model.state_dict()
    for key, value in encoder.items():
        torch.testing.assert_close(own[key], value, atol=0, rtol=0)
    assert any(k.startswith("head.predictions.") for k in report.dropped)
    assert ("head.seq_relationship.weight" in report.dropped) == nsp
    assert {"head.classifier.weight", "head.classifier.bias"} <= set(report.newly_initialised)
    pooler = {"encoder.pooler.dense.weight", "encoder.pooler.dense.bias"}
    if nsp:  # pre-trained with NSP: the pooler was trained and is loaded
        assert pooler <= set(report.loaded)
    else:
        assert pooler <= set(report.newly_initialised)


def test_init_from_a_run_wins_over_the_presets_pretrained_checkpoint(pretrained, tmp_path, caplog):
    """A preset with a hub checkpoint (model=minilm_l6 and the like) and model.init_from=<a run of it>: the run's
    weights are the start (task-adaptive pre-training, a two-stage fine-tune), not the preset's checkpoint."""
    preset_checkpoint, run = pretrained(True) / "export", pretrained(False)
    with caplog.at_level(logging.INFO, logger="bertlab.training"):
        _, model, report = _build_sst2(run, tmp_path, extra=[f"model.pretrained={preset_checkpoint}"])
    own = model.state_dict()
    for key, value in _best_encoder_tensors(run).items():
        torch.testing.assert_close(own[key], value, atol=0, rtol=0)
    assert str(run) in report.source
    assert "replaces model.pretrained" in caplog.text


def test_init_from_hf_export_folder(pretrained, tmp_path):
    mlm_dir = pretrained(False)
    tokenizer, model, report = _build_sst2(mlm_dir / "export", tmp_path)
    assert tokenizer.fingerprint() == load_tokenizer(mlm_dir / "tokenizer").fingerprint()
    own = model.state_dict()
    for key, value in _best_encoder_tensors(mlm_dir).items():
        torch.testing.assert_close(own[key], value, atol=0, rtol=0)
    assert any(k.startswith("cls.predictions.") for k in report.dropped)
    assert {"encoder.pooler.dense.weight", "head.classifier.weight"} <= set(report.newly_initialised)


@pytest.mark.parametrize("source", ["run_dir", "export"])
def test_fine_tuning_run_from_a_pretraining_run(pretrained, train_run, tmp_path, caplog, source):
    mlm_dir = pretrained(False)
    init_from = mlm_dir if source == "run_dir" else mlm_dir / "export"
    with caplog.at_level(logging.INFO, logger="bertlab.training.build"):
        metrics = train_run("model=bert_tiny", "task=sst2", f"model.init_from={init_from}", *QUICK, name="ft")
    assert metrics["val"]["num_examples"] == 16
    reports = [r.getMessage() for r in caplog.records if r.getMessage().startswith("weights:")]
    assert len(reports) == 1 and "dropped" in reports[0] and "newly initialised" in reports[0]
    # The fine-tuning run saved (and used) the pre-training run's tokenizer.
    ft_dir = tmp_path / "ft"
    assert load_tokenizer(ft_dir / "tokenizer").fingerprint() == load_tokenizer(mlm_dir / "tokenizer").fingerprint()


@pytest.fixture(scope="module")
def sst2_run(tmp_path_factory):
    """A fine-tuned bert_tiny SST-2 run (labels 0/1, BERT's pooler)."""
    run_dir = tmp_path_factory.mktemp("sst2") / "run"
    run_train(["model=bert_tiny", "task=sst2", *QUICK], run_dir)
    return run_dir


def _best_head_tensors(run_dir) -> dict[str, torch.Tensor]:
    best = json.loads((run_dir / "metrics.json").read_text())["best_checkpoint"]
    state = torch.load(best, map_location="cpu", weights_only=False)["state_dict"]
    return {k[len("model."):]: v for k, v in state.items() if k.startswith("model.head.")}


def test_init_from_a_run_of_the_same_head_keeps_its_head(sst2_run, tmp_path, caplog):
    """A run fine-tuned for the same labels with the same head settings starts with its classifier too (as
    transformers' from_pretrained keeps a matching head); model.init_head=new starts a new one."""
    head = _best_head_tensors(sst2_run)
    assert set(head) == {"head.classifier.weight", "head.classifier.bias"}
    with caplog.at_level(logging.INFO, logger="bertlab.training.build"):
        _, model, report = _build_sst2(sst2_run, tmp_path)
    own = model.state_dict()
    for key, value in head.items():
        torch.testing.assert_close(own[key], value, atol=0, rtol=0)
    assert set(head) <= set(report.loaded) and not set(head) & set(report.newly_initialised)
    assert "it is loaded too" in caplog.text

    _, model, report = _build_sst2(sst2_run, tmp_path, extra=["model.init_head=new"])
    assert set(head) <= set(report.dropped) and set(head) <= set(report.newly_initialised)
    assert not torch.equal(model.state_dict()["head.classifier.weight"], head["head.classifier.weight"])


def test_a_kept_head_takes_a_window_pooling_of_its_own(sst2_run, tmp_path, caplog):
    """A start trained without window-pooling weights (texts of one window, max pooling) keeps its classifier for a
    run that pools windows with attention: only the attention scorer starts new, and the log names it."""
    head = _best_head_tensors(sst2_run)
    with caplog.at_level(logging.INFO, logger="bertlab.training.build"):
        _, model, report = _build_sst2(sst2_run, tmp_path, extra=["+head.window_pooling=attention"])
    own = model.state_dict()
    assert "head.windows.score.weight" in own
    for key, value in head.items():
        torch.testing.assert_close(own[key], value, atol=0, rtol=0)
    assert set(head) <= set(report.loaded) and "head.windows.score.weight" in report.newly_initialised
    assert "its window pooling (head.windows.score.weight) starts new" in caplog.text


@pytest.mark.parametrize("task, extra, reason", [
    ("rte", [], "labels ['0', '1'] there, ['entailment', 'not_entailment'] here"),
    ("sst2", ["head.pooling=mean"], "head.pooling 'pooler' there, 'mean' here"),
    ("sst2", ["head.hidden_layers=1"], "head.hidden_layers 0 there, 1 here"),
    ("conll2003", [], "task family 'sequence' there, 'token' here"),
])
def test_init_from_a_run_of_another_head_starts_a_new_one(sst2_run, tmp_path, caplog, task, extra, reason):
    """Other labels, another pooling or depth, another kind of task: the encoder is loaded, the head is new,
    and the log says why."""
    with caplog.at_level(logging.INFO, logger="bertlab.training.build"):
        _, model, report = _build_sst2(sst2_run, tmp_path, extra=extra, task=task)
    assert {"head.classifier.weight", "head.classifier.bias"} <= set(report.dropped)
    assert not any(k.startswith("head.") for k in report.loaded)
    assert any(k.startswith("encoder.encoder.") for k in report.loaded)
    assert f"is not this run's ({reason})" in caplog.text


def test_model_init_head_takes_auto_or_new(sst2_run, tmp_path):
    """Checked with every setting before a run builds anything (runtime/schema.py)."""
    cfg = compose(["model=bert_tiny", "task=sst2", f"model.init_from={sst2_run}", "model.init_head=keep"],
                  tmp_path / "compose")
    with pytest.raises(Exception, match="model.init_head"):
        check_settings(cfg)
