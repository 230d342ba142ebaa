"""ModernBERT beyond the per-head parity of test_families.py: mean pooling, inputs several local windows long (padded
and unpadded, forward and backward), the sliding window in every attention kernel, its config.json both ways, its
checkpoint keys against bertlab's own prefixes, and the freeze policies, LoRA roles, lr decay and audit on its
``layers.N``. Tiny random models built offline."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from bertlab.models.assemble import assemble, config_from_record  # noqa: E402
from bertlab.models.families import family_spec  # noqa: E402
from bertlab.models.hf_weights import convert_hf_state_dict, load_into, normalize_hf_keys  # noqa: E402
from bertlab.models.kernels import Kernels, attention, repad_attention, varlen_attention  # noqa: E402
from bertlab.models.modernbert import ModernBertConfig, ModernBertModel  # noqa: E402
from bertlab.models.packing import pack  # noqa: E402
from bertlab.runtime.config import FreezeConfig, HeadConfig, LoraConfig, TaskSpec  # noqa: E402
from bertlab.runtime.errors import ConfigError  # noqa: E402
from bertlab.tasks.families import build_family  # noqa: E402
from bertlab.training.freeze import apply_freeze  # noqa: E402
from bertlab.training.optim import optimizer_param_groups  # noqa: E402

SPEC = family_spec("modernbert")
VOCAB = 99


def hf_config(**extra):
    kw = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=37,
              max_position_embeddings=128, local_attention=8, global_attn_every_n_layers=3, pad_token_id=0,
              bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2, global_rope_theta=500.0)
    kw.update(extra)
    return transformers.AutoConfig.for_model("modernbert", **kw)


def hf_model(cls_name: str = "ModernBertModel", **extra):
    torch.manual_seed(3)
    model = getattr(transformers, cls_name)(hf_config(**extra)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model


def long_batch(rows=(40, 23, 9, 31), t: int = 40):
    """Rows several local windows long (window: 4 tokens each side), right-padded."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(5, VOCAB, (len(rows), t), generator=g)
    mask = (torch.arange(t)[None] < torch.tensor(rows)[:, None]).long()
    return ids.masked_fill(mask == 0, 0), mask


def ours(task_family: str, head_kind: str | None, hf_cfg, unpad: str, num_labels: int = 3):
    config = SPEC.read_config(hf_cfg.to_dict(), "test")
    task = TaskSpec(name=task_family, family=task_family, labels=[str(i) for i in range(num_labels)]
                    if task_family == "sequence" else None)
    family = build_family(task, num_labels, task.labels, None)
    return assemble(config, HeadConfig(pooling="pooler"), family.build_head, head_kind, add_pooling_layer=False,
                    unpad=unpad).eval()


