"""Tokenizers of every encoder family through the ``tokenizers`` library: load a checkpoint's, or train one for
scratch models (WordPiece, byte-level BPE or Unigram: :mod:`bertlab.data.vocab`).

One wrapper, :class:`EncoderTokenizer`, serves BERT's WordPiece, RoBERTa's
byte-level BPE, XLM-R's SentencePiece Unigram and any other ``tokenizer.json``:

- the special tokens are found by role (cls, sep, pad, mask, unk): from ``tokenizer_config.json`` /
  ``special_tokens_map.json`` when the folder has them, else from the vocabulary (``[CLS]`` … or ``<s>`` …);
- the templates (``[CLS] A [SEP] B [SEP]``, ``<s> A </s></s> B </s>``) are the tokenizer's own post-processor's
  (:mod:`bertlab.data.templates`); callers that build sequences from id lists (QA windows, pre-training pairs, CLM
  segments) call :meth:`EncoderTokenizer.build_inputs`, and budgets ask :meth:`EncoderTokenizer.num_special_tokens`;
- encodings keep what alignment needs: char offsets into the original text (QA), word ids (NER, whole-word
  masking), and type ids exactly as the post-processor gives them (all 0 for RoBERTa and XLM-R).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer, processors

from bertlab.data.spm import SPM_NAME, tokenizer_from_spm_folder
from bertlab.data.templates import Template, template_of
from bertlab.data.vocab import KINDS, SPECIAL_TOKENS, bert_template, build_vocabulary, wordpiece_from_vocab
from bertlab.runtime.errors import TokenizerError, user_error_types
from bertlab.runtime.files import CACHE_FIX, cache_lock, write_failure, write_failure_message
from bertlab.runtime.model_folders import auto_from_pretrained
from bertlab.runtime.records import json_kind

log = logging.getLogger(__name__)

__all__ = ["KINDS", "SPECIAL_TOKENS", "EncoderTokenizer", "TokenizerError", "content_hash",
           "holds_tokenizer", "load_tokenizer", "tokenizer_for", "train_tokenizer", "train_wordpiece",
           "wordpiece_from_vocab"]

ROLES = ("cls", "sep", "pad", "mask", "unk")
# Where a role is looked up when the folder's configuration does not name it: BERT's names, then RoBERTa's.
_ROLE_CONFIG_KEYS = {"cls": ("cls_token", "bos_token"), "sep": ("sep_token", "eos_token"), "pad": ("pad_token",),
                     "mask": ("mask_token",), "unk": ("unk_token",)}
_ROLE_VOCAB = {"cls": ("[CLS]", "<s>"), "sep": ("[SEP]", "</s>"), "pad": ("[PAD]", "<pad>"),
               "mask": ("[MASK]", "<mask>"), "unk": ("[UNK]", "<unk>")}
# HF writes this for "no limit known" (transformers' VERY_LARGE_INTEGER): not a model length.
_NO_LIMIT = 10**9
_BYTE_SPACE = "\u0120"  # "Ġ": byte-level BPE's mark of a leading space



def _token_text(value: Any) -> str | None:
    """A special token as ``tokenizer_config.json`` / ``special_tokens_map.json`` write it: a string, or an
    ``AddedToken`` dict with its ``content``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _find(node: Any, kind: str) -> list[dict[str, Any]]:
    """Every component of type ``kind`` in a pre-tokenizer / post-processor spec (``Sequence`` nests them)."""
    if isinstance(node, dict):
        found = [node] if node.get("type") == kind else []
        return found + [x for v in node.values() for x in _find(v, kind)]
    if isinstance(node, list):
        return [x for v in node for x in _find(v, kind)]
    return []


def _lowercases(spec: dict[str, Any]) -> bool:
    """Whether a tokenizer.json's normalizer lower-cases: a ``Lowercase`` step, or ``BertNormalizer``'s option."""
    normalizer = spec.get("normalizer")
    return bool(_find(normalizer, "Lowercase")) or any(n.get("lowercase") for n in _find(normalizer, "BertNormalizer"))


