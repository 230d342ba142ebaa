"""MLM masking, the MLM loss and NSP pair building (BERT-SEMANTICS.md, "Pre-training")."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from bertlab.data.mlm import (
    IGNORE_INDEX,
    IS_NEXT,
    NOT_NEXT,
    NspExample,
    build_nsp_examples,
    mask_tokens,
    max_num_tokens_for,
    pack_pair,
    truncate_seq_pair,
)
from bertlab.data.rawtext import read_documents
from bertlab.tasks.mlm import mlm_loss

FIXTURES = Path(__file__).parent / "fixtures" / "rawtext"

PAD, CLS, SEP, MASK = 0, 101, 102, 103
VOCAB = 30522


def synthetic_batch(batch: int = 256, length: int = 1024, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """[CLS] ids [SEP] [PAD]... rows of random lengths; real ids avoid the special ids and [MASK]."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, VOCAB, (batch, length), generator=g)
    lengths = torch.randint(length // 4, length + 1, (batch,), generator=g)
    positions = torch.arange(length).expand(batch, length)
    ids = torch.where(positions < lengths[:, None], ids, torch.full_like(ids, PAD))
    ids[:, 0] = CLS
    ids[torch.arange(batch), lengths - 1] = SEP
    return ids, torch.isin(ids, torch.tensor([PAD, CLS, SEP, MASK]))


# --------------------------------------------------------------------------------------------------
# mask_tokens
# --------------------------------------------------------------------------------------------------


def test_masking_statistics_follow_15_and_80_10_10():
    ids, special = synthetic_batch()
    real = ~special
    assert real.sum() >= 100_000  # plenty of real tokens: the tolerances below are > 5 sigma
    masked, labels = mask_tokens(ids, special, VOCAB, MASK, generator=torch.Generator().manual_seed(1))

    selected = labels != IGNORE_INDEX
    assert not (selected & special).any()  # [CLS], [SEP], [PAD] are never selected
    assert abs(selected.sum().item() / real.sum().item() - 0.15) < 0.005
    # labels: original ids exactly at the selected positions, -100 everywhere else
    assert torch.equal(labels[selected], ids[selected])
    assert (labels[~selected] == IGNORE_INDEX).all()
    # unselected positions are untouched
    assert torch.equal(masked[~selected], ids[~selected])

    # Categories from the output; real ids never equal [MASK], and a random draw equals the original
    # with probability 1/30522, so "changed but not [MASK]" counts the random 10 % to within noise.
    n = selected.sum().item()
    to_mask = (masked == MASK) & selected
    unchanged = (masked == ids) & selected
    to_random = selected & ~to_mask & ~unchanged
    assert abs(to_mask.sum().item() / n - 0.80) < 0.015
    assert abs(to_random.sum().item() / n - 0.10) < 0.015
    assert abs(unchanged.sum().item() / n - 0.10) < 0.015
    assert ((masked >= 0) & (masked < VOCAB)).all()


def test_masking_is_reproducible_and_fresh_per_call():
    ids, special = synthetic_batch(16, 128)
    a = mask_tokens(ids, special, VOCAB, MASK, generator=torch.Generator().manual_seed(7))
    b = mask_tokens(ids, special, VOCAB, MASK, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])

    other_seed = mask_tokens(ids, special, VOCAB, MASK, generator=torch.Generator().manual_seed(8))
    assert not torch.equal(a[1], other_seed[1])

    g = torch.Generator().manual_seed(7)
    epoch1 = mask_tokens(ids, special, VOCAB, MASK, generator=g)
    epoch2 = mask_tokens(ids, special, VOCAB, MASK, generator=g)  # same generator, next epoch
    assert torch.equal(epoch1[1], a[1])
    assert not torch.equal(epoch1[1], epoch2[1])


