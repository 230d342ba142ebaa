"""The bundled sample datasets (src/bertlab/samples) and the test fixtures (tests/fixtures/data).

Each file is parsed here with a minimal reader of its own format (independent of bertlab's readers), so a
format slip in the generator fails here rather than deep inside a training run. The last tests check that
the files ship inside the package and that ``tools/make_samples.py`` still reproduces them byte for byte.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

import bertlab

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = Path(bertlab.__file__).resolve().parent / "samples"
FIXTURES = ROOT / "tests" / "fixtures" / "data"

# Allowed example counts per file: (low, high) for the samples and for the fixtures.
RANGES = {
    "sst2/train.tsv": ((350, 450), (30, 50)),
    "sst2/dev.tsv": ((80, 120), (12, 20)),
    "sst2/test.tsv": ((30, 50), (5, 12)),
    "mrpc/train.tsv": ((250, 350), (30, 50)),
    "mrpc/dev.tsv": ((60, 100), (12, 20)),
    "rte/train.tsv": ((180, 220), (30, 50)),
    "rte/dev.tsv": ((50, 70), (12, 20)),
    "conll2003/eng.train": ((350, 450), (30, 50)),
    "conll2003/eng.testa": ((80, 120), (12, 20)),
    "wnut17/wnut17train.conll": ((180, 220), (30, 50)),
    "wnut17/emerging.dev.conll": ((50, 70), (12, 20)),
    "squad_v1.1/train.json": ((250, 350), (20, 30)),
    "squad_v1.1/dev.json": ((60, 100), (8, 12)),
    "wikitext2/wiki.valid.tokens": ((12, 18), (2, 4)),  # articles
    "wikitext2/wiki.test.tokens": ((3, 6), (1, 3)),
    **{f"{task}/{name}.tsv": ranges for task in ("cola", "stsb", "qqp", "qnli")
       for name, ranges in (("train", ((200, 280), (30, 50))), ("dev", ((60, 100), (12, 20))))},
    "wnli/train.tsv": ((100, 140), (30, 50)), "wnli/dev.tsv": ((30, 50), (12, 20)),
    "mnli/train.tsv": ((200, 280), (30, 50)), "mnli/dev_matched.tsv": ((50, 70), (12, 20)),
    "mnli/dev_mismatched.tsv": ((50, 70), (12, 20)),
    "squad_v2/train.json": ((300, 380), (24, 40)),
    "squad_v2/dev.json": ((90, 130), (10, 16)),
    "swag/train.csv": ((200, 280), (30, 50)),
    "swag/val.csv": ((50, 70), (12, 20)),
}
SETS = [pytest.param(SAMPLES, 0, id="samples"), pytest.param(FIXTURES, 1, id="fixtures")]

CONLL_TYPES = ("PER", "LOC", "ORG", "MISC")
CHUNK_TYPES = ("NP", "VP", "PP", "ADJP", "ADVP", "SBAR", "PRT", "CONJP", "INTJ", "LST", "UCP")
WNUT_TYPES = ("person", "location", "corporation", "product", "creative-work", "group")


def in_range(root: Path, index: int, name: str, n: int) -> None:
    low, high = RANGES[name][index]
    assert low <= n <= high, f"{root / name}: {n} examples, expected {low}-{high}"


def read_tsv(path: Path) -> tuple[list[str], list[list[str]]]:
    raw = path.read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf"), f"{path}: starts with a byte-order mark"
    text = raw.decode("utf-8")
    assert text.endswith("\n") and not text.endswith("\n\n"), f"{path}: must end with exactly one newline"
    header, *rows = [line.split("\t") for line in text[:-1].split("\n")]
    for i, row in enumerate(rows, 2):
        assert len(row) == len(header), f"{path}:{i}: {len(row)} fields, header has {len(header)}"
        assert all(cell.strip() for cell in row), f"{path}:{i}: empty field"
    return header, rows


def iob_errors(tags: list[str], scheme: str) -> list[str]:
    """Tags that break IOB1 (B- only directly after the same type) or IOB2 (I- only inside an entity)."""
    errors = []
    prev = "O"
    for i, tag in enumerate(tags):
        if tag != "O":
            prefix, kind = tag.split("-", 1)
            same = prev != "O" and prev.split("-", 1)[1] == kind
            if scheme == "iob1" and prefix == "B" and not same:
                errors.append(f"{i}:{tag} after {prev}")
            if scheme == "iob2" and prefix == "I" and not same:
                errors.append(f"{i}:{tag} after {prev}")
        prev = tag
    return errors


# ---------------------------------------------------------------------------------------------------------
# GLUE tables


@pytest.mark.parametrize("root,index", SETS)
def test_sst2(root: Path, index: int) -> None:
    seen: set[str] = set()
    for split in ("train", "dev"):
        header, rows = read_tsv(root / f"sst2/{split}.tsv")
        assert header == ["sentence", "label"]
        assert {label for _, label in rows} == {"0", "1"}
        for sentence, _ in rows:
            # GLUE's SST-2 keeps a space before the tab; the text itself is lower-cased and tokenized.
            assert sentence.endswith(" ") and sentence.strip() == sentence[:-1]
            assert sentence == sentence.lower()
        sentences = {s for s, _ in rows}
        assert len(sentences) == len(rows) and not sentences & seen, "duplicate sentences across splits"
        seen |= sentences
        in_range(root, index, f"sst2/{split}.tsv", len(rows))
    header, rows = read_tsv(root / "sst2/test.tsv")
    assert header == ["index", "sentence"]
    assert [int(i) for i, _ in rows] == list(range(len(rows)))
    assert not {s + " " for _, s in rows} & seen
    in_range(root, index, "sst2/test.tsv", len(rows))


@pytest.mark.parametrize("root,index", SETS)
def test_mrpc(root: Path, index: int) -> None:
    for split in ("train", "dev"):
        header, rows = read_tsv(root / f"mrpc/{split}.tsv")
        assert header == ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
        assert {row[0] for row in rows} == {"0", "1"}
        assert all(row[1].isdigit() and row[2].isdigit() and row[1] != row[2] for row in rows)
        in_range(root, index, f"mrpc/{split}.tsv", len(rows))


@pytest.mark.parametrize("root,index", SETS)
def test_rte(root: Path, index: int) -> None:
    for split in ("train", "dev"):
        header, rows = read_tsv(root / f"rte/{split}.tsv")
        assert header == ["index", "sentence1", "sentence2", "label"]
        assert {row[3] for row in rows} == {"entailment", "not_entailment"}
        assert [int(row[0]) for row in rows] == list(range(len(rows)))
        in_range(root, index, f"rte/{split}.tsv", len(rows))


@pytest.mark.parametrize("root,index", SETS)
def test_cola(root: Path, index: int) -> None:
    for split in ("train", "dev"):
        path = root / f"cola/{split}.tsv"
        lines = path.read_text(encoding="utf-8")[:-1].split("\n")
        rows = [line.split("\t") for line in lines]
        assert all(len(r) == 4 for r in rows), "CoLA rows: source, label, mark, sentence (no header line)"
        assert {r[1] for r in rows} == {"0", "1"}
        assert all((r[2] == "*") == (r[1] == "0") and r[3].strip() for r in rows)
        in_range(root, index, f"cola/{split}.tsv", len(rows))


GLUE_HEADERS = {
    "stsb": ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2",
             "score"],
    "qqp": ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
    "qnli": ["index", "question", "sentence", "label"],
    "wnli": ["index", "sentence1", "sentence2", "label"],
}
GLUE_LABELS = {"qqp": {"0", "1"}, "qnli": {"entailment", "not_entailment"}, "wnli": {"0", "1"}}


@pytest.mark.parametrize("root,index", SETS)
@pytest.mark.parametrize("task", list(GLUE_HEADERS))
def test_glue_pair_tasks(root: Path, index: int, task: str) -> None:
    for split in ("train", "dev"):
        header, rows = read_tsv(root / f"{task}/{split}.tsv")
        assert header == GLUE_HEADERS[task]
        labels = [row[-1] for row in rows]
        if task == "stsb":
            assert all(0.0 <= float(x) <= 5.0 for x in labels) and len(set(labels)) > 5
        else:
            assert set(labels) == GLUE_LABELS[task]
        in_range(root, index, f"{task}/{split}.tsv", len(rows))


@pytest.mark.parametrize("root,index", SETS)
def test_mnli(root: Path, index: int) -> None:
    genres = {}
    for split in ("train", "dev_matched", "dev_mismatched"):
        header, rows = read_tsv(root / f"mnli/{split}.tsv")
        votes = ["label1"] if split == "train" else [f"label{i}" for i in range(1, 6)]
        assert header[:4] == ["index", "promptID", "pairID", "genre"] and header[-1] == "gold_label"
        assert header[8:10] == ["sentence1", "sentence2"] and header[10:-1] == votes
        assert {row[-1] for row in rows} == {"entailment", "neutral", "contradiction"}
        for row in rows:  # gold is the annotators' majority
            assert row[10:-1].count(row[-1]) > len(votes) / 2
        genres[split] = {row[3] for row in rows}
        in_range(root, index, f"mnli/{split}.tsv", len(rows))
    assert genres["dev_matched"] <= genres["train"] and not genres["dev_mismatched"] & genres["train"]


# ---------------------------------------------------------------------------------------------------------
# Tagging


def read_conll2003(path: Path) -> tuple[int, list[list[list[str]]]]:
    """(number of -DOCSTART- lines, sentences as lists of [word, POS, chunk, NER])."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n\n"), f"{path}: the last sentence must be closed by a blank line"
    docs, sentences, current = 0, [], []
    lines = text[:-1].split("\n")
    for i, line in enumerate(lines, 1):
        if line.startswith("-DOCSTART-"):
            assert line == "-DOCSTART- -X- O O" and lines[i] == "" and not current, f"{path}:{i}"
            docs += 1
        elif not line:
            if current:
                sentences.append(current)
            current = []
        else:
            cells = line.split(" ")
            assert len(cells) == 4 and all(cells), f"{path}:{i}: {line!r}"
            current.append(cells)
    assert not current
    return docs, sentences


