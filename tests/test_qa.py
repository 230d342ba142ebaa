"""Extractive QA: windows, span labels, span decoding, SQuAD metric (bertlab.tasks.qa)."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer
from tokenizers.processors import TemplateProcessing

from bertlab.data.qa import (
    QADataError,
    QAExample,
    QAFeatures,
    prepare_qa_features,
    validate_example,
    window_bounds,
)
from bertlab.tasks.qa import (
    best_spans,
    normalize_answer,
    postprocess_qa_predictions,
    squad_references,
    squad_scores,
)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "sat", "on", "mat", "cafe", "naive", "a", "b", "c", "play", "run", "what", "who", "did",
         "中", "国", ".", ",", "?", "##s", "##ing", "##ed"] + [f"w{i}" for i in range(60)]
CLS, SEP = 2, 3


def make_tokenizer() -> Tokenizer:
    """A tiny BERT-style WordPiece tokenizer (lower-casing, accent stripping, CJK split), no downloads."""
    vocab = {token: i for i, token in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = BertNormalizer(lowercase=True)
    tok.pre_tokenizer = BertPreTokenizer()
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", CLS), ("[SEP]", SEP)]
    )
    return tok


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return make_tokenizer()


def numbered(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def answer(context: str, text: str, occurrence: int = 0) -> dict:
    starts = [m.start() for m in re.finditer(re.escape(text), context)]
    return {"text": text, "answer_start": starts[occurrence]}


def prepare(examples, tok, train=True, **kw) -> QAFeatures:
    kw.setdefault("max_query_length", 4)  # small windows need short questions (doc_stride < window)
    return prepare_qa_features(examples, tok, cls_id=CLS, sep_id=SEP, train=train, **kw)


def feature_text(ex: QAExample, feats: QAFeatures, f: int, start: int, end: int) -> str:
    return ex.context[feats.offsets[f][start, 0]:feats.offsets[f][end, 1]]


def gold_logits(feats: QAFeatures, high: float = 10.0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Logits that score each feature's labelled span (CLS -> nothing) far above everything else."""
    starts, ends = [], []
    for f in range(len(feats)):
        s, e = np.zeros(len(feats.input_ids[f])), np.zeros(len(feats.input_ids[f]))
        if feats.start_positions[f]:
            s[feats.start_positions[f]] = high
            e[feats.end_positions[f]] = high
        starts.append(s)
        ends.append(e)
    return starts, ends


# ---------------------------------------------------------------------------------------------- windows