def _with_prefix_space(tokenizer: Tokenizer, value: bool) -> Tokenizer | None:
    """A copy of a byte-level tokenizer whose ``ByteLevel`` / ``RobertaProcessing`` steps add (or not) a space
    before the first word, as ``add_prefix_space`` says; None when nothing would change (not byte-level, or
    already so)."""
    spec = json.loads(tokenizer.to_str())
    parts = [*_find(spec.get("pre_tokenizer"), "ByteLevel"), *_find(spec.get("post_processor"), "ByteLevel"),
             *_find(spec.get("post_processor"), "RobertaProcessing")]
    if not _find(spec.get("pre_tokenizer"), "ByteLevel") or all(p.get("add_prefix_space") == value for p in parts):
        return None
    for part in parts:
        part["add_prefix_space"] = value
    return Tokenizer.from_str(json.dumps(spec))


@dataclass
class EncoderTokenizer:
    """A ``tokenizers.Tokenizer`` with its special tokens found by role and its template read, padding and
    truncation off. ``config`` is the folder's ``tokenizer_config.json`` (over ``special_tokens_map.json``), empty
    for a tokenizer trained here.

    Attributes set on creation: ``cls_id``, ``sep_id``, ``pad_id`` (never None), ``mask_id`` and ``unk_id`` (None
    when the tokenizer has no such token), ``special_ids``, ``roles`` (role → token text), ``template``
    (:class:`bertlab.data.templates.Template`), ``model_max_length`` (None when the folder does not say),
    ``kind`` (the model: ``WordPiece``, ``BPE``, ``Unigram``, ``WordLevel``).
    """

    tokenizer: Tokenizer
    do_lower_case: bool = True
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Fixed padding/truncation in a shipped tokenizer.json (the MiniLM package pads and truncates at 128)
        # would hide padding masks and cut QA windows: bertlab pads per batch and windows itself.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.config = dict(self.config or {})
        prefix_space = self.config.get("add_prefix_space")
        if isinstance(prefix_space, bool):  # as HF's fast tokenizers do: the folder's setting wins
            self.tokenizer = _with_prefix_space(self.tokenizer, prefix_space) or self.tokenizer
        spec = json.loads(self.tokenizer.to_str())
        self.kind = str(spec.get("model", {}).get("type", ""))
        vocab = self.tokenizer.get_vocab()
        unk = spec.get("model", {}).get("unk_token")
        if isinstance(unk, str) and unk not in vocab:
            # tokenizers would fail on the first unknown word ("Missing [UNK] token from the vocabulary").
            raise TokenizerError(f"the tokenizer's {self.kind} model names {unk!r} as its unknown token, but its "
                                 f"vocabulary of {len(vocab)} tokens has no such token: every word it cannot split "
                                 "would fail to encode")
        self.roles = {role: self._role(role, vocab, spec) for role in ROLES}
        if self.tokenizer.post_processor is None and self.roles["cls"] and self.roles["sep"]:
            self.tokenizer.post_processor = _default_template(self.roles["cls"], self.roles["sep"], vocab)
        self.template: Template = template_of(self.tokenizer)
        ids = {role: vocab[token] if token is not None else None for role, token in self.roles.items()}
        # A tokenizer that names no cls/sep: the template's first and last special token play the part.
        if ids["cls"] is None and self.template.prefix:
            ids["cls"] = self.template.prefix[0]
        if ids["sep"] is None and self.template.suffix:
            ids["sep"] = self.template.suffix[-1]
        missing = [role for role in ("pad", "cls", "sep") if ids[role] is None]
        if missing:
            raise TokenizerError(
                f"the tokenizer has no {' / '.join(missing)} token (looked in tokenizer_config.json, "
                f"special_tokens_map.json, the template and the vocabulary for {[_ROLE_VOCAB[r] for r in missing]}): "
                "an encoder tokenizer needs them; name them in tokenizer_config.json (e.g. \"pad_token\": \"<pad>\")")
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            ids["pad"], ids["unk"], ids["cls"], ids["sep"], ids["mask"])
        self.special_ids = frozenset({i for i in ids.values() if i is not None}
                                     | {*self.template.prefix, *self.template.suffix, *self.template.pair_middle})
        limit = self.config.get("model_max_length")
        self.model_max_length = int(limit) if isinstance(limit, int | float) and 0 < limit < _NO_LIMIT else None
        self._truncated: dict[tuple[int, str], EncoderTokenizer] = {}  # truncated(): one copy per setting
        self._words: Tokenizer | None = None

    def _role(self, role: str, vocab: dict[str, int], spec: dict[str, Any]) -> str | None:
        for key in _ROLE_CONFIG_KEYS[role]:
            token = _token_text(self.config.get(key))
            if token is not None and token in vocab:
                return token
        for token in _ROLE_VOCAB[role]:
            if token in vocab:
                return token
        model_unk = spec.get("model", {}).get("unk_token")
        if role == "unk" and isinstance(model_unk, str) and model_unk in vocab:
            return model_unk
        if role == "unk" and spec.get("model", {}).get("unk_id") is not None:  # Unigram names its unk by id
            return self.tokenizer.id_to_token(int(spec["model"]["unk_id"]))
        return None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    @property
    def has_token_types(self) -> bool:
        """Whether the template gives any position a type id other than 0 (BERT: yes; RoBERTa, XLM-R: no)."""
        return self.template.has_types

    def num_special_tokens(self, pair: bool = False) -> int:
        """Special tokens a single sequence (BERT, RoBERTa: 2) or a pair (BERT 3, RoBERTa / XLM-R 4) costs."""
        return self.template.num_pair if pair else self.template.num_single

    def build_inputs(self, a: Sequence[int], b: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
        """``(input_ids, token_type_ids)`` of id lists without special tokens, wrapped as the tokenizer's own
        template wraps text (``[CLS] A [SEP] B [SEP]``, ``<s> A </s></s> B </s>``); an empty ``b`` gives A alone."""
        return self.template.pair(a, b)

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

    def encode_words_batch(self, words: Sequence[Sequence[str]], add_special_tokens: bool = True):
        """Pre-split words (CoNLL): ``word_ids`` map every piece back to its word. A byte-level BPE tokenizer reads
        each word with its leading space (``add_prefix_space``), as in running text: without it "world" alone
        and " world" in a sentence are different pieces (HF asks for ``add_prefix_space=True`` here too)."""
        return self._words_pipeline().encode_batch([list(w) for w in words], is_pretokenized=True,
                                        add_special_tokens=add_special_tokens)

    def continuation_table(self) -> np.ndarray:
        """(vocab_size,) bool: True for pieces that continue the word before them, by the tokenizer's own marking
        of words (WordPiece: the model's continuing-subword prefix, ``##``; SentencePiece / ``Metaspace``: pieces
        not starting with ``▁``; byte-level BPE: pieces not starting with ``Ġ``). For ids alone (prepared
        corpora); where encodings are at hand, words come from ``word_ids`` (exact for every kind)."""
        spec = json.loads(self.tokenizer.to_str())
        model, pre = spec.get("model", {}), spec.get("pre_tokenizer")
        prefix = model.get("continuing_subword_prefix") or ("##" if self.kind == "WordPiece" else None)
        metaspace = _find(pre, "Metaspace")
        if prefix:
            def continues(token: str) -> bool:
                return token.startswith(prefix)
        elif metaspace:
            mark = metaspace[0].get("replacement", "\u2581")

            def continues(token: str) -> bool:
                return not token.startswith(mark)
        elif _find(pre, "ByteLevel"):
            def continues(token: str) -> bool:
                return not token.startswith(_BYTE_SPACE)
        else:
            def continues(token: str) -> bool:
                return False
        table = np.zeros(self.vocab_size, dtype=bool)
        for token, idx in self.tokenizer.get_vocab().items():
            if idx < len(table) and idx not in self.special_ids:
                table[idx] = continues(token)
        return table

    def truncated(self, max_length: int, strategy: str = "longest_first") -> EncoderTokenizer:
        """A tokenizer like this one whose encodings are cut to ``max_length`` tokens (specials included), the
        overflow of each in ``Encoding.overflowing``. This tokenizer itself never truncates: the copy (one per
        setting, kept) holds the setting, so no caller sees another's truncation."""
        key = (int(max_length), strategy)
        if key not in self._truncated:
            inner = Tokenizer.from_str(self.tokenizer.to_str())
            inner.enable_truncation(key[0], strategy=strategy)
            copy = object.__new__(type(self))
            copy.__dict__.update(self.__dict__, tokenizer=inner, _truncated={}, _words=None)
            self._truncated[key] = copy
        return self._truncated[key]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def hf_config(self) -> dict[str, Any]:
        """The ``tokenizer_config.json`` :meth:`save` writes: the family's tokenizer class (the folder's own when
        it named one) and its special tokens, so that HF's AutoTokenizer loads the same tokenizer."""
        roles = {f"{role}_token": self.tokenizer.id_to_token(getattr(self, f"{role}_id"))
                 for role in ("unk", "sep", "pad", "cls", "mask") if getattr(self, f"{role}_id") is not None}
        config: dict[str, Any] = {"tokenizer_class": self.config.get("tokenizer_class") or self._tokenizer_class()}
        config["do_lower_case"] = self.do_lower_case  # every kind: a reloaded vocabulary lower-cases as it did
        if self.kind != "WordPiece":
            config.update(bos_token=roles["cls_token"], eos_token=roles["sep_token"])
            byte_level = _find(json.loads(self.tokenizer.to_str()).get("pre_tokenizer"), "ByteLevel")
            if byte_level:
                config.update(add_prefix_space=bool(byte_level[0].get("add_prefix_space")), trim_offsets=True)
        return {**config, **roles, "model_max_length": self.model_max_length or 512}

    def save_for_transformers(self, directory: str | Path, words: bool = False, token_types: bool = True) -> None:
        """The tokenizer files of an export (:meth:`save`'s files), written so that transformers' ``AutoTokenizer``
        tokenizes exactly as bertlab does: ``tokenizer.json`` holds the very pipeline bertlab runs on the model's
        inputs, and ``tokenizer_config.json`` names transformers' generic fast tokenizer
        (``PreTrainedTokenizerFast``), which runs that file as it is. A family's own class would not: transformers 5
        rebuilds RoBERTa's, XLM-R's, BERT's pipeline from the vocabulary alone (a normalizer dropped, a whitespace
        split added, ``add_prefix_space`` from its default).

        ``words``: the model reads pre-split words (token classification); bertlab reads each word with its leading
        space (:meth:`encode_words_batch`), so the pipeline written is that one and ``add_prefix_space`` says so, for
        ``is_split_into_words=True`` and for raw text alike. ``token_types``: the model takes ``token_type_ids``;
        without them (DistilBERT, ModernBERT, DeBERTa-v3) ``model_input_names`` leaves them out, as the model's
        ``forward`` does."""
        pipeline = self._words_pipeline() if words else self.tokenizer
        byte_level = _find(json.loads(pipeline.to_str()).get("pre_tokenizer"), "ByteLevel")
        config = {**self.config, "tokenizer_class": "PreTrainedTokenizerFast"}
        if byte_level:
            config["add_prefix_space"] = bool(byte_level[0].get("add_prefix_space"))
        if self.model_max_length is not None:
            config["model_max_length"] = self.model_max_length
        copy = EncoderTokenizer(Tokenizer.from_str(pipeline.to_str()), do_lower_case=self.do_lower_case,
                                config=config)
        copy.save(directory)
        names = ["input_ids", "token_type_ids", "attention_mask"] if token_types else ["input_ids", "attention_mask"]
        path = Path(directory) / "tokenizer_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "model_input_names": names}, indent=2) + "\n")

    def _words_pipeline(self) -> Tokenizer:
        """The pipeline pre-split words go through: a byte-level BPE one adds a space before each word."""
        if self._words is None:
            self._words = _with_prefix_space(self.tokenizer, True) or self.tokenizer
        return self._words

    def _tokenizer_class(self) -> str:
        cls = self.tokenizer.id_to_token(self.cls_id)
        if self.kind == "WordPiece":
            return "BertTokenizer"
        if cls == "<s>" and self.kind == "BPE" and _find(json.loads(self.tokenizer.to_str()).get("pre_tokenizer"),
                                                         "ByteLevel"):
            return "RobertaTokenizer"
        if cls == "<s>" and self.kind == "Unigram":
            return "XLMRobertaTokenizer"
        return "PreTrainedTokenizerFast"

    def save(self, directory: str | Path) -> None:
        """tokenizer.json + tokenizer_config.json + special_tokens_map.json (+ vocab.txt for WordPiece): loadable by
        bertlab and by HF AutoTokenizer as the same family's tokenizer."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.tokenizer.save(str(directory / "tokenizer.json"))
        if self.kind == "WordPiece":
            vocab = sorted(self.tokenizer.get_vocab().items(), key=lambda kv: kv[1])
            (directory / "vocab.txt").write_text("".join(tok + "\n" for tok, _ in vocab), encoding="utf-8")
        config = self.hf_config()
        (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
        special = {k: v for k, v in config.items() if k.endswith("_token")}
        if self.kind == "WordPiece":  # the five, in the order bertlab always wrote them
            special = {k: config[k] for k in ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
                       if k in config}
        (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")




def _default_template(cls: str, sep: str, vocab: dict[str, int]):
    """The template of a tokenizer.json without a post-processor: BERT's for ``[CLS]``-style specials, RoBERTa's
    (``<s> A </s></s> B </s>``) otherwise."""
    if cls == "[CLS]":
        return bert_template(vocab[cls], vocab[sep])
    return processors.RobertaProcessing((sep, vocab[sep]), (cls, vocab[cls]))


# tokenizer_config.json keys bertlab reads, and the JSON types they may have (null: as if absent).
_CONFIG_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "do_lower_case": ((bool,), "true or false"), "add_prefix_space": ((bool,), "true or false"),
    "model_max_length": ((int, float), "a number"),
    **{f"{role}_token": ((str, dict), "a token (a string, or an object with its content)")
       for role in ("cls", "sep", "pad", "mask", "unk", "bos", "eos")},
}


def _read_config(directory: Path) -> dict[str, Any]:
    """``tokenizer_config.json`` over ``special_tokens_map.json`` (either may be absent); a key bertlab reads
    with a value of another JSON type (``"do_lower_case": "no"``, which would read as true) is an error naming
    the file and the key."""
    config: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = directory / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError(f"a JSON object was expected, got {type(data).__name__}")
        except (OSError, ValueError) as err:
            raise TokenizerError(f"{path} could not be read: {type(err).__name__}: {err}") from None
        for key, (types, expected) in _CONFIG_TYPES.items():
            value = data.get(key)
            if value is not None and (not isinstance(value, types) or isinstance(value, bool) is not (bool in types)):
                raise TokenizerError(f"{path}: {key}={json.dumps(value)} is {json_kind(value)} where {expected} is "
                                     "expected. Correct the value or restore the file from a copy of the tokenizer")
        config.update(data)
    return config


def load_tokenizer(directory: str | Path) -> EncoderTokenizer:
    """The tokenizer of a folder (see :func:`_load`); every problem with it, also one the ``tokenizers`` library
    meets while the tokenizer is set up (a foreign or broken vocabulary), is a :class:`TokenizerError` naming the
    folder or its file, never a traceback."""
    directory = Path(directory)
    try:
        return _load(directory)
    except TokenizerError as err:
        text = str(err)
        raise TokenizerError(text if str(directory) in text else f"{directory}: {text}") from None
    except Exception as err:  # the tokenizers library raises plain Exceptions; a KeyError of a foreign vocabulary
        if isinstance(err, user_error_types()):
            raise
        raise TokenizerError(
            f"{directory}: its tokenizer cannot be used ({type(err).__name__}: {err}): its files are damaged or "
            "not those of an encoder's tokenizer. Restore them from a copy of the model, or pass "
            "model.tokenizer=<a folder with a good tokenizer.json or vocab.txt>") from None


def _load(directory: Path) -> EncoderTokenizer:
    """``tokenizer.json`` when present, else ``vocab.txt`` (WordPiece, lower-casing as the checkpoint says), else
    the slow tokenizer files HF's AutoTokenizer converts (``vocab.json`` + ``merges.txt``, a SentencePiece
    ``*.model``; a DeBERTa-v3 ``spm.model`` is converted by
    :mod:`bertlab.data.spm`, exact to SentencePiece). The special tokens' roles, ``model_max_length`` and ``add_prefix_space`` come from
    ``tokenizer_config.json`` / ``special_tokens_map.json`` when the folder has them.

    Any file that cannot be read as such (damaged, truncated, not JSON, unreadable) is a :class:`TokenizerError`
    naming it."""
    config = _read_config(directory)
    lowercase = config.get("do_lower_case")
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
        spec = json.loads(tokenizer.to_str())
        if lowercase is None:  # WordPiece folders are uncased unless they say so; others as their normalizer does
            lowercase = spec.get("model", {}).get("type") == "WordPiece" or _lowercases(spec)
        return EncoderTokenizer(tokenizer, do_lower_case=bool(lowercase), config=config)
    if (directory / SPM_NAME).is_file():  # DeBERTa-v3's hub folders: a SentencePiece model only
        tokenizer, spm_lowercase = tokenizer_from_spm_folder(directory)
        return EncoderTokenizer(tokenizer, do_lower_case=spm_lowercase, config=config)
    if vocab_txt.is_file():
        lowercase = bool(lowercase if lowercase is not None else True)
        try:
            return EncoderTokenizer(wordpiece_from_vocab(vocab_txt, lowercase), do_lower_case=lowercase, config=config)
        except (OSError, UnicodeDecodeError) as err:
            raise TokenizerError(f"{vocab_txt} could not be read: {type(err).__name__}: {err}") from None
    slow = [p.name for p in directory.glob("*") if p.name in ("vocab.json", "merges.txt") or p.suffix == ".model"]
    if slow:
        return EncoderTokenizer(_converted(directory, slow), do_lower_case=bool(lowercase), config=config)
    raise TokenizerError(f"no tokenizer in {directory}: looked for tokenizer.json, vocab.txt, vocab.json + merges.txt "
                         "and a SentencePiece *.model")


def holds_tokenizer(directory: str | Path) -> bool:
    """Whether :func:`load_tokenizer` finds a tokenizer's files in ``directory`` (it may still find them damaged)."""
    directory = Path(directory)
    return any((directory / name).is_file() for name in ("tokenizer.json", "vocab.txt", "vocab.json")) or \
        any(directory.glob("*.model"))