@pytest.mark.parametrize("root,index", SETS)
def test_conll2003(root: Path, index: int) -> None:
    ner_tags = {"O"} | {f"{p}-{t}" for p in "IB" for t in CONLL_TYPES}
    chunk_tags = {"O"} | {f"{p}-{t}" for p in "IB" for t in CHUNK_TYPES}
    b_tags = 0
    for name in ("eng.train", "eng.testa"):
        docs, sentences = read_conll2003(root / "conll2003" / name)
        assert docs >= 2 and lines_start_with_doc(root / "conll2003" / name)
        for sentence in sentences:
            ner = [cells[3] for cells in sentence]
            chunks = [cells[2] for cells in sentence]
            assert set(ner) <= ner_tags, set(ner) - ner_tags
            assert set(chunks) <= chunk_tags, set(chunks) - chunk_tags
            assert not iob_errors(ner, "iob1"), (sentence, iob_errors(ner, "iob1"))
            assert not iob_errors(chunks, "iob1"), (sentence, iob_errors(chunks, "iob1"))
            assert all(cells[1] for cells in sentence)
            b_tags += sum(tag.startswith("B-") for tag in ner)
        in_range(root, index, f"conll2003/{name}", len(sentences))
        types = {tag[2:] for s in sentences for tag in (c[3] for c in s) if tag != "O"}
        if index == 0:
            assert types == set(CONLL_TYPES)
    if index == 0:
        assert b_tags >= 3, "IOB1 B- tags (an entity right after one of the same type) should occur"