def test_window_bounds_overlap_by_doc_stride_and_cover_everything():
    assert window_bounds(30, 10, 4) == [(0, 10), (6, 16), (12, 22), (18, 28), (24, 30)]
    assert window_bounds(10, 10, 4) == [(0, 10)]
    assert window_bounds(3, 10, 4) == [(0, 3)]
    assert window_bounds(11, 10, 4) == [(0, 10), (6, 11)]
    for n in range(1, 80):
        for width, stride in [(10, 4), (7, 0), (5, 4), (317, 128)]:
            bounds = window_bounds(n, width, stride)
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(we - ws <= width for ws, we in bounds)
            for (_, e0), (s1, _) in zip(bounds, bounds[1:]):
                assert e0 - s1 == stride  # consecutive windows share exactly doc_stride tokens
            assert len(bounds) == 1 + -(-max(0, n - width) // (width - stride))


def test_window_bounds_rejects_a_stride_that_does_not_advance():
    with pytest.raises(ValueError, match="doc_stride"):
        window_bounds(30, 4, 4)


def test_feature_layout(tok):
    ctx = numbered(30)
    ex = QAExample("q1", "who sat", ctx, [answer(ctx, "w8")])
    feats = prepare([ex], tok, max_seq_length=15, doc_stride=4, max_query_length=5)
    # question = 2 tokens -> [CLS] q q [SEP] = 4, window = 15 - 4 - 1 = 10 context tokens.
    assert len(feats) == 5
    assert feats.window_start == [0, 6, 12, 18, 24]
    assert feats.context_start == [4] * 5 and feats.context_end == [14, 14, 14, 14, 10]
    ids = feats.input_ids[1].tolist()
    vocab = tok.get_vocab()
    assert ids == [CLS, vocab["who"], vocab["sat"], SEP] + [vocab[f"w{i}"] for i in range(6, 16)] + [SEP]
    assert feats.token_type_ids[1].tolist() == [0] * 4 + [1] * 11
    assert all(len(f) <= 15 for f in feats.input_ids)
    off = feats.offsets[1]
    assert (off[:4] == -1).all() and (off[-1] == -1).all()
    assert [ctx[a:b] for a, b in off[4:14]] == [f"w{i}" for i in range(6, 16)]
    assert feats.example_index == [0] * 5


def test_question_is_truncated_to_max_query_length(tok):
    ex = QAExample("q", " ".join(["cat"] * 20), "the mat", [{"text": "mat", "answer_start": 4}])
    feats = prepare([ex], tok, max_seq_length=40, doc_stride=4, max_query_length=5)
    assert feats.context_start == [7]  # [CLS] + 5 question tokens + [SEP]
    assert feats.input_ids[0].tolist()[:7] == [CLS] + [tok.token_to_id("cat")] * 5 + [SEP]


def test_shared_context_gives_the_same_features_as_one_example_at_a_time(tok):
    ctx = numbered(25)
    exs = [QAExample(str(i), q, ctx, [answer(ctx, "w3")]) for i, q in enumerate(["who", "what did"])]
    together = prepare(exs, tok, max_seq_length=16, doc_stride=3, max_query_length=4)
    per = together.features_of()
    # the window width depends on the question length: 16 - 3 - 1 = 12 and 16 - 4 - 1 = 11 tokens
    assert [together.window_start[f] for f in per[0]] == [0, 9, 18]
    assert [together.window_start[f] for f in per[1]] == [0, 8, 16]
    for i, ex in enumerate(exs):
        alone = prepare([ex], tok, max_seq_length=16, doc_stride=3, max_query_length=4)
        for k, f in enumerate(per[i]):
            assert together.input_ids[f].tolist() == alone.input_ids[k].tolist()
            assert together.offsets[f].tolist() == alone.offsets[k].tolist()
            assert together.start_positions[f] == alone.start_positions[k]


# ---------------------------------------------------------------------------------------------- labels


def test_answer_straddling_a_window_edge_is_labelled_only_where_it_fits(tok):
    ctx = numbered(30)
    ex = QAExample("q1", "who", ctx, [answer(ctx, "w8 w9 w10")])
    feats = prepare([ex], tok, max_seq_length=14, doc_stride=4)  # c0 = 3, windows of 10, step 6
    assert feats.window_start == [0, 6, 12, 18, 24]
    # window 0 holds w0..w9 (answer cut at w10): CLS; window 1 holds w6..w15: the answer, at 3 + (8 - 6).
    assert list(zip(feats.start_positions, feats.end_positions)) == [(0, 0), (5, 7), (0, 0), (0, 0), (0, 0)]
    assert feature_text(ex, feats, 1, 5, 7) == "w8 w9 w10"


def test_answer_inside_two_windows_is_labelled_in_both(tok):
    ctx = numbered(30)
    ex = QAExample("q1", "who", ctx, [answer(ctx, "w7 w8")])
    feats = prepare([ex], tok, max_seq_length=14, doc_stride=4)
    assert list(zip(feats.start_positions, feats.end_positions))[:3] == [(10, 11), (4, 5), (0, 0)]


def test_answer_at_the_very_end_of_a_window_and_of_the_context(tok):
    ctx = numbered(30)
    # w9 is the last token of window 0 (run_qa.py walks into [SEP] there) and inside window 1.
    ex = QAExample("end_of_window", "who", ctx, [answer(ctx, "w9")])
    last = QAExample("end_of_context", "who", ctx, [answer(ctx, "w28 w29")])
    feats = prepare([ex, last], tok, max_seq_length=14, doc_stride=4)
    per = feats.features_of()
    assert [(feats.start_positions[f], feats.end_positions[f]) for f in per[0]][:2] == [(12, 12), (6, 6)]
    labels_last = [(feats.start_positions[f], feats.end_positions[f]) for f in per[1]]
    assert labels_last == [(0, 0), (0, 0), (0, 0), (0, 0), (7, 8)]
    f = per[1][-1]
    assert feats.end_positions[f] == feats.context_end[f] - 1  # last context token, right before [SEP]
    assert feature_text(last, feats, f, 7, 8) == "w28 w29"


def test_multi_piece_answer_and_answer_inside_a_word(tok):
    ctx = "the cats sat playing on a mat"
    exs = [
        QAExample("pieces", "who", ctx, [answer(ctx, "cats sat playing")]),
        QAExample("part", "who", ctx, [answer(ctx, "play")]),  # a prefix of 'playing' = the piece 'play'
    ]
    feats = prepare(exs, tok)
    tokens = [tok.id_to_token(i) for i in feats.input_ids[0].tolist()]
    assert tokens[3:10] == ["the", "cat", "##s", "sat", "play", "##ing", "on"]
    assert (feats.start_positions[0], feats.end_positions[0]) == (4, 8)
    assert feature_text(exs[0], feats, 0, 4, 8) == "cats sat playing"
    assert (feats.start_positions[1], feats.end_positions[1]) == (7, 7)


def test_impossible_and_eval_features_have_no_or_cls_labels(tok):
    ctx = "the cat sat"
    impossible = QAExample("imp", "who", ctx, [], is_impossible=True)
    feats = prepare([impossible], tok)
    assert (feats.start_positions, feats.end_positions) == ([0], [0])
    feats = prepare([QAExample("e", "who", ctx, [answer(ctx, "cat")])], tok, train=False)
    assert feats.start_positions is None and feats.end_positions is None


def test_answer_made_of_deleted_characters_gets_cls_everywhere(tok):
    ctx = "the \u200b cat sat"  # the normalizer deletes the zero-width space: no token covers the answer
    ex = QAExample("zw", "who", ctx, [answer(ctx, "\u200b")])
    feats = prepare([ex], tok)
    assert (feats.start_positions, feats.end_positions) == ([0], [0])


UNICODE_CONTEXTS = [
    "Café  naïve\tcats\nplaying 中国 mat",
    "the   cat\t\tsat\n\non  a\u00a0mat",
    "  leading and trailing spaces  ",
    "中国cat中国",
    "NAÏVE Cafés, the CAT?",
    "cafe\u0301 nai\u0308ve w1",  # decomposed accents (combining marks)
]


@pytest.mark.parametrize("ctx", UNICODE_CONTEXTS)
def test_offsets_index_the_original_context(tok, ctx):
    feats = prepare([QAExample("u", "who", ctx, [])], tok, train=False)
    enc = tok.encode(ctx, add_special_tokens=False)
    cs, ce = feats.context_start[0], feats.context_end[0]
    assert ce - cs == len(enc.ids)
    for (a, b), token in zip(feats.offsets[0][cs:ce].tolist(), enc.tokens):
        piece = ctx[a:b]
        assert piece.strip() == piece and piece  # never whitespace
        if token != "[UNK]":
            # the normalizer lower-cases and strips accents; the original text keeps them
            normalized = tok.normalizer.normalize_str(piece).strip()  # CJK chars get spaces around
            assert normalized == token.removeprefix("##"), (piece, token)


@pytest.mark.parametrize(("ctx", "gold"), [
    ("Café  naïve\tcats\nplaying 中国 mat", "naïve\tcats"),
    ("Café  naïve\tcats\nplaying 中国 mat", "中国"),
    ("Café  naïve\tcats\nplaying 中国 mat", "Café"),
    ("the   cat\t\tsat\n\non  a\u00a0mat", "sat\n\non"),
    ("the   cat\t\tsat\n\non  a\u00a0mat", "a\u00a0mat"),
    ("中国cat中国", "cat中"),
    ("NAÏVE Cafés, the CAT?", "Cafés"),
    ("cafe\u0301 nai\u0308ve w1", "cafe\u0301"),
    ("cafe\u0301 nai\u0308ve w1", "nai\u0308ve"),
])
def test_unicode_and_whitespace_answers_round_trip(tok, ctx, gold):
    ex = QAExample("u", "who", ctx, [answer(ctx, gold)])
    feats = prepare([ex], tok, max_seq_length=12, doc_stride=2)
    starts, ends = gold_logits(feats)
    assert any(feats.start_positions)
    assert postprocess_qa_predictions([ex], feats, starts, ends) == {"u": gold}


def random_examples(seed: int, n: int) -> list[QAExample]:
    rng = random.Random(seed)
    pool = ["the", "cat", "cats", "sat", "on", "mat", "playing", "played", "run", "runs", ".", ",", "a",
            "Café", "naïve", "中国", "xyz", "w1", "w2", "w3", "w4", "w5"]
    seps = [" ", " ", " ", "  ", "\t", "\n"]
    examples = []
    for i in range(n):
        words = [rng.choice(pool) for _ in range(rng.randint(1, 90))]
        ctx = "".join(w + rng.choice(seps) for w in words).rstrip()
        spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", ctx)]
        a = rng.randrange(len(spans))
        b = min(len(spans) - 1, a + rng.randint(0, 4))
        s, e = spans[a][0], spans[b][1]
        question = " ".join(rng.choice(pool) for _ in range(rng.randint(1, 6)))
        examples.append(QAExample(f"r{i}", question, ctx, [{"text": ctx[s:e], "answer_start": s}]))
    return examples


def test_gold_spans_round_trip_through_logits_on_random_multi_window_examples(tok):
    examples = random_examples(0, 300)
    feats = prepare(examples, tok, max_seq_length=32, doc_stride=8, max_query_length=12)
    assert len(feats) > 2 * len(examples)  # many multi-window examples
    for f in range(len(feats)):
        if feats.start_positions[f]:
            cs, ce = feats.context_start[f], feats.context_end[f]
            assert cs <= feats.start_positions[f] <= feats.end_positions[f] < ce
    starts, ends = gold_logits(feats)
    predictions = postprocess_qa_predictions(examples, feats, starts, ends)
    assert predictions == {ex.id: ex.answers[0]["text"] for ex in examples}
    # (F1 is below 100: answers made only of punctuation normalize to nothing, which v1.1 scores F1 0)
    assert squad_scores(predictions, squad_references(examples))["exact_match"] == 100.0


def test_windows_and_labels_match_hugging_face_run_qa(tok):
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertTokenizerFast(tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]",
                                        pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]")
    examples = random_examples(1, 200)
    max_len, stride = 32, 8
    feats = prepare(examples, tok, max_seq_length=max_len, doc_stride=stride, max_query_length=12)
    enc = hf([e.question for e in examples], [e.context for e in examples], truncation="only_second",
             max_length=max_len, stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True)
    assert enc["overflow_to_sample_mapping"] == feats.example_index
    hf_bug = 0
    for i, off in enumerate(enc["offset_mapping"]):
        seq = enc.sequence_ids(i)
        assert feats.input_ids[i].tolist() == enc["input_ids"][i]
        assert feats.token_type_ids[i].tolist() == enc["token_type_ids"][i]
        assert feats.offsets[i].tolist() == [list(o) if seq[k] == 1 else [-1, -1] for k, o in enumerate(off)]
        # run_qa.py's prepare_train_features labelling, verbatim in spirit
        gold = examples[enc["overflow_to_sample_mapping"][i]].answers[0]
        sc, ec = gold["answer_start"], gold["answer_start"] + len(gold["text"])
        ts = seq.index(1)
        te = len(seq) - 1 - seq[::-1].index(1)
        if not (off[ts][0] <= sc and off[te][1] >= ec):
            hf_labels = (0, 0)
        else:
            while ts < len(off) and off[ts][0] <= sc:
                ts += 1
            while off[te][1] >= ec:
                te -= 1
            hf_labels = (ts - 1, te + 1)
        ours = (feats.start_positions[i], feats.end_positions[i])
        if hf_labels != ours:
            # run_qa.py walks past the window's last token into [SEP] (offset (0, 0)): its label is
            # outside the context there, ours is the answer.
            hf_bug += 1
            assert seq[hf_labels[0]] != 1
            assert feature_text(examples[enc["overflow_to_sample_mapping"][i]], feats, i, *ours) == gold["text"]
    assert hf_bug < len(feats) // 10


