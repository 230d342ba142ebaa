"""The rule that splits raw text into the words a tagging model labels (``bertlab.inference.text.split_words``):
punctuation and symbols come off the ends of whitespace-separated pieces, inner punctuation stays, and every word
keeps its offsets into the original text."""

from __future__ import annotations

import pytest

from bertlab.inference.text import split_words

CASES = {
    # trailing and leading punctuation
    "New York.": ["New", "York", "."],
    "Hello, world!": ["Hello", ",", "world", "!"],
    "(Berlin)": ["(", "Berlin", ")"],
    "Is it Rome?!": ["Is", "it", "Rome", "?", "!"],
    # quotes, ASCII and Unicode
    '"Paris," she said.': ['"', "Paris", ",", '"', "she", "said", "."],
    "“Zürich” and ‘Genève’": ["“", "Zürich", "”", "and", "‘", "Genève", "’"],
    "«Moskva»": ["«", "Moskva", "»"],
    # runs of one character stay one word
    "Wait... what": ["Wait", "...", "what"],
    "So…": ["So", "…"],
    "no -- yes!!!": ["no", "--", "yes", "!!!"],
    # punctuation inside a word stays
    "don't e-mail AT&T at 3.5": ["don't", "e-mail", "AT&T", "at", "3.5"],
    "Germany's Jean-Luc": ["Germany's", "Jean-Luc"],
    # abbreviations and initials keep their full stop; other words do not
    "the U.S. and e.g. Ph.D.,": ["the", "U.S.", "and", "e.g.", "Ph.D.", ","],
    "J. Smith visited Oslo.": ["J.", "Smith", "visited", "Oslo", "."],
    "(U.S.).": ["(", "U.S.", ")", "."],
    # symbols, signs and numbers
    "$100 and 50% or €5": ["$", "100", "and", "50", "%", "or", "€", "5"],
    "-3 +44 .500 −2": ["-3", "+44", ".500", "−2"],
    "won 6-3.": ["won", "6-3", "."],
    "#NLP @bertlab :)": ["#", "NLP", "@", "bertlab", ":", ")"],
    "great😀": ["great", "😀"],
    # whitespace of every kind separates; empty text has no words
    "a\tb\u00a0c\n d": ["a", "b", "c", "d"],
    "   ": [],
}


@pytest.mark.parametrize("text", CASES, ids=list(range(len(CASES))))
def test_words_and_offsets(text):
    words = split_words(text)
    assert [w for w, _ in words] == CASES[text]
    for word, start in words:
        assert text[start:start + len(word)] == word  # offsets slice back to the word
    starts = [s for _, s in words]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)


def test_words_of_any_text_cover_it_without_whitespace():
    text = " “Ann-Marie O'Neil,” (CEO of A.B.C. Ltd.) said: «It's 3.5% up»... — fine?! "
    words = split_words(text)
    assert "".join(w for w, _ in words) == "".join(text.split())
    assert all(text[s:s + len(w)] == w for w, s in words)
