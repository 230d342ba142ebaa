"""Encoder families against transformers on tiny random models built offline: every native family's encoder and
stock heads equal the HF classes (padded and unpadded, fp32), checkpoints load from and export to the family's
own names, and the folder bertlab writes loads in ``AutoModelFor*`` with the same outputs."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from bertlab.models.assemble import assemble, needs_pooler  # noqa: E402
from bertlab.models.families import (  # noqa: E402
    KeyMap,
    families,
    family_spec,
    is_encoder_type,
    tiny_config,
)
from bertlab.models.hf_weights import (  # noqa: E402
    CheckpointError,
    architecture_to_head,
    convert_hf_state_dict,
    export_state_dict,
    load_encoder,
    load_into,
    read_encoder_config,
    save_encoder,  # noqa: E402
)
from bertlab.runtime.config import HeadConfig, TaskSpec  # noqa: E402
from bertlab.tasks.families import build_family  # noqa: E402

NATIVE = list(families())  # the registry: a family added there is checked against transformers here
VOCAB = 99  # the tiny models' vocabulary (FamilySpec.tiny_config)


def tiny_hf_config(model_type: str, **extra):
    """The family's tiny random config (``FamilySpec.tiny_config``: dropout off, its own layout small enough for the
    test rows of 11 tokens to reach it)."""
    return transformers.AutoConfig.for_model(**tiny_config(model_type, **extra))


def segments(model_type: str) -> bool:
    """Whether the family's tiny model has segment embeddings that token_type_ids select (BERT's, ELECTRA's)."""
    return family_spec(model_type).read_config(tiny_config(model_type), "test").type_vocab_size > 1


def batch(model_type: str):
    """Three rows, two of them padded with the family's pad id, other ids clear of every special id."""
    pad = tiny_config(model_type)["pad_token_id"]
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = pad
    types = torch.zeros_like(ids)
    if segments(model_type):
        types[:, 5:] = 1
    return ids, mask, types


HF_TASK_CLASSES = {"sequence": "AutoModelForSequenceClassification", "token": "AutoModelForTokenClassification",
                   "span": "AutoModelForQuestionAnswering", "multiple_choice": "AutoModelForMultipleChoice",
                   "mlm": "AutoModelForMaskedLM", None: "AutoModel"}
TASK_FAMILY = {"sequence": "sequence", "token": "token", "span": "qa", "multiple_choice": "multiple_choice",
               "mlm": "mlm"}


def hf_model(model_type: str, head_kind: str | None, num_labels: int = 3):
    torch.manual_seed(1)
    cls = getattr(transformers, HF_TASK_CLASSES[head_kind])
    cfg = tiny_hf_config(model_type, num_labels=2 if head_kind == "span" else num_labels)
    model = cls.from_config(cfg).eval()
    with torch.no_grad():  # no zero biases or unit LayerNorms: every tensor must really be mapped
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model


def ours_for(model_type: str, head_kind: str, num_labels: int = 3, unpad: str = "false"):
    """bertlab's model of the family with its stock head of this kind (random weights)."""
    hf_dict = tiny_hf_config(model_type).to_dict()
    config = family_spec(model_type).read_config(hf_dict, "test")
    fam = TASK_FAMILY[head_kind]
    task = TaskSpec(name=fam, family=fam, labels=[str(i) for i in range(num_labels)] if fam in ("sequence", "token")
                    else None)
    family = build_family(task, num_labels, task.labels, None)
    head_cfg = HeadConfig(pooling="pooler")
    return assemble(config, head_cfg, family.build_head, head_kind,
                    add_pooling_layer=needs_pooler(config, fam, head_cfg), unpad=unpad).eval()