# ---------------------------------------------------------------------------------------------- decoding


def test_spans_never_in_question_or_special_tokens(tok):
    ctx = "the cat sat on a mat"
    ex = QAExample("q", "what cat sat", ctx, [])
    feats = prepare([ex], tok, train=False)
    t = len(feats.input_ids[0])
    start, end = np.full(t, 50.0), np.full(t, 50.0)
    cs, ce = feats.context_start[0], feats.context_end[0]
    start[cs:ce] = np.arange(ce - cs) * 0.1  # context scores all far below the question/special scores
    end[cs:ce] = np.arange(ce - cs) * 0.1
    span = best_spans([ex], feats, [start], [end])["q"]
    assert cs <= span.start_position <= span.end_position < ce
    assert span.text == "mat" and span.score == pytest.approx(1.0)


def test_end_before_start_and_max_answer_length_are_refused(tok):
    ctx = numbered(20)
    ex = QAExample("q", "who", ctx, [])
    feats = prepare([ex], tok, train=False)
    cs = feats.context_start[0]
    t = len(feats.input_ids[0])
    start, end = np.full(t, -10.0), np.full(t, -10.0)
    start[cs + 10], end[cs + 2] = 9.0, 9.0  # best end lies before best start
    start[cs + 3], end[cs + 4] = 1.0, 1.0
    assert postprocess_qa_predictions([ex], feats, [start], [end]) == {"q": "w3 w4"}
    start, end = np.full(t, -10.0), np.full(t, -10.0)
    start[cs + 1], end[cs + 15] = 9.0, 9.0  # 15 tokens long
    start[cs + 5], end[cs + 6] = 2.0, 2.0
    longest = best_spans([ex], feats, [start], [end], max_answer_length=15)["q"]
    assert longest.text == " ".join(f"w{i}" for i in range(1, 16))
    span = best_spans([ex], feats, [start], [end], max_answer_length=14)["q"]
    assert span.end_position - span.start_position + 1 <= 14
    assert span.text == "w1 w2 w3 w4 w5 w6"