def lines_start_with_doc(path: Path) -> bool:
    return path.read_text(encoding="utf-8").startswith("-DOCSTART- -X- O O\n\n")


def read_wnut(path: Path) -> tuple[list[list[tuple[str, str]]], set[str]]:
    """(sentences, the kinds of separator lines seen: 'tab' and/or 'empty')."""
    text = path.read_text(encoding="utf-8")
    sentences, current, separators = [], [], set()
    for i, line in enumerate(text[:-1].split("\n"), 1):
        if not line.strip():
            separators.add("tab" if line == "\t" else "empty")
            assert line in ("", "\t"), f"{path}:{i}: {line!r}"
            assert current, f"{path}:{i}: empty sentence"
            sentences.append(current)
            current = []
            continue
        word, tag = line.split("\t")
        assert word and " " not in word, f"{path}:{i}: {line!r}"
        current.append((word, tag))
    assert not current, f"{path}: the last sentence must be closed by a separator line"
    return sentences, separators


@pytest.mark.parametrize("root,index", SETS)
def test_wnut17(root: Path, index: int) -> None:
    allowed = {"O"} | {f"{p}-{t}" for p in "BI" for t in WNUT_TYPES}
    for name, separators in (("wnut17train.conll", {"tab", "empty"}), ("emerging.dev.conll", {"empty"})):
        sentences, seen = read_wnut(root / "wnut17" / name)
        # The real train file breaks sentences with tab-only lines for most of the file, empty ones at the end.
        assert seen == separators
        for sentence in sentences:
            tags = [tag for _, tag in sentence]
            assert set(tags) <= allowed, set(tags) - allowed
            assert not iob_errors(tags, "iob2"), (sentence, iob_errors(tags, "iob2"))
        in_range(root, index, f"wnut17/{name}", len(sentences))
        if index == 0:
            assert {tag[2:] for s in sentences for _, tag in s if tag != "O"} == set(WNUT_TYPES)


