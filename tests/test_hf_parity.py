"""Parity with transformers on tiny random models: HF → bertlab → HF is the identity, outputs agree in fp32."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from bertlab.models.bert import BertModel  # noqa: E402
from bertlab.models.heads import (  # noqa: E402
    PreTrainingHead,
    SequenceClassificationHead,
    SpanHead,
    TaskModel,
    TokenClassificationHead,
)
from bertlab.models.hf_weights import (  # noqa: E402  # noqa: E402
    CheckpointError,
    convert_hf_state_dict,
    export_state_dict,
    load_encoder,
    load_into,
    save_encoder,
)
from bertlab.runtime.config import EncoderConfig, HeadConfig  # noqa: E402

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def hf_config(**kw):
    return transformers.BertConfig(**{**TINY, **kw})


def batch(with_types: bool = True):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 99, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padding in the batch
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types if with_types else None}


def build_ours(kind: str, num_labels: int = 3) -> TaskModel:
    cfg = EncoderConfig(**TINY)
    head_cfg = HeadConfig()
    if kind == "sequence":
        bert = BertModel(cfg, add_pooling_layer=True)
        head = SequenceClassificationHead(cfg, head_cfg, num_labels)
    elif kind == "token":
        bert = BertModel(cfg, add_pooling_layer=False)
        head = TokenClassificationHead(cfg, head_cfg, num_labels)
    elif kind == "span":
        bert = BertModel(cfg, add_pooling_layer=False)
        head = SpanHead(cfg, head_cfg)
    elif kind == "mlm":
        bert = BertModel(cfg, add_pooling_layer=False)
        head = PreTrainingHead(cfg, bert.embeddings.word_embeddings, nsp=False)
    else:
        bert = BertModel(cfg, add_pooling_layer=True)
        head = PreTrainingHead(cfg, bert.embeddings.word_embeddings, nsp=True)
    return TaskModel(bert, head, kind).eval()


HF_CLASSES = {
    "sequence": "BertForSequenceClassification",
    "token": "BertForTokenClassification",
    "span": "BertForQuestionAnswering",
    "mlm": "BertForMaskedLM",
    "pretraining": "BertForPreTraining",
}


def hf_model(kind: str, num_labels: int = 3):
    torch.manual_seed(1)
    cls = getattr(transformers, HF_CLASSES[kind])
    model = cls(hf_config(num_labels=num_labels if kind != "span" else 2))
    # Give biases and LayerNorms non-trivial values so a missed tensor shows up in the outputs.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bias" in name or "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


@pytest.mark.parametrize("kind", list(HF_CLASSES))
@pytest.mark.parametrize("with_types", [True, False])
def test_task_model_parity(kind, with_types):
    hf = hf_model(kind)
    ours = build_ours(kind)
    state, report = convert_hf_state_dict(hf.state_dict(), kind, has_pooler=ours.encoder.pooler is not None)
    load_into(ours, state, report)
    assert not report.newly_initialised, report.newly_initialised
    b = batch(with_types)
    kwargs = {k: v for k, v in b.items() if v is not None}
    with torch.no_grad():
        ref = hf(**kwargs)
        if kind in ("mlm", "pretraining"):
            mlm, nsp = ours(b)
            ref_mlm = ref.logits if kind == "mlm" else ref.prediction_logits
            valid = b["attention_mask"].bool()
            torch.testing.assert_close(mlm[valid], ref_mlm[valid], atol=1e-5, rtol=1e-5)
            if kind == "pretraining":
                torch.testing.assert_close(nsp, ref.seq_relationship_logits, atol=1e-5, rtol=1e-5)
        elif kind == "span":
            logits = ours(b)
            valid = b["attention_mask"].bool()
            torch.testing.assert_close(logits[..., 0][valid], ref.start_logits[valid], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(logits[..., 1][valid], ref.end_logits[valid], atol=1e-5, rtol=1e-5)
        else:
            logits = ours(b)
            if kind == "token":
                valid = b["attention_mask"].bool()
                torch.testing.assert_close(logits[valid], ref.logits[valid], atol=1e-5, rtol=1e-5)
            else:
                torch.testing.assert_close(logits, ref.logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", list(HF_CLASSES))
def test_round_trip_is_identity(kind):
    hf = hf_model(kind)
    ours = build_ours(kind)
    state, report = convert_hf_state_dict(hf.state_dict(), kind, has_pooler=ours.encoder.pooler is not None)
    load_into(ours, state, report)
    back = export_state_dict(ours.state_dict(), kind)
    reference = {k: v for k, v in hf.state_dict().items() if not k.endswith("position_ids")}
    # HF state_dict lists the tied decoder weight; export writes it once as the word embeddings (as HF saves).
    reference.pop("cls.predictions.decoder.weight", None)
    assert set(back) == set(reference)
    for key, tensor in reference.items():
        assert torch.equal(back[key], tensor), key


def test_encoder_parity_with_bert_model_and_padding():
    torch.manual_seed(0)
    hf = transformers.BertModel(hf_config()).eval()
    ours = BertModel(EncoderConfig(**TINY)).eval()
    state, report = convert_hf_state_dict(hf.state_dict(), None, has_pooler=True)
    load_into(ours, {k[len("encoder."):]: v for k, v in state.items()}, report)
    b = batch()
    with torch.no_grad():
        ref = hf(**b)
        out = ours(**b)
    valid = b["attention_mask"].bool()
    torch.testing.assert_close(out.last_hidden_state[valid], ref.last_hidden_state[valid], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.pooler_output, ref.pooler_output, atol=1e-5, rtol=1e-5)


def test_save_pretrained_loads_in_transformers(tmp_path):
    torch.manual_seed(0)
    ours = BertModel(EncoderConfig(**TINY)).eval()
    save_encoder(ours, tmp_path)
    hf = transformers.BertModel.from_pretrained(str(tmp_path)).eval()
    again = load_encoder(tmp_path).eval()
    b = batch()
    with torch.no_grad():
        ref = hf(**b).last_hidden_state
        out = ours(**b).last_hidden_state
        out2 = again(**b).last_hidden_state
    valid = b["attention_mask"].bool()
    torch.testing.assert_close(out[valid], ref[valid], atol=1e-5, rtol=1e-5)
    assert torch.equal(out, out2)


def test_legacy_keys_and_stale_buffers(tmp_path):
    """gamma/beta LayerNorm names, a stale position_ids buffer and a bert. prefix all load."""
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hf_config()).eval()
    state = {}
    for k, v in hf.state_dict().items():
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[k] = v
    state["bert.embeddings.position_ids"] = torch.arange(64)[None]
    state.pop("cls.predictions.decoder.bias", None)  # bert-base-uncased lacks it (HF issue #11809)
    ours = build_ours("sequence")
    converted, report = convert_hf_state_dict(state, "sequence", has_pooler=True)
    load_into(ours, converted, report)
    assert any("gamma" in r for r in report.renamed)
    assert "bert.embeddings.position_ids" in report.dropped
    assert any(d.startswith("cls.seq_relationship") for d in report.dropped)
    assert report.newly_initialised == ["head.classifier.bias", "head.classifier.weight"]
    torch.testing.assert_close(ours.encoder.embeddings.LayerNorm.weight, hf.bert.embeddings.LayerNorm.weight)


def test_unknown_key_and_shape_mismatch_are_errors():
    ours = build_ours("token")
    hf = hf_model("token")
    state = dict(hf.state_dict())
    state["bert.encoder.layer.0.attention.self.rotary.weight"] = torch.zeros(1)
    converted, report = convert_hf_state_dict(state, "token", has_pooler=False)
    with pytest.raises(CheckpointError, match="rotary"):
        load_into(ours, converted, report)
    state = dict(hf.state_dict())
    state["bert.encoder.layer.1.output.dense.weight"] = torch.zeros(32, 36)
    converted, report = convert_hf_state_dict(state, "token", has_pooler=False)
    with pytest.raises(CheckpointError, match=r"layer\.1\.output\.dense\.weight.*\(32, 36\).*\(32, 37\)"):
        load_into(ours, converted, report)
    with pytest.raises(CheckpointError, match="unknown checkpoint key 'lm_head.weight'"):
        convert_hf_state_dict({"lm_head.weight": torch.zeros(1)}, "token", has_pooler=False)


def test_bad_checkpoint_folders(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_encoder(tmp_path / "nope")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "hidden_size": 8}))
    with pytest.raises(CheckpointError, match="model_type 'gpt2' is not an encoder"):
        load_encoder(tmp_path)
    save_encoder(BertModel(EncoderConfig(**TINY)), tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\x00garbage")
    with pytest.raises(CheckpointError, match="model.safetensors is not a readable safetensors file"):
        load_encoder(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weights in"):
        load_encoder(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_encoder(tmp_path)


def test_pytorch_model_bin_is_loaded_weights_only(tmp_path):
    torch.manual_seed(0)
    hf = transformers.BertModel(hf_config()).eval()
    hf.config.to_json_file(str(tmp_path / "config.json"))
    torch.save(hf.state_dict(), tmp_path / "pytorch_model.bin")
    ours = load_encoder(tmp_path).eval()
    b = batch()
    with torch.no_grad():
        torch.testing.assert_close(ours(**b).pooler_output, hf(**b).pooler_output, atol=1e-5, rtol=1e-5)
