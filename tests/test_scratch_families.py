"""Scratch encoders of every family (``model.model_type`` with ``pretrained: null``): the config class of the
family, the vocabulary's special ids, the family's fixed traits, and a scratch ModernBERT that trains, exports
and computes what transformers computes from the export."""

from __future__ import annotations

import pytest
import torch

from bertlab.data.tokenizer import tokenizer_for
from bertlab.models.families import families, family_spec, scratch_families, tiny_config
from bertlab.runtime.config import ConfigError
from bertlab.training.build import architecture

TEXTS = [f"the film {w} and the plot {v} ." for w in ("works", "fails", "sings", "drags") for v in ("holds", "sags")]
SHAPE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
             max_position_embeddings=128, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory):
    cache = tmp_path_factory.mktemp("vocab")
    return {kind: tokenizer_for(None, lambda: TEXTS * 20, vocab_size=200, cache_dir=cache, kind=kind)
            for kind in ("wordpiece", "bpe")}


@pytest.mark.parametrize("model_type", families())
def test_each_family_builds_its_own_config_with_the_vocabulary_ids(vocabularies, model_type):
    tokenizer = vocabularies["bpe"]  # <s> 0, <pad> 1, </s> 2: ids that differ from BERT's defaults
    spec = family_spec(model_type)
    # The family's own segment count (ModernBERT and DeBERTa-v3 have none), as its tiny config says.
    segments = spec.read_config(tiny_config(model_type), "test").type_vocab_size
    config = architecture({"model_type": model_type, **SHAPE, "type_vocab_size": segments}, tokenizer)
    assert type(config) is spec.config_class and config.model_type == model_type
    assert config.vocab_size == tokenizer.vocab_size and config.pad_token_id == tokenizer.pad_id == 1
    assert (config.hidden_size, config.num_hidden_layers) == (64, 2)
    for key, role in (("cls_token_id", "cls_id"), ("sep_token_id", "sep_id")):
        if hasattr(config, key):
            assert getattr(config, key) == getattr(tokenizer, role)
    # What transformers reads back from the family's config.json is what was built.
    assert spec.read_config(spec.write_config(config), "test") == config


def test_family_traits_hold_whatever_model_says(vocabularies):
    tokenizer = vocabularies["wordpiece"]
    assert architecture({"model_type": "roberta", **SHAPE}, tokenizer).position_style == "after_padding"
    distil = architecture({"model_type": "distilbert", **SHAPE}, tokenizer)
    assert distil.type_vocab_size == 0 and not distil.attention_output_dropout
    bert = architecture({**SHAPE}, tokenizer)  # no model_type: BERT, as every scratch preset before
    assert bert.model_type == "bert" and bert.position_style == "absolute" and bert.pad_token_id == 0


def test_a_pad_id_other_than_the_vocabulary_s_is_refused(vocabularies):
    with pytest.raises(ConfigError, match=r"model.pad_token_id=3 but the vocabulary pads with id 1"):
        architecture({"model_type": "roberta", **SHAPE, "pad_token_id": 3}, vocabularies["bpe"])
    assert architecture({**SHAPE, "pad_token_id": 0}, vocabularies["wordpiece"]).pad_token_id == 0


def test_a_value_the_family_changes_is_named_in_the_log(vocabularies, caplog):
    with caplog.at_level("WARNING"):
        bert = architecture({**SHAPE, "embedding_size": 32}, vocabularies["wordpiece"])
        distil = architecture({"model_type": "distilbert", **SHAPE, "type_vocab_size": 2}, vocabularies["wordpiece"])
    assert bert.embedding_size is None and distil.type_vocab_size == 0
    text = caplog.text
    assert "model.embedding_size=32: a scratch BERT has None" in text
    assert "model.type_vocab_size=2: a scratch DistilBERT has 0" in text
    caplog.clear()
    with caplog.at_level("WARNING"):  # a preset's vocab_size is the size to train: the trained size is no change
        architecture({**SHAPE, "vocab_size": 8000, "type_vocab_size": 2}, vocabularies["wordpiece"])
    assert not caplog.records, caplog.text


def test_a_preset_of_another_family_says_which_setting_to_change(vocabularies):
    with pytest.raises(ConfigError, match=r"type_vocab_size must be 0 .*model=bert_tiny with "
                                          r"model.model_type=modernbert.*override it"):
        architecture({"name": "bert_tiny", "model_type": "modernbert", **SHAPE, "type_vocab_size": 2},
                     vocabularies["wordpiece"])


