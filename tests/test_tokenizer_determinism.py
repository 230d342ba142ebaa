"""A scratch WordPiece vocabulary is a function of its training text: the same text, the same vocabulary,
in this process and in another one."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

from bertlab.data.tokenizer import SPECIAL_TOKENS, train_wordpiece

SAMPLE = ROOT / "src" / "bertlab" / "samples" / "sst2" / "train.tsv"

PROGRAM = f"""
import hashlib, json
from bertlab.data.tokenizer import train_wordpiece
texts = [l.split("\\t")[0] for l in open({str(SAMPLE)!r}, encoding="utf-8").read().splitlines()[1:]]
tok = train_wordpiece(texts, vocab_size=8000)
print(hashlib.sha256(tok.tokenizer.to_str().encode()).hexdigest())
"""


def _texts() -> list[str]:
    return [line.split("\t")[0] for line in SAMPLE.read_text(encoding="utf-8").splitlines()[1:]]


def test_the_same_text_gives_the_same_vocabulary_in_one_process():
    vocabularies = {tuple(sorted(train_wordpiece(_texts()).tokenizer.get_vocab().items())) for _ in range(4)}
    assert len(vocabularies) == 1


def test_the_same_text_gives_the_same_tokenizer_in_separate_processes():
    digests = {subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True,
                              env={"TOKENIZERS_PARALLELISM": "false", "PATH": ""}).stdout.strip()
               for _ in range(3)}
    assert len(digests) == 1, digests


def test_only_bert_specials_are_special_and_continuing_pieces_tokenize_as_usual():
    tok = train_wordpiece(["the cat sat on the mat", "a dog ran to the park"] * 20, vocab_size=80)
    added = [token.content for _, token in sorted(tok.tokenizer.get_added_tokens_decoder().items())]
    assert added == list(SPECIAL_TOKENS)
    assert [tok.tokenizer.id_to_token(i) for i in range(5)] == list(SPECIAL_TOKENS)
    # "##t" is a vocabulary piece, not an added token: in text it splits like any other string.
    assert "##t" in tok.tokenizer.get_vocab()
    assert "##t" not in tok.tokenizer.encode("##t", add_special_tokens=False).tokens


def test_a_truncated_view_leaves_the_shared_tokenizer_untouched():
    """Splits are tokenized with a truncating copy (one per max length), never by switching truncation on and
    off on the tokenizer every split, predictor and collator share."""
    tok = train_wordpiece(_texts(), vocab_size=300)
    long = " ".join(_texts()[:5])
    short = tok.truncated(8)
    assert tok.truncated(8) is short and tok.truncated(9) is not short
    assert len(short.encode_batch([long])[0].ids) == 8 and short.encode_batch([long])[0].overflowing
    assert tok.tokenizer.truncation is None and len(tok.encode_batch([long])[0].ids) > 8
    assert (short.pad_id, short.cls_id, short.vocab_size) == (tok.pad_id, tok.cls_id, tok.vocab_size)


def test_ids_only_encoding_equals_the_full_encoding_without_specials():
    """Pre-training preparation reads ids only (``encode_ids_batch``, which skips the offsets where the
    installed tokenizers can): the ids are those of ``encode_batch(..., add_special_tokens=False)``."""
    tok = train_wordpiece(_texts(), vocab_size=300)
    texts = _texts()[:50] + ["", "  ", "Ünïcödé — and a very long word: antidisestablishmentarianism."]
    assert tok.encode_ids_batch(texts) == [enc.ids for enc in tok.encode_batch(texts, add_special_tokens=False)]
