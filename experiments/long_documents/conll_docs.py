"""CoNLL-2003 documents as single long "sentences": the tagging half of the long-documents study (issue 35).

Each document (the lines between two ``-DOCSTART-`` lines) is written as one CoNLL sentence: its sentences one
after the other with no blank line between them, so a tagger reads the whole document (hundreds of words, far
past ``data.max_seq_length=128``) and bertlab's windows (``data.long_text=windows``) must cover it. Every token
line is kept as it was, except the tag: with ``--scheme iob1`` (CoNLL-2003's ``eng.*`` files) each sentence's tags
are brought to IOB2 first, sentence by sentence, so that joining two sentences never merges an entity that ends
one with an entity of the same type that starts the next (in IOB1 both read ``I-X``). The output is IOB2: train
on it with ``data.tag_scheme=iob2``; its entities and words are exactly those of the input.

    python experiments/long_documents/conll_docs.py ../shared/data/conll2003/eng.train /tmp/docs/eng.train
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bertlab.data.tags import iob1_to_iob2


def documents(lines: list[str]) -> list[list[list[list[str]]]]:
    """Documents → sentences → token lines (as lists of columns); blank lines end sentences."""
    docs: list[list[list[list[str]]]] = [[]]
    sentence: list[list[str]] = []
    for line in lines:
        cells = line.split()
        if not cells or cells[0] == "-DOCSTART-":
            if sentence:
                docs[-1].append(sentence)
            sentence = []
            if cells and docs[-1]:
                docs.append([])
            continue
        sentence.append(cells)
    if sentence:
        docs[-1].append(sentence)
    return [d for d in docs if d]


def join(docs: list[list[list[list[str]]]], scheme: str) -> str:
    out = []
    for doc in docs:
        out.append("-DOCSTART- -X- O O\n\n")
        for sentence in doc:
            tags = [cells[-1] for cells in sentence]
            if scheme == "iob1":
                tags = iob1_to_iob2(tags)
            out.extend(" ".join([*cells[:-1], tag]) + "\n" for cells, tag in zip(sentence, tags))
        out.append("\n")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", type=Path, help="a CoNLL file with -DOCSTART- lines (eng.train, eng.testa)")
    parser.add_argument("output", type=Path, help="where to write the documents, one sentence each")
    parser.add_argument("--scheme", choices=("iob1", "iob2"), default="iob1",
                        help="the input's tag scheme (CoNLL-2003's eng.* files: iob1); the output is iob2")
    args = parser.parse_args(argv)
    docs = documents(args.input.read_text(encoding="utf-8").splitlines())
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(join(docs, args.scheme), encoding="utf-8")
    words = [sum(len(s) for s in d) for d in docs]
    print(f"{args.input} → {args.output}: {len(docs)} documents, {sum(len(d) for d in docs)} sentences, "
          f"{sum(words)} words (per document: median {sorted(words)[len(words) // 2]}, longest {max(words)})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