def test_the_settings_check_takes_the_registry_families():
    """model.model_type is checked against the registry when a run starts (the schema holds no list of its own):
    every family is accepted, another name is refused with the registry's names."""
    from bertlab.runtime.schema import check_config

    names = {"model.model_type": scratch_families()}
    assert set(scratch_families()) == {name for name, spec in families().items() if spec.scratch} == set(families())
    for model_type in families():
        check_config({"model": {"model_type": model_type}}, names)
    with pytest.raises(ConfigError, match="model.model_type=gpt2: .* one of bert, roberta"):
        check_config({"model": {"model_type": "gpt2"}}, names)


def test_unknown_family_is_a_config_error(vocabularies):
    with pytest.raises(ConfigError, match="model.model_type='gpt2'.*own families"):
        architecture({"model_type": "gpt2", **SHAPE}, vocabularies["wordpiece"])


def test_scratch_modernbert_trains_exports_and_matches_transformers(train_run, tmp_path):
    transformers = pytest.importorskip("transformers")
    from bertlab.inference.loading import load

    train_run("model=modernbert_tiny", "task=mlm", "trainer.max_epochs=1", "model.num_hidden_layers=2",
              "export=true", name="mlm")
    run_dir = tmp_path / "mlm"
    loaded = load(run_dir, backend="torch")
    assert type(loaded.model.bert.config).__name__ == "ModernBertConfig"
    hf = transformers.AutoModelForMaskedLM.from_pretrained(run_dir / "export").eval()
    assert type(hf).__name__ == "ModernBertForMaskedLM"
    enc = loaded.tokenizer.encode_batch(["the film works and the plot holds .", "a plot ."])
    width = max(len(e.ids) for e in enc)
    ids = torch.tensor([e.ids + [loaded.tokenizer.pad_id] * (width - len(e.ids)) for e in enc])
    mask = torch.tensor([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in enc])
    model = loaded.model.eval()
    with torch.no_grad():
        ours, _ = model({"input_ids": ids, "attention_mask": mask})  # (masked-LM logits, NSP logits: None)
        theirs = hf(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    assert torch.allclose(ours[real], theirs[real], atol=1e-5), (ours[real] - theirs[real]).abs().max()


@pytest.mark.parametrize("family", [
    ["model=modernbert_tiny", "model.num_hidden_layers=2"],
    # a byte-level BPE vocabulary: its reloaded tokenizer must lower-case as the trained one did, or the
    # fine-tuning run refuses the pre-training's checkpoint as "trained with another tokenizer"
    ["model=bert_tiny", "model.model_type=roberta", "model.tokenizer_kind=bpe", "model.max_position_embeddings=514"],
], ids=["modernbert_wordpiece", "roberta_bpe"])
def test_scratch_preset_fine_tunes_from_its_pretraining(train_run, tmp_path, caplog, family):
    train_run(*family, "task=mlm", "trainer.max_epochs=1", name="pre")
    with caplog.at_level("INFO"):
        train_run(*family, "task=sst2", "trainer.max_epochs=1", f"model.init_from={tmp_path / 'pre'}",
                  "head.pooling=mean", name="ft")
    loaded = [r.getMessage() for r in caplog.records if r.getMessage().startswith("weights: loaded")]
    assert len(loaded) == 1 and f"from {tmp_path / 'pre' / 'checkpoints'}" in loaded[0], loaded
    assert "newly initialised" in loaded[0] and "embeddings" not in loaded[0].split("newly initialised")[1]


def test_the_recipe_preset_is_the_recorded_best_run(tmp_path):
    """docs/pretraining.md promises that experiment=pretrain_quick alone holds the settings of the recorded attempt
    mbert_4x256: the preset composed alone and composed with every setting that run gave on its command line build
    the same network and run the same pre-training (the run named the shape as modernbert_tiny plus overrides;
    the preset is modernbert_mini)."""
    import json
    from pathlib import Path

    from conftest import compose
    from omegaconf import OmegaConf

    record = Path(__file__).parents[1] / "experiments/pretrain_quick/attempts/mbert_4x256/pretrain/sst2.json"
    given = [o for o in json.loads(record.read_text())["overrides"]
             if not o.startswith(("data.train_file=", "data.val_file=", "logger=", "trainer.enable_progress_bar="))]
    data = ["data.train_file=[a.txt]", "data.val_file=b.txt"]

    def settings(overrides):
        cfg = OmegaConf.to_container(compose(overrides + data, tmp_path / "run"), resolve=True)
        model = {k: v for k, v in cfg["model"].items() if k != "name"}
        return model, cfg["task"], cfg["optim"], cfg["data"], cfg["trainer"]["max_steps"]

    preset = settings(["experiment=pretrain_quick"])
    assert preset == settings(given)
    assert preset[0]["hidden_size"] == 256 and preset[4] == 5000