# ---------------------------------------------------------------------------------------------------------
# SQuAD


@pytest.mark.parametrize("root,index", SETS)
def test_squad(root: Path, index: int) -> None:
    ids: set[str] = set()
    for split in ("train", "dev"):
        path = root / f"squad_v1.1/{split}.json"
        squad = json.loads(path.read_text(encoding="utf-8"))
        assert set(squad) == {"version", "data"} and squad["version"] == "1.1"
        questions = 0
        for article in squad["data"]:
            assert set(article) == {"title", "paragraphs"} and article["title"]
            for paragraph in article["paragraphs"]:
                assert set(paragraph) == {"context", "qas"} and paragraph["qas"]
                context = paragraph["context"]
                for qa in paragraph["qas"]:
                    assert set(qa) == {"id", "question", "answers"}
                    assert qa["id"] not in ids, f"duplicate id {qa['id']}"
                    ids.add(qa["id"])
                    assert qa["question"].endswith("?")
                    n_answers = len(qa["answers"])
                    assert n_answers == 1 if split == "train" else 1 <= n_answers <= 3
                    for answer in qa["answers"]:
                        start, text = answer["answer_start"], answer["text"]
                        assert isinstance(start, int) and text
                        assert context[start:start + len(text)] == text, (qa["question"], answer)
                    questions += 1
        in_range(root, index, f"squad_v1.1/{split}.json", questions)
    if root == SAMPLES:
        contexts = [p["context"] for split in ("train", "dev")
                    for a in json.loads((root / f"squad_v1.1/{split}.json").read_text())["data"]
                    for p in a["paragraphs"]]
        assert any(600 <= len(c) <= 1200 for c in contexts), "some contexts should be long (600-1,200 chars)"


