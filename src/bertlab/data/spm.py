"""A SentencePiece ``spm.model`` as a ``tokenizers.Tokenizer`` that encodes exactly as SentencePiece does.

DeBERTa-v3's hub folders ship only ``spm.model`` (a unigram model; no ``tokenizer.json``). It is read here once
and rebuilt as the ``tokenizers`` pipeline that gives SentencePiece's pieces, with DeBERTa's template around them:

- normalizer: the model's precompiled character map (``nmt_nfkc``: NFKC plus its whitespace and control-character
  rules), then SentencePiece's whitespace rules in its order: spaces stripped at both ends and runs of spaces
  collapsed (``remove_extra_whitespaces``), spaces written ``▁`` (``escape_whitespaces``), one ``▁`` before the
  text (``add_dummy_prefix``, never before an empty text);
- pre-tokenizer: the text split before each ``▁`` (pieces never hold an inner ``▁`` when the model was trained
  with ``split_by_whitespace``, so each word's best segmentation is the text's), user-defined pieces isolated
  (SentencePiece always emits them whole);
- model: Unigram with the model's pieces and scores in their order (ids are SentencePiece's ids);
- post-processor ``[CLS] A [SEP]`` / ``[CLS] A [SEP] B [SEP]`` (B with segment 1); special tokens (the model's
  control and unknown pieces, and ``[MASK]`` after the last piece when the model lacks it, as transformers adds
  it) are matched in the raw text as whole tokens, as transformers' tokenizer does.

The file is read with a small reader of protobuf's wire format: neither ``sentencepiece`` nor ``protobuf`` is
needed to load a folder (``sentencepiece`` only trains models, in the tests).
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import Unigram

from bertlab.runtime.errors import TokenizerError

SPM_NAME = "spm.model"
# SentencePiece piece types (sentencepiece_model.proto).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM = 1
# DeBERTa's special tokens by role (tokenizer_config.json may rename them).
DEBERTA_SPECIALS = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
                    "mask_token": "[MASK]"}


@dataclass
class SpmModel:
    """What a SentencePiece model file says that encoding depends on."""

    pieces: list[tuple[str, float, int]] = field(default_factory=list)  # (piece, score, type), by id
    model_type: int = UNIGRAM
    unk_id: int = 0
    byte_fallback: bool = False
    split_by_whitespace: bool = True
    treat_whitespace_as_suffix: bool = False
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of one protobuf message: varints as ints, the rest as raw bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, value


def read_spm_model(path: str | Path) -> SpmModel:
    """Parse a SentencePiece model file (``ModelProto``); a TokenizerError names a file that is not one."""
    path = Path(path)
    try:
        buf = path.read_bytes()
        model = SpmModel()
        for number, value in _fields(buf):
            if number == 1:  # SentencePiece: piece (1), score (2, float), type (3)
                piece, score, kind = "", 0.0, NORMAL
                for n, v in _fields(value):
                    if n == 1:
                        piece = v.decode("utf-8")
                    elif n == 2:
                        score = struct.unpack("<f", v)[0]
                    elif n == 3:
                        kind = v
                model.pieces.append((piece, score, kind))
            elif number == 2:  # TrainerSpec
                for n, v in _fields(value):
                    if n == 3:
                        model.model_type = v
                    elif n == 40:
                        model.unk_id = v
                    elif n == 35:
                        model.byte_fallback = bool(v)
                    elif n == 22:
                        model.split_by_whitespace = bool(v)
                    elif n == 24:
                        model.treat_whitespace_as_suffix = bool(v)
            elif number == 3:  # NormalizerSpec
                for n, v in _fields(value):
                    if n == 2:
                        model.precompiled_charsmap = bytes(v)
                    elif n in (3, 4, 5):
                        setattr(model, {3: "add_dummy_prefix", 4: "remove_extra_whitespaces",
                                        5: "escape_whitespaces"}[n], bool(v))
    except (OSError, ValueError, IndexError, UnicodeDecodeError, struct.error) as err:
        raise TokenizerError(f"{path} could not be read as a SentencePiece model ({type(err).__name__}: {err}); "
                             "restore the file, or pass model.tokenizer=<a folder with tokenizer.json>") from None
    if not model.pieces:
        raise TokenizerError(f"{path} holds no pieces: not a SentencePiece model")
    if model.model_type != UNIGRAM:
        raise TokenizerError(f"{path} is a SentencePiece model of type {model.model_type} (BPE, word or char); "
                             "bertlab converts unigram models only (DeBERTa-v3's): give the folder a tokenizer.json")
    return model


def spm_tokenizer(model: SpmModel, specials: dict[str, str] | None = None, lowercase: bool = False,
                  split_by_punct: bool = False, added: dict[str, int] | None = None) -> Tokenizer:
    """The ``tokenizers.Tokenizer`` of a parsed model (module docstring). ``specials``: role → token
    (DeBERTa's by default); ``added``: tokens past the model's pieces with their ids (``added_tokens.json``)."""
    specials = {**DEBERTA_SPECIALS, **(specials or {})}
    tokenizer = Tokenizer(Unigram([(p, s) for p, s, _ in model.pieces], unk_id=model.unk_id,
                                  byte_fallback=model.byte_fallback))
    steps = [normalizers.Lowercase()] if lowercase else []
    if model.precompiled_charsmap:
        steps.append(normalizers.Precompiled(model.precompiled_charsmap))
    if model.remove_extra_whitespaces:  # SentencePiece's whitespace is the space alone (after the charsmap)
        steps += [normalizers.Replace(Regex(r"\A +| +\z"), ""), normalizers.Replace(Regex(" {2,}"), " ")]
    if model.escape_whitespaces:
        steps.append(normalizers.Replace(" ", "▁"))
    if model.add_dummy_prefix and not model.treat_whitespace_as_suffix:
        steps.append(normalizers.Prepend("▁"))
    tokenizer.normalizer = normalizers.Sequence(steps)
    splits = []
    if split_by_punct:
        splits.append(pre_tokenizers.Punctuation(behavior="isolated"))
    if model.split_by_whitespace and not model.treat_whitespace_as_suffix and model.escape_whitespaces:
        splits.append(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True))
    user_defined = [p for p, _, kind in model.pieces if kind == USER_DEFINED]
    if user_defined:
        pattern = "|".join(re.escape(p) for p in sorted(user_defined, key=len, reverse=True))
        splits.append(pre_tokenizers.Split(Regex(pattern), behavior="isolated"))
    if splits:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(splits)
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    # Special tokens: the model's control and unknown pieces, the roles' tokens, then any added tokens, by id.
    vocab_size = len(model.pieces)
    extra = dict(sorted((added or {}).items(), key=lambda kv: kv[1]))
    for token in specials.values():
        if tokenizer.token_to_id(token) is None and token not in extra:
            extra[token] = vocab_size + len(extra)
    known = [p for p, _, kind in model.pieces if kind in (CONTROL, UNKNOWN)] + list(specials.values())
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in dict.fromkeys(known)
                                  if tokenizer.token_to_id(t) is not None])
    for token, want in extra.items():
        tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False)])
        if tokenizer.token_to_id(token) != want:
            raise TokenizerError(f"added token {token!r} should have id {want} but the SentencePiece model has "
                                 f"{vocab_size} pieces: the folder's added_tokens.json does not fit its spm.model")
    cls, sep = specials["cls_token"], specials["sep_token"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, tokenizer.token_to_id(cls)), (sep, tokenizer.token_to_id(sep))])
    return tokenizer


def _json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise TokenizerError(f"{path} could not be read: {type(err).__name__}: {err}") from None
    return data if isinstance(data, dict) else {}


def tokenizer_from_spm_folder(directory: str | Path) -> tuple[Tokenizer, bool]:
    """A folder's ``spm.model`` (with its tokenizer_config.json, special_tokens_map.json and added_tokens.json
    when present) as (tokenizer, lower-cases)."""
    directory = Path(directory)
    config = _json(directory / "tokenizer_config.json")
    specials_map = _json(directory / "special_tokens_map.json")
    specials = {}
    for role in DEBERTA_SPECIALS:
        value = config.get(role, specials_map.get(role))
        if isinstance(value, dict):  # {"content": "[MASK]", ...}
            value = value.get("content")
        if isinstance(value, str):
            specials[role] = value
    added = {k: v for k, v in _json(directory / "added_tokens.json").items() if isinstance(v, int)}
    lowercase = bool(config.get("do_lower_case", False))
    model = read_spm_model(directory / SPM_NAME)
    return spm_tokenizer(model, specials, lowercase=lowercase, split_by_punct=bool(config.get("split_by_punct")),
                         added=added), lowercase