def test_masking_does_not_modify_inputs():
    ids, special = synthetic_batch(4, 64)
    ids_before, special_before = ids.clone(), special.clone()
    masked, labels = mask_tokens(ids, special, VOCAB, MASK, generator=torch.Generator().manual_seed(0))
    assert torch.equal(ids, ids_before) and torch.equal(special, special_before)
    assert masked.data_ptr() != ids.data_ptr() and labels.data_ptr() != ids.data_ptr()
    assert masked.dtype == ids.dtype == labels.dtype and masked.shape == ids.shape == labels.shape


def test_masking_uses_the_global_rng_without_a_generator():
    ids, special = synthetic_batch(8, 64)
    torch.manual_seed(3)
    a = mask_tokens(ids, special, VOCAB, MASK)
    torch.manual_seed(3)
    b = mask_tokens(ids, special, VOCAB, MASK)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_masking_edge_probabilities_and_integer_special_mask():
    ids, special = synthetic_batch(4, 64)
    _, labels = mask_tokens(
        ids, special.long(), VOCAB, MASK, generator=torch.Generator().manual_seed(0), mlm_probability=1.0
    )
    assert torch.equal(labels != IGNORE_INDEX, ~special)  # every real token, no special one
    masked, labels = mask_tokens(ids, special, VOCAB, MASK, mlm_probability=0.0)
    assert torch.equal(masked, ids) and (labels == IGNORE_INDEX).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mlm_probability": 1.5}, "mlm_probability"),
        ({"mask_token_id": VOCAB}, "mask_token_id"),
        ({"special_tokens_mask": torch.zeros(2, 3, dtype=torch.bool)}, "shape"),
        ({"word_ids": torch.zeros(2, 3, dtype=torch.long)}, "word_ids"),
    ],
)
def test_masking_rejects_bad_arguments(kwargs, message):
    ids, special = synthetic_batch(2, 16)
    args = {"special_tokens_mask": special, "vocab_size": VOCAB, "mask_token_id": MASK, **kwargs}
    with pytest.raises(ValueError, match=message):
        mask_tokens(ids, **args)