@pytest.mark.parametrize("root,index", SETS)
def test_squad_v2(root: Path, index: int) -> None:
    ids: set[str] = set()
    for split in ("train", "dev"):
        squad = json.loads((root / f"squad_v2/{split}.json").read_text(encoding="utf-8"))
        assert squad["version"] == "v2.0"
        impossible = answerable = 0
        for article in squad["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    assert set(qa) == {"id", "question", "answers", "is_impossible"} and qa["id"] not in ids
                    ids.add(qa["id"])
                    assert qa["is_impossible"] == (qa["answers"] == [])
                    impossible += qa["is_impossible"]
                    answerable += not qa["is_impossible"]
                    for a in qa["answers"]:
                        assert paragraph["context"][a["answer_start"]:a["answer_start"] + len(a["text"])] == a["text"]
        assert impossible and answerable, split  # both kinds in every split
        in_range(root, index, f"squad_v2/{split}.json", impossible + answerable)


@pytest.mark.parametrize("root,index", SETS)
def test_swag(root: Path, index: int) -> None:
    import csv

    for split in ("train", "val"):
        path = root / f"swag/{split}.csv"
        rows = list(csv.reader(path.read_text(encoding="utf-8").splitlines()))
        assert rows[0] == ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0",
                           "ending1", "ending2", "ending3", "label"]
        for row in rows[1:]:
            assert len(row) == 12 and row[3] == f"{row[4]} {row[5]}" and all(row[7:11])
            assert row[11] in {"0", "1", "2", "3"} and len(set(row[7:11])) == 4
        assert len({row[11] for row in rows[1:]}) > 1
        in_range(root, index, f"swag/{split}.csv", len(rows) - 1)


# ---------------------------------------------------------------------------------------------------------
# WikiText


@pytest.mark.parametrize("root,index", SETS)
def test_wikitext(root: Path, index: int) -> None:
    for name in ("wiki.valid.tokens", "wiki.test.tokens"):
        path = root / "wikitext2" / name
        lines = path.read_text(encoding="utf-8")[:-1].split("\n")
        assert lines[0] == " " and lines[1].startswith(" = ")
        articles = 0
        for i, line in enumerate(lines, 1):
            assert line.startswith(" ") and line.endswith(" "), f"{path}:{i}: {line!r}"
            if re.fullmatch(r" = [^=].* = ", line):
                articles += 1
                assert lines[i - 2] == " " and lines[i] == " ", f"{path}:{i}: title not set off by space lines"
            elif line.startswith(" = "):
                assert re.fullmatch(r" (= ){2,3}[^=]+ (= ){2,3}", line), f"{path}:{i}: {line!r}"
            elif line != " ":
                assert "  " not in line, f"{path}:{i}: double space in {line!r}"
        in_range(root, index, f"wikitext2/{name}", articles)
    text = (root / "wikitext2" / "wiki.valid.tokens").read_text(encoding="utf-8")
    assert " @-@ " in text and " <unk> " in text


# ---------------------------------------------------------------------------------------------------------
# Packaging and regeneration


def test_samples_ship_with_the_package() -> None:
    assert SAMPLES.is_dir() and SAMPLES.parent == Path(bertlab.__file__).resolve().parent
    resource = importlib.resources.files("bertlab") / "samples" / "sst2" / "train.tsv"
    assert resource.is_file()
    for name in RANGES:
        assert (SAMPLES / name).is_file(), name
    # tomllib is Python 3.11+, and bertlab supports 3.10: read the one line by hand.
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    package_data = pyproject.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^bertlab = \[.*"samples/\*\*/\*"', package_data, re.M), package_data
    readme = (SAMPLES / "README.md").read_text(encoding="utf-8")
    assert "written for bertlab" in readme and "Apache-2.0" in readme and "not for reporting results" in readme


def test_sizes() -> None:
    def size(root: Path) -> int:
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())

    assert size(SAMPLES) < 1_500_000
    assert size(FIXTURES) < 300_000


def _generator():
    path = ROOT / "tools" / "make_samples.py"
    spec = importlib.util.spec_from_file_location("make_samples", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind,root", [("samples", SAMPLES), ("fixtures", FIXTURES)])
def test_generator_reproduces_the_files(kind: str, root: Path) -> None:
    make_samples = _generator()
    files = make_samples.generate(kind)
    assert make_samples.differences(files, root) == [], "rerun: python tools/make_samples.py"
    if kind == "samples":  # the package ships exactly what the generator makes; other tests may add fixtures
        on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
        assert on_disk == set(files), f"files not made by the generator: {sorted(on_disk - set(files))}"
