"""Tokenizers of every encoder family (bertlab.data.tokenizer): RoBERTa's byte-level BPE, XLM-R's Unigram and BERT's
WordPiece, each trained here offline with ``tokenizers`` and saved by ``transformers`` as HF saves them.

Checked per family: the special tokens are found by role, the template is the tokenizer's own (single and pair
encodings equal HF AutoTokenizer's, and ``build_inputs`` of id lists equals the encoding), QA answer spans map back
to the answer text through offsets, NER labels the first piece of each word however the word is split, whole-word
masking groups the pieces of a word, a word that becomes no token is still scored, and every kind of vocabulary
trains, saves and loads (in bertlab and in HF AutoTokenizer). Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_DATA, ROOT
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

import bertlab.tasks.token as token_module
from bertlab.data.batching import Collator
from bertlab.data.features import LabelMap, mlm_split, token_split
from bertlab.data.qa import QAExample, prepare_qa_features
from bertlab.data.tokenizer import (
    BertTokenizer,
    EncoderTokenizer,
    TokenizerError,
    content_hash,
    load_tokenizer,
    tokenizer_for,
    train_tokenizer,
)
from bertlab.data.vocab import build_wordpiece
from bertlab.runtime.config import ConfigError, DataConfig, TaskSpec
from bertlab.tasks.metrics import entity_scores
from bertlab.tasks.token import TokenFamily

transformers = pytest.importorskip("transformers")

SST2 = ROOT / "src" / "bertlab" / "samples" / "sst2" / "train.tsv"
SQUAD = FIXTURE_DATA / "squad_v1.1" / "train.json"
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
# Control and zero-width characters: BERT's normalizer and SentencePiece's NMT normalization delete them.
DELETED = Regex("[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\u200b-\u200d\ufeff]")


def _texts() -> list[str]:
    sst = [line.split("\t")[0] for line in SST2.read_text(encoding="utf-8").splitlines()[1:]]
    squad = json.loads(SQUAD.read_text(encoding="utf-8"))
    contexts = [p["context"] for article in squad["data"] for p in article["paragraphs"]]
    # Single spaces: transformers 5 rebuilds XLM-R's pre-tokenizer to split at whitespace first, so a trailing
    # space (every SST-2 line has one) is a "▁" piece in tokenizer.json's pipeline and nothing in HF's.
    return [" ".join(t.split()) for t in sst + [s for c in contexts for s in c.split(". ")]]


TEXTS = _texts()


def _roberta_style() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                      add_prefix_space=False)
    return tok


def _xlmr_style() -> Tokenizer:
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Replace(DELETED, "")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(TEXTS, trainers.UnigramTrainer(vocab_size=300, special_tokens=SPECIALS,
                                                           unk_token="<unk>", show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    return tok


FAMILIES = {
    # family: (tokenizer builder, the HF class that saves it, pair specials, has token types)
    "roberta_style": (_roberta_style, "RobertaTokenizerFast", 4, False),
    "xlmr_style": (_xlmr_style, "XLMRobertaTokenizerFast", 4, False),
    "bert_style": (lambda: build_wordpiece(TEXTS, 400, True, 2), "BertTokenizerFast", 3, True),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Each family's tokenizer saved by transformers' save_pretrained, as a hub folder holds it."""
    out = {}
    for name, (build, hf_class, _, _) in FAMILIES.items():
        folder = tmp_path_factory.mktemp(name)
        getattr(transformers, hf_class)(tokenizer_object=build()).save_pretrained(folder)
        out[name] = folder
    return out


def _hf(folder: Path, **kw):
    return transformers.AutoTokenizer.from_pretrained(str(folder), **kw)


