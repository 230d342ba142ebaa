"""A SentencePiece ``spm.model`` (DeBERTa-v3's hub folders ship nothing else) converted to a ``tokenizers``
tokenizer encodes exactly as SentencePiece does: unigram models trained here, offline, with DeBERTa-v3's special
pieces, encoded on varied text (accents, full-width and CJK characters, emoji and other unknowns, tabs, newlines,
runs of spaces, empty and blank strings), under several trainer settings."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

spm = pytest.importorskip("sentencepiece")

from bertlab.data.spm import read_spm_model, spm_tokenizer, tokenizer_from_spm_folder  # noqa: E402
from bertlab.data.tokenizer import load_tokenizer  # noqa: E402
from bertlab.runtime.errors import TokenizerError  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "bertlab" / "samples" / "sst2" / "train.tsv"
VARIED = [
    "Café naïve façade – “quoted” ½ ﬁne", "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "東京は日本の首都です。", "emoji 😀 and ✓ marks",
    "tabs\tand\nnewlines\r\nhere", "  leading and trailing  ", "multiple    spaces   inside", "x", "", "   ", "\t",
    "numbers 3.14159 and 2,000,000", "URL https://example.com/a?b=c&d=e", "▁already▁escaped", " ▁ x",
    "unknown chars ☃☄★ ⚡ ☃☃", "ÀÉÎÕÜ àéîõü", "a\u00a0non-breaking\u2003em space", "zero\u200bwidth", "a\u3000b",
    "it's a truly, deeply moving film -- and funny!", "a <ud> b@@c", "<ud><ud>x", "x<ud>",
]


def sentences() -> list[str]:
    return [line.split("\t")[0] for line in SAMPLE.read_text(encoding="utf-8").splitlines()[1:]]


def train(folder: Path, **options) -> Path:
    """A unigram spm.model with DeBERTa-v3's special pieces ([PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3)."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences() + VARIED[:6]), model_writer=model, vocab_size=300, model_type="unigram",
        pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2, eos_piece="[SEP]", unk_id=3,
        unk_piece="[UNK]", minloglevel=2, **options)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spm.model").write_bytes(model.getvalue())
    return folder / "spm.model"


@pytest.mark.parametrize("options", [{}, {"user_defined_symbols": ["<ud>", "@@"]}, {"split_by_whitespace": False},
                                     {"normalization_rule_name": "identity"}, {"add_dummy_prefix": False}],
                         ids=["deberta_v3", "user_defined", "no_whitespace_split", "identity_norm", "no_prefix"])
def test_encodes_exactly_as_sentencepiece(tmp_path, options):
    path = train(tmp_path, **options)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    tok = spm_tokenizer(read_spm_model(path))
    for text in sentences() + VARIED:
        assert tok.encode(text, add_special_tokens=False).ids == sp.encode(text), repr(text)
    assert tok.get_vocab_size() == sp.get_piece_size() + 1  # [MASK] after the pieces, as transformers adds it


def test_deberta_template_special_ids_and_offsets(tmp_path):
    train(tmp_path)
    tok = load_tokenizer(tmp_path)  # a folder with spm.model only
    assert (tok.pad_id, tok.cls_id, tok.sep_id, tok.unk_id, tok.mask_id) == (0, 1, 2, 3, 300)
    enc = tok.encode_batch(["a moving film"], ["funny"])[0]
    assert enc.tokens[0] == "[CLS]" and enc.tokens.count("[SEP]") == 2 and enc.tokens[-1] == "[SEP]"
    first_sep = enc.tokens.index("[SEP]")
    assert set(enc.type_ids[:first_sep + 1]) == {0} and set(enc.type_ids[first_sep + 1:]) == {1}
    text = "a moving film"
    single = tok.encode_batch([text])[0]
    pieces = [text[a:b] for (a, b), special in zip(single.offsets, single.special_tokens_mask) if not special]
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")
    assert len(set(single.word_ids[1:-1])) == 3  # one word per ▁ boundary (whole-word masking, NER labels)
    words = tok.encode_words_batch([["a", "moving", "film"]])[0]
    assert words.ids == single.ids
    assert tok.decode(single.ids) == text


def test_literal_special_tokens_are_read_as_special(tmp_path):
    """The one deliberate difference from SentencePiece (as transformers' tokenizer): "[MASK]" in the text is the
    mask token, not the pieces of its characters."""
    train(tmp_path)
    tok = load_tokenizer(tmp_path)
    ids = tok.encode_batch(["the [MASK] film"], add_special_tokens=False)[0].ids
    assert tok.mask_id in ids


def test_folder_files_name_specials_and_added_ids(tmp_path):
    """tokenizer_config.json's roles and do_lower_case, added_tokens.json's ids; ids that do not fit are refused."""
    train(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "mask_token": "[MASK]"}))
    (tmp_path / "added_tokens.json").write_text(json.dumps({"[MASK]": 300, "<extra>": 301}))
    tokenizer, lowercase = tokenizer_from_spm_folder(tmp_path)
    assert lowercase and tokenizer.token_to_id("<extra>") == 301
    assert tokenizer.encode("FILM", add_special_tokens=False).ids == tokenizer.encode("film",
                                                                                      add_special_tokens=False).ids
    (tmp_path / "added_tokens.json").write_text(json.dumps({"[MASK]": 128000}))
    with pytest.raises(TokenizerError, match="added_tokens.json"):
        tokenizer_from_spm_folder(tmp_path)


@pytest.mark.parametrize("content", [b"", b"\x0a\xff\xff", b"not a model at all"])
def test_damaged_model_is_a_tokenizer_error(tmp_path, content):
    (tmp_path / "spm.model").write_bytes(content)
    with pytest.raises(TokenizerError, match="spm.model"):
        load_tokenizer(tmp_path)


def test_bpe_models_are_refused(tmp_path):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences()), model_writer=model, vocab_size=200,
                                   model_type="bpe", minloglevel=2)
    (tmp_path / "spm.model").write_bytes(model.getvalue())
    with pytest.raises(TokenizerError, match="unigram"):
        load_tokenizer(tmp_path)
