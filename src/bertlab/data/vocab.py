"""Vocabularies for scratch models, one per kind (``model.tokenizer_kind``), each a ``tokenizers.Tokenizer``:

- ``wordpiece`` (BERT): BERT's normalizer and pre-tokenizer, ``##`` continuation pieces, ``[PAD] [UNK] [CLS]
  [SEP] [MASK]`` as ids 0-4, ``[CLS] A [SEP] B [SEP]`` with segment ids 0/1;
- ``bpe`` (RoBERTa): byte-level BPE (no unknown byte), ``<s> <pad> </s> <unk> <mask>`` as ids 0-4,
  ``RobertaProcessing`` (``<s> A </s></s> B </s>``, type ids all 0);
- ``unigram`` (XLM-R): a SentencePiece-style Unigram model over ``▁``-marked words (``Metaspace``), NMT + NFKC
  normalization (control characters deleted, as SentencePiece's ``nmt_nfkc``), the same specials and template
  as XLM-R.

Call them with the training split only: a vocabulary fit on validation or test text leaks them. Each is
deterministic: the same texts give the same vocabulary in any process (tests/test_tokenizer_determinism.py,
tests/test_tokenizer_families.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from bertlab.runtime.errors import TokenizerError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
ROBERTA_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
KINDS = ("wordpiece", "bpe", "unigram")


def bert_template(cls_id: int, sep_id: int) -> processors.TemplateProcessing:
    return processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )


def _bert_pipeline(tokenizer: Tokenizer, lowercase: bool) -> Tokenizer:
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    return tokenizer


# The tokens a BERT WordPiece vocab.txt must hold (bertlab's template and unknown words need them).
WORDPIECE_REQUIRED = ("[CLS]", "[SEP]", "[UNK]")


def wordpiece_from_vocab(vocab_file: str | Path, lowercase: bool = True) -> Tokenizer:
    """BERT's WordPiece tokenizer of a ``vocab.txt`` (one token a line, its id the line's index, as transformers'
    BertTokenizer reads it). A file that is no BERT vocabulary (a JSON ``vocab.json``, SentencePiece's
    ``token<TAB>score`` lines, RoBERTa's ``<s>`` tokens, an empty file) is a :class:`TokenizerError` that says what
    it looks like, not a ``KeyError``."""
    text = Path(vocab_file).read_text(encoding="utf-8")
    # Lines end at \n, \r\n or \r, as transformers reads vocab.txt (not at U+2028, U+0085 or a form feed,
    # which str.splitlines would take as line ends and so shift every later id).
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab: dict[str, int] = {}
    for i, line in enumerate(lines):
        vocab.setdefault(line, i)
    missing = [token for token in WORDPIECE_REQUIRED if token not in vocab]
    if missing:
        raise TokenizerError(f"{vocab_file}: not a BERT WordPiece vocabulary: it has no {', '.join(missing)} token{'s' if len(missing) > 1 else ''}"
                             f"{_looks_like(lines)}. A vocab.txt holds one WordPiece token a line with BERT's special "
                             "tokens; give the folder the tokenizer.json of its model (or pass model.tokenizer=<a "
                             "folder with the right tokenizer>)")
    tokenizer = _bert_pipeline(Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100)),
                               lowercase)
    tokenizer.post_processor = bert_template(vocab["[CLS]"], vocab["[SEP]"])
    return tokenizer


def _looks_like(lines: list[str]) -> str:
    """What a vocab.txt that is no WordPiece vocabulary looks like, for the error message."""
    filled = [line for line in lines if line.strip()]
    if not filled:
        return " (the file is empty)"
    if sum("\t" in line for line in filled[:50]) > len(filled[:50]) // 2:
        return " (its lines are token<TAB>score: a SentencePiece vocabulary)"
    if filled[0].lstrip().startswith("{"):
        return " (it holds JSON: a BPE vocab.json renamed?)"
    if filled[0].startswith("#version") or all(len(line.split(" ")) == 2 for line in filled[:50]):
        return " (its lines are pairs: BPE merges, merges.txt?)"
    if any(token in filled for token in ROBERTA_SPECIALS):
        return " (it holds <s>, </s>, ...: the vocabulary of a RoBERTa- or XLM-R-style tokenizer)"
    return ""


def build_wordpiece(texts: list[str], vocab_size: int, lowercase: bool, min_frequency: int) -> Tokenizer:
    """BERT's WordPiece. The ``tokenizers`` trainer numbers the continuing pieces (``##x``) in hash-map order,
    and merges of equal count are ordered by those numbers, so two trainings could pick different merges
    (huggingface/tokenizers#1794). Every ``##x`` of the texts is therefore declared up front, in sorted order,
    and the tokenizer is rebuilt from the trained vocabulary with BERT's five special tokens only."""
    pipeline = _bert_pipeline(Tokenizer(models.WordPiece(unk_token="[UNK]")), lowercase)
    continuing: set[str] = set()
    for text in texts:
        for word, _ in pipeline.pre_tokenizer.pre_tokenize_str(pipeline.normalizer.normalize_str(text)):
            continuing.update(word[1:])
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, continuing_subword_prefix="##", show_progress=False,
        special_tokens=[*SPECIAL_TOKENS, *(f"##{c}" for c in sorted(continuing))],
    )
    pipeline.train_from_iterator(texts, trainer=trainer)
    vocab = pipeline.get_vocab(with_added_tokens=False)
    tokenizer = _bert_pipeline(Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100)),
                               lowercase)
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer.post_processor = bert_template(vocab["[CLS]"], vocab["[SEP]"])
    return tokenizer