@pytest.mark.parametrize("name", FAMILIES)
def test_roles_templates_and_counts_are_the_familys(folders, name):
    tok = load_tokenizer(folders[name])
    vocab = tok.tokenizer.get_vocab()
    names = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]") if name == "bert_style" else ("<s>", "</s>", "<pad>", "<mask>",
                                                                                   "<unk>")
    assert (tok.cls_id, tok.sep_id, tok.pad_id, tok.mask_id, tok.unk_id) == tuple(vocab[t] for t in names)
    assert (tok.num_special_tokens(), tok.num_special_tokens(pair=True)) == (2, FAMILIES[name][2])
    assert tok.has_token_types is FAMILIES[name][3]
    assert tok.model_max_length is None  # transformers writes "no limit" (1e30) for a tokenizer built from an object
    assert isinstance(tok, BertTokenizer) and BertTokenizer is EncoderTokenizer


def test_roles_come_from_the_folders_configuration_when_the_names_are_not_the_usual(tmp_path):
    """A tokenizer whose special tokens have other names: tokenizer_config.json / special_tokens_map.json (plain
    strings or HF's AddedToken dicts) say which is which, and model_max_length is read there too."""
    vocab = {t: i for i, t in enumerate(["<|pad|>", "<|start|>", "<|end|>", "<|hole|>", "<|?|>", "a", "b"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|?|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<|start|> $A <|end|>",
                                                       pair="<|start|> $A <|end|> $B:1 <|end|>:1",
                                                       special_tokens=[("<|start|>", 1), ("<|end|>", 2)])
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "special_tokens_map.json").write_text(json.dumps(
        {"pad_token": {"content": "<|pad|>", "lstrip": False}, "mask_token": "<|hole|>"}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"cls_token": "<|start|>", "sep_token": "<|end|>", "unk_token": "<|?|>", "model_max_length": 256}))
    loaded = load_tokenizer(tmp_path)
    assert (loaded.cls_id, loaded.sep_id, loaded.pad_id, loaded.mask_id, loaded.unk_id) == (1, 2, 0, 3, 4)
    assert loaded.model_max_length == 256 and loaded.num_special_tokens(pair=True) == 3
    assert loaded.build_inputs([5], [6]) == ([1, 5, 2, 6, 2], [0, 0, 0, 1, 1])
    (tmp_path / "special_tokens_map.json").unlink()
    with pytest.raises(TokenizerError, match="no pad token"):
        load_tokenizer(tmp_path)


@pytest.mark.parametrize("name", FAMILIES)
def test_single_and_pair_encodings_equal_hf_autotokenizer(folders, name):
    tok, hf = load_tokenizer(folders[name]), _hf(folders[name])
    texts = TEXTS[::37][:10]
    pairs = TEXTS[5::41][:10]
    ours = tok.encode_batch(texts)
    theirs = hf(texts, return_token_type_ids=True)
    assert [e.ids for e in ours] == theirs["input_ids"]
    assert [e.attention_mask for e in ours] == theirs["attention_mask"]
    assert [e.type_ids for e in ours] == theirs["token_type_ids"]
    ours = tok.encode_batch(texts, pairs)
    theirs = hf(texts, pairs, return_token_type_ids=True)
    assert [e.ids for e in ours] == theirs["input_ids"]
    assert [e.type_ids for e in ours] == theirs["token_type_ids"]
    if name != "bert_style":
        assert ours[0].ids.count(tok.sep_id) == 3  # <s> A </s></s> B </s>


@pytest.mark.parametrize("name", FAMILIES)
def test_pre_split_words_encode_as_hf_with_a_prefix_space(folders, name):
    """Byte-level BPE reads each pre-split word with its leading space (HF: add_prefix_space=True), as in running
    text: "world" alone and " world" in a sentence are different pieces otherwise."""
    tok = load_tokenizer(folders[name])
    hf = _hf(folders[name], **({"add_prefix_space": True} if name == "roberta_style" else {}))
    words = [s.split() for s in TEXTS[3::53][:8]]
    ours = tok.encode_words_batch(words)
    theirs = hf(words, is_split_into_words=True)
    assert [e.ids for e in ours] == theirs["input_ids"]
    assert [e.word_ids for e in ours] == [theirs.word_ids(i) for i in range(len(words))]
    if name == "roberta_style":  # each word's pieces are the ones it has after a space inside a sentence
        alone = tok.encode_batch([" " + w for w in words[0]], add_special_tokens=False)
        assert ours[0].ids[1:-1] == [i for enc in alone for i in enc.ids]