def hf_logits(model, head_kind, ids, mask, types, model_type):
    kw = {"attention_mask": mask}
    if segments(model_type):
        kw["token_type_ids"] = types
    if head_kind == "multiple_choice":
        kw = {k: v.view(1, 3, -1) for k, v in kw.items()}
        return model(input_ids=ids.view(1, 3, -1), **kw).logits
    out = model(input_ids=ids, **kw)
    if head_kind is None:
        return out.last_hidden_state
    if head_kind == "span":
        return torch.stack([out.start_logits, out.end_logits], -1)
    return out.logits


def ours_logits(model, head_kind, ids, mask, types):
    b = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if head_kind == "multiple_choice":
        b = {k: v.view(1, 3, -1) for k, v in b.items()}
        return model(b, num_choices=3)
    if head_kind == "mlm":
        return model(b)[0]
    return model(b)


def _real(x, mask, head_kind):
    """Outputs at real positions (padded positions differ by design: zeros on the unpadded path)."""
    if head_kind in ("token", "span", "mlm", None):
        return x[mask.bool()]
    return x


HEAD_KINDS = ["sequence", "token", "span", "multiple_choice", "mlm"]


@pytest.mark.parametrize("model_type", NATIVE)
@pytest.mark.parametrize("head_kind", HEAD_KINDS)
@pytest.mark.parametrize("unpad", ["false", "true"])
def test_stock_heads_equal_transformers(model_type, head_kind, unpad):
    """HF checkpoint → bertlab (the family's key map) gives the HF class's outputs on padded batches, both paths."""
    hf = hf_model(model_type, head_kind)
    ours = ours_for(model_type, head_kind, unpad=unpad)
    spec = family_spec(model_type)
    state, report = convert_hf_state_dict(hf.state_dict(), head_kind, has_pooler=ours.bert.pooler is not None,
                                          spec=spec)
    load_into(ours, state, report)
    assert not report.newly_initialised, report.newly_initialised
    ids, mask, types = batch(model_type)
    with torch.no_grad():
        want = _real(hf_logits(hf, head_kind, ids, mask, types, model_type), mask, head_kind)
        got = _real(ours_logits(ours, head_kind, ids, mask, types), mask, head_kind)
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


@pytest.mark.parametrize("model_type", NATIVE)
@pytest.mark.parametrize("head_kind", HEAD_KINDS)
def test_export_names_are_the_family_class_names(model_type, head_kind):
    """bertlab → HF keys give exactly the HF class's state dict (tied decoder weights aside), equal tensors."""
    hf = hf_model(model_type, head_kind)
    ours = ours_for(model_type, head_kind)
    spec = family_spec(model_type)
    state, report = convert_hf_state_dict(hf.state_dict(), head_kind, has_pooler=ours.bert.pooler is not None,
                                          spec=spec)
    load_into(ours, state, report)
    exported = export_state_dict(ours.state_dict(), head_kind, spec)
    theirs = {k: v for k, v in hf.state_dict().items()
              if not k.endswith(("position_ids", "token_type_ids")) and k not in spec.heads[head_kind].tied}
    assert set(exported) == set(theirs)
    for k, v in theirs.items():
        assert torch.equal(exported[k], v), k
    assert architecture_to_head(type(hf).__name__) == (model_type, head_kind)


@pytest.mark.parametrize("model_type", NATIVE)
def test_encoder_from_pretrained_folder(model_type, tmp_path):
    """A bare <Family>Model folder loads as a bertlab encoder (family from config.json) with equal hidden states,
    and save_pretrained writes a folder transformers loads back with equal outputs."""
    hf = hf_model(model_type, None)
    hf.save_pretrained(tmp_path / "hf")
    enc = load_encoder(tmp_path / "hf", add_pooling_layer=False).eval()
    assert enc.config.model_type == model_type
    ids, mask, types = batch(model_type)
    kw = {"token_type_ids": types} if segments(model_type) else {}
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask, **kw).last_hidden_state
        got = enc(ids, attention_mask=mask, token_type_ids=types if kw else None).last_hidden_state
    assert torch.allclose(got[mask.bool()], want[mask.bool()], atol=1e-5)
    save_encoder(enc, tmp_path / "ours")
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert saved["model_type"] == model_type
    back = transformers.AutoModel.from_pretrained(tmp_path / "ours").eval()
    with torch.no_grad():
        again = back(input_ids=ids, attention_mask=mask, **kw).last_hidden_state
    assert torch.allclose(again[mask.bool()], want[mask.bool()], atol=1e-5)


