"""The recurrent encoder (model=bilstm|gru|lstm): packing, the head interface, freeze policies, and task=clm
(teacher forcing, padding-free loss, greedy generation), plus end-to-end runs of every task family."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from bertlab.data.mlm import IGNORE_INDEX
from bertlab.data.tokenizer import train_wordpiece
from bertlab.models.bert import BertModel
from bertlab.models.heads import (
    CausalLMHead,
    PreTrainingHead,
    SequenceClassificationHead,
    SpanHead,
    TaskModel,
    TokenClassificationHead,
)
from bertlab.models.hf_weights import save_encoder
from bertlab.models.recurrent import RecurrentConfig, RecurrentEncoder, check_head_layers
from bertlab.runtime.config import ConfigError, EncoderConfig, FreezeConfig, HeadConfig, TaskSpec
from bertlab.tasks.clm import causal_lm_loss, generate, next_token_targets, target_positions
from bertlab.tasks.families import build_family
from bertlab.training.build import build_model, build_tokenizer
from bertlab.training.freeze import apply_freeze

PAD = 0
SMALL = ("model.embedding_dim=32", "model.hidden_size=32", "data.batch_size=8", "trainer.max_epochs=1")


def encoder(**kw) -> RecurrentEncoder:
    torch.manual_seed(0)
    values = dict(vocab_size=60, embedding_dim=16, hidden_size=12, num_layers=2, dropout=0.1, pad_token_id=PAD)
    values.update(kw)
    return RecurrentEncoder(RecurrentConfig(**values)).eval()


def padded_batch(lengths: list[int], seq_len: int, pad_fill: int | None = None):
    """Random ids (5..59) right-padded to seq_len; padding is PAD, or pad_fill to show it is never read."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 60, (len(lengths), seq_len), generator=g)
    mask = (torch.arange(seq_len)[None, :] < torch.tensor(lengths)[:, None]).long()
    ids = ids.masked_fill(mask == 0, PAD if pad_fill is None else pad_fill)
    return ids, mask


# ------------------------------------------------------------------------------------------------------------
# Packing: padding never leaks


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("pooling", ["final", "mean", "max"])
def test_same_sentence_alone_or_padded_in_a_batch(cell, bidirectional, pooling):
    enc = encoder(cell=cell, bidirectional=bidirectional, pooling=pooling)
    lengths = [7, 3, 5, 1]
    ids, mask = padded_batch(lengths, seq_len=9)
    batch = enc(ids, mask, output_hidden_states=True)
    # Padding content is never read: other ids at padded positions change nothing.
    junk = enc(padded_batch(lengths, 9, pad_fill=42)[0], mask, output_hidden_states=True)
    torch.testing.assert_close(junk.last_hidden_state, batch.last_hidden_state, rtol=0, atol=0)
    torch.testing.assert_close(junk.pooler_output, batch.pooler_output, rtol=0, atol=0)
    h_out = 12 * (2 if bidirectional else 1)
    assert batch.last_hidden_state.shape == (4, 9, h_out) and batch.pooler_output.shape == (4, h_out)
    assert len(batch.hidden_states) == 3  # embeddings + 2 layers
    for i, n in enumerate(lengths):
        alone = enc(ids[i:i + 1, :n], output_hidden_states=True)  # no mask, no padding at all
        torch.testing.assert_close(batch.last_hidden_state[i:i + 1, :n], alone.last_hidden_state,
                                   rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(batch.pooler_output[i:i + 1], alone.pooler_output, rtol=1e-5, atol=1e-6)
        for layer, state in enumerate(alone.hidden_states):
            torch.testing.assert_close(batch.hidden_states[layer][i:i + 1, :n], state, rtol=1e-5, atol=1e-6)
        for state in batch.hidden_states:
            assert not state[i, n:].any(), "padded positions must be exactly zero"


def test_final_pooling_is_last_forward_state_and_first_backward_state():
    enc = encoder(hidden_size=12, bidirectional=True, pooling="final")
    ids, mask = padded_batch([6, 2, 4], seq_len=6)
    out = enc(ids, mask)
    for i, n in enumerate([6, 2, 4]):
        torch.testing.assert_close(out.pooler_output[i, :12], out.last_hidden_state[i, n - 1, :12])
        torch.testing.assert_close(out.pooler_output[i, 12:], out.last_hidden_state[i, 0, 12:])
    uni = encoder(bidirectional=False, pooling="final")
    out = uni(ids, mask)
    for i, n in enumerate([6, 2, 4]):
        torch.testing.assert_close(out.pooler_output[i], out.last_hidden_state[i, n - 1])


def test_left_padding_and_empty_rows_are_errors():
    enc = encoder()
    ids, _ = padded_batch([4, 4], seq_len=4)
    with pytest.raises(ValueError, match="right-padded"):
        enc(ids, torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]]))
    with pytest.raises(ValueError, match="no real token"):
        enc(ids, torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]]))