@pytest.mark.parametrize("unpad", ["false", "true"])
@pytest.mark.parametrize("cls_name, family, kind", [
    ("ModernBertForSequenceClassification", "sequence", "sequence"),
    ("ModernBertForMultipleChoice", "multiple_choice", "multiple_choice"),
])
def test_mean_pooling_heads_equal_transformers_on_long_rows(cls_name, family, kind, unpad):
    """classifier_pooling=mean: the head reads the mean of the real tokens (transformers' class), on rows that cross
    the local window several times."""
    hf = hf_model(cls_name, classifier_pooling="mean", num_labels=3 if kind == "sequence" else 2)
    model = ours(family, kind, hf.config, unpad)
    assert model.head.reads_attention_mask and not model.head.reads_first_token_only
    state, report = convert_hf_state_dict(hf.state_dict(), kind, has_pooler=False, spec=SPEC)
    load_into(model, state, report)
    ids, mask = long_batch()
    with torch.no_grad():
        if kind == "multiple_choice":
            want = hf(input_ids=ids.view(2, 2, -1), attention_mask=mask.view(2, 2, -1)).logits
            got = model({"input_ids": ids.view(2, 2, -1), "attention_mask": mask.view(2, 2, -1)}, num_choices=2)
        else:
            want = hf(input_ids=ids, attention_mask=mask).logits
            got = model({"input_ids": ids, "attention_mask": mask})
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_long_rows_padded_and_unpadded_forward_and_backward():
    """Rows up to five windows long: the encoder equals transformers on both paths, and the two paths give the same
    gradients. Training mode with an attention dropout of 2⁻²⁰ (no element dropped) takes the CPU kernel with
    dropout, whose softmax would be NaN for a padded query past its row's window if it saw no key at all."""
    hf = hf_model()
    ids, mask = long_batch()
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask).last_hidden_state
    grads = {}
    for unpad in ("false", "true", "nested"):  # nested: CUDA's default kernel (the local layers fall back to repad)
        config = SPEC.read_config(hf.config.to_dict(), "test")
        kernels = Kernels(varlen_attention="nested" if unpad == "nested" else "auto")
        p = 0.0 if unpad == "nested" else 2**-20  # nested SDPA on CPU has no dropout kernel
        enc = SPEC.build_encoder(dataclasses.replace(config, attention_probs_dropout_prob=p),
                                 unpad="true" if unpad == "nested" else unpad, kernels=kernels)
        state, report = convert_hf_state_dict(hf.state_dict(), None, has_pooler=False, spec=SPEC)
        load_into(enc, {k[len("bert."):]: v for k, v in state.items()}, report)
        enc.train()
        out = enc(ids, attention_mask=mask).last_hidden_state
        real = mask.bool()
        torch.testing.assert_close(out[real], want[real], atol=1e-5, rtol=0)
        out[real].pow(2).sum().backward()
        grads[unpad] = {n: p.grad.clone() for n, p in enc.named_parameters()}
        assert all(torch.isfinite(g).all() for g in grads[unpad].values())
    for name, g in grads["false"].items():
        torch.testing.assert_close(grads["true"][name], g, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(grads["nested"][name], g, atol=5e-5, rtol=1e-3)  # another summation order


def test_context_of_8192_positions():
    config = SPEC.read_config(hf_config(max_position_embeddings=8192).to_dict(), "test")
    assert config.max_sequence_length == 8192
    enc = ModernBertModel(config)
    with pytest.raises(ValueError, match="8192 positions"):
        enc(torch.ones(1, 8193, dtype=torch.long))


@pytest.mark.parametrize("mask_kind", ["none", "keys"])
def test_window_in_every_kernel(mask_kind):
    """The sliding window computes the same in SDPA, the CPU slices with dropout (p → 0), repad groups and the
    varlen entry point; a window every row fits in is global attention."""
    torch.manual_seed(0)
    b, nh, t, hd, w = 3, 2, 13, 4, 3
    q, k, v = (torch.randn(b, nh, t, hd) for _ in range(3))
    lengths = torch.tensor([13, 9, 5]) if mask_kind == "keys" else torch.tensor([13, 13, 13])
    real = torch.arange(t)[None] < lengths[:, None]  # (B, T)
    dist = (torch.arange(t)[:, None] - torch.arange(t)[None]).abs()
    allowed = (dist <= w)[None] & real[:, None, :]  # (B, T, T)
    scores = (q @ k.transpose(-1, -2)) * hd**-0.5
    want = scores.masked_fill(~allowed[:, None], float("-inf")).softmax(-1) @ v  # (B, nh, T, hd)
    key_mask = real[:, None, None, :] if mask_kind == "keys" else None
    got = attention(q, k, v, key_mask, 0.0, window=w)
    sliced = attention(q, k, v, key_mask, 2**-20, Kernels(cpu_attention_slice_bytes=64), window=w)
    for out in (got, sliced):
        torch.testing.assert_close(out.transpose(1, 2)[real], want.transpose(1, 2)[real], atol=1e-5, rtol=0)
    packing = pack(real.long(), overhead=0)  # one group per length
    packed = lambda x: packing.gather(x.transpose(1, 2))  # noqa: E731  (N, nh, hd)
    qkv = torch.stack([packed(x) for x in (q, k, v)], 1)
    want_packed = packed(want)
    torch.testing.assert_close(repad_attention(qkv, packing, 0.0, window=w), want_packed, atol=1e-5, rtol=0)
    torch.testing.assert_close(varlen_attention(*qkv.unbind(1), packing, 0.0, Kernels(varlen_attention="nested"),
                                                window=w), want_packed, atol=1e-5, rtol=0)
    assert torch.equal(attention(q, k, v, key_mask, 0.0, window=t - 1), attention(q, k, v, key_mask, 0.0))
    # A window every row fits in: nested SDPA (CUDA's default) on views of one fused q/k/v tensor.
    nested = varlen_attention(*qkv.unbind(1), packing, 0.0, Kernels(varlen_attention="nested"), window=t - 1)
    torch.testing.assert_close(nested, repad_attention(qkv, packing, 0.0), atol=1e-5, rtol=0)


def test_config_json_both_ways():
    """config.json → ours → config.json: transformers reads back the same layer pattern, thetas and window; the
    older keys (global_attn_every_n_layers, *_rope_theta) read as the newer ones; unsupported values refused."""
    cfg = hf_config()
    ours_cfg = SPEC.read_config(cfg.to_dict(), "test")
    assert ours_cfg.layer_types == cfg.layer_types and ours_cfg.window == cfg.sliding_window == 4
    assert (ours_cfg.global_rope_theta, ours_cfg.local_rope_theta) == (500.0, 10_000.0)
    back = transformers.ModernBertConfig.from_dict(SPEC.write_config(ours_cfg))
    assert back.layer_types == cfg.layer_types and back.rope_parameters == cfg.rope_parameters
    assert back.local_attention == 8 and back.norm_eps == cfg.norm_eps
    old_style = {"model_type": "modernbert", "vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 4,
                 "num_attention_heads": 4, "global_attn_every_n_layers": 2, "global_rope_theta": 7.0,
                 "local_rope_theta": 3.0, "pad_token_id": 0, "norm_eps": 1e-6, "mlp_dropout": 0.1}
    read = SPEC.read_config(old_style, "old.json")
    assert read.layer_types == ["full_attention", "sliding_attention"] * 2
    assert (read.global_rope_theta, read.local_rope_theta, read.layer_norm_eps, read.hidden_dropout_prob) == \
        (7.0, 3.0, 1e-6, 0.1)
    assert SPEC.read_config(SPEC.write_config(read), "x") == read
    for bad, match in (({"hidden_activation": "silu"}, "hidden_activation"),
                       ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling"),
                       ({"classifier_pooling": "max"}, "classifier_pooling")):
        with pytest.raises(ConfigError, match=match):
            SPEC.read_config({**old_style, **bad}, "bad.json")


def test_checkpoint_record_rebuilds_the_family_config():
    config = SPEC.read_config(hf_config(classifier_pooling="mean").to_dict(), "test")
    rebuilt = config_from_record(json.loads(json.dumps(dataclasses.asdict(config))))
    assert isinstance(rebuilt, ModernBertConfig) and rebuilt == config


def test_checkpoint_keys_against_bertlab_prefixes():
    """model.* is ModernBERT's encoder (not the Lightning wrapper), head.* its head (not bertlab's); a bare encoder,
    a torch.compile wrapper and a Lightning state dict of bertlab's own names all land on the same keys."""
    hf = hf_model("ModernBertForSequenceClassification")
    theirs = hf.state_dict()
    normal, _, _ = normalize_hf_keys(theirs, SPEC)
    assert "bert.layers.1.attn.Wqkv.weight" in normal and "head.dense.weight" in normal
    bare = {k[len("model."):]: v for k, v in theirs.items() if k.startswith("model.")}
    assert set(normalize_hf_keys(bare, SPEC)[0]) == {k for k in normal if k.startswith("bert.")}
    compiled = {f"_orig_mod.{k}": v for k, v in theirs.items()}
    assert set(normalize_hf_keys(compiled, SPEC)[0]) == set(normal)
    lightning = {f"model.{k}": v for k, v in normal.items() if k.startswith("bert.")}
    assert set(normalize_hf_keys(lightning, SPEC)[0]) == {k[len("model."):] for k in lightning}
    model = ours("sequence", "sequence", hf.config, "false", num_labels=2)
    state, report = convert_hf_state_dict(theirs, "sequence", has_pooler=False, spec=SPEC)
    load_into(model, state, report)
    assert torch.equal(model.head.dense.weight, theirs["head.dense.weight"])
    assert torch.equal(model.head.classifier.weight, theirs["classifier.weight"])


def _model(task_family: str = "sequence"):
    return ours(task_family, "sequence" if task_family == "sequence" else None, hf_config(), "false")


@pytest.mark.parametrize("policy, frozen", [("embeddings", ["embeddings"]),
                                            ("bottom_k", ["embeddings", "layers.0", "layers.1"])])
def test_freeze_policies_use_the_layer_stack(policy, frozen):
    model = _model()
    plan = apply_freeze(model.bert, model.head, FreezeConfig(policy=policy, k=2))
    assert plan.frozen_module_names == frozen
    trainable = {n for n, p in model.bert.named_parameters() if p.requires_grad}
    assert not any(n.startswith(tuple(f + "." for f in frozen)) for n in trainable)
    assert any(n.startswith("layers.2.") for n in trainable)


def test_lora_roles_map_to_the_fused_projections():
    """conf/freeze/lora.yaml's [query, value] adapt ModernBERT's Wqkv; dense its Wo and Wi; its own names work too."""
    model = _model()
    plan = apply_freeze(model.bert, model.head, FreezeConfig(policy="lora", lora=LoraConfig(target_modules=[
        "query", "value"])))
    assert plan.adapted_modules == [f"layers.{i}.attn.Wqkv" for i in range(4)]
    model = _model()
    plan = apply_freeze(model.bert, model.head, FreezeConfig(policy="lora", lora=LoraConfig(target_modules=[
        "dense", "Wqkv"])))
    assert {n.rsplit(".", 1)[-1] for n in plan.adapted_modules} == {"Wqkv", "Wo", "Wi"}
    with pytest.raises(ConfigError, match=r"this family's names: \['Wqkv'\]"):
        bad = _model()
        bad.bert.layers = bad.bert.layers[:0]
        apply_freeze(bad.bert, bad.head, FreezeConfig(policy="lora"))


def test_layer_lr_decay_and_audit_groups_read_layers_n():
    from bertlab.training.audit import ScopeAudit

    model = _model()
    groups = {g["name"]: g["lr"] for g in optimizer_param_groups(model, 0.0, lr=1.0, layer_lr_decay=0.5)}
    assert groups["layer.3.decay"] == 0.5 and groups["layer.0.decay"] == 0.5**4
    assert groups["embeddings.decay"] == 0.5**5 and groups["head.decay"] == 1.0
    audit = ScopeAudit(model.bert, model.head, None, policy="none", encoder_prefix="bert")
    audit.start()
    assert {t.group for t in audit._tracked if t.part == "encoder"} >= {"layer.0", "layer.3", "embeddings",
                                                                        "final_norm"}


def test_mlm_probability_null_is_the_family_rate(tmp_path):
    """task.mlm_probability=null: 30 % for a ModernBERT checkpoint, 15 % for BERT's; a rate set is kept."""
    from bertlab.training.build import resolve_task_defaults

    hf_model().save_pretrained(tmp_path / "modernbert")
    transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                                                   num_attention_heads=4, intermediate_size=37)
                           ).save_pretrained(tmp_path / "bert")
    mlm = TaskSpec(name="mlm", family="mlm")
    assert mlm.mlm_probability is None
    def rate(folder: str) -> float:  # the family's own rate, read from the checkpoint's config.json
        return resolve_task_defaults(mlm, {"pretrained": str(tmp_path / folder)}).mlm_probability

    assert rate("modernbert") == 0.3 and rate("bert") == 0.15
    assert resolve_task_defaults(mlm, {"name": "bert_tiny"}).mlm_probability == 0.15  # a scratch BERT
    chosen = dataclasses.replace(mlm, mlm_probability=0.2)
    assert resolve_task_defaults(chosen, {"pretrained": str(tmp_path / "modernbert")}) is chosen