def test_roberta_positions_count_from_after_padding():
    """RoBERTa's positions: pad_token_id + 1 + index for real tokens, pad_token_id for padding (HF's rule)."""
    config = family_spec("roberta").read_config(tiny_hf_config("roberta").to_dict(), "test")
    assert config.position_offset == 2 and config.max_sequence_length == config.max_position_embeddings - 2
    enc = family_spec("roberta").build_encoder(config, add_pooling_layer=False)
    ids = torch.tensor([[0, 7, 8, 2, 1, 1]])
    assert enc.embeddings.position_ids(ids).tolist() == [[2, 3, 4, 5, 1, 1]]
    with pytest.raises(ValueError, match=f"{config.max_sequence_length} positions"):
        enc(torch.full((1, config.max_sequence_length + 1), 5))


def test_pair_segment_ids_are_ignored_by_single_segment_families():
    """RoBERTa has one segment row: a batch carrying 1s (a BERT-style pair template) computes as all-zero types."""
    ours = ours_for("roberta", "sequence")
    ids, mask, _ = batch("roberta")
    ones = torch.ones_like(ids)
    with torch.no_grad():
        a = ours({"input_ids": ids, "attention_mask": mask, "token_type_ids": ones})
        b = ours({"input_ids": ids, "attention_mask": mask, "token_type_ids": None})
    assert torch.equal(a, b)


def test_distilbert_key_map_round_trips():
    m = family_spec("distilbert").encoder_keys
    theirs = "transformer.layer.3.attention.q_lin.weight"
    assert m.to_ours(theirs) == "encoder.layer.3.attention.self.query.weight"
    assert m.to_theirs(m.to_ours(theirs)) == theirs
    assert m.to_ours("embeddings.LayerNorm.bias") == "embeddings.LayerNorm.bias"
    assert KeyMap().to_ours("x.y") == "x.y"


def test_other_heads_are_dropped_unknown_keys_refused():
    """An ELECTRA discriminator checkpoint fine-tunes without its replaced-token head; a key no family layout
    knows is an error naming it."""
    spec = family_spec("electra")
    hf = hf_model("electra", None)
    state = dict(hf.state_dict())
    state = {f"electra.{k}": v for k, v in state.items()}
    state["discriminator_predictions.dense.weight"] = torch.zeros(32, 32)
    ours = ours_for("electra", "token")
    converted, report = convert_hf_state_dict(state, "token", has_pooler=False, spec=spec)
    assert "discriminator_predictions.dense.weight" in report.dropped
    state["mystery.weight"] = torch.zeros(1)
    with pytest.raises(CheckpointError, match="mystery.weight"):
        convert_hf_state_dict(state, "token", has_pooler=False, spec=spec)
    del ours


@pytest.mark.parametrize("model_type, expect", [("gpt2", "not an encoder"), ("t5", "not an encoder"),
                                                ("llama", "not an encoder"), ("mpnet", "not a native")])
def test_non_native_model_types_are_explained(model_type, expect, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, "hidden_size": 8}))
    with pytest.raises(CheckpointError, match=expect) as err:
        read_encoder_config(tmp_path)
    for spec in families().values():
        assert spec.display in str(err.value)


def test_registry_is_consistent():
    assert is_encoder_type("camembert") and not is_encoder_type("gpt_neox")
    for spec in families().values():
        archs = [spec.base_architecture] + [h.architecture for h in spec.heads.values()]
        assert len(set(archs)) == len(archs)