def test_n_best_size_limits_candidates(tok):
    ctx = numbered(10)
    ex = QAExample("q", "who", ctx, [])
    feats = prepare([ex], tok, train=False)
    cs = feats.context_start[0]
    t = len(feats.input_ids[0])
    start, end = np.zeros(t), np.zeros(t)
    start[cs + 5], end[cs + 1] = 9.0, 9.0  # top-1 pair is invalid
    start[cs + 2], end[cs + 3] = 8.0, 8.0
    assert postprocess_qa_predictions([ex], feats, [start], [end], n_best_size=2) == {"q": "w2 w3"}
    assert postprocess_qa_predictions([ex], feats, [start], [end], n_best_size=1) == {}


def test_best_window_wins_and_only_arrived_features_count(tok):
    ctx = numbered(30)
    exs = [QAExample("a", "who", ctx, [answer(ctx, "w20")]), QAExample("b", "who", ctx, [answer(ctx, "w2")])]
    feats = prepare(exs, tok, max_seq_length=14, doc_stride=4)
    per = feats.features_of()
    assert len(per[0]) == 5 and len(per[1]) == 5
    starts, ends = gold_logits(feats)
    # Everything arrives: gold answers.
    assert postprocess_qa_predictions(exs, feats, starts, ends) == {"a": "w20", "b": "w2"}
    # Only two windows of example 'a' (w12..w21 and w24..w29) arrive, in a shuffled order, padded to a
    # common length, with one duplicate (DDP sampler padding); nothing of 'b' arrives.
    arrived = [per[0][4], per[0][2], per[0][4]]
    width = max(len(feats.input_ids[f]) for f in arrived) + 3
    s2d = np.full((3, width), -5.0)
    e2d = np.full((3, width), -5.0)
    for k, f in enumerate(arrived):
        s2d[k, :len(starts[f])] = starts[f]
        e2d[k, :len(ends[f])] = ends[f]
    spans = best_spans(exs, feats, s2d, e2d, feature_indices=arrived)
    assert set(spans) == {"a"}
    assert spans["a"].text == "w20" and spans["a"].feature_index == per[0][2]
    # Only the last window arrives: the answer is not in it, the best span there is still returned.
    spans = best_spans(exs, feats, [starts[per[0][4]]], [ends[per[0][4]]], feature_indices=[per[0][4]])
    assert spans["a"].feature_index == per[0][4]
    assert ctx.index(spans["a"].text) >= ctx.index("w24")
    with pytest.raises(ValueError, match="aligned"):
        best_spans(exs, feats, starts, ends, feature_indices=[0])