def test_run_dirs_recorded_with_the_old_fixed_rate_still_resume(tmp_path):
    """conf/task/mlm.yaml's 0.15 became null (the family's rate, 0.15 for every family of that time): a run dir
    recorded with 0.15 is the same run; one recorded with null is not the same as 0.15 set now."""
    from bertlab.runtime.run_dir import claim_run_dir

    def cfg(rate):
        return {"task": {"name": "mlm", "mlm_probability": rate}, "model": {"name": "bert_tiny"}}

    old = tmp_path / "old"
    claim_run_dir(old, cfg(0.15))
    (old / "metrics.json").write_text("{}")
    claim_run_dir(old, cfg(None))
    new = tmp_path / "new"
    claim_run_dir(new, cfg(None))
    (new / "metrics.json").write_text("{}")
    with pytest.raises(ConfigError, match="task.mlm_probability: None there, 0.15 now"):
        claim_run_dir(new, cfg(0.15))


def test_a_bpe_tokenizer_like_modernberts_round_trips(tmp_path):
    """ModernBERT's tokenizer is a byte-level BPE with BERT's special names: bertlab reads its tokenizer.json with
    the ids transformers gives (single texts and pairs), and the folder bertlab saves (the run's tokenizer/, the
    export) loads in AutoTokenizer as that BPE, not as a WordPiece rebuilt from vocab.txt."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from bertlab.data.tokenizer import load_tokenizer

    texts = ["A Sample sentence, with Capitals.", "another one: it's byte-level BPE!", "Short."] * 20
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=[
        "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
                                         mask_token="[MASK]", unk_token="[UNK]").save_pretrained(tmp_path / "hub")
    ours = load_tokenizer(tmp_path / "hub")
    ours.save(tmp_path / "saved")
    text, pair = "Capitals In A Sample", "it's BPE"
    for folder in ("hub", "saved"):
        hf = transformers.AutoTokenizer.from_pretrained(tmp_path / folder)
        assert hf(text)["input_ids"] == ours.encode_batch([text])[0].ids
        assert hf(text, pair)["input_ids"] == ours.encode_batch([text], [pair])[0].ids