def test_segment_ids_are_ignored_and_names_follow_the_bert_layout():
    enc = encoder()
    ids, mask = padded_batch([5, 3], seq_len=5)
    types = torch.ones_like(ids)
    torch.testing.assert_close(enc(ids, mask, types).last_hidden_state, enc(ids, mask).last_hidden_state)
    names = [n for n, _ in enc.named_parameters()]
    assert names[0] == "embeddings.word_embeddings.weight"
    assert {n.split(".")[2] for n in names[1:]} == {"0", "1"} and all(n.startswith("encoder.layer.") for n in names[1:])
    assert enc.rnn is enc.encoder.layer and enc.hidden_size == 24


def test_config_is_validated():
    with pytest.raises(ConfigError, match="model.cell"):
        RecurrentConfig(cell="rnn")
    with pytest.raises(ConfigError, match="model.pooling"):
        RecurrentConfig(pooling="cls")
    with pytest.raises(ConfigError, match="model.hidden_size"):
        RecurrentConfig(hidden_size=0)


# ------------------------------------------------------------------------------------------------------------
# The head interface


def test_every_head_reads_the_recurrent_encoder():
    enc = encoder(embedding_dim=24, hidden_size=12)  # H_out = 24 = embedding_dim: MLM's tied decoder fits
    config = enc.config
    assert config.hidden_size == 24 and config.hidden_dropout_prob == 0.1 and config.vocab_size == 60
    ids, mask = padded_batch([5, 3], seq_len=5)
    out = enc(ids, mask, output_hidden_states=True)

    head = SequenceClassificationHead(config, HeadConfig(pooling="pooler"), num_labels=3)
    assert head.features(out) is out.pooler_output  # "pooler" = the named sequence vector, as it is
    assert head(head.features(out)).shape == (2, 3)
    head = SequenceClassificationHead(config, HeadConfig(pooling="cls", layers="concat_last4", hidden_layers=1), 3)
    deep = encoder(embedding_dim=24, hidden_size=12, num_layers=4)
    assert head(head.features(deep(ids, mask, output_hidden_states=True))).shape == (2, 3)
    head = TokenClassificationHead(config, HeadConfig(layers=1), num_labels=5)
    assert head(head.features(out)).shape == (2, 5, 5)
    head = SpanHead(config, HeadConfig())
    assert head(head.features(out)).shape == (2, 5, 2)
    head = PreTrainingHead(config, enc.embeddings.word_embeddings, nsp=True)
    mlm, nsp = head(head.features(out), positions=torch.tensor([[0, 1], [1, 2]]))
    assert mlm.shape == (2, 60) and nsp.shape == (2, 2)
    for tie in (True, False):
        head = CausalLMHead(encoder(bidirectional=False).config, enc.embeddings.word_embeddings, tie=tie)
        assert (head.decoder.weight is enc.embeddings.word_embeddings.weight) == tie
        assert head(out.last_hidden_state[..., :12]).shape == (2, 5, 60)


