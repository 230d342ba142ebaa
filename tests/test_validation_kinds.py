"""Input validation by kind (issue: reliability, round three, items 1-3, 9 and the data part of 10).

Each kind of input is checked in one place (bertlab.data.validate) and every reader of that kind uses it, so
the tables below hold the cases the issue lists and others of the same kind it does not. Most rows read the
data the way a run does (``TaskDataModule.setup("fit")``: labels, then every split), which is what a run does
before its first training step; the end-to-end rows at the bottom run the recipe (or ``train.py``) and check
that no training step ran and that the message reaches the terminal as one paragraph with exit status 1.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from conftest import FIXTURE_DATA
from test_bad_input import TINY, cli, data_dir

from bertlab.data.datamodule import TaskDataModule
from bertlab.data.readers import BadExamplePolicy, DataError, read_conll, read_table
from bertlab.data.tokenizer import train_wordpiece
from bertlab.data.validate import canonical_label
from bertlab.runtime.config import DataConfig, TaskSpec


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece(["a small vocabulary for the tests of input kinds, text and labels"] * 4,
                           vocab_size=200)


def _lines(*rows) -> str:
    return "".join(r + "\n" for r in rows)


def _jsonl(*objs) -> str:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs)


def _tsv(*labels, text="a b") -> str:
    return _lines("text\tlabel", *[f"{text} {i}\t{label}" for i, label in enumerate(labels)])


def read(tmp_path: Path, tokenizer, files: dict[str, str], family: str = "sequence", labels=None,
         regression: bool = False, train: str | None = None, val: str | None = None, **data) -> TaskDataModule:
    """Write ``files`` under tmp_path and read them as a run does before training: the label set, then
    every split of ``fit``. ``train`` / ``val`` default to the first / second file (no val with one file)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8", newline="")
    names = list(files)
    cfg = DataConfig(data_dir=str(tmp_path), train_file=train or names[0],
                     val_file=val or (names[1] if len(names) > 1 else None), max_seq_length=64,
                     doc_stride=16, max_query_length=16, **data)
    task = TaskSpec(name="kinds", family=family, labels=labels, regression=regression)
    dm = TaskDataModule(task, cfg, tokenizer)
    dm.setup("fit")
    return dm


# ----------------------------------------------------------------------------------------------------------
# Kind: one label spelled several ways


@pytest.mark.parametrize("raw,canonical", [
    ("1", "1"), ("1.0", "1"), (" 1 ", "1"), ("01", "1"), ("+1", "1"), ("1e0", "1"), ("0.50", "0.5"), ("-0", "0"),
    ("True", "true"), ("TRUE", "true"), ("false", "false"), ("Positive", "Positive"), ("1_000", "1_000"),
    ("\u0661", "\u0661"), ("nan", "nan"), ("1e999999", "1e999999"),
])
def test_the_label_rule(raw, canonical):
    assert canonical_label(raw) == canonical


MERGED = [
    ("numbers", {"train.tsv": _tsv("1", "1.0", " 1", "01", "0", "0.0", "00"), "dev.tsv": _tsv("1.0", "0")},
     ["0", "1"]),
    ("booleans", {"train.tsv": _tsv("True", "true", "TRUE", "False", "false"), "dev.tsv": _tsv("FALSE", "True")},
     ["false", "true"]),
    ("json-numbers", {"train.jsonl": _jsonl({"text": "a", "label": 1}, {"text": "b", "label": "1"},
                                            {"text": "c", "label": 1.0}, {"text": "d", "label": 0}),
                      "dev.jsonl": _jsonl({"text": "a", "label": "0"}, {"text": "b", "label": 1.0})}, ["0", "1"]),
    ("json-booleans", {"train.jsonl": _jsonl({"text": "a", "label": True}, {"text": "b", "label": "false"}),
                       "dev.jsonl": _jsonl({"text": "a", "label": "True"})}, ["false", "true"]),
    ("csv-decimals", {"train.csv": _lines("text,label", "a,0.5", "b,.5", "c,0.50", "d,2"),
                      "dev.csv": _lines("text,label", "a,2.0")}, ["0.5", "2"]),
]


@pytest.mark.parametrize("files,labels", [c[1:] for c in MERGED], ids=[c[0] for c in MERGED])
def test_label_spellings_of_one_value_are_one_class(tmp_path, tokenizer, files, labels):
    dm = read(tmp_path, tokenizer, files)
    assert dm.labels == labels
    assert len(dm.splits["val"].features) >= 1


