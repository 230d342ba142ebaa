"""NER: tag schemes, sub-word alignment, word-level decoding, seqeval-exact entity scores (bertlab.tasks.token)."""

from __future__ import annotations

import random
import warnings

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer
from tokenizers.processors import TemplateProcessing

from bertlab.data.tags import (
    IGNORE_INDEX,
    align_labels,
    b_to_i_map,
    iob1_to_iob2,
    validate_iob2,
)
from bertlab.tasks.entities import decode_word_predictions, extract_entities
from bertlab.tasks.entities import entity_prf as entity_scores

X = IGNORE_INDEX
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
ID = {name: i for i, name in enumerate(LABELS)}


def make_tokenizer() -> Tokenizer:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "lives", "in", "new", "york", "play",
             "##ing", "##s", "cat", "un", "##believ", "##able", "."]
    tok = Tokenizer(WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = BertNormalizer(lowercase=True)
    tok.pre_tokenizer = BertPreTokenizer()
    tok.post_processor = TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                            special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok


def ids(tags):
    return [ID[t] for t in tags]


# ------------------------------------------------------------------------------------------ tag schemes


def test_iob1_to_iob2():
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-MISC", "I-PER", "O", "B-PER", "I-PER"]
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-MISC", "B-PER", "O", "B-PER", "I-PER"]
    assert iob1_to_iob2(iob1) == iob2
    assert iob1_to_iob2(iob2) == iob2  # valid IOB2 is left alone
    assert iob1_to_iob2(["I-creative-work", "I-creative-work", "I-group"]) == [
        "B-creative-work", "I-creative-work", "B-group"]
    assert iob1_to_iob2([]) == []
    validate_iob2(iob1_to_iob2(iob1), "converted")


def test_iob1_to_iob2_keeps_the_entities_seqeval_reads_from_iob1():
    rng = random.Random(3)
    tags = ["O", "B-PER", "I-PER", "I-LOC", "B-LOC", "I-MISC"]
    for _ in range(500):
        seq = [rng.choice(tags) for _ in range(rng.randint(0, 12))]
        converted = iob1_to_iob2(seq)
        validate_iob2(converted, "random")
        assert extract_entities(converted) == extract_entities(seq)


@pytest.mark.parametrize(("tags", "message"), [
    (["I-PER", "O"], "tag 0 'I-PER' follows the sentence start"),
    (["B-PER", "O", "I-PER"], "tag 2 'I-PER' follows 'O'"),
    (["B-PER", "I-LOC"], "tag 1 'I-LOC' follows 'B-PER'"),
    (["O", "E-PER"], "neither 'O' nor"),
    (["PER"], "neither 'O' nor"),
])
def test_validate_iob2_names_where_and_what(tags, message):
    with pytest.raises(ValueError, match="eng.train sentence 12") as err:
        validate_iob2(tags, "eng.train sentence 12")
    assert message in str(err.value)
    if "follows" in message:
        assert "iob1" in str(err.value)


def test_validate_iob2_accepts_iob2():
    validate_iob2(["B-PER", "I-PER", "B-PER", "O", "B-creative-work", "I-creative-work"], "ok")
    validate_iob2([], "empty")


# ------------------------------------------------------------------------------------------ alignment


def test_b_to_i_map():
    assert b_to_i_map(LABELS) == {0: 0, 1: 2, 2: 2, 3: 4, 4: 4, 5: 6, 6: 6}
    assert b_to_i_map(["O", "B-X"]) == {0: 0, 1: 1}  # no I-X: B-X stays


def test_alignment_by_hand():
    # [CLS] john lives in new york play ##ing [SEP]  (word 4 = 'playing' has two pieces)
    word_ids = [None, 0, 1, 2, 3, 4, 5, 5, None]
    words = ids(["B-PER", "O", "O", "B-LOC", "I-LOC", "B-MISC"])
    assert align_labels(word_ids, words) == [X, 1, 0, 0, 3, 4, 5, X, X]
    # label_all_tokens: continuation pieces carry the label with B-X turned into I-X
    assert align_labels(word_ids, words, label_all_tokens=True, b_to_i=b_to_i_map(LABELS)) == [
        X, 1, 0, 0, 3, 4, 5, 6, X]
    with pytest.raises(ValueError, match="b_to_i"):
        align_labels(word_ids, words, label_all_tokens=True)
    with pytest.raises(ValueError, match="outside"):
        align_labels([None, 7, None], words)


def test_alignment_with_a_real_tokenizer_multi_piece_empty_and_truncated_words():
    tok = make_tokenizer()
    words = ["John", "unbelievable", "\u200b", "playings", "New", "York", "."]
    tags = ["B-PER", "O", "B-MISC", "O", "B-LOC", "I-LOC", "O"]
    enc = tok.encode(words, is_pretokenized=True)
    assert enc.tokens == ["[CLS]", "john", "un", "##believ", "##able", "play", "##ing", "##s", "new", "york",
                          ".", "[SEP]"]
    assert 2 not in enc.word_ids  # the zero-width space tokenizes to nothing
    labels = align_labels(enc.word_ids, ids(tags))
    assert labels == [X, 1, 0, X, X, 0, X, X, 3, 4, 0, X]
    labels_all = align_labels(enc.word_ids, ids(tags), label_all_tokens=True, b_to_i=b_to_i_map(LABELS))
    assert labels_all == [X, 1, 0, 0, 0, 0, 0, 0, 3, 4, 0, X]

    # Truncation in the middle of 'playings' and before 'New York': the first piece keeps the label.
    tok.enable_truncation(max_length=7)
    short = tok.encode(words, is_pretokenized=True)
    assert short.tokens == ["[CLS]", "john", "un", "##believ", "##able", "play", "[SEP]"]
    assert align_labels(short.word_ids, ids(tags)) == [X, 1, 0, X, X, 0, X]

    # A perfect tagger's token predictions decode back to the gold words, except words with no token,
    # which are predicted O (the zero-width word's B-MISC and the truncated LOC entity are missed).
    full_words = decode_word_predictions([max(v, 0) for v in labels], enc.word_ids, len(words), o_id=ID["O"])
    assert [LABELS[i] for i in full_words] == ["B-PER", "O", "O", "O", "B-LOC", "I-LOC", "O"]
    short_words = decode_word_predictions([max(v, 0) for v in align_labels(short.word_ids, ids(tags))],
                                          short.word_ids, len(words))
    assert [LABELS[i] for i in short_words] == ["B-PER", "O", "O", "O", "O", "O", "O"]
    scores = entity_scores([tags], [[LABELS[i] for i in short_words]])
    assert scores == {"precision": 1.0, "recall": pytest.approx(1 / 3), "f1": pytest.approx(0.5)}


def test_decode_word_predictions_reads_the_first_sub_word():
    word_ids = [None, 0, 0, 1, 3, 3, None]
    preds = [5, 1, 2, 3, 4, 6, 0, 0, 0]  # longer than word_ids: batch padding is ignored
    assert decode_word_predictions(preds, word_ids, num_words=5, o_id=0) == [1, 3, 0, 4, 0]
    assert decode_word_predictions(preds, word_ids, num_words=5, o_id=9) == [1, 3, 9, 4, 9]
    assert decode_word_predictions([], [], num_words=2) == [0, 0]


# ------------------------------------------------------------------------------------------ entity scores


def test_extract_entities_by_hand():
    assert extract_entities(["B-PER", "I-PER", "O", "B-LOC"]) == {("PER", 0, 1), ("LOC", 3, 3)}
    # seqeval default mode: I- after O starts an entity; a type change splits.
    assert extract_entities(["O", "I-PER", "I-PER", "I-LOC", "B-LOC", "I-LOC"]) == {
        ("PER", 1, 2), ("LOC", 3, 3), ("LOC", 4, 5)}
    assert extract_entities(["B-creative-work", "I-creative-work"]) == {("creative-work", 0, 1)}
    assert extract_entities([]) == set()
    assert extract_entities(["O", "O"]) == set()


def test_entity_scores_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-MISC", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-PER"], ["B-MISC", "B-MISC"]]
    # gold: PER(0-1), LOC(3), MISC(0); pred: PER(0-1), PER(3), MISC(0), MISC(1); tp = 2
    assert entity_scores(gold, pred) == pytest.approx({"precision": 0.5, "recall": 2 / 3, "f1": 4 / 7})
    # a span with a wrong boundary is both a false positive and a false negative
    assert entity_scores([["B-PER", "I-PER"]], [["B-PER", "O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    # undefined -> 0.0
    assert entity_scores([["O"]], [["O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert entity_scores([["B-PER"]], [["O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    with pytest.raises(ValueError, match="sequence 0"):
        entity_scores([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="gold sequences"):
        entity_scores([["O"]], [])


def random_corpus(rng: random.Random, tags: list[str]) -> list[list[str]]:
    return [[rng.choice(tags) for _ in range(rng.randint(0, 15))] for _ in range(rng.randint(1, 12))]


def corrupt(rng: random.Random, seqs: list[list[str]], tags: list[str]) -> list[list[str]]:
    return [[rng.choice(tags) if rng.random() < 0.3 else t for t in seq] for seq in seqs]


@pytest.mark.parametrize("tags", [
    ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-MISC"],  # IOB2 plus ill-formed I- starts
    ["O", "O", "O", "B-PER", "I-PER", "B-creative-work", "I-creative-work", "I-corporation"],
    ["O", "B-PER", "I-PER", "E-PER", "S-PER", "S-LOC", "E-LOC"],  # seqeval's default mode reads IOBES too
])
def test_parity_with_seqeval_on_random_sequences(tags):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    from seqeval.metrics.sequence_labeling import get_entities

    rng = random.Random(len(tags))
    for _ in range(300):
        gold = random_corpus(rng, tags)
        pred = corrupt(rng, gold, tags)
        for seq in gold:
            assert extract_entities(seq) == set(get_entities(seq))
        ours = entity_scores(gold, pred)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # seqeval warns where a score is undefined (we return 0.0)
            expected = {
                "precision": seqeval_metrics.precision_score(gold, pred),
                "recall": seqeval_metrics.recall_score(gold, pred),
                "f1": seqeval_metrics.f1_score(gold, pred),
            }
        assert ours == pytest.approx(expected, abs=1e-12)
