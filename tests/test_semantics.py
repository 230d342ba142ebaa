"""BERT's input and head rules, one test each: the [CLS] A [SEP] B [SEP] layout and its segments, the sum of
three learned embeddings, attention across segments, padding hidden from every position, the tanh pooler on
[CLS] versus the raw [CLS] vector, and an encoder built without a pooler."""

from __future__ import annotations

import torch

from bertlab.data.tokenizer import train_wordpiece
from bertlab.models.bert import BertModel
from bertlab.models.heads import SequenceClassificationHead, TaskModel
from bertlab.runtime.config import EncoderConfig, HeadConfig

CFG = EncoderConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                    max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def encoder() -> BertModel:
    torch.manual_seed(0)
    return BertModel(CFG).eval()


def test_pair_packing_and_segments():
    tok = train_wordpiece(["the cat sat on the mat", "a dog ran far away"] * 20, vocab_size=60, min_frequency=1)
    enc = tok.encode_batch(["the cat"], ["a dog"])[0]
    assert enc.tokens[0] == "[CLS]" and enc.tokens.count("[SEP]") == 2 and enc.tokens[-1] == "[SEP]"
    first_sep = enc.tokens.index("[SEP]")
    assert enc.type_ids == [0] * (first_sep + 1) + [1] * (len(enc.ids) - first_sep - 1)
    single = tok.encode_batch(["the cat"])[0]
    assert single.tokens[0] == "[CLS]" and single.tokens[-1] == "[SEP]" and set(single.type_ids) == {0}


def test_input_is_the_sum_of_three_learned_embeddings():
    m = encoder()
    ids = torch.tensor([[2, 7, 9, 3]])
    types = torch.tensor([[0, 0, 1, 1]])
    emb = m.embeddings
    expected = emb.LayerNorm(emb.word_embeddings(ids) + emb.token_type_embeddings(types)
                             + emb.position_embeddings.weight[:4])
    torch.testing.assert_close(emb(ids, types), expected)
    assert emb.position_embeddings.weight.requires_grad  # learned, not a fixed sinusoid table


def test_segment_ids_do_not_block_attention_between_a_and_b():
    m = encoder()
    ids = torch.tensor([[2, 7, 8, 3, 11, 12, 3]])
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1]])
    changed = ids.clone()
    changed[0, 5] = 40  # a token of segment B
    with torch.no_grad():
        a = m(ids, token_type_ids=types).last_hidden_state
        b = m(changed, token_type_ids=types).last_hidden_state
    assert not torch.allclose(a[0, 1], b[0, 1])  # a segment-A position sees the change in B


def test_padding_is_hidden_from_every_position():
    m = encoder()
    ids = torch.tensor([[2, 7, 8, 9, 3]])
    padded = torch.tensor([[2, 7, 8, 9, 3, 0, 0, 0], [2, 7, 8, 9, 3, 5, 5, 5]])
    mask = torch.tensor([[1] * 5 + [0] * 3, [1] * 5 + [0] * 3])
    with torch.no_grad():
        alone = m(ids).last_hidden_state
        batch = m(padded, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(batch[0, :5], alone[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(batch[1, :5], alone[0], atol=1e-6, rtol=1e-5)  # padded content is invisible


def test_pooler_and_raw_cls_are_different_computations():
    m = encoder()
    ids = torch.tensor([[2, 7, 8, 3]])
    pooled = SequenceClassificationHead(CFG, HeadConfig(pooling="pooler"), 2)
    raw = SequenceClassificationHead(CFG, HeadConfig(pooling="cls"), 2)
    with torch.no_grad():
        out = m(ids)
        assert torch.equal(pooled.features(out), torch.tanh(m.pooler.dense(out.last_hidden_state[:, 0])))
        assert torch.equal(raw.features(out), out.last_hidden_state[:, 0])
        assert not torch.allclose(pooled.features(out), raw.features(out))


def test_encoder_without_pooler_returns_none_and_builds_no_parameters():
    m = BertModel(CFG, add_pooling_layer=False)
    assert m(torch.tensor([[2, 3]])).pooler_output is None
    assert not any(n.startswith("pooler") for n, _ in m.named_parameters())
    assert isinstance(TaskModel(m, torch.nn.Identity(), None), torch.nn.Module)