def test_max_context_check_prefers_the_window_where_the_token_is_central(tok):
    ctx = numbered(30)
    ex = QAExample("q", "who", ctx, [])
    feats = prepare([ex], tok, train=False, max_seq_length=14, doc_stride=4)  # windows 0-9, 6-15, ...
    starts = [np.zeros(len(ids)) for ids in feats.input_ids]
    ends = [np.zeros(len(ids)) for ids in feats.input_ids]
    # w8: 1 token of right context in window 0 (score 1.1), 2 of left context in window 1 (score 2.1).
    starts[0][feats.context_start[0] + 8] = ends[0][feats.context_start[0] + 8] = 5.1
    starts[1][feats.context_start[1] + 2] = ends[1][feats.context_start[1] + 2] = 5.0
    plain = best_spans([ex], feats, starts, ends)["q"]
    assert (plain.text, plain.feature_index) == ("w8", 0)
    central = best_spans([ex], feats, starts, ends, use_max_context=True)["q"]
    assert (central.text, central.feature_index) == ("w8", 1)


def test_logits_row_shorter_than_the_feature_is_an_error(tok):
    ex = QAExample("q", "who", numbered(5), [])
    feats = prepare([ex], tok, train=False)
    with pytest.raises(ValueError, match="logits row"):
        best_spans([ex], feats, [np.zeros(3)], [np.zeros(3)])