def synthetic_words(batch: int = 128, length: int = 512, seed: int = 0):
    """Rows of words of 1–4 pieces: word_ids (-1 at [CLS], [SEP], padding) and the matching tensors."""
    rng = random.Random(seed)
    word_rows, id_rows = [], []
    for _ in range(batch):
        real = rng.randint(length // 2, length - 2)
        words: list[int] = []
        w = 0
        while len(words) < real:
            words.extend([w] * rng.randint(1, 4))
            w += 1
        words = words[:real]
        word_rows.append([-1, *words, -1] + [-1] * (length - real - 2))
        id_rows.append(
            [CLS] + [rng.randrange(1000, VOCAB) for _ in words] + [SEP] + [PAD] * (length - real - 2)
        )
    ids = torch.tensor(id_rows)
    return ids, torch.isin(ids, torch.tensor([PAD, CLS, SEP, MASK])), torch.tensor(word_rows)


def test_whole_word_masking_selects_all_pieces_of_a_word_together():
    ids, special, word_ids = synthetic_words(batch=192)
    _, labels = mask_tokens(
        ids, special, VOCAB, MASK, generator=torch.Generator().manual_seed(5), word_ids=word_ids
    )
    selected = labels != IGNORE_INDEX
    assert not (selected & special).any()
    n_words = selected_words = 0
    for word_row, selected_row in zip(word_ids.tolist(), selected.tolist()):
        words: dict[int, set[bool]] = {}
        for w, sel in zip(word_row, selected_row):
            if w >= 0:
                words.setdefault(w, set()).add(sel)
        assert all(len(decisions) == 1 for decisions in words.values())  # all pieces or none
        n_words += len(words)
        selected_words += sum(True in d for d in words.values())
    assert n_words > 20_000
    assert abs(selected_words / n_words - 0.15) < 0.01  # the probability applies per word


def test_whole_word_masking_treats_repeated_ids_that_are_not_consecutive_as_two_words():
    word_ids = torch.tensor([[-1, 0, 0, 1, 0, -1]])  # the second "0" run is a new word
    ids = torch.tensor([[CLS, 2000, 2001, 2002, 2003, SEP]])
    special = torch.isin(ids, torch.tensor([CLS, SEP]))
    seen = set()
    for seed in range(200):
        _, labels = mask_tokens(
            ids,
            special,
            VOCAB,
            MASK,
            generator=torch.Generator().manual_seed(seed),
            word_ids=word_ids,
            mlm_probability=0.5,
        )
        sel = (labels[0] != IGNORE_INDEX).tolist()
        assert sel[1] == sel[2] and not sel[0] and not sel[5]
        seen.add((sel[1], sel[3], sel[4]))
    assert (True, False, False) in seen and (False, False, True) in seen


# --------------------------------------------------------------------------------------------------
# mlm_loss
# --------------------------------------------------------------------------------------------------

GOLDEN_LOGITS = [[2.0, 0.0, -1.0], [0.0, 2.0, -1.0], [-0.2, 0.1, 1.1], [1.0, 0.0, 0.0]]


def test_mlm_loss_golden_value_averages_over_selected_positions_only():
    logits = torch.tensor(GOLDEN_LOGITS, dtype=torch.float64)
    labels = torch.tensor([0, IGNORE_INDEX, 2, IGNORE_INDEX])
    loss = mlm_loss(logits, labels)
    assert loss.dtype == torch.float64
    assert abs(loss.item() - 0.33239649126176235) < 1e-12
    assert abs(loss.item() - 0.16619824563088118) > 0.1  # not divided by all four positions
    # batched shape (B, T, V) gives the same value
    assert abs(mlm_loss(logits[None], labels[None]).item() - 0.33239649126176235) < 1e-12


def test_mlm_loss_ignores_targets_and_logits_at_unselected_positions():
    logits = torch.tensor(GOLDEN_LOGITS, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, IGNORE_INDEX, 2, IGNORE_INDEX])
    loss = mlm_loss(logits, labels)
    loss.backward()
    assert (logits.grad[[1, 3]] == 0).all()
    assert (logits.grad[[0, 2]].abs().sum(dim=-1) > 0).all()

    altered = logits.detach().clone()
    altered[1] = torch.tensor([100.0, -100.0, 50.0], dtype=torch.float64)
    altered[3] = torch.tensor([-90.0, 80.0, 70.0], dtype=torch.float64)
    assert mlm_loss(altered, labels).item() == loss.item()
    # "changing the target" at an ignored position: still ignored, whatever the source token was
    assert mlm_loss(logits.detach(), torch.tensor([0, IGNORE_INDEX, 2, IGNORE_INDEX])).item() == loss.item()


def test_mlm_loss_is_zero_not_nan_when_nothing_is_selected():
    logits = torch.randn(2, 5, 7, requires_grad=True)
    loss = mlm_loss(logits, torch.full((2, 5), IGNORE_INDEX))
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))


def test_mlm_loss_upcasts_half_precision_logits():
    logits = torch.tensor(GOLDEN_LOGITS, dtype=torch.bfloat16)
    loss = mlm_loss(logits, torch.tensor([0, IGNORE_INDEX, 2, IGNORE_INDEX]))
    assert loss.dtype == torch.float32
    expected = mlm_loss(logits.float(), torch.tensor([0, IGNORE_INDEX, 2, IGNORE_INDEX]))
    assert loss.item() == expected.item()
    with pytest.raises(ValueError, match="do not match"):
        mlm_loss(torch.zeros(4, 3), torch.zeros(5, dtype=torch.long))


# --------------------------------------------------------------------------------------------------
# NSP
# --------------------------------------------------------------------------------------------------


def test_nsp_label_convention_is_hugging_faces():
    assert (IS_NEXT, NOT_NEXT) == (0, 1)  # BertForPreTraining: 0 = B continues A, 1 = B is random


