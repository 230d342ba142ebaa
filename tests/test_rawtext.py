"""Raw-text corpus reading and sentence splitting for pre-training."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertlab.data.rawtext import (
    read_corpus,
    read_documents,
    read_wikitext,
    split_sentences,
    undo_wikitext_marks,
)

FIXTURES = Path(__file__).parent / "fixtures" / "rawtext"


# --------------------------------------------------------------------------------------------------
# split_sentences
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("It rained. We stayed in.", ["It rained.", "We stayed in."]),
        ("Stop! Who goes there? Nobody.", ["Stop!", "Who goes there?", "Nobody."]),
        ("Wait... Then it moved.", ["Wait...", "Then it moved."]),
        ("It was built in 1871. 1872 was quieter.", ["It was built in 1871.", "1872 was quieter."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("(See the map.) The road ends here.", ["(See the map.)", "The road ends here."]),
        ('She paused. "Go on," he said.', ["She paused.", '"Go on," he said.']),
        # abbreviations and initials are not boundaries
        ("Mr. Moll met Dr. Varga at St. Brannoc.", ["Mr. Moll met Dr. Varga at St. Brannoc."]),
        ("Mrs. Hale left. She was tired.", ["Mrs. Hale left.", "She was tired."]),
        (
            "Some towns, e.g. Oskel, closed. Others did not.",
            ["Some towns, e.g. Oskel, closed.", "Others did not."],
        ),
        ("Moss, lichen, i.e. Small plants.", ["Moss, lichen, i.e. Small plants."]),
        ("He moved to the U.S. In 1990 he returned.", ["He moved to the U.S. In 1990 he returned."]),
        ("Pots, nets etc. They sold everything.", ["Pots, nets etc. They sold everything."]),
        (
            "The lobster H. Gammarus is blue. It turns red.",
            ["The lobster H. Gammarus is blue.", "It turns red."],
        ),
        ("J. R. R. Tolkien wrote it.", ["J. R. R. Tolkien wrote it."]),
        (
            "He flew with No. 2 Squadron. I said no. Then he left.",
            ["He flew with No. 2 Squadron.", "I said no.", "Then he left."],
        ),
        # no split before lowercase or without whitespace
        ("It cost 0.5 dollars. ok then.", ["It cost 0.5 dollars. ok then."]),
        ("See example.com for more. Bye.", ["See example.com for more.", "Bye."]),
        # WikiText's tokenized form: detached punctuation, @.@ inside numbers
        (
            " It is large . The tower is 21 @.@ 5 metres tall . It was built in 1871 . ",
            ["It is large .", "The tower is 21 @.@ 5 metres tall .", "It was built in 1871 ."],
        ),
        ("called H. americanus . It may grow", ["called H. americanus .", "It may grow"]),
        # WikiText's detached quotes: closing when one is open, opening otherwise; never a sentence alone
        (
            'He said " Go home . " Then he left . " Why ? " she asked .',
            ['He said " Go home . "', "Then he left .", '" Why ? " she asked .'],
        ),
        ('He said " Go home . " he said .', ['He said " Go home . " he said .']),
        ('He said "Go home." "Why?" she asked.', ['He said "Go home."', '"Why?" she asked.']),
        ('It ended . Then he wrote " I am sorry . "', ["It ended .", 'Then he wrote " I am sorry . "']),
        ('He was my whole life . " ', ['He was my whole life . "']),
        ("  ", []),
        ("", []),
        ("No final punctuation", ["No final punctuation"]),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


# --------------------------------------------------------------------------------------------------
# plain text
# --------------------------------------------------------------------------------------------------


def test_read_documents_splits_at_blank_and_whitespace_lines():
    docs = read_documents(FIXTURES / "small_corpus.txt")
    assert docs == [
        [
            "The lighthouse at Corran Point was built in 1871.",
            "Its keeper, Mr. Albrecht Moll, kept a log of every ship that passed.",
            "He wrote in a small hand.",
            "Storms were marked with a red cross!",
        ],
        ["Dr. Ines Varga studied the moss of the northern valleys.", "She found 41 species in one summer."],
        [
            '"Nobody believed me," she said.',
            '"Then the samples came back."',
            "Her notes are kept in St. Brannoc library, e.g. the field diaries of 1903.",
        ],
        [
            "The tram line to Oskel closed in 1958.",
            "A bus route replaced it.",
            "Why did it close?",
            "The bridge over the canal had grown unsafe.",
        ],
    ]


def test_read_documents_handles_crlf_bom_and_missing_final_newline(tmp_path):
    path = tmp_path / "windows.txt"
    path.write_bytes(b"\xef\xbb\xbfFirst doc. Still first.\r\n\r\nSecond doc.")
    assert read_documents(path) == [["First doc.", "Still first."], ["Second doc."]]


def test_read_corpus_concatenates_files_in_order(tmp_path):
    (tmp_path / "a.txt").write_text("Alpha one.\n\nAlpha two.\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("Beta one.\nBeta one again.\n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("\n  \n", encoding="utf-8")
    paths = [tmp_path / "a.txt", tmp_path / "empty.txt", str(tmp_path / "b.txt")]
    assert read_corpus(paths) == [["Alpha one."], ["Alpha two."], ["Beta one.", "Beta one again."]]
    # one document per file: blank lines only separate paragraphs
    assert read_corpus(paths, one_document_per_file=True) == [
        ["Alpha one.", "Alpha two."],
        ["Beta one.", "Beta one again."],
    ]
    assert read_corpus(tmp_path / "b.txt") == [["Beta one.", "Beta one again."]]  # a single path


def test_read_corpus_auto_detects_wikitext(tmp_path):
    docs = read_corpus([FIXTURES / "wiki_sample.tokens", FIXTURES / "small_corpus.txt"])
    assert docs == read_wikitext(FIXTURES / "wiki_sample.tokens") + read_documents(
        FIXTURES / "small_corpus.txt"
    )
    with pytest.raises(ValueError, match="unknown corpus format"):
        read_corpus([FIXTURES / "small_corpus.txt"], fmt="csv")


# --------------------------------------------------------------------------------------------------
# WikiText
# --------------------------------------------------------------------------------------------------


def test_read_wikitext_one_document_per_article_without_headings():
    docs = read_wikitext(FIXTURES / "wiki_sample.tokens")
    assert docs == [
        [
            "The Corran Point Lighthouse is a <unk> tower on the west coast of the island .",
            "It was built in 1871 by the harbour board .",
            "The tower is 21 @.@ 5 metres ( 70 ft ) tall .",
            "The first keeper , Albrecht Moll , served for thirty years .",
            "His log survives in the town archive .",
            "The light was automated in 1962 .",
        ],
        [
            "The Oskel tram line was a narrow @-@ gauge tramway .",
            "It closed in 1958 ; a bus route replaced it .",
        ],
        [
            "Ines Varga studied the moss of the northern valleys .",
            "She found 41 species in one summer .",
        ],
    ]
    assert not any("=" in sentence for doc in docs for sentence in doc)


def test_read_wikitext_drops_articles_without_text(tmp_path):
    path = tmp_path / "wiki.test.tokens"
    path.write_text(
        " \n = Empty = \n \n = = Section = = \n \n = Full = \n \n Some text . \n", encoding="utf-8"
    )
    assert read_wikitext(path) == [["Some text ."]]


# --------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reader", [read_documents, read_wikitext, lambda p: read_corpus([p])])
def test_missing_file_names_the_path(tmp_path, reader):
    missing = tmp_path / "nowhere" / "corpus.txt"
    with pytest.raises(FileNotFoundError, match="corpus.txt") as info:
        reader(missing)
    assert info.value.filename == str(missing)


@pytest.mark.parametrize("reader", [read_documents, read_wikitext, lambda p: read_corpus([p])])
def test_non_utf8_names_file_and_line(tmp_path, reader):
    path = tmp_path / "latin1.txt"
    path.write_bytes("First line.\n\nCaf\u00e9 au lait.\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.txt:3: not valid UTF-8"):
        reader(path)


def test_empty_corpus_names_the_files(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty corpus.*empty.txt"):
        read_documents(empty)
    headings_only = tmp_path / "wiki.valid.tokens"
    headings_only.write_text(" \n = Title = \n \n = = Sub = = \n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty corpus.*wiki.valid.tokens"):
        read_wikitext(headings_only)
    with pytest.raises(ValueError, match="empty corpus.*empty.txt.*wiki.valid.tokens"):
        read_corpus([empty, headings_only])
    with pytest.raises(ValueError, match="at least one file"):
        read_corpus([])


def test_undo_wikitext_marks_joins_what_wikitext_split():
    line = " The well @-@ known 1 @,@ 000 <unk> ships , 3 @.@ 5  km long . \n"
    assert undo_wikitext_marks(line) == "The well-known 1,000 ships , 3.5 km long ."