def test_declared_labels_match_other_spellings(tmp_path, tokenizer):
    dm = read(tmp_path, tokenizer, {"train.tsv": _tsv("0", "1"), "dev.tsv": _tsv("1.0", " 0", "01")},
              labels=["0", "1"])
    assert [f["labels"] for f in dm.splits["val"].features] == [1, 0, 1]


REFUSED_LABELS = [
    ("case", {"train.tsv": _tsv("positive", "negative", "Positive")},
     r"train\.tsv: the label column 'label' spells one class several ways: 'positive' \(first at train\.tsv:2\) "
     r"vs 'Positive' \(first at train\.tsv:4\)"),
    ("inner-space", {"train.tsv": _tsv("very good", "bad", "very  good")},
     r"'very good' \(first at train\.tsv:2\) vs 'very  good' \(first at train\.tsv:4\)"),
    ("upper-json", {"train.jsonl": _jsonl({"text": "a", "label": "NEG"}, {"text": "b", "label": "neg"},
                                          {"text": "c", "label": "pos"})},
     r"train\.jsonl: the label column 'label' spells one class several ways: 'NEG' .* vs 'neg'"),
    ("tags", {"train.conll": _lines("Paris B-LOC", "is O", "", "Rome B-Loc", "too O")},
     r"train\.conll: the label column 'tags' spells one class several ways: 'B-LOC' \(first at train\.conll:1\) "
     r"vs 'B-Loc' \(first at train\.conll:4\)"),
    ("dev-unknown-all-named", {"train.tsv": _tsv("x", "y"), "dev.tsv": _tsv("x", "z", "w", "z")},
     r"dev\.tsv:3: label 'z' is not in the task's label set \['x', 'y'\] \(the labels of the training split "
     r".*train\.tsv\); nor are 'w' \(first at dev\.tsv:4\); fix the file, add examples of these labels"),
    ("dev-case", {"train.tsv": _tsv("positive", "negative"), "dev.tsv": _tsv("Positive")},
     r"dev\.tsv:2: label 'Positive', which differs from 'positive' only in case or spacing, is not in"),
    ("ids-as-labels", {"train.tsv": _lines("text\tlabel", *[f"a b\tid{i}" for i in range(12)])},
     r"train\.tsv: the label column 'label' has 12 different values in 12 examples, .* task=text_regression"),
]


@pytest.mark.parametrize("files,match", [c[1:] for c in REFUSED_LABELS], ids=[c[0] for c in REFUSED_LABELS])
def test_label_clashes_and_unknown_labels_are_refused(tmp_path, tokenizer, files, match):
    family = "token" if any(n.endswith(".conll") for n in files) else "sequence"
    with pytest.raises(DataError, match=match):
        read(tmp_path, tokenizer, files, family=family)


def test_unknown_tags_name_the_fix_that_applies(tmp_path, tokenizer):
    files = {"train.conll": _lines("Paris B-LOC", "is O"), "dev.conll": _lines("Ann B-PER", "is O", "", "x B-ORG")}
    with pytest.raises(DataError, match=r"dev\.conll:1: label 'B-PER' is not in .*; nor are 'B-ORG' \(first at "
                                        r"dev\.conll:4\); fix the file, .*task\.labels=\[\.\.\.\]"):
        read(tmp_path, tokenizer, files, family="token")
    with pytest.raises(DataError, match=r"\(declared by task=kinds\); nor are 'B-ORG' .*; fix the file; for "
                                        r"another label set use a generic task"):
        read(tmp_path, tokenizer, files, family="token", labels=["O", "B-LOC", "I-LOC"])


def test_dev_i_tag_of_a_type_train_has_only_as_b(tmp_path, tokenizer):
    dm = read(tmp_path, tokenizer, {"train.conll": _lines("Paris B-LOC", "is O"),
                                    "dev.conll": _lines("New B-LOC", "York I-LOC", "is O")}, family="token")
    assert dm.labels == ["O", "B-LOC", "I-LOC"]
    assert dm.splits["val"].num_examples == 1