def _converted(directory: Path, files: list[str]) -> Tokenizer:
    """A folder with only slow-tokenizer files: HF's AutoTokenizer converts them (offline) to a fast tokenizer."""
    try:  # a folder whose files name code of their own is refused (TokenizerError), never run
        converted = auto_from_pretrained("AutoTokenizer", directory, TokenizerError)
        backend = converted.backend_tokenizer
    except TokenizerError:
        raise
    except Exception as err:  # transformers or sentencepiece missing, or files it cannot read
        raise TokenizerError(
            f"{directory} holds no tokenizer.json, only {sorted(files)}, and converting them with transformers' "
            f"AutoTokenizer failed ({type(err).__name__}: {err}). Install transformers (and sentencepiece for a "
            "*.model file), or save the tokenizer as tokenizer.json (AutoTokenizer.from_pretrained(folder)"
            ".save_pretrained(folder))") from None
    return Tokenizer.from_str(backend.to_str())


def train_tokenizer(texts: Iterable[str], kind: str = "wordpiece", vocab_size: int = 8000, lowercase: bool = True,
                    min_frequency: int = 2) -> EncoderTokenizer:
    """A vocabulary of ``kind`` (``wordpiece`` | ``bpe`` | ``unigram``, :mod:`bertlab.data.vocab`) trained on
    ``texts``; deterministic. Call it with the training split only: a vocabulary fit on validation or test text
    leaks them."""
    if kind not in KINDS:
        raise TokenizerError(f"model.tokenizer_kind={kind!r} is not a vocabulary kind bertlab trains; use one of "
                             f"{', '.join(KINDS)} (wordpiece: BERT, bpe: RoBERTa's byte-level BPE, unigram: XLM-R's "
                             "SentencePiece)")
    # 512: the positions of bertlab's scratch encoders, and what a saved scratch tokenizer has always declared.
    return EncoderTokenizer(build_vocabulary(kind, texts, vocab_size, lowercase, min_frequency),
                            do_lower_case=lowercase, config={"model_max_length": 512})