# ---------------------------------------------------------------------------------------------- metric


def test_squad_normalisation_and_scores():
    assert normalize_answer("The  Cat!") == "cat"
    assert normalize_answer("an apple, a pear and THE plum.") == "apple pear and plum"
    assert normalize_answer("theater") == "theater"  # articles only as whole words
    refs = {"1": ["cat"], "2": ["the black cat", "a dog"], "3": ["Paris"], "4": ["cat sat"]}
    preds = {"1": "The cat", "2": "black cats", "3": "London", "4": "the black cat", "extra": "x"}
    scores = squad_scores(preds, refs)
    # 1: EM; 2: F1 vs 'black cat' = 0.5 (one of two tokens each way); 3: 0; 4: 'black cat' vs 'cat sat' = 0.5
    assert scores["exact_match"] == pytest.approx(25.0)
    assert scores["f1"] == pytest.approx(100 * (1 + 0.5 + 0 + 0.5) / 4)
    # A referenced question without prediction counts as wrong; no references -> zeros.
    assert squad_scores({}, {"1": ["cat"]}) == {"exact_match": 0.0, "f1": 0.0}
    assert squad_scores({"1": "cat"}, {}) == {"exact_match": 0.0, "f1": 0.0}
    # max over golds
    assert squad_scores({"1": "a dog"}, {"1": ["cat", "dog"]}) == {"exact_match": 100.0, "f1": 100.0}


# ---------------------------------------------------------------------------------------------- errors