@pytest.mark.parametrize("label,match", [
    ('"1_000"', r"regression label '1_000' is not a number"),
    ('"\u0663"', r"regression label '\u0663' is not a number"),
    ('"high"', r"regression label 'high' is not a number"),
    ("true", r"regression label 'true' is not a number"),
    ("[1]", r"field 'label' is a JSON array \(\[1\]\) where a label \(text or a number\) is expected"),
    ('{"v": 1}', r"field 'label' is a JSON object"),
])
def test_regression_label_that_is_not_a_number(tmp_path, tokenizer, label, match):
    train = _jsonl({"text": "a", "label": 1.5}, {"text": "b", "label": 2}, f'{{"text": "c", "label": {label}}}')
    with pytest.raises(DataError, match=r"train\.jsonl:3: " + match):
        read(tmp_path, tokenizer, {"train.jsonl": train}, regression=True)


# ----------------------------------------------------------------------------------------------------------
# Kind: ambiguous table schemas


SCHEMAS = [
    ("tsv-twice", "train.tsv", _lines("text\ttext\tlabel", "a\tb\t1", "c\td\t0"),
     r"train\.tsv: the header names the column 'text' twice \(columns 0 and 1, from 0\)"),
    ("csv-case", "train.csv", _lines("Text,text,label", "a,b,1", "c,d,0"),
     r"train\.csv: the header names the column 'Text' twice, spelled 'Text' and 'text'"),
    ("tsv-space", "train.tsv", _lines("text\tlabel\tlabel ", "a\t1\t0", "c\t0\t1"),
     r"names the column 'label' twice, spelled 'label' and 'label '"),
    ("jsonl-case", "train.jsonl", _jsonl({"text": "a", "label": 1}, {"Text": "b", "label": 0}),
     r"train\.jsonl: the records together names the column 'Text' twice, spelled 'Text' and 'text'"),
    ("jsonl-key-twice", "train.jsonl", _jsonl({"text": "a", "label": 1}, '{"text": "b", "label": 0, "label": 1}'),
     r"train\.jsonl:2: a JSON object names the field 'label' twice"),
    ("near-case", "train.tsv", _lines("Text\tlabel", "a\t1", "b\t0"),
     r"no column 'text' \(data\.text_column\); the header has \['Text', 'label'\]\. Did you mean 'Text'\? "
     r"\(data\.text_column=Text\)"),
    ("near-typo", "train.csv", _lines("txet,label", "a,1", "b,0"), r"Did you mean 'txet'\?"),
    ("more-fields", "train.tsv", _lines("text\tlabel", "a\t1", "b\t0\textra", "c\t0"),
     r"train\.tsv:3: 3 columns where the header has 2"),
    ("fewer-fields", "train.csv", _lines("text,pair,label", "a,b,1", "c,0", "d,e,0"),
     r"train\.csv:3: 2 columns where the header has 3"),
]


@pytest.mark.parametrize("name,text,match", [c[1:] for c in SCHEMAS], ids=[c[0] for c in SCHEMAS])
def test_ambiguous_table_schemas(tmp_path, tokenizer, name, text, match):
    with pytest.raises(DataError, match=match):
        read(tmp_path, tokenizer, {name: text})


# ----------------------------------------------------------------------------------------------------------
# Kind: a value of the wrong type where text is expected


WRONG_TYPES = [
    ("object", '{"text": {"a": 1}, "label": 1}', r":2: field 'text' is a JSON object \(\{\"a\": 1\}\) where text"),
    ("array", '{"text": ["a", "b"], "label": 1}', r":2: field 'text' is a JSON array"),
    ("number", '{"text": 42, "label": 1}', r":2: field 'text' is a number \(42\) where text \(a JSON string\)"),
    ("boolean", '{"text": true, "label": 1}', r":2: field 'text' is a boolean \(true\)"),
    ("null", '{"text": null, "label": 1}', r":2: field 'text' is null \(null\)"),
    ("pair-number", '{"text": "a", "pair": 3.5, "label": 1}', r":2: field 'pair' is a number \(3\.5\)"),
    ("label-object", '{"text": "a", "pair": "b", "label": {"id": 1}}', r":2: field 'label' is a JSON object"),
    ("no-field", '{"txt": "a", "label": 1}', r":2: no field 'text'; the record has \['label', 'txt'\]"),
]


@pytest.mark.parametrize("record,match", [c[1:] for c in WRONG_TYPES], ids=[c[0] for c in WRONG_TYPES])
def test_wrong_json_types_in_jsonl_tables(tmp_path, record, match):
    path = tmp_path / "train.jsonl"
    path.write_text(_jsonl({"text": "ok", "pair": "fine", "label": 0}, record))
    pair = "pair" if "pair" in record else None
    with pytest.raises(DataError, match=r"train\.jsonl" + match):
        read_table(path, "text", pair, "label", BadExamplePolicy("error"))
    # skipped and counted like any bad example, never read as the Python repr of the value
    policy = BadExamplePolicy("skip")
    examples = read_table(path, "text", pair, "label", policy)
    assert policy.skipped == 1 and [e.text for e in examples] == ["ok"]