@pytest.mark.parametrize("name", FAMILIES)
def test_build_inputs_of_id_lists_equals_the_encoding(folders, name):
    """QA windows, pre-training pairs and CLM segments are built from id lists: the result is the tokenizer's."""
    tok = load_tokenizer(folders[name])
    for a, b in zip(TEXTS[:20], TEXTS[20:40]):
        ia, ib = (tok.encode_batch([t], add_special_tokens=False)[0].ids for t in (a, b))
        pair, single = tok.encode_batch([a], [b])[0], tok.encode_batch([a])[0]
        assert tok.build_inputs(ia, ib) == (pair.ids, pair.type_ids)
        assert tok.build_inputs(ia) == tok.build_inputs(ia, []) == (single.ids, single.type_ids)


@pytest.mark.parametrize("name", FAMILIES)
def test_qa_answer_spans_map_back_to_the_answer_text_through_offsets(folders, name):
    tok = load_tokenizer(folders[name])
    squad = json.loads(SQUAD.read_text(encoding="utf-8"))
    examples = [QAExample(q["id"], q["question"], p["context"], q["answers"])
                for article in squad["data"] for p in article["paragraphs"] for q in p["qas"]]
    feats = prepare_qa_features(examples, tok.tokenizer, template=tok.template, train=True, max_seq_length=64,
                                doc_stride=16, max_query_length=16)
    labelled = 0
    for i in range(len(feats)):
        ex = examples[feats.example_index[i]]
        assert len(feats.input_ids[i]) <= 64 and feats.input_ids[i][0] == tok.cls_id
        start, end = feats.start_positions[i], feats.end_positions[i]
        if start == 0:
            continue
        labelled += 1
        span = ex.context[feats.offsets[i][start][0]:feats.offsets[i][end][1]]
        assert span.strip() == ex.answers[0]["text"].strip(), (name, span, ex.answers[0])
    assert labelled >= len(examples) // 2
    # A window that holds the whole context is the HF encoding of (question, context).
    short = [ex for ex in examples if len(tok.encode_batch([ex.context], add_special_tokens=False)[0].ids) < 300]
    one = prepare_qa_features(short[:1], tok.tokenizer, template=tok.template, train=False, max_seq_length=512,
                              doc_stride=16, max_query_length=64)
    hf = _hf(folders[name])(short[0].question, short[0].context, return_token_type_ids=True)
    assert one.input_ids[0].tolist() == hf["input_ids"]
    assert one.token_type_ids[0].tolist() == hf["token_type_ids"]


# -------------------------------------------------------------------------------------------------- words


WORDS = ["Thornby", "visited", "Zürich", "and", "Schwarzenegger", "'s", "Clock", "Town", "\u0007", "yesterday", "\u200b",
         "."]
TAGS = ["B-LOC", "O", "B-LOC", "O", "B-PER", "O", "B-LOC", "I-LOC", "O", "O", "O", "O"]


def _conll(tmp_path: Path) -> Path:
    path = tmp_path / "ner.conll"
    rows = [f"{w} {t}" for w, t in zip(WORDS, TAGS)]
    path.write_text("\n".join(rows) + "\n\n" + "\n".join(rows[:4]) + "\n", encoding="utf-8")
    return path