def test_validate_example_errors_name_the_example_and_the_fix():
    ctx = "the cat sat on the mat"
    with pytest.raises(QADataError, match=r"'q7'.*answer_start 5.*set answer_start to 4") as err:
        validate_example(QAExample("q7", "who", ctx, [{"text": "cat", "answer_start": 5}]), train=True)
    assert isinstance(err.value, ValueError)
    with pytest.raises(QADataError, match="does not occur"):
        validate_example(QAExample("q", "who", ctx, [{"text": "dog", "answer_start": 0}]), train=False)
    with pytest.raises(QADataError, match="context is empty"):
        validate_example(QAExample("q", "who", " \n", []), train=False)
    with pytest.raises(QADataError, match="question is empty"):
        validate_example(QAExample("q", " ", ctx, []), train=False)
    with pytest.raises(QADataError, match="'q8'.*at least one answer"):
        validate_example(QAExample("q8", "who", ctx, []), train=True)
    with pytest.raises(QADataError, match="empty text"):
        validate_example(QAExample("q", "who", ctx, [{"text": "", "answer_start": 0}]), train=True)
    with pytest.raises(QADataError, match="answer_start"):
        validate_example(QAExample("q", "who", ctx, [{"text": "cat"}]), train=True)
    # fine: eval question without answers, impossible training question, answer at the very end
    validate_example(QAExample("q", "who", ctx, []), train=False)
    validate_example(QAExample("q", "who", ctx, [], is_impossible=True), train=True)
    validate_example(QAExample("q", "who", ctx, [{"text": "mat", "answer_start": 19}]), train=True)


def test_prepare_refuses_bad_settings_and_bad_data(tok):
    ex = QAExample("q", "who", "the cat", [{"text": "cat", "answer_start": 4}])
    with pytest.raises(ValueError, match="doc_stride"):
        prepare([ex], tok, max_seq_length=100, doc_stride=40, max_query_length=64)
    with pytest.raises(QADataError, match="'bad'"):
        prepare([ex, QAExample("bad", "who", "the cat", [{"text": "cat", "answer_start": 0}])], tok)
    with pytest.raises(QADataError, match="no token"):
        prepare([QAExample("zw", "who", "\u200b", [])], tok, train=False)
    padded = make_tokenizer()
    padded.enable_padding(length=16)
    with pytest.raises(ValueError, match="no_padding"):
        prepare([ex], padded)


def test_squad_references_are_the_gold_texts_per_id():
    exs = [QAExample("1", "who?", "the cat", [{"text": "cat", "answer_start": 4}]),
           QAExample("2", "what?", "the cat", [], is_impossible=True)]
    assert squad_references(exs) == {"1": ["cat"], "2": []}


def test_the_qa_family_returns_its_predictions_and_keeps_nothing_on_itself(tok):
    """QAFamily.evaluate gives the scores and the answer text per id; the module writes them from there (no
    attribute left on the family for the module to look up)."""
    from bertlab.data.features import Split
    from bertlab.data.qa import QAEvalData
    from bertlab.runtime.config import DataConfig, TaskSpec
    from bertlab.tasks.qa import QAFamily

    examples = random_examples(2, 20)
    feats = prepare(examples, tok, train=False, max_seq_length=32, doc_stride=8, max_query_length=12)
    gold = prepare(examples, tok, max_seq_length=32, doc_stride=8, max_query_length=12)
    starts, ends = gold_logits(gold)
    outputs = [np.stack([s, e], axis=1) for s, e in zip(starts, ends)]
    split = Split("val", [], len(examples), eval_data=QAEvalData(examples, feats))
    family = QAFamily(TaskSpec(name="squad", family="qa", monitor="val/f1", mode="max"), 0, None, DataConfig())
    before = dict(vars(family))
    evaluation = family.evaluate(np.arange(len(feats)), outputs, split, 0.5, {})
    assert vars(family) == before
    assert evaluation.predictions == {ex.id: ex.answers[0]["text"] for ex in examples}
    assert evaluation.scores["exact_match"] == 100.0 and evaluation.scores["num_examples"] == len(examples)
    assert family.score(np.arange(len(feats)), outputs, split, 0.5, {}) == evaluation.scores