def _squad(edit) -> str:
    squad = json.loads((FIXTURE_DATA / "squad_v1.1" / "dev.json").read_text())
    edit(squad)
    return json.dumps(squad)


def _qa(squad):
    return squad["data"][0]["paragraphs"][0]["qas"]


SQUAD_TYPES = [
    ("data-object", lambda s: s.update(data={"x": s["data"][0]}),
     r"dev\.json: data is a JSON object where a list of articles is expected"),
    ("context-list", lambda s: s["data"][0]["paragraphs"][0].update(context=["a", "b"]),
     r"dev\.json: data\[0\]\.paragraphs\[0\]: field 'context' is a JSON array"),
    ("paragraphs-text", lambda s: s["data"][0].update(paragraphs="none"),
     r"dev\.json: data\[0\]\.paragraphs is text where a list of paragraphs is expected"),
    ("question-number", lambda s: _qa(s)[0].update(question=7),
     r"qas\[0\]: field 'question' is a number \(7\) where text"),
    ("answer-text-null", lambda s: _qa(s)[0]["answers"][0].update(text=None),
     r"qas\[0\]\.answers\[0\]: field 'text' is null"),
    ("answer-start-float", lambda s: _qa(s)[0]["answers"][0].update(answer_start=3.5),
     r"qas\[0\]\.answers\[0\]: field 'answer_start' is a number \(3\.5\) where an integer"),
    ("impossible-text", lambda s: _qa(s)[0].update(is_impossible="no"),
     r"qas\[0\]: field 'is_impossible' is text \(\"no\"\) where true or false is expected"),
    ("id-object", lambda s: _qa(s)[0].update(id={"n": 1}), r"qas\[0\]: field 'id' is a JSON object"),
]


@pytest.mark.parametrize("edit,match", [c[1:] for c in SQUAD_TYPES], ids=[c[0] for c in SQUAD_TYPES])
def test_wrong_json_types_in_squad(tmp_path, tokenizer, edit, match):
    train = (FIXTURE_DATA / "squad_v1.1" / "train.json").read_text()
    with pytest.raises(DataError, match=match):
        read(tmp_path, tokenizer, {"train.json": train, "dev.json": _squad(edit)}, family="qa")


MC_TYPES = [
    ("context-object", {"context": {"a": 1}, "choices": ["x", "y"], "label": 0},
     r"field 'context' is a JSON object"),
    ("choice-number", {"context": "c", "choices": ["x", 2], "label": 0},
     r"field 'choices\[1\]' is a number \(2\)"),
    ("choices-text", {"context": "c", "choices": "x y", "label": 0}, r"field 'choices' is text"),
    ("label-boolean", {"context": "c", "choices": ["x", "y"], "label": True}, r"field 'label' is a boolean"),
    ("prefix-array", {"context": "c", "start": ["s"], "choices": ["x", "y"], "label": 0},
     r"field 'start' is a JSON array"),
]


@pytest.mark.parametrize("record,match", [c[1:] for c in MC_TYPES], ids=[c[0] for c in MC_TYPES])
def test_wrong_json_types_in_multiple_choice(tmp_path, tokenizer, record, match):
    good = {"context": "c", "start": "s", "choices": ["x", "y"], "label": 1}
    with pytest.raises(DataError, match=r"train\.jsonl:2: " + match):
        read(tmp_path, tokenizer, {"train.jsonl": _jsonl(good, record)}, family="multiple_choice",
             text_column="context", choice_prefix_column="start")


def test_multiple_choice_label_spellings(tmp_path, tokenizer):
    rows = [{"context": "c", "choices": ["x", "y", "z"], "label": label} for label in (1, "1", 1.0, " 01", "2.0")]
    dm = read(tmp_path, tokenizer, {"train.jsonl": _jsonl(*rows)}, family="multiple_choice",
              text_column="context")
    assert [f["labels"] for f in dm.splits["train"].features] == [1, 1, 1, 1, 2]


# ----------------------------------------------------------------------------------------------------------
# Kind: quoting and field counts in delimited files; columns in CoNLL files