def test_ner_labels_the_first_piece_of_words_split_differently_by_bpe_and_unigram(folders, tmp_path):
    labels = LabelMap(["O", "B-LOC", "I-LOC", "B-PER", "I-PER"])
    task = TaskSpec(name="ner", family="token", labels=labels.labels)
    pieces = {}
    for name in FAMILIES:
        tok = load_tokenizer(folders[name])
        split = token_split("train", _conll(tmp_path), DataConfig(max_seq_length=64), tok, labels, task)
        feature, word_ids = split.features[0], split.eval_data.word_ids[0]
        pieces[name] = [word_ids.count(w) for w in range(len(WORDS))]
        for position, (w, label) in enumerate(zip(word_ids, feature["labels"])):
            first = w >= 0 and w not in word_ids[:position]
            assert label == (labels.id(TAGS[w], "") if first else -100), (name, position)
        assert feature["input_ids"][0] == tok.cls_id and feature["input_ids"][-1] == tok.sep_id
    # The premise: the three kinds cut the words into different pieces, some into several.
    assert len({tuple(p) for p in pieces.values()}) == 3 and all(max(p) > 1 for p in pieces.values())
    assert pieces["roberta_style"][WORDS.index("\u0007")] >= 1  # bytes never vanish in byte-level BPE
    assert pieces["xlmr_style"][WORDS.index("\u0007")] == 0 and pieces["bert_style"][WORDS.index("\u200b")] == 0


@pytest.mark.parametrize("name", FAMILIES)
def test_a_word_that_becomes_no_token_is_still_scored(folders, tmp_path, monkeypatch, name):
    """A word the normalizer deletes (a lone control or zero-width character) has no piece to predict: it is
    predicted "O" and compared with its gold tag like every other word, so the words scored are the input's."""
    tok = load_tokenizer(folders[name])
    labels = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    task = TaskSpec(name="ner", family="token", labels=labels)
    split = token_split("val", _conll(tmp_path), DataConfig(max_seq_length=64), tok, LabelMap(labels), task)
    family = TokenFamily(task, len(labels), labels)
    # A model that predicts "B-PER" everywhere: every word with a piece gets B-PER, a word without one gets O.
    outputs = [torch.full((len(f["input_ids"]),), labels.index("B-PER")).numpy() for f in split.features]
    scored = []

    def spy(true_seqs, pred_seqs):
        scored.extend(zip(true_seqs, pred_seqs))
        return entity_scores(true_seqs, pred_seqs)

    monkeypatch.setattr(token_module.metrics, "entity_scores", spy)
    family.score(torch.arange(len(split.features)), outputs, split, 0.0, None)
    assert [len(gold) for gold, _ in scored] == [len(pred) for _, pred in scored] == [len(WORDS), 4]
    without_piece = [w for w in range(len(WORDS)) if w not in split.eval_data.word_ids[0]]
    assert [scored[0][1][w] for w in without_piece] == ["O"] * len(without_piece)
    assert all(scored[0][1][w] == "B-PER" for w in range(len(WORDS)) if w not in without_piece)


# -------------------------------------------------------------------------------------- whole-word masking


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    docs = ["\n".join(TEXTS[i:i + 6]) for i in range(0, 240, 6)]
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", FAMILIES)
def test_whole_word_masking_masks_every_piece_of_a_word_or_none(folders, tmp_path, name):
    tok = load_tokenizer(folders[name])
    task = TaskSpec(name="mlm", family="mlm", whole_word_masking=True, nsp=True, mlm_probability=0.3)
    split = mlm_split("train", [_corpus(tmp_path)], DataConfig(max_seq_length=48), tok, task, seed=0)
    assert all(len(f["input_ids"]) <= 48 and len(f["word_starts"]) == len(f["input_ids"]) for f in split.features)
    assert all(f["input_ids"][0] == tok.cls_id for f in split.features)
    # The word starts are the encodings' word ids: a sentence's own pieces, grouped as its word ids group them.
    sentence = TEXTS[0]
    enc = tok.encode_batch([sentence], add_special_tokens=False)[0]
    groups = [enc.word_ids.count(w) for w in sorted(set(enc.word_ids))]
    assert max(groups) > 1  # some word has several pieces
    collate = Collator(tok.pad_id, mlm={"vocab_size": tok.vocab_size, "mask_id": tok.mask_id,
                                        "special_ids": torch.tensor(sorted(tok.special_ids)), "probability": 0.3,
                                        "whole_word": True, "continuation": torch.zeros(tok.vocab_size, dtype=bool),
                                        "generator": torch.Generator().manual_seed(0), "seed": 0})
    batch = collate(split.features[:32])
    assert "word_starts" not in batch
    selected = batch["labels"] != -100
    for row, f in enumerate(split.features[:32]):
        starts = list(f["word_starts"])
        words = [0] * len(starts)
        for k in range(1, len(starts)):
            words[k] = words[k - 1] + starts[k]
        specials = {k for k, i in enumerate(f["input_ids"]) if i in tok.special_ids}
        by_word: dict[int, set[bool]] = {}
        for k in range(len(starts)):
            if k not in specials:
                by_word.setdefault(words[k], set()).add(bool(selected[row, k]))
        assert all(len(v) == 1 for v in by_word.values()), (name, row)
    assert selected.any()