def test_head_layers_must_pick_states_of_the_head_width():
    config = RecurrentConfig(embedding_dim=16, hidden_size=12, num_layers=2)  # widths: 16, 24, 24
    check_head_layers(config, "last")
    check_head_layers(config, 2)
    check_head_layers(config, -1)
    with pytest.raises(ConfigError, match="model.embedding_dim"):
        check_head_layers(config, 0)
    with pytest.raises(ConfigError, match="model.num_layers >= 4"):
        check_head_layers(config, "concat_last4")
    with pytest.raises(ConfigError, match="outside"):
        check_head_layers(config, 3)
    check_head_layers(RecurrentConfig(embedding_dim=24, hidden_size=12, num_layers=3), "sum_last4")


# ------------------------------------------------------------------------------------------------------------
# Freeze policies


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = torch.nn.Linear(24, 2)


@pytest.mark.parametrize("policy,k,trainable", [
    ("none", 0, None),
    ("encoder", 0, set()),
    ("embeddings", 0, {"encoder.layer.0", "encoder.layer.1"}),
    ("bottom_k", 1, {"encoder.layer.1"}),
    ("bitfit", 0, {"encoder.layer.0", "encoder.layer.1"}),
])
def test_freeze_policies_that_apply(policy, k, trainable):
    enc = encoder()
    plan = apply_freeze(enc, Head(), FreezeConfig(policy=policy, k=k))
    names = [n for n, p in enc.named_parameters() if p.requires_grad]
    if trainable is None:
        assert len(names) == len(list(enc.parameters()))
    else:
        assert {n.rsplit(".", 1)[0] for n in names} == trainable
    if policy == "bitfit":  # the gate biases of nn.LSTM (bias_ih_l0, bias_hh_l0_reverse, ...)
        assert names and all("bias_" in n for n in names)
    assert plan.encoder_frozen == (policy == "encoder")


def test_lora_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match="freeze=lora does not apply to RecurrentEncoder.*no nn.Linear"):
        apply_freeze(encoder(), Head(), FreezeConfig(policy="lora"))


# ------------------------------------------------------------------------------------------------------------
# task=clm: teacher forcing


def test_targets_are_the_inputs_shifted_by_one():
    ids = torch.tensor([[2, 11, 12, 13, 3], [2, 21, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    targets = next_token_targets(ids, mask)
    assert targets.tolist() == [[11, 12, 13, 3, IGNORE_INDEX], [21, 3, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX]]
    real = targets != IGNORE_INDEX
    assert torch.equal(targets[real], ids[:, 1:][mask[:, 1:].bool()])  # position t predicts token t + 1
    assert target_positions(targets).tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1]]


def test_loss_ignores_padding():
    torch.manual_seed(0)
    ids, mask = padded_batch([6, 3, 4], seq_len=6)
    logits = torch.randn(3, 6, 60)
    loss = causal_lm_loss(logits, ids, mask)
    # Whatever the logits and ids at padded positions, the loss is the same ...
    noisy = logits.clone()
    noisy[mask == 0] = 1e4 * torch.randn_like(noisy[mask == 0])
    torch.testing.assert_close(causal_lm_loss(noisy, ids.masked_fill(mask == 0, 7), mask), loss)
    # ... and it is the token-weighted mean of the per-sentence next-token losses, computed without padding.
    total, count = 0.0, 0
    for i, n in enumerate([6, 3, 4]):
        total += F.cross_entropy(logits[i, : n - 1], ids[i, 1:n], reduction="sum")
        count += n - 1
    torch.testing.assert_close(loss, total / count)
    # Scoring only the target positions (what the head does in training) gives the same loss.
    positions = target_positions(next_token_targets(ids, mask))
    torch.testing.assert_close(causal_lm_loss(logits[positions[:, 0], positions[:, 1]], ids, mask), loss)


def test_left_to_right_states_never_see_the_target():
    enc = encoder(bidirectional=False)
    ids, _ = padded_batch([8], seq_len=8)
    changed = ids.clone()
    changed[0, 5:] = 9
    a, b = enc(ids).last_hidden_state, enc(changed).last_hidden_state
    torch.testing.assert_close(a[:, :5], b[:, :5], rtol=0, atol=0)  # position 4 predicts token 5 unseen
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_clm_refuses_bidirectional_encoders():
    family = build_family(TaskSpec(name="clm", family="clm"), 0, None, None)
    bi = encoder(bidirectional=True)
    with pytest.raises(ConfigError, match="model.bidirectional"):
        family.build_head(bi.config, HeadConfig(), bi.embeddings.word_embeddings)
    bert = BertModel(EncoderConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32))
    with pytest.raises(ConfigError, match="model.bidirectional"):
        family.build_head(bert.config, HeadConfig(), bert.embeddings.word_embeddings)
    with pytest.raises(ConfigError, match="task.nsp"):
        build_family(TaskSpec(name="clm", family="clm", nsp=True), 0, None, None)