QUOTING = [
    ("csv-unclosed", "train.csv", _lines("text,label", "one,1", '"two,0', "three,1", "four,0", "five,1"),
     r"train\.csv:3: a quoted cell that starts on line 3 is never closed, so it swallows every row after it"),
    ("csv-unclosed-last-cell", "train.csv", _lines("text,label", "one,1", 'two,"0', "three,1", "four,0", "five,1"),
     r"train\.csv:3: a quoted cell that starts on line 3 is never closed"),
    ("csv-text-after-quote", "train.csv", _lines("text,label", '"he said" hi,1', "b,0"),
     r"train\.csv:2: a quoted cell on line 2 is followed by more text"),
    ("csv-unclosed-later-quote", "train.csv", _lines("text,label", '"two,0', 'three "x",1', "four,0"),
     r"train\.csv:2: a quoted cell on line 2 is followed by more text"),
    ("tsv-pandas-newline", "train.tsv", _lines("text\tlabel", "a\t1", '"line one', 'line two"\t0', "b\t1"),
     r"train\.tsv:3: lines 3-4 are one record only when read as CSV: a quoted cell holds a line break; bertlab "
     r"reads \.tsv files unquoted"),
    ("tsv-pandas-newline-last-cell", "train.tsv", _lines("label\ttext", '1\t"line one', 'line two"', "0\tb"),
     r"train\.tsv:2: lines 2-3 are one record only when read as CSV"),
    ("tsv-pandas-doubled", "train.tsv", _lines("text\tlabel", '"he said ""hi"" twice"\t1', "b\t0"),
     r"train\.tsv:2: the cell '\"he said \"\"hi\"\" twice\"' is quoted CSV-style .*save it as \.csv"),
]


@pytest.mark.parametrize("name,text,match", [c[1:] for c in QUOTING], ids=[c[0] for c in QUOTING])
def test_quoting_in_delimited_files(tmp_path, name, text, match):
    path = tmp_path / name
    path.write_text(text)
    column = "text"
    with pytest.raises(DataError, match=match):
        read_table(path, column, None, "label", BadExamplePolicy("error"))


def test_a_quoted_line_break_in_a_tsv_is_skipped_whole(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text(_lines("text\tlabel", "a\t1", '"line one', 'line two"\t0', "b\t1"))
    policy = BadExamplePolicy("skip")
    examples = read_table(path, "text", None, "label", policy)
    assert [e.text for e in examples] == ["a", "b"] and policy.skipped == 1  # never half an example


def test_glue_style_bare_quotes_stay_text(tmp_path):
    # MRPC/RTE hold bare, unbalanced quote marks in unquoted cells: they are text, not quoting.
    path = tmp_path / "train.tsv"
    path.write_text(_lines("text\tlabel", '" the witness , he said\t1', 'an odd " mark\t0', '"quoted" start\t1'))
    examples = read_table(path, "text", None, "label", BadExamplePolicy("error"))
    assert [e.text for e in examples] == ['" the witness , he said', 'an odd " mark', '"quoted" start']


CONLL = [
    ("issue-case", _lines("New York B-LOC", "is O"),
     r"train\.conll:1: 3 column\(s\) where the file's token lines have 2 \(as line 2\)"),
    ("word-with-space", _lines("New York B-LOC", "is O", "big O"),
     r"train\.conll:1: 3 column\(s\) where the file's token lines have 2 \(as line 2\): 'New York B-LOC' \(a word "
     r"holding a space\?"),
    ("missing-tag", _lines("Paris B-LOC", "is", "big O"),
     r"train\.conll:2: 1 column\(s\) where the file's token lines have 2 .*a missing column\?"),
    ("tab-separated", _lines("Paris\tB-LOC", "Le Havre\tB-LOC", "is\tO"),
     r"train\.conll:2: 3 column\(s\) .*'Le Havre B-LOC'"),
    ("four-columns", _lines("EU NNP B-NP B-ORG", "rejects VBZ B-VP O", "German JJ B-NP", "call NN I-NP O"),
     r"train\.conll:3: 3 column\(s\) where the file's token lines have 4"),
    ("extra-column", _lines("Paris B-LOC", "is O x", "big O"), r"train\.conll:2: 3 column\(s\)"),
]


@pytest.mark.parametrize("text,match", [c[1:] for c in CONLL], ids=[c[0] for c in CONLL])
def test_conll_lines_with_another_column_count(tmp_path, text, match):
    path = tmp_path / "train.conll"
    path.write_text(text)
    with pytest.raises(DataError, match=match):
        read_conll(path, -1, BadExamplePolicy("error"))


def test_conll_words_only_file_to_predict(tmp_path):
    path = tmp_path / "input.conll"
    path.write_text(_lines("New York", "is", "big"))
    with pytest.raises(DataError, match=r"input\.conll:1: 2 column\(s\) where the file's token lines have 1"):
        read_conll(path, None, BadExamplePolicy("error"))


# ----------------------------------------------------------------------------------------------------------
# Kind: a data path that exists but is not a regular readable file


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path):
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


