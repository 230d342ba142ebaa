"""Reading prediction text before any model is loaded: the input formats, and the rule that splits raw text into
the words a tagging model labels.

Nothing here imports torch: ``python -m bertlab.predict --help`` and its argument checks use this module and
must answer at once.

The word rule (raw text given to a tagging model; a list of words is taken as it is):

1. Split at whitespace.
2. From each piece, split off the leading and the trailing run of punctuation and symbols (Unicode categories
   ``P*`` and ``S*``: ``. , ; : ! ? " ' “ ” ‘ ’ ( ) [ ] … $ % € + = @ #`` and the like). A run becomes one word
   per group of repeated characters: ``."`` gives ``.`` and ``"``, while ``...``, ``!!!`` and ``--`` stay one
   word each.
3. What stays on a word: punctuation inside it (``U.S``, ``don't``, ``e-mail``, ``3.5``, ``AT&T``); a sign or
   point right before a digit (``-3``, ``+44``, ``.500``); a trailing full stop after a single letter or a
   word with a full stop inside (``J.``, ``U.S.``, ``e.g.``, ``Ph.D.``), as CoNLL-2003 writes initials and
   abbreviations. Other abbreviations (``Inc.``, ``vs.``) lose their full stop: no list of them is kept.

Each word keeps its character offsets into the original text: ``text[start:end] == word``.
"""

from __future__ import annotations

import re
import unicodedata

FORMATS = ("auto", "text", "jsonl", "table", "conll", "squad")

_PIECE = re.compile(r"\S+")
_NUMBER_PREFIX = "+-\u2212."  # stays on a number it starts; \u2212 is the minus sign


def _is_mark(char: str) -> bool:
    """Punctuation (P*) or a symbol (S*)."""
    return unicodedata.category(char)[0] in "PS"


def _runs(piece: str, at: int) -> list[tuple[str, int]]:
    """A run of punctuation split into groups of repeated characters, with their offsets."""
    out = []
    for m in re.finditer(r"(.)\1*", piece, flags=re.DOTALL):
        out.append((m.group(), at + m.start()))
    return out


def split_words(text: str) -> list[tuple[str, int]]:
    """``(word, start offset in text)`` for each word of ``text`` by the rule in this module's docstring."""
    words: list[tuple[str, int]] = []
    for m in _PIECE.finditer(text):
        piece, at = m.group(), m.start()
        head = 0
        while head < len(piece) and _is_mark(piece[head]):
            head += 1
        while head and piece[head - 1] in _NUMBER_PREFIX and piece[head:head + 1].isdigit():
            head -= 1  # -3, +44, .500
        if head == len(piece):  # only punctuation and symbols: "--", "...", "“"
            words.extend(_runs(piece, at))
            continue
        tail = len(piece)
        while _is_mark(piece[tail - 1]):
            tail -= 1
        core = piece[head:tail]
        if piece[tail:tail + 1] == "." and ("." in core or (len(core) == 1 and core.isalpha())):  # U.S., J.
            tail += 1
            core += "."
        words.extend(_runs(piece[:head], at))
        words.append((core, at + head))
        words.extend(_runs(piece[tail:], at + tail))
    return words

# What prediction runs on (Predictor.from_run's ``backend``): auto takes what the folder holds (an ONNX export's
# gated int8 graph, else its fp32 graph, else PyTorch).
BACKENDS = ("auto", "torch", "onnx", "onnx-int8")