def test_greedy_generation():
    tokenizer = train_wordpiece(["the cat sat on the mat", "a dog ran to the park"] * 20, vocab_size=80)
    enc = encoder(vocab_size=tokenizer.vocab_size, bidirectional=False, embedding_dim=12, hidden_size=12)
    model = TaskModel(enc, CausalLMHead(enc.config, enc.embeddings.word_embeddings), None).train()
    cat = tokenizer.tokenizer.token_to_id("cat")
    with torch.no_grad():
        model.head.decoder.bias.zero_()
        model.head.decoder.bias[cat] = 1e4  # greedy must pick "cat" at every step
        model.head.decoder.bias[tokenizer.pad_id] = 2e4  # never a target: excluded
    assert generate(model, tokenizer, "the dog", 3) == "cat cat cat"
    assert model.training  # mode restored
    with torch.no_grad():
        model.head.decoder.bias[tokenizer.sep_id] = 1.5e4  # [SEP] ends the segment at once
    assert generate(model, tokenizer, "the dog", 3) == ""


# ------------------------------------------------------------------------------------------------------------
# Builders: init_embeddings_from a BERT checkpoint


def test_embeddings_and_tokenizer_from_a_bert_checkpoint(tmp_path):
    tokenizer = train_wordpiece(["the cat sat on the mat", "a dog ran to the park"] * 20, vocab_size=80)
    torch.manual_seed(0)
    bert = BertModel(EncoderConfig(vocab_size=tokenizer.vocab_size, hidden_size=20, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32))
    save_encoder(bert, tmp_path)
    tokenizer.save(tmp_path)
    model_cfg = {"name": "bilstm", "encoder": "recurrent", "init_embeddings_from": str(tmp_path), "embedding_dim": 64,
                 "hidden_size": 8, "num_layers": 1, "bidirectional": True}
    loaded = build_tokenizer(model_cfg, None, lambda: pytest.fail("must not train a tokenizer"), None)
    assert loaded.tokenizer.get_vocab() == tokenizer.tokenizer.get_vocab()
    family = build_family(TaskSpec(name="sst2", family="sequence"), 2, ["0", "1"], None)
    model, report = build_model(model_cfg, HeadConfig(), family, loaded)
    torch.testing.assert_close(model.encoder.embeddings.word_embeddings.weight, bert.embeddings.word_embeddings.weight)
    assert model.encoder.recurrent_config.embedding_dim == 20  # the checkpoint's width, not the configured 64
    assert report.loaded == ["encoder.embeddings.word_embeddings.weight"]
    with pytest.raises(ConfigError, match="init_embeddings_from"):
        build_model({**model_cfg, "pretrained": str(tmp_path)}, HeadConfig(), family, loaded)


