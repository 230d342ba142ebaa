"""Token tasks on sentences longer than the window (issue 35): overlapping windows, each token owned by the
window where it has the most context, every word trained once and scored once; a sentence that fits is read
exactly as before; data.long_text=truncate keeps the old truncation."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURE_DATA, run_train

from bertlab.data.features import LabelMap, token_split
from bertlab.data.readers import BadExamplePolicy, read_conll
from bertlab.data.tags import IGNORE_INDEX, align_labels, b_to_i_map, iob1_to_iob2, tag_windows
from bertlab.data.tokenizer import train_tokenizer
from bertlab.data.windows import max_context_owner, window_bounds
from bertlab.runtime.config import ConfigError, DataConfig, TaskSpec
from bertlab.tasks.token import TokenFamily

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
CONLL_LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
KINDS = ("wordpiece", "bpe", "unigram")
TESTA = FIXTURE_DATA / "conll2003" / "eng.testa"


def _words(path: Path) -> list[list[str]]:
    return [s.words for s in read_conll(path, -1, BadExamplePolicy("error"))]


@pytest.fixture(scope="module", params=KINDS)
def tokenizer(request):
    """A small vocabulary of each kind (BERT's [CLS] A [SEP], RoBERTa's <s> A </s>, XLM-R's SentencePiece),
    trained on the fixture sentences."""
    texts = [" ".join(w) for w in _words(FIXTURE_DATA / "conll2003" / "eng.train")]
    return train_tokenizer(texts, request.param, vocab_size=300, lowercase=True)


def _task(label_all_tokens: bool = False, labels=LABELS) -> TaskSpec:
    return TaskSpec(name="token_classification", family="token", labels=labels, label_all_tokens=label_all_tokens)


def _split(path: Path, tokenizer, max_seq_length: int, long_text: str = "windows", labels=LABELS,
           label_all_tokens: bool = False, scheme: str = "iob2", window_stride=None):
    data = DataConfig(max_seq_length=max_seq_length, long_text=long_text, window_stride=window_stride,
                      tag_scheme=scheme)
    return token_split("val", path, data, tokenizer, LabelMap(labels), _task(label_all_tokens, labels))


def _old_features(path: Path, tokenizer, max_seq_length: int, labels, label_all_tokens: bool, scheme: str):
    """What token_split made before windows (the truncating encoder with special tokens): the reference."""
    sentences = read_conll(path, -1, BadExamplePolicy("error"))
    index = {t: i for i, t in enumerate(labels)}
    b_to_i = b_to_i_map(labels)
    encodings = tokenizer.truncated(max_seq_length).encode_words_batch([s.words for s in sentences])
    features, word_ids = [], []
    for i, (s, enc) in enumerate(zip(sentences, encodings)):
        tags = iob1_to_iob2(s.tags) if scheme == "iob1" else s.tags
        aligned = align_labels(enc.word_ids, [index[t] for t in tags], label_all_tokens, b_to_i)
        features.append({"input_ids": enc.ids, "token_type_ids": enc.type_ids, "labels": aligned, "index": i})
        word_ids.append([-1 if w is None else w for w in enc.word_ids])
    return features, word_ids


def _perfect(split, wrong: int) -> list[np.ndarray]:
    """A stub tagger that is right wherever a window trains a label and wrong everywhere else (``wrong``): a
    score of 1.0 proves each word is read where its window owns it."""
    return [np.array([lab if lab != IGNORE_INDEX else wrong for lab in f["labels"]]) for f in split.features]


def _score(split, outputs, labels=LABELS) -> dict[str, float]:
    family = TokenFamily(_task(labels=labels), len(labels), labels)
    index = np.array([f["index"] for f in split.features])
    return family.score(index, outputs, split, 0.0, {})


def _write_conll(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    path.write_text("-DOCSTART- O\n\n" + "\n\n".join("\n".join(f"{w} {t}" for w, t in s) for s in sentences) + "\n")
    return path


def _one_token_words(tokenizer, n: int) -> list[str]:
    """``n`` words that each read as exactly one token with this tokenizer."""
    candidates = [w for ws in _words(FIXTURE_DATA / "conll2003" / "eng.train") for w in ws]
    good = list(dict.fromkeys(w for w in candidates if len(tokenizer.encode_words_batch([[w]], False)[0].ids) == 1))
    assert len(good) >= 3, good
    return [good[i % len(good)] for i in range(n)]


def _tags(n: int) -> list[str]:
    """Entities of one to three words that cross any window cut."""
    pattern = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-LOC", "O", "B-MISC", "O", "O"]
    return [pattern[i % len(pattern)] for i in range(n)]


# ----------------------------------------------------------------------------------------------------------
# A sentence that fits is read exactly as before; truncate is the old truncation


@pytest.mark.parametrize("label_all_tokens", [False, True])
def test_sentences_that_fit_give_the_features_they_always_had(tokenizer, label_all_tokens):
    split = _split(TESTA, tokenizer, 256, labels=CONLL_LABELS, label_all_tokens=label_all_tokens, scheme="iob1")
    features, word_ids = _old_features(TESTA, tokenizer, 256, CONLL_LABELS, label_all_tokens, "iob1")
    assert split.windowed == split.extra_windows == split.truncated == 0
    assert json.dumps(split.features) == json.dumps(features)  # same keys, order, values and types
    assert split.eval_data.word_ids == word_ids and split.eval_data.sentence == list(range(len(features)))


def test_truncate_keeps_the_old_truncation(tokenizer):
    split = _split(TESTA, tokenizer, 12, long_text="truncate", labels=CONLL_LABELS, scheme="iob1")
    features, word_ids = _old_features(TESTA, tokenizer, 12, CONLL_LABELS, False, "iob1")
    assert split.truncated > 0 and split.windowed == split.extra_windows == 0
    assert json.dumps(split.features) == json.dumps(features)
    assert split.eval_data.word_ids == word_ids


# ----------------------------------------------------------------------------------------------------------
# Windows: edges, special tokens, ownership


@pytest.mark.parametrize("extra", [-3, 0, 1, 2, 40])
def test_window_edges_and_every_word_trained_once(tokenizer, tmp_path, extra):
    """A sentence 3 tokens short of the window, exactly the window, one and two tokens more, far longer."""
    content = 16 - tokenizer.num_special_tokens()
    n = content + extra
    words = _one_token_words(tokenizer, n)
    path = _write_conll(tmp_path / "s.conll", [list(zip(words, _tags(n)))])
    split = _split(path, tokenizer, 16)
    windows = len(window_bounds(n, content, content // 4))
    assert len(split.features) == windows and (windows > 1) == (extra > 0)
    assert split.windowed == (n > content) and split.extra_windows == windows - 1
    t = tokenizer.template
    for f in split.features:
        assert len(f["input_ids"]) <= 16
        assert tuple(f["input_ids"][:len(t.prefix)]) == t.prefix and tuple(f["input_ids"][-len(t.suffix):]) == t.suffix
    trained = [lab for f in split.features for lab in f["labels"] if lab != IGNORE_INDEX]
    assert len(trained) == n  # one label per word, in exactly one window
    scores = _score(split, _perfect(split, wrong=LABELS.index("B-MISC")))
    assert scores["f1"] == 1.0 and scores["accuracy"] == 1.0
    assert scores["num_words"] == n and scores["num_examples"] == 1


def _letters_tokenizer():
    """WordPiece over single letters (a word of n letters is n pieces) and a few words, with BERT's
    normalizer (which deletes a zero-width space: a word of no token)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    from bertlab.data.tokenizer import EncoderTokenizer
    from bertlab.data.vocab import bert_template

    letters = "abcdefghijklmnop"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "lives", "in", "new", "york", *letters,
             *("##" + c for c in letters)]
    tok = Tokenizer(WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = BertNormalizer(lowercase=True)
    tok.pre_tokenizer = BertPreTokenizer()
    tok.post_processor = bert_template(2, 3)
    return EncoderTokenizer(tok)


def test_a_word_longer_than_the_window_is_trained_and_scored_once(tmp_path):
    """A single word of many pieces: the windows past its first piece own no word start and train nothing
    (a batch of them would have no label at all: a NaN loss), so they are left out; the word is still trained
    and scored once, as are the words around it."""
    tokenizer = _letters_tokenizer()
    long_word = "abcdefghijklmnop" * 3
    assert len(tokenizer.encode_words_batch([[long_word]], False)[0].ids) == 48  # > 3 windows of 14
    sentences = [[(long_word, "B-MISC")], [("john", "B-PER"), (long_word, "I-PER"), ("in", "O"), ("york", "B-LOC")]]
    path = _write_conll(tmp_path / "w.conll", sentences)
    split = _split(path, tokenizer, 16)
    assert split.windowed == 2 and split.num_examples == 2
    owned_starts = [sum(lab != IGNORE_INDEX for lab in f["labels"]) for f in split.features]
    assert all(owned_starts) and sum(owned_starts) == 1 + 4
    scores = _score(split, _perfect(split, wrong=0))
    assert scores["f1"] == 1.0 and scores["num_words"] == 5
    # label_all_tokens: every piece carries a label, so every window trains and none is left out.
    every = _split(path, tokenizer, 16, label_all_tokens=True)
    assert len(split.features) == 3
    assert len(every.features) == len(window_bounds(48, 14, 3)) + len(window_bounds(51, 14, 3))
    assert _score(every, _perfect(every, wrong=0))["f1"] == 1.0


def test_words_without_tokens_and_an_empty_sentence_are_scored_as_o(tmp_path):
    """A word the normalizer deletes (a zero-width space) inside a long sentence, and a sentence of such words
    only (no token at all: one empty window): scored, predicted O."""
    tokenizer = _letters_tokenizer()
    assert tokenizer.encode_words_batch([["\u200b"]], False)[0].ids == []
    body = [("john", "B-PER"), ("lives", "O"), ("\u200b", "O"), ("in", "O"), ("new", "B-LOC"), ("york", "I-LOC")]
    sentences = [body * 6, [("\u200b", "O"), ("\u200b", "O")]]
    split = _split(_write_conll(tmp_path / "z.conll", sentences), tokenizer, 10)
    assert split.windowed == 1 and split.features[-1]["input_ids"] == tokenizer.template.single([])[0]
    scores = _score(split, _perfect(split, wrong=LABELS.index("B-MISC")))
    assert scores["f1"] == 1.0 and scores["num_words"] == 36 + 2 and scores["num_examples"] == 2


def test_window_owners_never_decrease_along_a_sentence():
    """stitch_windows relies on it: reading windows one after the other meets each word's first sub-word in
    its owner first."""
    for window in range(1, 24):
        for stride in range(window):
            for n in range(1, 70):
                owner = max_context_owner(window_bounds(n, window, stride), n)
                assert (owner >= 0).all() and (np.diff(owner) >= 0).all(), (window, stride, n)


def test_tag_windows_by_hand():
    """8 tokens, windows of 4 sharing 2 (starts 0, 2, 4): each token's label and word in its owner only."""
    from bertlab.data.templates import Template

    template = Template(prefix=(101,), suffix=(102,), prefix_types=(0,), suffix_types=(0,))
    ids = [10, 11, 12, 13, 14, 15, 16, 17]
    word_ids = [0, 1, 1, 2, 3, 4, 5, 6]  # word 1 has two pieces
    windows = tag_windows(ids, word_ids, template, 4, 2, [1, 2, 3, 4, 5, 6, 0])
    owner = max_context_owner(window_bounds(8, 4, 2), 8).tolist()
    assert owner == [0, 0, 0, 1, 1, 2, 2, 2]
    assert [w.input_ids for w in windows] == [[101, 10, 11, 12, 13, 102], [101, 12, 13, 14, 15, 102],
                                              [101, 14, 15, 16, 17, 102]]
    X = IGNORE_INDEX
    assert [w.labels for w in windows] == [[X, 1, 2, X, X, X], [X, X, 3, 4, X, X], [X, X, 5, 6, 0, X]]
    assert [w.word_ids for w in windows] == [[-1, 0, 1, 1, -1, -1], [-1, -1, 2, 3, -1, -1],
                                             [-1, -1, 4, 5, 6, -1]]
    # Without labels (prediction) the same windows, read at the same places.
    assert [w.word_ids for w in tag_windows(ids, word_ids, template, 4, 2)] == [w.word_ids for w in windows]
    # Truncation: the first window, nothing owned past it.
    (cut,) = tag_windows(ids, word_ids, template, 4, None, [1, 2, 3, 4, 5, 6, 0])
    assert cut.labels == [X, 1, 2, X, 3, X] and cut.word_ids == [-1, 0, 1, 1, 2, -1]


def test_a_stride_that_leaves_no_room_is_a_config_error(tokenizer, tmp_path):
    content = 16 - tokenizer.num_special_tokens()
    path = _write_conll(tmp_path / "s.conll", [[("a", "O")]])
    with pytest.raises(ConfigError, match="data.window_stride"):
        _split(path, tokenizer, 16, window_stride=content)
    assert _split(path, tokenizer, 16, window_stride=content - 1).num_examples == 1


@pytest.mark.parametrize("mode", ["window", "Truncate", ""])
def test_an_unknown_long_text_mode_is_a_config_error_for_every_family(tokenizer, tmp_path, mode):
    """The config refuses it; so do the two places that cut windows (tag_features for token tasks in training and
    prediction, encode_documents for sequence tasks), which a Predictor's settings reach directly, even when no
    text is long."""
    from bertlab.data.documents import encode_documents
    from bertlab.data.tags import tag_features

    path = _write_conll(tmp_path / "s.conll", [[("a", "O")]])
    with pytest.raises(ConfigError, match=r"data\.long_text"):
        _split(path, tokenizer, 16, long_text=mode)
    with pytest.raises(ConfigError, match="data.long_text must be windows or truncate"):
        tag_features(tokenizer.encode_words_batch([["a"]], False), tokenizer.template, 16, mode)
    with pytest.raises(ConfigError, match="data.long_text must be windows or truncate"):
        encode_documents(tokenizer, ["a"], None, 16, mode)


# ----------------------------------------------------------------------------------------------------------
# Counting words on a real CoNLL file


def _conll_words(path: Path) -> int:
    lines = path.read_text().splitlines()
    return sum(1 for line in lines if line.strip() and not line.startswith("-DOCSTART-"))


@pytest.mark.parametrize("max_seq_length", [8, 16, 24])
def test_every_word_of_the_file_is_scored(tokenizer, max_seq_length):
    split = _split(TESTA, tokenizer, max_seq_length, labels=CONLL_LABELS, scheme="iob1")
    assert split.windowed > 0
    scores = _score(split, _perfect(split, wrong=CONLL_LABELS.index("B-MISC")), CONLL_LABELS)
    assert scores["num_words"] == _conll_words(TESTA) and scores["num_examples"] == split.num_examples
    assert scores["f1"] == 1.0
    cut = _split(TESTA, tokenizer, max_seq_length, long_text="truncate", labels=CONLL_LABELS, scheme="iob1")
    truncated = _score(cut, _perfect(cut, wrong=CONLL_LABELS.index("B-MISC")), CONLL_LABELS)
    assert truncated["num_words"] == _conll_words(TESTA) and truncated["f1"] < 1.0  # cut words: O, still scored


# ----------------------------------------------------------------------------------------------------------
# A tiny training run, prediction, and the same records from the ONNX export


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """bert_tiny on the CoNLL fixture with max_seq_length=16 (most sentences are longer), a few steps."""
    run_dir = tmp_path_factory.mktemp("long") / "run"
    logger, handler = logging.getLogger("bertlab.data.datamodule"), _Lines()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        metrics = run_train(["model=bert_tiny", "task=conll2003", "data.max_seq_length=16",
                             "trainer.max_epochs=1", "trainer.limit_train_batches=3", "data.batch_size=8"], run_dir)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return run_dir, metrics, handler.lines


def test_a_training_run_on_long_sentences_scores_every_word(long_run):
    _, metrics, lines = long_run
    assert metrics["val"]["num_words"] == _conll_words(TESTA)
    assert metrics["val"]["num_examples"] == metrics["data"]["val_examples"]
    report = [line for line in lines if line.startswith("val:")]
    assert report and "longer than data.max_seq_length=16 read in" in report[0], lines


def test_predict_tags_every_word_of_a_long_text(long_run, caplog):
    from bertlab.inference.predictor import Predictor

    run_dir, *_ = long_run
    predictor = Predictor.from_run(run_dir)
    words = " ".join(" ".join(w) for w in _words(TESTA)[:6]).split()
    record = predictor(" ".join(words), word_scores=True)
    assert len(record["tags"]) == len(words) and None not in record["word_scores"]
    short = predictor("Peter lives in Paris", word_scores=True)
    predictor.settings.long_text = "truncate"
    with caplog.at_level(logging.WARNING, logger="bertlab.inference.predictor"):
        cut = predictor(" ".join(words), word_scores=True)
    assert predictor("Peter lives in Paris", word_scores=True) == short  # a text that fits: the same record
    assert cut["word_scores"][-1] is None and set(cut["tags"][-10:]) == {"O"}
    assert any("data.long_text=truncate" in r.getMessage() for r in caplog.records)


def test_onnx_export_predicts_the_same_records_on_long_texts(long_run, tmp_path):
    pytest.importorskip("onnxruntime")
    from conftest import records_close

    from bertlab.inference import onnx as bonnx
    from bertlab.inference.predictor import Predictor

    run_dir, *_ = long_run
    bonnx.export_onnx(run_dir, tmp_path / "onnx", check_dev=False)
    sentences = [" ".join(w) for w in _words(TESTA)[:8]]
    inputs = [" ".join(sentences[:4]), " ".join(sentences[4:]), "Paris"]
    torch_records = Predictor.from_run(run_dir)(inputs, word_scores=True)
    onnx_records = Predictor.from_run(tmp_path / "onnx")(inputs, word_scores=True)
    assert all(len(r["tags"]) == len(r["words"]) for r in onnx_records)
    assert all(records_close(a, b) for a, b in zip(torch_records, onnx_records, strict=True))
