"""Plain-text pre-training corpora from the labelled data at hand (labels dropped).

    python experiments/pretrain_quick/make_corpus.py DATA_DIR OUT_DIR

DATA_DIR holds the data sets in bertlab's layout (sst2/train.tsv, conll2003/eng.train, rte/train.tsv, ...).
Written to OUT_DIR, one sentence per line (bertlab's plain-text format packs consecutive lines into full
sequences; a blank line separates documents):

- ``sst2_train.txt`` / ``sst2_val.txt``: SST-2's training sentences, the last 2 % held out as the
  pre-training validation text. SST-2's dev sentences are never written: they are the fine-tuning dev set.
- ``conll_train.txt`` / ``conll_val.txt``: the sentences of CoNLL-2003's eng.train (words joined by spaces,
  one document per ``-DOCSTART-`` block), the last 2 % of documents held out.
- ``<task>_train.txt`` / ``<task>_val.txt`` for the GLUE pair tasks present (rte, mrpc; cola single): every
  training text (both sides of a pair) once, for task-adaptive pre-training (TAPT).
- ``wiki_train.txt`` / ``wiki_val.txt``: general-domain text, every article of WikiText-2's valid and test files
  (its tokenisation marks undone) and every distinct paragraph of SQuAD v1.1's training contexts, one article a
  document, the last 2 % of articles held out: pre-trained beside a task's own text (``CORPUS=sst2_wiki``).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from bertlab.data.rawtext import undo_wikitext_marks, wikitext_documents

HELD_OUT = 0.02


def _tsv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def _write(out: Path, name: str, documents: list[list[str]]) -> None:
    cut = max(1, round(len(documents) * (1 - HELD_OUT)))
    if len(documents) == 1:  # one long document: hold out its tail lines instead
        lines = documents[0]
        cut_line = max(1, round(len(lines) * (1 - HELD_OUT)))
        parts = {"train": [lines[:cut_line]], "val": [lines[cut_line:]]}
    else:
        parts = {"train": documents[:cut], "val": documents[cut:]}
    for split, docs in parts.items():
        text = "\n\n".join("\n".join(doc) for doc in docs) + "\n"
        (out / f"{name}_{split}.txt").write_text(text, encoding="utf-8")
        words = sum(len(line.split()) for doc in docs for line in doc)
        print(f"{name}_{split}.txt: {sum(len(d) for d in docs):,} lines, {words:,} words")


def sst2(data: Path, out: Path) -> None:
    sentences = [r["sentence"].strip() for r in _tsv(data / "sst2" / "train.tsv")]
    _write(out, "sst2", [[s for s in sentences if s]])


def conll(data: Path, out: Path) -> None:
    documents, sentence, doc = [], [], []
    for line in (data / "conll2003" / "eng.train").read_text(encoding="utf-8").splitlines():
        if line.startswith("-DOCSTART-"):
            if doc:
                documents.append(doc)
            doc = []
            continue
        if not line.strip():
            if sentence:
                doc.append(" ".join(sentence))
            sentence = []
            continue
        sentence.append(line.split()[0])
    if sentence:
        doc.append(" ".join(sentence))
    if doc:
        documents.append(doc)
    _write(out, "conll", documents)


GLUE = {"rte": ("sentence1", "sentence2"), "mrpc": ("#1 String", "#2 String"), "cola": None}


def glue(data: Path, out: Path) -> None:
    for task, columns in GLUE.items():
        path = data / task / "train.tsv"
        if not path.is_file():
            continue
        if columns is None:  # CoLA's train.tsv has no header: source, label, mark, sentence
            with path.open(newline="", encoding="utf-8") as f:
                texts = [row[3].strip() for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
        else:
            rows = _tsv(path)
            texts = [r[c].strip() for r in rows for c in columns]
        # one document of distinct texts, one a line: packed into full sequences (a document per text would
        # give mostly padding, the texts being far shorter than a sequence)
        _write(out, task, [list(dict.fromkeys(t for t in texts if t))])


def wiki(data: Path, out: Path) -> None:
    documents = []
    for name in ("wiki.valid.tokens", "wiki.test.tokens"):
        path = data / "wikitext2" / name
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            # one paragraph a line (bertlab splits a line into its sentences when it reads the corpus)
            documents += [[t for t in map(undo_wikitext_marks, doc) if t] for doc in wikitext_documents(lines, split=lambda x: [x])]
    squad = data / "squad_v1.1" / "train.json"
    if squad.is_file():
        for article in json.loads(squad.read_text(encoding="utf-8"))["data"]:
            paragraphs = dict.fromkeys(" ".join(p["context"].split()) for p in article["paragraphs"])
            documents.append([p for p in paragraphs if p])
    documents = [doc for doc in documents if doc]
    if documents:
        _write(out, "wiki", documents)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    sst2(data, out)
    conll(data, out)
    glue(data, out)
    wiki(data, out)


if __name__ == "__main__":
    main()
