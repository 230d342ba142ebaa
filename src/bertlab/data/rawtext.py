"""Raw-text corpora for pre-training: documents as lists of sentences.

Two formats:

* **plain text** (the original BERT input format): documents separated by blank lines (a line holding only
  whitespace counts as blank); each non-blank line is one sentence or a paragraph, which
  :func:`split_sentences` splits further (a one-sentence line stays one sentence).
* **WikiText** (``wiki.*.tokens``): an article starts at a `` = Title = `` line (one ``=`` each side),
  `` = = Sub = = `` lines are section headings (dropped, not new articles), paragraphs are separated by
  lines holding a single space. An article, all its paragraphs, is one document. The text stays as WikiText
  tokenized it (``@-@``, ``<unk>``, spaced punctuation); titles and headings are not sentences.

Errors name the file: a missing file raises ``FileNotFoundError``, bytes that are not UTF-8 raise
:class:`~bertlab.runtime.errors.DataError` (a ``ValueError``) with the line number, a corpus without any sentence
raises ``DataError``: the command lines print them as one paragraph, never a traceback.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from bertlab.runtime.errors import DataError

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

# ----------------------------------------------------------------------------------------------------
# Sentence splitting
# ----------------------------------------------------------------------------------------------------

# Words whose trailing period is (almost always) an abbreviation, compared lower-cased without the period.
# "no" is deliberately absent ("I said no. Then ..."); "etc." is kept although it can end a sentence.
ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "st", "mt", "ft", "prof", "jr", "sr", "rev", "hon", "gen", "col", "lt",
        "sgt", "capt", "cmdr", "gov", "sen", "rep", "pres", "vs", "etc", "e.g", "i.e", "cf", "al", "approx",
        "ca", "inc", "ltd", "co", "corp", "dept", "fig", "vol", "ed", "eds", "jan", "feb", "mar", "apr",
        "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    }
)  # fmt: skip

# Abbreviations only before a number: "No. 2" is one, "I said no. Then" is a boundary.
_NUMBER_ABBREVIATIONS = frozenset({"no", "nos", "pp", "art"})

# End punctuation, closing quotes/brackets glued to it, then whitespace. Whether it is a boundary is
# decided by what follows (uppercase, digit, quote) and what precedes (abbreviation, initial).
_CANDIDATE = re.compile(r"""[.!?]+["'”’»)\]]*(\s+)""")
_OPENING_QUOTES = "\"'“‘«"
_OPENERS = "\"'“‘«([{"
_CLOSERS = "\"'”’»)]}"
# "U.S", "e.g", "i.e", "a.m": letters joined by periods (the final period is the candidate boundary).
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")


def _is_abbreviation(text: str, punct_start: int, follower: str) -> bool:
    """True when the '.' at ``punct_start`` ends an abbreviation or a single-letter initial."""
    if text[punct_start] != "." or text[punct_start : punct_start + 2] == "..":
        return False
    before = text[:punct_start]
    if not before or before[-1].isspace():
        return False  # a free-standing period, as WikiText writes it ("sea . It"): a real boundary
    word = before.split()[-1].lstrip(_OPENERS)
    if len(word) == 1 and word.isalpha():
        return True  # an initial: "H. americanus", "J. R. R. Tolkien"
    if follower.isdigit() and word.lower() in _NUMBER_ABBREVIATIONS:
        return True  # "No. 2 Squadron", "pp. 12"
    return word.lower() in ABBREVIATIONS or _DOTTED.fullmatch(word) is not None