def _folder(path: Path) -> None:
    path.mkdir()
    (path / "part-0.tsv").write_text("text\tlabel\n")


def _dangling(path: Path) -> None:
    os.symlink(path.parent / "nowhere.tsv", path)


def _device(path: Path) -> None:
    os.symlink("/dev/null", path)


NOT_FILES = [
    ("fifo", _fifo, r"dev\.tsv: a named pipe \(FIFO\), not a regular file\. bertlab reads a data file more than "
                    r"once"),
    ("socket", _socket, r"dev\.tsv: a socket, not a regular file"),
    ("folder", _folder, r"dev\.tsv: a folder, not a data file; .*\(this folder holds part-0\.tsv\)"),
    ("dangling-link", _dangling, r"dev\.tsv: a symbolic link that points to nothing"),
    ("device", _device, r"/dev/null: a character device, not a regular file"),
]


@pytest.mark.parametrize("make,match", [c[1:] for c in NOT_FILES], ids=[c[0] for c in NOT_FILES])
def test_data_path_that_is_not_a_regular_file(tmp_path, tokenizer, make, match):
    (tmp_path / "train.tsv").write_text(_tsv("0", "1"))
    kept = make(tmp_path / "dev.tsv")
    try:
        with pytest.raises(DataError, match=match) as err:
            read(tmp_path, tokenizer, {}, train="train.tsv", val="dev.tsv")
    finally:
        if kept is not None:
            kept.close()
    assert "not found" not in str(err.value) and "data.source=sample" not in str(err.value)


# ----------------------------------------------------------------------------------------------------------
# Kind: SQuAD answers against the SQuAD version


def _v2(edit) -> str:
    squad = json.loads((FIXTURE_DATA / "squad_v2" / "dev.json").read_text())
    edit(squad)
    return json.dumps(squad)


SQUAD_VERSION = [
    ("v1-dev-no-answer", False, "dev", lambda s: _qa(s)[1].update(answers=[]),
     r"dev\.json: data\[0\]\.paragraphs\[0\]\.qas\[1\]: no answers\. SQuAD v1\.1 scores a question against its "
     r"answers, so one without any would score 0"),
    ("v1-dev-impossible", False, "dev", lambda s: _qa(s)[0].update(is_impossible=True),
     r"qas\[0\]: is_impossible is true, but this task reads SQuAD v1\.1, .*task=squad_v2"),
    ("v1-train-impossible", False, "train", lambda s: _qa(s)[0].update(is_impossible=True, answers=[]),
     r"train\.json: data\[0\]\.paragraphs\[0\]\.qas\[0\]: is_impossible is true, but this task reads SQuAD v1\.1"),
    ("v2-impossible-with-answers", True, "dev",
     lambda s: _qa(s)[0].update(is_impossible=True),
     r"qas\[0\]: is_impossible is true but it has \d answer\(s\)"),
    ("v2-unmarked-no-answer", True, "dev", lambda s: _qa(s)[0].update(answers=[], is_impossible=False),
     r"qas\[0\]: no answers and not marked is_impossible"),
]


@pytest.mark.parametrize("v2,split,edit,match", [c[1:] for c in SQUAD_VERSION], ids=[c[0] for c in SQUAD_VERSION])
def test_squad_answers_against_the_version(tmp_path, tokenizer, v2, split, edit, match):
    folder = "squad_v2" if v2 else "squad_v1.1"
    files = {name: (FIXTURE_DATA / folder / name).read_text() for name in ("train.json", "dev.json")}
    squad = json.loads(files[f"{split}.json"])
    edit(squad)
    files[f"{split}.json"] = json.dumps(squad)
    with pytest.raises(DataError, match=match):
        read(tmp_path, tokenizer, files, family="qa", version_2_with_negative=v2)