def id_documents(n_docs: int = 100, seed: int = 0) -> list[list[list[int]]]:
    """Pre-tokenized documents whose ids encode provenance: doc * 10_000 + running position."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        pos = 0
        segments = []
        for _ in range(rng.randint(4, 30)):
            n = rng.randint(3, 14)
            segments.append([d * 10_000 + pos + k for k in range(n)])
            pos += n
        docs.append(segments)
    return docs


def is_contiguous(ids: list[int]) -> bool:
    return all(b == a + 1 for a, b in zip(ids, ids[1:]))


def test_nsp_pairs_are_balanced_consecutive_or_foreign_and_fit():
    max_num_tokens = max_num_tokens_for(64, nsp=True)
    assert max_num_tokens == 61
    examples = build_nsp_examples(id_documents(), None, max_num_tokens, random.Random(0))
    assert len(examples) >= 300
    labels = [ex.next_sentence_label for ex in examples]
    assert set(labels) == {IS_NEXT, NOT_NEXT}
    assert 0.4 <= labels.count(NOT_NEXT) / len(labels) <= 0.6

    for ex in examples:
        a, b = ex.tokens_a, ex.tokens_b
        assert a and b and len(a) + len(b) <= max_num_tokens
        # truncation only trims the ends of A and B, so each side stays one contiguous run of one document
        assert is_contiguous(a) and is_contiguous(b)
        doc_a, doc_b = a[0] // 10_000, b[0] // 10_000
        if ex.next_sentence_label == IS_NEXT:
            assert doc_a == doc_b and a[-1] < b[0]
            if len(a) + len(b) < max_num_tokens:  # nothing was truncated: B starts right after A
                assert b[0] == a[-1] + 1
        else:
            assert doc_a != doc_b


def test_nsp_is_reproducible_under_a_seeded_rng():
    docs = id_documents(20)
    first = build_nsp_examples(docs, None, 40, random.Random(11))
    assert first == build_nsp_examples(docs, None, 40, random.Random(11))
    assert first != build_nsp_examples(docs, None, 40, random.Random(12))
    rng = random.Random(11)
    build_nsp_examples(docs, None, 40, rng)
    assert build_nsp_examples(docs, None, 40, rng) != first  # a second pass (dupe) gives new splits


def test_nsp_on_the_fixture_text_corpus():
    documents = read_documents(FIXTURES / "many_docs.txt")
    assert len(documents) == 48
    vocab: dict[str, int] = {}

    def tokenize(sentence: str) -> list[int]:
        return [vocab.setdefault(w, len(vocab)) for w in sentence.lower().split()]

    rng = random.Random(3)
    examples = [ex for _ in range(3) for ex in build_nsp_examples(documents, tokenize, 29, rng)]
    assert len(examples) >= 300
    not_next = sum(ex.next_sentence_label == NOT_NEXT for ex in examples)
    assert 0.4 <= not_next / len(examples) <= 0.6
    assert all(len(ex.tokens_a) + len(ex.tokens_b) <= 29 for ex in examples)


def test_short_seq_prob_makes_some_examples_shorter():
    docs = id_documents(200)
    always = build_nsp_examples(docs, None, 61, random.Random(0), short_seq_prob=1.0)
    never = build_nsp_examples(docs, None, 61, random.Random(0), short_seq_prob=0.0)

    def mean_len(exs: list[NspExample]) -> float:
        return sum(len(e.tokens_a) + len(e.tokens_b) for e in exs) / len(exs)

    assert mean_len(always) < mean_len(never) - 5


def test_segments_without_nsp_are_contiguous_and_packed():
    docs = id_documents(30)
    max_num_tokens = max_num_tokens_for(48, nsp=False)
    assert max_num_tokens == 46
    examples = build_nsp_examples(docs, None, max_num_tokens, random.Random(0), short_seq_prob=0.0, nsp=False)
    assert all(ex.tokens_b == [] and ex.next_sentence_label == IGNORE_INDEX for ex in examples)
    assert all(0 < len(ex.tokens_a) <= max_num_tokens and is_contiguous(ex.tokens_a) for ex in examples)
    # no text is lost or repeated: the segments tile every document in order
    assert [t for ex in examples for t in ex.tokens_a] == [t for d in docs for s in d for t in s]
    # packing fills segments: no two neighbours from one document could have been merged
    for prev, nxt in zip(examples, examples[1:]):
        if prev.tokens_a[0] // 10_000 == nxt.tokens_a[0] // 10_000:
            first_sentence = next(s for s in docs[nxt.tokens_a[0] // 10_000] if s[0] == nxt.tokens_a[0])
            assert len(prev.tokens_a) + len(first_sentence) > max_num_tokens


def test_long_sentences_are_cut_not_dropped_without_nsp():
    docs = [[list(range(100))]]
    examples = build_nsp_examples(docs, None, 30, random.Random(0), short_seq_prob=0.0, nsp=False)
    assert [len(ex.tokens_a) for ex in examples] == [30, 30, 30, 10]


def test_nsp_input_errors():
    with pytest.raises(ValueError, match="two non-empty documents"):
        build_nsp_examples([[[1, 2, 3], [4, 5]], [[]]], None, 10, random.Random(0))
    with pytest.raises(ValueError, match="max_num_tokens"):
        build_nsp_examples(id_documents(3), None, 1, random.Random(0))
    with pytest.raises(TypeError, match="tokenize"):
        build_nsp_examples([["a sentence"], ["another"]], None, 10, random.Random(0))
    with pytest.raises(ValueError, match="no non-empty documents"):
        build_nsp_examples([[], [[]]], None, 10, random.Random(0))


def test_truncate_seq_pair_trims_the_longer_side_from_both_ends():
    rng = random.Random(0)
    fronts = backs = 0
    for _ in range(200):
        a, b = list(range(10)), list(range(100, 103))
        truncate_seq_pair(a, b, 8, rng)
        assert len(a) == 5 and b == [100, 101, 102]  # only the longer side loses tokens
        assert is_contiguous(a)
        fronts += a[0] > 0
        backs += a[-1] < 9
    assert fronts > 50 and backs > 50

    a, b = [1, 2, 3], [4, 5, 6]
    truncate_seq_pair(a, b, 5, random.Random(0))
    assert len(a) == 3 and len(b) == 2  # ties trim B, as the original



def test_pack_pair_layout_and_segments():
    assert pack_pair([5, 6], [7, 8, 9], CLS, SEP) == (
        [CLS, 5, 6, SEP, 7, 8, 9, SEP],
        [0, 0, 0, 0, 1, 1, 1, 1],
    )
    assert pack_pair([5, 6], [], CLS, SEP) == ([CLS, 5, 6, SEP], [0, 0, 0, 0])
    ex = build_nsp_examples(id_documents(5), None, max_num_tokens_for(32), random.Random(0))[0]
    ids, segments = pack_pair(ex.tokens_a, ex.tokens_b, CLS, SEP)
    assert len(ids) <= 32 and len(ids) == len(segments)


def test_only_one_sentence_documents_force_not_next():
    docs = [[[1, 2, 3]], [[10, 11], [12, 13], [14, 15]]]
    for seed in range(20):
        examples = build_nsp_examples(docs, None, 20, random.Random(seed), short_seq_prob=0.0)
        assert examples[0].tokens_a == [1, 2, 3] and examples[0].next_sentence_label == NOT_NEXT
        assert examples[0].tokens_b[0] in (10, 12, 14)  # B starts at a sentence of the other document
    # a long first sentence (over the target) still gets a real continuation half of the time
    docs = [[list(range(50)), [50, 51]], [[100, 101], [102]]]
    labels = [
        build_nsp_examples(docs, None, 20, random.Random(s), short_seq_prob=0.0)[0].next_sentence_label
        for s in range(200)
    ]
    assert 60 < labels.count(IS_NEXT) < 140