def train_wordpiece(texts: Iterable[str], vocab_size: int = 8000, lowercase: bool = True,
                    min_frequency: int = 2) -> EncoderTokenizer:
    """Train a BERT WordPiece tokenizer (specials first: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4); see
    :func:`bertlab.data.vocab.build_wordpiece` for why it is deterministic."""
    return train_tokenizer(texts, "wordpiece", vocab_size, lowercase, min_frequency)


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
                  lowercase: bool = True, cache_dir: str | Path | None = None,
                  kind: str = "wordpiece") -> EncoderTokenizer:
    """The tokenizer saved in ``folder``; without one, a vocabulary of ``kind`` (``model.tokenizer_kind``:
    wordpiece, bpe or unigram) trained on ``training_texts()`` (the training split only), cached under
    ``<cache_dir>/tokenizers/<content hash>`` (a WordPiece vocabulary under the key it always had).

    The texts are read only when a vocabulary must be trained. Processes started together (torchrun, SLURM)
    train it once under a file lock; the others load it.
    """
    if folder is not None:
        return load_tokenizer(folder)
    if kind not in KINDS:
        train_tokenizer([], kind)  # the error naming the kinds, before any text is read
    texts = training_texts()
    key = content_hash(kind, str(vocab_size), str(lowercase), *texts)
    cached = Path(cache_dir) / "tokenizers" / key if cache_dir else None
    with cache_lock(cached):  # processes started together (torchrun, SLURM) train it once; the others load it
        if cached is not None and (cached / "tokenizer.json").is_file():
            try:
                return load_tokenizer(cached)
            except TokenizerError as err:  # a damaged or foreign file in the cache: trained again below
                log.warning("cached tokenizer %s is damaged (%s); it is removed and trained again", cached, err)
                shutil.rmtree(cached, ignore_errors=True)
        log.info("training a %s tokenizer (vocab %d) on %d training texts", kind, vocab_size, len(texts))
        tokenizer = train_tokenizer(texts, kind, vocab_size=vocab_size, lowercase=lowercase)
        if cached is not None:
            tmp = cached.with_name(cached.name + f".tmp{os.getpid()}-{id(tokenizer)}")
            try:
                tokenizer.save(tmp)
            except Exception as err:  # a full or read-only cache disk: this run goes on, uncached
                failure = write_failure(err)
                if failure is None:
                    raise
                shutil.rmtree(tmp, ignore_errors=True)
                log.warning("tokenizer not cached: %s. The run goes on without the cache",
                            write_failure_message(cached, "the cached tokenizer", failure[0], CACHE_FIX))
                return tokenizer
            try:
                tmp.rename(cached)
            except OSError:  # another process won the race (a file system without locks): same content
                shutil.rmtree(tmp, ignore_errors=True)
    return tokenizer