def test_squad_v2_fixture_and_v1_fixture_read_cleanly(tmp_path, tokenizer):
    for v2, folder in ((False, "squad_v1.1"), (True, "squad_v2")):
        files = {name: (FIXTURE_DATA / folder / name).read_text() for name in ("train.json", "dev.json")}
        dm = read(tmp_path / folder, tokenizer, files, family="qa", version_2_with_negative=v2)
        assert dm.splits["val"].skipped == 0 and dm.splits["train"].skipped == 0


# ----------------------------------------------------------------------------------------------------------
# Kind: splits and column roles


def _link(tmp_path: Path) -> None:
    os.symlink(tmp_path / "train.tsv", tmp_path / "dev.tsv")


SPLITS = [
    ("same-path", {}, dict(val="train.tsv"), r"data\.val_file=.*train\.tsv is the same file as data\.train_file"),
    ("copy", {"dev.tsv": _tsv("0", "1", "1", "0")}, dict(val="dev.tsv"),
     r"data\.val_file=.*dev\.tsv is a copy \(same content\) of data\.train_file .*measure how well the model "
     r"remembers its training examples"),
    ("link", "link", dict(val="dev.tsv"), r"data\.val_file=.*dev\.tsv is the same file as data\.train_file"),
    ("test", {"dev.tsv": _tsv("1", "0")}, dict(val="dev.tsv", test_file="train.tsv"),
     r"data\.test_file=.*train\.tsv is the same file as data\.train_file"),
    ("extra-dev", {"dev.tsv": _tsv("1", "0")}, dict(val="dev.tsv", val_extra_files={"val_b": "train.tsv"}),
     r"data\.val_extra_files\.val_b=.*train\.tsv is the same file"),
]


@pytest.mark.parametrize("extra,settings,match", [c[1:] for c in SPLITS], ids=[c[0] for c in SPLITS])
def test_an_evaluation_split_that_is_the_training_file(tmp_path, tokenizer, extra, settings, match):
    (tmp_path / "train.tsv").write_text(_tsv("0", "1", "1", "0"))
    if extra == "link":
        _link(tmp_path)
    else:
        for name, text in extra.items():
            (tmp_path / name).write_text(text)
    with pytest.raises(DataError, match=match):
        read(tmp_path, tokenizer, {}, train="train.tsv", **settings)


ROLES = [
    ("pair-is-text", "sequence", dict(text_pair_column="text"),
     r"data\.text_column and data\.text_pair_column both name the column 'text': the model would read the same "
     r"text twice"),
    ("label-is-text", "sequence", dict(label_column="text"),
     r"data\.text_column and data\.label_column both name the column 'text': the model would be given its answer"),
    ("label-is-pair", "sequence", dict(text_pair_column="label"),
     r"data\.text_pair_column and data\.label_column both name the column 'label'"),
    ("choice-is-text", "multiple_choice", dict(text_column="a", choice_columns=["a", "b"]),
     r"data\.text_column and data\.choice_columns both name the column 'a'"),
    ("choice-twice", "multiple_choice", dict(text_column="c", choice_columns=["a", "a"]),
     r"data\.choice_columns and data\.choice_columns both name the column 'a'"),
]


@pytest.mark.parametrize("family,settings,match", [c[1:] for c in ROLES], ids=[c[0] for c in ROLES])
def test_one_column_in_two_roles(tmp_path, tokenizer, family, settings, match):
    with pytest.raises(DataError, match=match):
        read(tmp_path, tokenizer, {"train.tsv": _tsv("0", "1")}, family=family, **settings)


# ----------------------------------------------------------------------------------------------------------
# Kind: a file to predict read in another format than it has


PREDICT = [
    ("tsv-other-column", "in.tsv", _lines("sentence\tlabel", "good film\t1"),
     r"in\.tsv: no column 'text' \(data\.text_column\); the header has \['sentence', 'label'\]\. This model reads "
     r"its input from the column 'text', and a \.tsv file is read as a table"),
    ("csv-other-column", "in.csv", _lines("review,stars", "good film,5"), r"in\.csv: no column 'text'"),
    ("tsv-case", "in.tsv", _lines("Text\tlabel", "good film\t1"), r"Did you mean 'Text'\?"),
    ("tsv-no-header", "in.tsv", _lines("good film\t1", "bad film\t0"),
     r"the header has \['good film', '1'\]"),
    ("csv-typo", "in.csv", _lines("txt,label", "good film,1"), r"Did you mean 'txt'\?"),
]


