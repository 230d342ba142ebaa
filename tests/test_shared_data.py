"""The readers on the real data sets of the lab's data folder (CI runs these through `make test-shared` when the folder
is there)."""

from __future__ import annotations

import pytest
from conftest import SHARED_DATA

from bertlab.data.rawtext import read_corpus
from bertlab.data.readers import BadExamplePolicy, read_conll, read_squad, read_table
from bertlab.data.tags import iob1_to_iob2, validate_iob2

pytestmark = pytest.mark.shared


@pytest.mark.parametrize("path,sentences", [("conll2003/eng.train", 14041), ("conll2003/eng.testa", 3250)])
def test_conll_sentence_counts_match_provenance(path, sentences):
    read = read_conll(SHARED_DATA / path, -1, BadExamplePolicy("error"))
    assert len(read) == sentences
    for s in read:
        validate_iob2(iob1_to_iob2(s.tags), where=s.where)


def test_wnut17_tab_only_lines_are_sentence_breaks():
    train = read_conll(SHARED_DATA / "wnut17/wnut17train.conll", -1, BadExamplePolicy("error"))
    assert len(train) == 3394 and all(s.words for s in train)


@pytest.mark.parametrize("path,questions", [("squad_v1.1/train.json", 8582), ("squad_v1.1/dev.json", 1232)])
def test_squad_question_counts_and_answers(path, questions):
    assert len(read_squad(SHARED_DATA / path, train=True, policy=BadExamplePolicy("error"))) == questions


@pytest.mark.parametrize("path,columns,rows", [
    ("sst2/dev.tsv", ("sentence", None, "label"), 872),
    ("mrpc/dev.tsv", ("#1 String", "#2 String", "Quality"), 408),
    ("rte/dev.tsv", ("sentence1", "sentence2", "label"), 277),
])
def test_glue_tables(path, columns, rows):
    assert len(read_table(SHARED_DATA / path, *columns, BadExamplePolicy("error"))) == rows


def test_wikitext_articles():
    docs = read_corpus([SHARED_DATA / "wikitext2/wiki.valid.tokens"], fmt="wikitext")
    assert len(docs) > 50 and sum(len(d) for d in docs) > 2000
