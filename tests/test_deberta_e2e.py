"""DeBERTa-v3 end to end on a tiny random checkpoint built offline as the hub ships it (config.json, weights and a
SentencePiece ``spm.model``, no tokenizer.json): ``model=auto`` trains, the header names the family, ``export=true``
writes a folder ``AutoModelFor*`` loads with equal outputs, prediction from the export equals the run's, and
freeze=lora's default targets (BERT's role names) adapt DeBERTa's projections."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_DATA, assert_onnx_like_torch, run_train

from bertlab.inference.export import load_checkpoint_model

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")

QUICK = ("model=auto", "trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=2")
V3 = dict(relative_attention=True, position_biased_input=False, pos_att_type=["p2c", "c2p"], position_buckets=16,
          max_relative_positions=128, share_att_key=True, norm_rel_ebd="layer_norm", type_vocab_size=0)


def _texts() -> list[str]:
    lines = (FIXTURE_DATA / "sst2" / "train.tsv").read_text().splitlines()[1:]
    return [line.split("\t")[0] for line in lines]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A tiny DeBERTa-v3: random weights, a unigram spm.model with DeBERTa-v3's special pieces ([MASK] added after
    them, as the hub's added_tokens.json says), the hub's position embeddings and RTD head as extra keys."""
    out = tmp_path_factory.mktemp("deberta")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_texts()), model_writer=model, vocab_size=200,
                                   model_type="unigram", pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]",
                                   eos_id=2, eos_piece="[SEP]", unk_id=3, unk_piece="[UNK]", minloglevel=2)
    (out / "spm.model").write_bytes(model.getvalue())
    (out / "added_tokens.json").write_text(json.dumps({"[MASK]": 200}))
    (out / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "tokenizer_class":
                                                           "DebertaV2Tokenizer"}))
    cfg = transformers.DebertaV2Config(vocab_size=210, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=37, max_position_embeddings=128, **V3)
    torch.manual_seed(0)
    transformers.DebertaV2Model(cfg).save_pretrained(out)
    from safetensors.torch import load_file, save_file

    state = load_file(str(out / "model.safetensors"))
    state["embeddings.position_embeddings.weight"] = torch.zeros(128, 32)  # as the hub's v3 folders hold
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_trains_exports_and_reloads_in_transformers(folder, tmp_path, caplog):
    run_dir = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        metrics = run_train([*QUICK, f"model.pretrained={folder}", "task=sst2", "export=true"], run_dir)
    assert metrics["val"]["accuracy"] is not None
    assert "model=auto (DeBERTa-v2/v3)" in caplog.text
    assert "embeddings.position_embeddings.weight" in caplog.text or "dropped" in caplog.text
    export = run_dir / "export"
    config = json.loads((export / "config.json").read_text())
    assert config["architectures"] == ["DebertaV2ForSequenceClassification"]
    assert config["model_type"] == "deberta-v2" and config["position_buckets"] == 16
    hf, info = transformers.AutoModelForSequenceClassification.from_pretrained(export, output_loading_info=True)
    assert not any(info.values()), info
    hf.eval()
    ours = load_checkpoint_model(metrics["best_checkpoint"]).model
    from bertlab.data.tokenizer import load_tokenizer

    tok = load_tokenizer(export)  # the run saved the converted tokenizer as tokenizer.json
    assert (export / "tokenizer.json").is_file()
    encs = tok.encode_batch(_texts()[:5])
    width = max(len(e.ids) for e in encs)
    ids = torch.tensor([e.ids + [tok.pad_id] * (width - len(e.ids)) for e in encs])
    mask = (torch.arange(width)[None] < torch.tensor([len(e.ids) for e in encs])[:, None]).long()
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask).logits
        got = ours({"input_ids": ids, "attention_mask": mask})
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)

    from bertlab.inference.predictor import Predictor

    texts = _texts()[:4]
    for a, b in zip(Predictor.from_run(metrics["best_checkpoint"])(texts), Predictor.from_run(export)(texts)):
        assert a["label"] == b["label"] and abs(a["score"] - b["score"]) < 1e-5


def test_onnx_export_equals_pytorch(folder, tmp_path):
    """DeBERTa-v3's disentangled relative attention (log buckets) traced to ONNX, its relative index computed
    in the graph for each length: fp32 logits as PyTorch's on the run's dev set, the same records from both."""
    pytest.importorskip("onnxruntime")
    run_train([*QUICK, f"model.pretrained={folder}", "task=sst2"], tmp_path / "run")
    assert_onnx_like_torch(tmp_path / "run", tmp_path / "onnx", ["a gorgeous, witty film .", "the plot is a mess", "x"])


def test_lora_with_the_default_targets_and_mlm(folder, tmp_path):
    metrics = run_train([*QUICK, f"model.pretrained={folder}", "task=sst2", "freeze=lora"], tmp_path / "lora")
    scope = json.loads((tmp_path / "lora" / "update_scope.json").read_text())
    text = json.dumps(scope)
    assert "query_proj" in text and "value_proj" in text
    assert metrics["val"]["accuracy"] is not None
    mlm = run_train([*QUICK, f"model.pretrained={folder}", "task=mlm", "task.nsp=false", "export=true",
                     "data.max_seq_length=32"], tmp_path / "mlm")
    assert mlm["val"]["loss"] is not None
    hf = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "mlm" / "export").eval()
    ours = load_checkpoint_model(mlm["best_checkpoint"]).model
    ids = torch.tensor([[1, 20, 30, 200, 40, 2]])
    with torch.no_grad():
        torch.testing.assert_close(ours({"input_ids": ids})[0], hf(input_ids=ids).logits, atol=1e-5, rtol=0)