def build_bpe(texts: list[str], vocab_size: int, lowercase: bool, min_frequency: int) -> Tokenizer:
    """RoBERTa's byte-level BPE: every byte is in the alphabet (no unknown input), words keep their leading
    space as ``Ġ``. The alphabet is given up front (all 256 bytes), so piece numbering, and with it the order of
    equal-count merges, does not depend on hash-map order."""
    tokenizer = Tokenizer(models.BPE())
    if lowercase:
        tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                  special_tokens=list(ROBERTA_SPECIALS),
                                  initial_alphabet=sorted(pre_tokenizers.ByteLevel.alphabet()))
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", tokenizer.token_to_id("</s>")),
                                                            ("<s>", tokenizer.token_to_id("<s>")),
                                                            trim_offsets=True, add_prefix_space=False)
    return tokenizer


def build_unigram(texts: list[str], vocab_size: int, lowercase: bool, min_frequency: int) -> Tokenizer:
    """XLM-R's SentencePiece Unigram: words marked by a leading ``▁``, pieces chosen by likelihood, unknown
    characters as ``<unk>``. ``min_frequency`` does not apply (Unigram prunes by likelihood)."""
    del min_frequency
    steps = [normalizers.Nmt(), normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.Sequence([*steps, normalizers.Lowercase()] if lowercase else steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=list(ROBERTA_SPECIALS),
                                      unk_token="<unk>", show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.model = models.Unigram(_canonical_pieces(json.loads(tokenizer.to_str())["model"]["vocab"]),
                                     unk_id=tokenizer.token_to_id("<unk>"), byte_fallback=False)
    s, e = tokenizer.token_to_id("<s>"), tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", s), ("</s>", e)])
    return tokenizer


_PENALTY_STEP = 1e-4  # tokenizers' UnigramTrainer: each character added without a score gets min_score + k * 1e-4


def _canonical_pieces(pieces: list[list]) -> list[tuple[str, float]]:
    """The trained pieces in an order and with scores that do not depend on hash-map order.

    The ``tokenizers`` Unigram trainer is not deterministic across processes: the characters it must keep but did
    not score get ``min_score + k * 1e-4`` with ``k`` in the iteration order of a hash set, and its EM sums in
    hash-map order (scores differ in the last bits). So the single characters whose score is ``min_score`` plus a
    whole multiple of 1e-4 get those scores in character order, every score is rounded to 1e-9, and pieces of equal
    score are ordered by text; the special tokens (score 0, first) keep their ids.
    """
    specials = [(p, s) for p, s in pieces if p in ROBERTA_SPECIALS]
    rest = [(p, float(s)) for p, s in pieces if p not in ROBERTA_SPECIALS]
    low = min((s for _, s in rest), default=0.0)
    group = [(s, p) for p, s in rest
             if len(p) == 1 and abs((s - low) / _PENALTY_STEP - round((s - low) / _PENALTY_STEP)) < 1e-4]
    fixed = dict(zip(sorted(p for _, p in group), sorted(s for s, _ in group)))
    rest = [(p, round(fixed.get(p, s), 9)) for p, s in rest]
    return [(p, float(s)) for p, s in specials] + sorted(rest, key=lambda ps: (-ps[1], ps[0]))


BUILDERS = {"wordpiece": build_wordpiece, "bpe": build_bpe, "unigram": build_unigram}


def build_vocabulary(kind: str, texts: Iterable[str], vocab_size: int, lowercase: bool,
                     min_frequency: int = 2) -> Tokenizer:
    return BUILDERS[kind](list(texts), vocab_size, lowercase, min_frequency)