@pytest.mark.parametrize("name,text,match", [c[1:] for c in PREDICT], ids=[c[0] for c in PREDICT])
def test_predict_table_without_the_text_column(tmp_path, name, text, match):
    from bertlab.inference.inputs import read_inputs
    from bertlab.inference.predictor import PredictSettings

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError, match=match):
        read_inputs(path, "sequence", PredictSettings(text_column="text"))
    items, _ = read_inputs(path, "sequence", PredictSettings(text_column="text"), fmt="text")  # asked for
    assert len(list(items)) == 2


# ----------------------------------------------------------------------------------------------------------
# End to end: before any training step, one paragraph, exit status 1


@pytest.fixture
def no_fit(monkeypatch):
    fits = []
    monkeypatch.setattr("lightning.Trainer.fit", lambda *a, **k: fits.append(1))
    return fits


E2E = [
    ("label-clash", {"train.tsv": "sentence\tlabel\n" + "".join(f"film {i}\t{'Pos' if i % 3 else 'pos'}\n"
                                                                 for i in range(12))},
     ["task=text_classification", "data.text_column=sentence"], r"spells one class several ways"),
    ("jsonl-object", {"train.jsonl": _jsonl(*[{"sentence": f"film {i}", "label": i % 2} for i in range(6)],
                                            {"sentence": {"t": "x"}, "label": 1}),
                      "dev.jsonl": _jsonl({"sentence": "film", "label": 1})},
     ["task=text_classification", "data.text_column=sentence", "data.train_file=sst2/train.jsonl",
      "data.val_file=sst2/dev.jsonl"], r"train\.jsonl:7: field 'sentence' is a JSON object"),
    ("same-file", {}, ["task=sst2", "data.val_file=sst2/train.tsv"], r"is the same file as data\.train_file"),
    ("pair-is-text", {}, ["task=sst2", "data.text_pair_column=sentence"], r"both name the column 'sentence'"),
    ("quoted-newline", {"dev.tsv": _lines("sentence\tlabel", "good\t1", '"half', 'half"\t0')}, ["task=sst2"],
     r"dev\.tsv:3: lines 3-4 are one record only when read as CSV"),
]


@pytest.mark.parametrize("files,overrides,match", [c[1:] for c in E2E], ids=[c[0] for c in E2E])
def test_refused_before_any_training_step(train_run, tmp_path, no_fit, files, overrides, match):
    root = data_dir(tmp_path, "sst2", files)
    base = [] if any(o.startswith("data.train_file") for o in overrides) else \
        ["data.train_file=sst2/train.tsv", "data.val_file=sst2/dev.tsv"]
    with pytest.raises(DataError, match=match):
        train_run(*TINY, *base, *overrides, data_dir=root)
    assert no_fit == []


def test_fifo_on_the_command_line(tmp_path):
    root = data_dir(tmp_path, "sst2")
    (root / "sst2" / "dev.tsv").unlink()
    os.mkfifo(root / "sst2" / "dev.tsv")
    out = cli(tmp_path, *TINY, "task=sst2", f"hydra.run.dir={tmp_path / 'run'}", data=root, timeout=300)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("bertlab: error:")]
    assert len(lines) == 1 and "dev.tsv: a named pipe (FIFO), not a regular file" in lines[0]
    assert "not found" not in out.stderr


def test_resume_after_the_training_data_changed(train_run, tmp_path):
    root = data_dir(tmp_path, "sst2")
    args = (*TINY, "task=sst2", "trainer.max_epochs=2", "trainer.limit_train_batches=2")
    train_run(*args, "trainer.max_steps=2", data_dir=root, name="run")
    train = root / "sst2" / "train.tsv"
    flipped = [line.rsplit("\t", 1) for line in train.read_text().splitlines()]
    train.write_text("\n".join(flipped[0] and ["\t".join(flipped[0])] +
                               [f"{t}\t{1 - int(label)}" for t, label in flipped[1:]]) + "\n")
    with pytest.raises(DataError, match=r"the data changed since the checkpoint being resumed was written: train "
                                        r"\(.*sst2/train\.tsv: [0-9a-f]{16} then, [0-9a-f]{16} now\).*the same "
                                        r"command without ckpt_path"):
        train_run(*args, "ckpt_path=last", data_dir=root, name="run")
    # evaluating the checkpoint on other data is no resume: allowed
    metrics = train_run(*args, "train=false", f"ckpt_path={tmp_path / 'run' / 'checkpoints' / 'last.ckpt'}",
                        data_dir=root, name="eval")
    assert metrics["val"]["num_examples"] > 0