@pytest.mark.parametrize("name", ["bert_style", "xlmr_style", "roberta_style"])
def test_the_tokenizers_own_word_marks_group_as_word_ids_do(folders, name):
    """Prepared corpora hold ids only: there the tokenizer's own marking of pieces (## / ▁ / Ġ) groups them. It
    agrees with word ids for WordPiece and SentencePiece; byte-level BPE marks only words after a space (the
    first word of a text, and a word after punctuation, join the piece before them)."""
    tok = load_tokenizer(folders[name])
    table = tok.continuation_table()
    differ = 0
    for text in TEXTS[:300]:
        enc = tok.encode_batch([text], add_special_tokens=False)[0]
        by_ids = [k == 0 or enc.word_ids[k] != enc.word_ids[k - 1] for k in range(len(enc.ids))]
        by_table = [k == 0 or not table[i] for k, i in enumerate(enc.ids)]
        if name == "roberta_style":  # never a word start inside a word; some word starts missed
            assert all(i or not t for t, i in zip(by_table, by_ids)), text
            differ += by_table != by_ids
        else:
            assert by_table == by_ids, text
    assert (differ > 0) is (name == "roberta_style")


def test_wordpiece_whole_word_masks_are_the_ones_of_the_continuation_table():
    """BERT's whole-word masking is unchanged: word starts from word ids give exactly the masks the ## table gave."""
    tok = train_tokenizer(TEXTS, "wordpiece", 300)
    task = TaskSpec(name="mlm", family="mlm", whole_word_masking=True, nsp=True)
    corpus = Path(__file__).parent / "fixtures" / "data" / "wikitext2" / "wiki.valid.tokens"
    with_starts = mlm_split("val", [corpus], DataConfig(max_seq_length=64, text_format="wikitext"), tok, task, 0)
    plain = [{k: v for k, v in f.items() if k != "word_starts"} for f in with_starts.features]
    table = torch.tensor([t.startswith("##") for t, _ in sorted(tok.tokenizer.get_vocab().items(),
                                                                  key=lambda kv: kv[1])])
    cfg = {"vocab_size": tok.vocab_size, "mask_id": tok.mask_id, "special_ids": torch.tensor(sorted(tok.special_ids)),
           "probability": 0.15, "whole_word": True, "continuation": table, "seed": 0}
    for start in range(0, min(len(plain), 64), 16):
        a = Collator(tok.pad_id, mlm={**cfg, "generator": torch.Generator().manual_seed(start)})(
            with_starts.features[start:start + 16])
        b = Collator(tok.pad_id, mlm={**cfg, "generator": torch.Generator().manual_seed(start)})(plain[start:start + 16])
        assert torch.equal(a["labels"], b["labels"]) and torch.equal(a["input_ids"], b["input_ids"])