def _starts_sentence(char: str) -> bool:
    return char.isupper() or char.isdigit() or char in _OPENING_QUOTES


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with a few rules, good enough for NSP chunking.

    A boundary is end punctuation (``.``, ``!``, ``?``, repeated or not, optionally followed by closing
    quotes or brackets) followed by whitespace and then an uppercase letter, a digit or an opening quote.
    A period after a common abbreviation (Mr., Dr., St., e.g., i.e., U.S., etc., see ``ABBREVIATIONS``)
    or a single-letter initial is not a boundary. WikiText's detached punctuation (``word . Next``) splits
    like ordinary text; a detached ``"`` after the punctuation closes the sentence when the sentence has
    an unclosed ``"`` (``he said " Go . " Then``), and a piece made only of quotes or brackets joins the
    sentence before it. Returns stripped, non-empty sentences; ``[]`` for blank text.
    """
    sentences: list[str] = []
    start = 0
    for match in _CANDIDATE.finditer(text):
        if match.start() < start:
            continue  # inside a detached closing quote already taken below
        end, nxt = match.start(1), match.end()  # the sentence ends at `end`, the next one starts at `nxt`
        if nxt >= len(text) or _is_abbreviation(text, match.start(), text[nxt]):
            continue
        if text[nxt] == '"' and text[start:end].count('"') % 2 == 1:
            # A detached quote closing an open one (WikiText writes `" Go . " Then`): it belongs to this
            # sentence, and the boundary, if any, comes after it.
            after = re.match(r"\s+", text[nxt + 1 :])
            if after is None or nxt + 1 + after.end() >= len(text):
                continue
            end, nxt = nxt + 1, nxt + 1 + after.end()
        if not _starts_sentence(text[nxt]):
            continue
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = nxt
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    # A stray closing quote or bracket (`... end . "` at the end of a WikiText paragraph) is no sentence.
    merged: list[str] = []
    for sentence in sentences:
        if merged and not sentence.strip(_CLOSERS + " "):
            merged[-1] = f"{merged[-1]} {sentence}"
        else:
            merged.append(sentence)
    return merged


# ----------------------------------------------------------------------------------------------------
# Reading files
# ----------------------------------------------------------------------------------------------------


def _lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """(1-based line number, decoded line without its line ending); errors name the file and line.

    Streams the file (one line in memory at a time), so a corpus larger than memory can be read. Lines
    break at LF, CR LF and CR, as ``bytes.splitlines`` does, so line numbers match what an editor shows.
    """
    p = Path(path)
    if not p.is_file():
        if p.exists():
            raise IsADirectoryError(errno.EISDIR, "corpus path is not a file", str(p))
        raise FileNotFoundError(errno.ENOENT, "corpus file not found", str(p))
    number = 0
    with open(p, "rb") as f:
        for chunk in f:  # binary iteration breaks at LF only: a CR LF pair stays in one chunk
            if number == 0 and chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]  # a UTF-8 byte-order mark is not text
            for raw in chunk.splitlines() or [b""]:
                number += 1
                try:
                    yield number, raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise DataError(
                        f"{p}:{number}: not valid UTF-8 ({err.reason} at byte {err.start} of the line); "
                        "re-encode the file as UTF-8"
                    ) from None


def _one_line(line: str) -> list[str]:
    return [line]


def _iter_text_documents(path: PathLike, one_document: bool = False, split=split_sentences) -> Iterator[list[str]]:
    current: list[str] = []
    for _, line in _lines(path):
        if not line.strip():
            if current and not one_document:
                yield current
                current = []
            continue
        current.extend(split(line))
    if current:
        yield current


def _text_documents(path: PathLike, one_document: bool = False) -> list[list[str]]:
    return list(_iter_text_documents(path, one_document))


# The title is lazy so that "= = Sub = =" gives "= =" on both sides, not "= =" and "=".
_HEADING = re.compile(r"(=(?: =)*) (.*?\S) (=(?: =)*)")


def _heading_level(stripped: str) -> int:
    """1 for `` = Title = ``, 2 for `` = = Section = = ``, ...; 0 for a line that is not a heading."""
    m = _HEADING.fullmatch(stripped)
    if m is None or m.group(1) != m.group(3):
        return 0
    return m.group(1).count("=")


def _iter_wikitext_documents(path: PathLike, split=split_sentences) -> Iterator[list[str]]:
    return wikitext_documents((line for _, line in _lines(path)), split)


def wikitext_documents(lines: Iterable[str], split=split_sentences) -> Iterator[list[str]]:
    """WikiText lines → one document per `` = Title = `` article, each its lines passed through ``split``."""
    current: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue  # " " lines separate paragraphs; articles are delimited by titles, not by blanks
        level = _heading_level(stripped)
        if level == 1:
            if current:
                yield current
            current = []
        elif level == 0:
            current.extend(split(stripped))
        # level >= 2: a section heading inside the article, not a sentence
    if current:
        yield current


# WikiText's tokenisation marks: "1 @,@ 000", "well @-@ known", "3 @.@ 5"; <unk> stands for a rare word.
_WIKITEXT_MARKS = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), ("<unk>", ""))


def undo_wikitext_marks(text: str) -> str:
    """WikiText's joining marks undone (``well @-@ known`` → ``well-known``, ``1 @,@ 000`` → ``1,000``), ``<unk>``
    dropped and runs of whitespace made one space; punctuation stays spaced as WikiText wrote it."""
    for old, new in _WIKITEXT_MARKS:
        text = text.replace(old, new)
    return re.sub(r"\s+", " ", text).strip()


def _wikitext_documents(path: PathLike) -> list[list[str]]:
    return list(_iter_wikitext_documents(path))


def _require_nonempty(documents: list[list[str]], paths: Sequence[PathLike]) -> list[list[str]]:
    if not documents:
        names = ", ".join(str(p) for p in paths)
        raise DataError(f"empty corpus: no sentences in {names}: give the corpus text (documents separated by blank "
                        "lines, or WikiText articles)")
    return documents


def read_documents(path: PathLike) -> list[list[str]]:
    """Plain text → documents (split at blank lines), each a list of sentences. See the module docstring."""
    return _require_nonempty(_text_documents(path), [path])


def read_wikitext(path: PathLike) -> list[list[str]]:
    """WikiText-2/103 ``wiki.*.tokens`` → one document per article, each a list of sentences."""
    return _require_nonempty(_wikitext_documents(path), [path])


CorpusFormat = Literal["auto", "text", "wikitext"]


def _file_documents(path: PathLike, fmt: CorpusFormat, one_document_per_file: bool,
                    split) -> Iterator[list[str]]:
    if fmt == "wikitext" or (fmt == "auto" and Path(path).suffix == ".tokens"):
        return _iter_wikitext_documents(path, split)
    return _iter_text_documents(path, one_document=one_document_per_file, split=split)


def iter_corpus(
    paths: PathLike | Sequence[PathLike],
    fmt: CorpusFormat = "auto",
    one_document_per_file: bool = False,
    sentences: bool = True,
) -> Iterator[list[str]]:
    """The documents of :func:`read_corpus`, one at a time: memory holds one document, not the corpus.

    Same formats, order and errors as :func:`read_corpus`; the empty-corpus ``ValueError`` comes when the
    iteration ends without a single document. ``sentences=False`` yields each document as its lines
    (paragraphs) instead, not yet split: ``split_sentences`` on each line, concatenated, gives exactly the
    document of ``sentences=True`` (so the costly splitting can run in parallel workers).
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    if not paths:
        raise ValueError("read_corpus needs at least one file")
    if fmt not in ("auto", "text", "wikitext"):
        raise ValueError(f"unknown corpus format {fmt!r}: use 'auto', 'text' or 'wikitext'")
    any_document = False
    for path in paths:
        file_has_documents = False
        split = split_sentences if sentences else _one_line
        for doc in _file_documents(path, fmt, one_document_per_file, split):
            file_has_documents = any_document = True
            yield doc
        if not file_has_documents:
            log.warning("corpus file %s holds no sentences; skipped", path)
    if not any_document:
        _require_nonempty([], list(paths))


def read_corpus(
    paths: PathLike | Sequence[PathLike],
    fmt: CorpusFormat = "auto",
    one_document_per_file: bool = False,
) -> list[list[str]]:
    """Documents of many files, concatenated in the order given.

    ``fmt="auto"`` reads ``*.tokens`` files as WikiText and everything else as plain text.
    ``one_document_per_file=True`` (plain text only) makes each file one document, blank lines then only
    separating paragraphs. A file without sentences is skipped with a warning; a corpus without any
    raises ``ValueError`` naming the files. :func:`iter_corpus` gives the same documents one at a time.
    """
    return list(iter_corpus(paths, fmt, one_document_per_file))