def test_builder_refuses_heads_that_cannot_read_the_encoder():
    tokenizer = train_wordpiece(["the cat sat on the mat", "a dog ran to the park"] * 20, vocab_size=80)
    lstm = {"encoder": "recurrent", "embedding_dim": 16, "hidden_size": 8, "num_layers": 1, "bidirectional": False}
    sequence = build_family(TaskSpec(name="sst2", family="sequence"), 2, ["0", "1"], None)
    with pytest.raises(ConfigError, match="head.pooling=cls"):
        build_model(lstm, HeadConfig(pooling="cls"), sequence, tokenizer)
    mlm = build_family(TaskSpec(name="mlm", family="mlm"), 0, None, None)
    with pytest.raises(ConfigError, match="model.embedding_dim"):
        build_model({**lstm, "bidirectional": True, "embedding_dim": 12}, HeadConfig(), mlm, tokenizer)
    model, _ = build_model({**lstm, "bidirectional": True}, HeadConfig(), mlm, tokenizer)  # 16 = 2 × 8: tied
    assert model.head_kind is None and model.encoder.config.hidden_size == 16


# ------------------------------------------------------------------------------------------------------------
# End to end (the real config, in-process, on the fixtures)


@pytest.mark.parametrize("task,metric", [("sst2", "accuracy"), ("mrpc", "f1"), ("conll2003", "f1"),
                                         ("squad", "exact_match")])
def test_every_fine_tuning_task_runs(train_run, tmp_path, task, metric):
    metrics = train_run("model=bilstm", f"task={task}", *SMALL, "trainer.limit_train_batches=3", "freeze=embeddings")
    assert metrics["model"] == "bilstm" and metric in metrics["val"]
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    assert scope["frozen_changed"] == [] and scope["groups"]["embeddings"]["changed"] == 0
    assert scope["groups"]["layer.1"]["changed"] == scope["groups"]["layer.1"]["tensors"] > 0


def test_clm_trains_reports_perplexity_and_samples_then_fine_tunes_from_it(train_run, tmp_path):
    metrics = train_run("model=lstm", "task=clm", *SMALL, "task.max_new_tokens=4", name="lm")
    val = metrics["val"]
    assert {"loss", "perplexity", "accuracy"} <= set(val)
    assert val["perplexity"] == pytest.approx(2.718281828 ** val["loss"], rel=1e-6)
    assert [s["prompt"] for s in metrics["samples"]] == ["the game", "in 1990 , the band"]
    assert all(isinstance(s["continuation"], str) for s in metrics["samples"])
    # The language model's encoder starts a classifier (its run's tokenizer comes along).
    tuned = train_run("model=lstm", "task=sst2", *SMALL, f"model.init_from={tmp_path / 'lm'}", name="sst2")
    assert "accuracy" in tuned["val"]


def test_clm_with_a_bidirectional_encoder_is_a_config_error(train_run):
    with pytest.raises(ConfigError, match="model.bidirectional"):
        train_run("model=bilstm", "task=clm", *SMALL)


def test_a_recurrent_encoder_has_no_position_table_and_says_so():
    """Its config carries what heads read, not a made-up position table: the length check before training
    is skipped for it, and still applies to BERT."""
    from bertlab.runtime.checks import preflight
    from bertlab.runtime.config import DataConfig

    encoder = RecurrentEncoder(RecurrentConfig(vocab_size=50, embedding_dim=8, hidden_size=4, num_layers=1))
    assert not hasattr(encoder.config, "max_position_embeddings")
    task = TaskSpec(name="sst2", family="sequence", monitor="val/accuracy", mode="max")
    preflight(task, DataConfig(max_seq_length=100_000), None)
    with pytest.raises(ConfigError, match="larger than the model's position table"):
        preflight(task, DataConfig(max_seq_length=1024), 512)