@pytest.mark.parametrize("name", ["roberta_style", "xlmr_style"])
def test_pretraining_pairs_and_segments_follow_the_template(folders, tmp_path, name):
    tok = load_tokenizer(folders[name])
    for nsp in (True, False):
        task = TaskSpec(name="mlm", family="mlm", nsp=nsp)
        split = mlm_split("train", [_corpus(tmp_path)], DataConfig(max_seq_length=40), tok, task, seed=1)
        for f in split.features:
            ids = f["input_ids"]
            assert len(ids) <= 40 and ids[0] == tok.cls_id and ids[-1] == tok.sep_id
            assert set(f["token_type_ids"]) == {0}  # RoBERTa / XLM-R: no segment ids
            if nsp and ids.count(tok.sep_id) == 3:
                k = ids.index(tok.sep_id)
                assert ids[k + 1] == tok.sep_id  # <s> A </s></s> B </s>
        assert max(len(f["input_ids"]) for f in split.features) >= 38  # the budget is used to the full


def test_max_seq_length_must_leave_room_for_the_familys_special_tokens(folders):
    from bertlab.data.datamodule import TaskDataModule

    tok = load_tokenizer(folders["roberta_style"])
    task = TaskSpec(name="pairs", family="sequence")
    TaskDataModule(task, DataConfig(max_seq_length=5, text_pair_column="b"), load_tokenizer(folders["bert_style"]))
    with pytest.raises(ConfigError, match=r"max_seq_length=5 .* \(<s> a </s> </s> b </s>\) already take 4 positions"):
        TaskDataModule(task, DataConfig(max_seq_length=5, text_pair_column="b"), tok)


# ------------------------------------------------------------------------------------------ vocabularies


@pytest.mark.parametrize("kind,hf_class", [("wordpiece", "BertTokenizer"), ("bpe", "RobertaTokenizer"),
                                           ("unigram", "XLMRobertaTokenizer")])
def test_each_kind_of_vocabulary_trains_saves_and_loads_here_and_in_hf(tmp_path, kind, hf_class):
    tok = train_tokenizer(TEXTS, kind, vocab_size=350, lowercase=False)
    assert 200 <= tok.vocab_size <= 350 and tok.model_max_length == 512
    tok.save(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == hf_class
    again, hf = load_tokenizer(tmp_path), _hf(tmp_path)
    assert type(hf).__name__.removesuffix("Fast") == hf_class
    texts, pairs = TEXTS[1::29][:10], TEXTS[2::31][:10]
    ours = again.encode_batch(texts, pairs)
    assert [e.ids for e in ours] == [e.ids for e in tok.encode_batch(texts, pairs)]
    theirs = hf(texts, pairs, return_token_type_ids=True)
    assert [e.ids for e in ours] == theirs["input_ids"] and [e.type_ids for e in ours] == theirs["token_type_ids"]
    assert (again.cls_id, again.sep_id, again.pad_id, again.mask_id) == (
        hf.cls_token_id, hf.sep_token_id, hf.pad_token_id, hf.mask_token_id)
    assert again.fingerprint() == tok.fingerprint()
    words = [t.split() for t in texts]
    hf = _hf(tmp_path, **({"add_prefix_space": True} if kind == "bpe" else {}))
    assert [e.ids for e in again.encode_words_batch(words)] == hf(words, is_split_into_words=True)["input_ids"]


PROGRAM = f"""
import hashlib, sys
from bertlab.data.tokenizer import train_tokenizer
texts = [l.split("\\t")[0] for l in open({str(SST2)!r}, encoding="utf-8").read().splitlines()[1:]]
for kind in ("bpe", "unigram"):
    print(hashlib.sha256(train_tokenizer(texts, kind, 300).tokenizer.to_str().encode()).hexdigest())
"""


def test_bpe_and_unigram_vocabularies_are_the_same_in_separate_processes():
    digests = {subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True,
                              env={"TOKENIZERS_PARALLELISM": "false", "PATH": "",
                                   **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}).stdout
               for _ in range(3)}
    assert len(digests) == 1, digests


