"""freeze=lora checkpoints store only what trained plus a reference to the base weights."""

from __future__ import annotations

import torch

from bertlab.data.tokenizer import train_wordpiece
from bertlab.models.bert import BertModel
from bertlab.models.hf_weights import save_encoder
from bertlab.runtime.config import EncoderConfig


def _base_folder(path):
    tok = train_wordpiece(["the film was good and the plot was great", "an awful movie with poor actors"] * 30,
                          vocab_size=200, min_frequency=1)
    torch.manual_seed(0)
    save_encoder(BertModel(EncoderConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=64, max_position_embeddings=128)), path)
    tok.save(path)
    return path


def test_lora_checkpoint_is_slim_and_reloads(train_run, tmp_path):
    base = _base_folder(tmp_path / "base")
    m = train_run("model=bert_tiny", f"model.pretrained={base}", "task=sst2", "freeze=lora", "trainer.max_epochs=1",
                  "data.batch_size=8", "export=true")
    ckpt = torch.load(m["best_checkpoint"], map_location="cpu", weights_only=False)
    keys = set(ckpt["state_dict"])
    assert keys and all(".lora_" in k or k.startswith("model.head.") for k in keys), sorted(keys)[:5]
    assert ckpt["bertlab_base_weights"] == str(base)
    again = train_run("model=bert_tiny", f"model.pretrained={base}", "task=sst2", "freeze=lora", "train=false",
                      f"ckpt_path={m['best_checkpoint']}", name="eval")
    assert again["val"] == m["val"]
    assert (tmp_path / "run" / "export" / "model.safetensors").is_file()


def _full_run(train_run, base, name):
    """A full fine-tuning run of the base folder: its run dir and best .ckpt become LoRA bases."""
    return train_run("model=bert_tiny", f"model.pretrained={base}", "task=sst2", "trainer.max_epochs=1",
                     "data.batch_size=8", name=name)


def test_lora_exports_from_a_bertlab_run_dir_and_ckpt_base(train_run, tmp_path):
    base = _base_folder(tmp_path / "base")
    first = _full_run(train_run, base, "full")
    for name, init in (("lora_dir", tmp_path / "full"), ("lora_ckpt", first["best_checkpoint"])):
        m = train_run("model=bert_tiny", f"model.init_from={init}", "task=sst2", "freeze=lora",
                      "trainer.max_epochs=1", "data.batch_size=8", "export=true", name=name)
        assert (tmp_path / name / "export" / "model.safetensors").is_file()
        ckpt = torch.load(m["best_checkpoint"], map_location="cpu", weights_only=True)
        assert ckpt["bertlab_base_weights"] == str(init) and ckpt["bertlab_base_fingerprint"]


def test_a_lora_checkpoint_refuses_a_base_that_changed(train_run, tmp_path):
    import pytest

    from bertlab.inference.export import load_checkpoint_model
    from bertlab.models.hf_weights import CheckpointError

    base = _base_folder(tmp_path / "base")
    m = train_run("model=bert_tiny", f"model.pretrained={base}", "task=sst2", "freeze=lora", "trainer.max_epochs=1",
                  "data.batch_size=8")
    load_checkpoint_model(m["best_checkpoint"])  # the base as it was: loads
    from bertlab.models.hf_weights import read_encoder_config

    torch.manual_seed(1)  # the same architecture, other weights, at the same path
    save_encoder(BertModel(read_encoder_config(base)), base)
    with pytest.raises(CheckpointError, match=r"base weights .* differ from the ones it was trained on"):
        load_checkpoint_model(m["best_checkpoint"])
