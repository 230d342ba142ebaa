"""WordPiece tokenizers through the ``tokenizers`` library: load a checkpoint's, or train one for scratch models.

Encodings keep what downstream alignment needs: char offsets into the original text (QA), word ids (NER,
whole-word masking), and segment ids for pairs (``[CLS] A [SEP] B [SEP]``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from bertlab.data.spm import SPM_NAME, tokenizer_from_spm_folder
from bertlab.runtime.errors import TokenizerError
from bertlab.runtime.files import cache_lock

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")



@dataclass
class BertTokenizer:
    """A ``tokenizers.Tokenizer`` with BERT's special ids resolved, padding and truncation off."""

    tokenizer: Tokenizer
    do_lower_case: bool = True

    def __post_init__(self) -> None:
        # Fixed padding/truncation in a shipped tokenizer.json (the MiniLM package pads and truncates at 128)
        # would hide padding masks and cut QA windows: bertlab pads per batch and windows itself.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        vocab = self.tokenizer.get_vocab()
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise TokenizerError(f"the tokenizer lacks BERT special tokens {missing}")
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (vocab[t] for t in SPECIAL_TOKENS)
        self.special_ids = frozenset(vocab[t] for t in SPECIAL_TOKENS)
        if self.tokenizer.post_processor is None:
            self.tokenizer.post_processor = _bert_template(self.cls_id, self.sep_id)
        self._truncated: dict[tuple[int, str], BertTokenizer] = {}  # truncated(): one copy per setting

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def fingerprint(self) -> str:
        """A content hash, for cache keys of tokenized data."""
        return hashlib.sha256(self.tokenizer.to_str().encode()).hexdigest()[:16]

    def encode_batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None, add_special_tokens: bool = True):
        """Batched encoding (Rust, parallel): a list of ``tokenizers.Encoding`` (ids, type_ids, offsets, word_ids)."""
        if pairs is None:
            return self.tokenizer.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return self.tokenizer.encode_batch(list(zip(texts, pairs)), add_special_tokens=add_special_tokens)

    def encode_ids_batch(self, texts: Sequence[str], chunk: int = 2048) -> list[list[int]]:
        """Token ids only, without special tokens. ``encode_batch_fast`` (tokenizers >= 0.20.2) skips the
        offsets that ids-only callers (pre-training preparation) never read; it is called on ``chunk`` texts
        at a time: one call on a whole block of sentences is slower."""
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        texts = list(texts)
        return [enc.ids for start in range(0, len(texts), chunk)
                for enc in encode(texts[start : start + chunk], add_special_tokens=False)]

    def encode_words_batch(self, words: Sequence[Sequence[str]]):
        """Pre-split words (CoNLL): word_ids map every piece back to its word."""
        return self.tokenizer.encode_batch([list(w) for w in words], is_pretokenized=True)

    def truncated(self, max_length: int, strategy: str = "longest_first") -> BertTokenizer:
        """A tokenizer like this one whose encodings are cut to ``max_length`` tokens (specials included), the
        overflow of each in ``Encoding.overflowing``. This tokenizer itself never truncates: the copy (one per
        setting, kept) holds the setting, so no caller sees another's truncation."""
        key = (int(max_length), strategy)
        if key not in self._truncated:
            inner = Tokenizer.from_str(self.tokenizer.to_str())
            inner.enable_truncation(key[0], strategy=strategy)
            copy = object.__new__(BertTokenizer)
            copy.__dict__.update(self.__dict__, tokenizer=inner, _truncated={})
            self._truncated[key] = copy
        return self._truncated[key]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def save(self, directory: str | Path) -> None:
        """tokenizer.json + vocab.txt + tokenizer_config.json: loadable by bertlab and by HF AutoTokenizer."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.tokenizer.save(str(directory / "tokenizer.json"))
        vocab = sorted(self.tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        (directory / "vocab.txt").write_text("".join(tok + "\n" for tok, _ in vocab), encoding="utf-8")
        (directory / "tokenizer_config.json").write_text(
            json.dumps(
                {
                    "tokenizer_class": "BertTokenizer",
                    "do_lower_case": self.do_lower_case,
                    "unk_token": "[UNK]",
                    "sep_token": "[SEP]",
                    "pad_token": "[PAD]",
                    "cls_token": "[CLS]",
                    "mask_token": "[MASK]",
                    "model_max_length": 512,
                },
                indent=2,
            )
            + "\n"
        )
        (directory / "special_tokens_map.json").write_text(
            json.dumps({k: f"[{v}]" for k, v in
                        (("unk_token", "UNK"), ("sep_token", "SEP"), ("pad_token", "PAD"), ("cls_token", "CLS"),
                         ("mask_token", "MASK"))}, indent=2) + "\n"
        )


def _bert_template(cls_id: int, sep_id: int) -> processors.TemplateProcessing:
    return processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )


def _lowercase_from_config(directory: Path) -> bool:
    config = directory / "tokenizer_config.json"
    if config.is_file():
        return bool(json.loads(config.read_text(encoding="utf-8")).get("do_lower_case", True))
    return True


def load_tokenizer(directory: str | Path) -> BertTokenizer:
    """``tokenizer.json`` when present, else a SentencePiece ``spm.model`` (converted: :mod:`bertlab.data.spm`),
    else ``vocab.txt`` (WordPiece, lower-casing as the checkpoint says).

    Any file that cannot be read as such (damaged, truncated, not JSON, unreadable) is a :class:`TokenizerError`
    naming it."""
    directory = Path(directory)
    config = directory / "tokenizer_config.json"
    try:
        lowercase = _lowercase_from_config(directory)
    except (OSError, ValueError, AttributeError) as err:
        raise TokenizerError(f"{config} could not be read: {type(err).__name__}: {err}") from None
    tok_json = directory / "tokenizer.json"
    vocab_txt = directory / "vocab.txt"
    if tok_json.is_file():
        try:
            tokenizer = Tokenizer.from_file(str(tok_json))
        except Exception as err:
            raise TokenizerError(
                f"{tok_json} could not be read ({err}): the file is damaged or not a tokenizer saved by the "
                "`tokenizers` library. Restore it from a copy (a run's tokenizer/ or export/ folder holds one), "
                "or pass model.tokenizer=<a folder with a good tokenizer.json or vocab.txt>"
            ) from None
        return BertTokenizer(tokenizer, do_lower_case=lowercase)
    if (directory / SPM_NAME).is_file():  # DeBERTa-v3's hub folders: a SentencePiece model only
        tokenizer, spm_lowercase = tokenizer_from_spm_folder(directory)
        return BertTokenizer(tokenizer, do_lower_case=spm_lowercase)
    if vocab_txt.is_file():
        try:
            return BertTokenizer(wordpiece_from_vocab(vocab_txt, lowercase), do_lower_case=lowercase)
        except (OSError, UnicodeDecodeError) as err:
            raise TokenizerError(f"{vocab_txt} could not be read: {type(err).__name__}: {err}") from None
    raise TokenizerError(f"no tokenizer in {directory}: looked for tokenizer.json, {SPM_NAME} and vocab.txt")


def _bert_pipeline(tokenizer: Tokenizer, lowercase: bool) -> Tokenizer:
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    return tokenizer


def wordpiece_from_vocab(vocab_file: str | Path, lowercase: bool = True) -> Tokenizer:
    vocab = {}
    for i, line in enumerate(Path(vocab_file).read_text(encoding="utf-8").splitlines()):
        vocab.setdefault(line.rstrip("\n"), i)
    tokenizer = _bert_pipeline(Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100)), lowercase)
    tokenizer.post_processor = _bert_template(vocab["[CLS]"], vocab["[SEP]"])
    return tokenizer


def train_wordpiece(texts: Iterable[str], vocab_size: int = 8000, lowercase: bool = True,
                    min_frequency: int = 2) -> BertTokenizer:
    """Train a BERT WordPiece tokenizer (specials first: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4).

    Call it with the training split only: a vocabulary fit on validation or test text leaks them.

    Deterministic: the same texts give the same vocabulary in any process. The ``tokenizers`` trainer numbers
    the continuing pieces (``##x``) in hash-map order, and merges of equal count are ordered by those
    numbers, so two trainings could pick different merges (huggingface/tokenizers#1794). Every ``##x`` of
    the texts is therefore declared up front, in sorted order, and the tokenizer is rebuilt from the trained
    vocabulary with BERT's five special tokens only.
    """
    texts = list(texts)
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
    tokenizer.post_processor = _bert_template(vocab["[CLS]"], vocab["[SEP]"])
    return BertTokenizer(tokenizer, do_lower_case=lowercase)


def content_hash(*parts: str | bytes | Path) -> str:
    """sha256 over strings, bytes and file contents: the key of every tokenization cache."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            h.update(str(part.name).encode())
            with open(part, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        else:
            h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def tokenizer_for(folder: Path | None, training_texts: Callable[[], list[str]], vocab_size: int = 8000,
                  lowercase: bool = True, cache_dir: str | Path | None = None) -> BertTokenizer:
    """The tokenizer saved in ``folder``; without one, a WordPiece vocabulary trained on ``training_texts()``
    (the training split only), cached under ``<cache_dir>/tokenizers/<content hash>``.

    The texts are read only when a vocabulary must be trained. Processes started together (torchrun, SLURM)
    train it once under a file lock; the others load it.
    """
    if folder is not None:
        return load_tokenizer(folder)
    texts = training_texts()
    key = content_hash("wordpiece", str(vocab_size), str(lowercase), *texts)
    cached = Path(cache_dir) / "tokenizers" / key if cache_dir else None
    with cache_lock(cached):  # processes started together (torchrun, SLURM) train it once; the others load it
        if cached is not None and (cached / "tokenizer.json").is_file():
            try:
                return load_tokenizer(cached)
            except TokenizerError as err:  # a damaged or foreign file in the cache: trained again below
                log.warning("cached tokenizer %s is damaged (%s); it is removed and trained again", cached, err)
                shutil.rmtree(cached, ignore_errors=True)
        log.info("training a WordPiece tokenizer (vocab %d) on %d training texts", vocab_size, len(texts))
        tokenizer = train_wordpiece(texts, vocab_size=vocab_size, lowercase=lowercase)
        if cached is not None:
            tmp = cached.with_name(cached.name + f".tmp{os.getpid()}-{id(tokenizer)}")
            tokenizer.save(tmp)
            try:
                tmp.rename(cached)
            except OSError:  # another process won the race (a file system without locks): same content
                shutil.rmtree(tmp, ignore_errors=True)
    return tokenizer