def test_the_cache_key_of_a_wordpiece_vocabulary_is_unchanged_and_each_kind_has_its_own(tmp_path):
    texts = TEXTS[:200]
    tokenizer_for(None, lambda: texts, vocab_size=300, cache_dir=tmp_path)
    assert (tmp_path / "tokenizers" / content_hash("wordpiece", "300", "True", *texts) / "vocab.txt").is_file()
    bpe = tokenizer_for(None, lambda: texts, vocab_size=300, cache_dir=tmp_path, kind="bpe")
    assert bpe.kind == "BPE" and len([p for p in (tmp_path / "tokenizers").iterdir() if p.is_dir()]) == 2
    assert tokenizer_for(None, lambda: texts, vocab_size=300, cache_dir=tmp_path, kind="bpe").fingerprint() == \
        bpe.fingerprint()
    with pytest.raises(TokenizerError, match="model.tokenizer_kind='sentencepiece' is not"):
        tokenizer_for(None, lambda: texts, cache_dir=tmp_path, kind="sentencepiece")


def test_a_folder_with_only_slow_tokenizer_files_is_converted(folders, tmp_path):
    """vocab.json + merges.txt (a RoBERTa folder without tokenizer.json): transformers converts them, offline."""
    hf = transformers.AutoTokenizer.from_pretrained(str(folders["roberta_style"]))
    spec = json.loads(hf.backend_tokenizer.to_str())
    (tmp_path / "vocab.json").write_text(json.dumps(spec["model"]["vocab"]))
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (tmp_path / "tokenizer_config.json").write_text((folders["roberta_style"] / "tokenizer_config.json").read_text())
    tok = load_tokenizer(tmp_path)
    assert [e.ids for e in tok.encode_batch(TEXTS[:5])] == hf(TEXTS[:5])["input_ids"]


def test_random_pairs_keep_their_shape_under_truncation(folders):
    """A truncating copy keeps the template: the special tokens stay, the texts are cut."""
    tok = load_tokenizer(folders["roberta_style"]).truncated(16)
    rng = random.Random(0)
    for _ in range(10):
        a, b = rng.sample(TEXTS, 2)
        enc = tok.encode_batch([a], [b])[0]
        assert len(enc.ids) <= 16 and enc.ids[0] == tok.cls_id and enc.ids[-1] == tok.sep_id


def test_the_folders_add_prefix_space_wins_as_in_hf(folders, tmp_path):
    """tokenizer_config.json's add_prefix_space=true over tokenizer.json's false: HF's fast tokenizer reads text
    with a leading space then, and so does bertlab."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_text((folders["roberta_style"] / name).read_text())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "add_prefix_space": True}))
    tok, hf = load_tokenizer(tmp_path), _hf(tmp_path)
    assert [e.ids for e in tok.encode_batch(TEXTS[:8])] == hf(TEXTS[:8])["input_ids"]
    assert tok.encode_batch(TEXTS[:1])[0].tokens[1].startswith("\u0120")
    assert load_tokenizer(folders["roberta_style"]).encode_batch(TEXTS[:1])[0].ids != tok.encode_batch(TEXTS[:1])[0].ids


@pytest.mark.parametrize("hf_class", ["DistilBertTokenizerFast", "ElectraTokenizerFast"])
def test_saving_keeps_the_folders_tokenizer_class(tmp_path, hf_class):
    """DistilBERT and ELECTRA use WordPiece like BERT: a run's tokenizer/ folder names the class the checkpoint's
    folder named, not always BertTokenizer."""
    getattr(transformers, hf_class)(tokenizer_object=build_wordpiece(TEXTS, 300, True, 2)).save_pretrained(
        tmp_path / "hub")
    load_tokenizer(tmp_path / "hub").save(tmp_path / "run")
    config = json.loads((tmp_path / "run" / "tokenizer_config.json").read_text())
    # The class the hub folder names (transformers 5 writes ELECTRA's as BertTokenizer, DistilBERT's as its own).
    assert config["tokenizer_class"] == json.loads((tmp_path / "hub" / "tokenizer_config.json").read_text())[
        "tokenizer_class"]
    assert type(_hf(tmp_path / "run")) is type(_hf(tmp_path / "hub"))
    assert (tmp_path / "run" / "vocab.txt").is_file()
