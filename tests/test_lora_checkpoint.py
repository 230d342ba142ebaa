"""freeze=lora checkpoints store only what trained plus a reference to the base weights."""

from __future__ import annotations

import torch

from bertlab.config import EncoderConfig
from bertlab.encoder import BertEncoder
from bertlab.tokenization import train_wordpiece


def _base_folder(path):
    tok = train_wordpiece(["the film was good and the plot was great", "an awful movie with poor actors"] * 30,
                          vocab_size=200, min_frequency=1)
    torch.manual_seed(0)
    BertEncoder(EncoderConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=64, max_position_embeddings=128)).save_pretrained(path)
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
