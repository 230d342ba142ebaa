"""Generate bertlab's bundled sample datasets and the unit-test fixtures.

Every sentence, name, paragraph and article in these files is invented: this script builds them from
templates and word lists written for bertlab, seeded so that a rerun reproduces the files byte for byte.
Each dataset copies the file format of the public benchmark it stands in for (SST-2, MRPC and RTE in GLUE
TSV form, CoNLL-2003, WNUT-17, SQuAD v1.1, WikiText-2), so the same readers work on both.

    python tools/make_samples.py                  # writes src/bertlab/samples/ and tests/fixtures/data/
    python tools/make_samples.py --only fixtures  # just the test fixtures
    python tools/make_samples.py --check          # exit 1 if the committed files differ from a fresh run

The samples are for smoke runs and demos, not for reporting results.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from samples.common import FIXTURE_SIZES, FIXTURES_DIR, SAMPLE_SIZES, SAMPLES_DIR, SEED, Files, Sizes
from samples.conll import build_conll
from samples.glue import build_cola, build_mnli, build_qnli, build_qqp, build_stsb, build_wnli
from samples.mrpc import build_mrpc
from samples.rte import build_rte
from samples.squad import build_squad, build_squad_v2, build_swag
from samples.sst2 import build_sst2
from samples.wikitext import build_wikitext
from samples.wnut import build_wnut

# ---------------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------------

BUILDERS: list[tuple[str, Callable[[random.Random, Sizes], Files]]] = [
    ("sst2", build_sst2), ("mrpc", build_mrpc), ("rte", build_rte), ("conll2003", build_conll),
    ("wnut17", build_wnut), ("squad_v1.1", build_squad), ("wikitext2", build_wikitext),
    ("cola", build_cola), ("stsb", build_stsb), ("qqp", build_qqp), ("mnli", build_mnli), ("qnli", build_qnli),
    ("wnli", build_wnli), ("squad_v2", build_squad_v2), ("swag", build_swag),
]


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def count(path: str, text: str) -> str:
    """A short description of what one generated file holds (for the README)."""
    lines = text.split("\n")[:-1]
    if path.endswith(".csv"):
        return f"{len(lines) - 1} rows"
    if path.startswith("cola/"):
        return f"{len(lines)} rows (no header line, as CoLA's)"
    if path.endswith(".tsv"):
        return f"{len(lines) - 1} rows"
    if path.startswith("conll2003/"):
        docs = sum(line.startswith("-DOCSTART-") for line in lines)
        sentences = sum(1 for a, b in zip(lines, lines[1:], strict=False)
                        if a and not a.startswith("-DOCSTART-") and not b)
        return f"{sentences} sentences in {docs} documents"
    if path.startswith("wnut17/"):
        sentences = sum(1 for a, b in zip(lines, lines[1:] + [""], strict=True) if a.strip() and not b.strip())
        return f"{sentences} sentences"
    if path.endswith(".json"):
        data = json.loads(text)["data"]
        paragraphs = [p for article in data for p in article["paragraphs"]]
        questions = sum(len(p["qas"]) for p in paragraphs)
        impossible = sum(qa.get("is_impossible", False) for p in paragraphs for qa in p["qas"])
        extra = f" ({impossible} unanswerable)" if impossible else ""
        return f"{questions} questions{extra} on {len(paragraphs)} paragraphs of {plural(len(data), 'article')}"
    if path.endswith(".tokens"):
        articles = sum(line.startswith(" = ") and not line.startswith(" = = ") for line in lines)
        return f"{plural(articles, 'article')}, {len(text.split()):,} tokens"
    raise ValueError(path)


SAMPLES_README = """\
# bertlab sample data

Small datasets bundled with bertlab so that every task runs out of the box (`data.source=sample`).
They were **written for bertlab**: every sentence, name, paragraph and article is invented, generated
from templates and word lists by `tools/make_samples.py` (seeded, so a rerun reproduces these files byte
for byte: `python tools/make_samples.py --check`). No text was copied from any dataset.

Each folder copies the file format of the public benchmark it stands in for, so the same readers load
both: GLUE TSV for SST-2, MRPC (header without the byte-order mark the GLUE file has), RTE, CoLA (no
header line: source, label, the author's mark, sentence), STS-B (a 0-5 score), QQP, MNLI (parse columns
reduced to one bracket; matched and mismatched dev files), QNLI and WNLI; CoNLL-2003
(`word POS chunk NER`, IOB1); WNUT-17 (`token<TAB>tag`, IOB2; tab-only sentence breaks for most of the
train file, as in the original); SQuAD v1.1 JSON (three answers per dev question); SQuAD 2.0 JSON (the same kind of articles plus
unanswerable questions: a question of another paragraph of the same article, whose answer is not in this
one); SWAG CSV (a context, the first words of the next sentence and four endings); WikiText-2 tokens.

The samples of the rest of GLUE (CoLA, STS-B, QQP, MNLI, QNLI, WNLI) are made the same way. For CoLA,
STS-B, QNLI and WNLI real files exist, but the copies at hand came from third-party repositories without a
licence statement for the text (and CoLA's sentences are quoted from linguistics publications), so no row
of them is shipped in this Apache-2.0 package; run on the real data from a data folder or the hub instead.

**Use them for smoke runs, demos and tutorials, not for reporting results**: the text is template-made,
so scores on it say nothing about a model's quality on real data.

License: Apache-2.0, the same as bertlab.

| file | contents |
|---|---|
{rows}
"""

FIXTURES_README = """\
# Test fixtures

Tiny datasets for the unit tests, in the same formats and folder layout as the real benchmark files
(`../shared/data` beside the repository) and the bundled samples (`src/bertlab/samples`). Written for bertlab (invented text,
generated by `tools/make_samples.py --only fixtures`); Apache-2.0.

| file | contents |
|---|---|
{rows}
"""


def generate(kind: str, seed: int = SEED) -> Files:
    """All files of one kind ("samples" or "fixtures"), keyed by path relative to its folder."""
    sizes = SAMPLE_SIZES if kind == "samples" else FIXTURE_SIZES
    files: Files = {}
    for index, (_, build) in enumerate(BUILDERS):
        files.update(build(random.Random(seed + 100 * index + (kind == "fixtures")), sizes))
    rows = "\n".join(f"| `{path}` | {count(path, text)} |" for path, text in files.items())
    files["README.md"] = (SAMPLES_README if kind == "samples" else FIXTURES_README).format(rows=rows)
    return files


def write(files: Files, root: Path) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="\n")


def differences(files: Files, root: Path) -> list[str]:
    """Paths under ``root`` that are missing or differ from ``files``."""
    return [path for path, text in files.items()
            if not (root / path).is_file() or (root / path).read_text(encoding="utf-8") != text]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["samples", "fixtures"], help="write only one of the two sets")
    parser.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    parser.add_argument("--out", type=Path, help="write the chosen set here instead (needs --only)")
    args = parser.parse_args(argv)
    if args.out and not args.only:
        parser.error("--out needs --only")
    if args.out and not args.check:  # a folder of its own: never a run or export folder, nor inside one
        from bertlab.runtime.errors import ConfigError
        from bertlab.runtime.outputs import refuse_folder_in_bertlab_folders

        try:
            refuse_folder_in_bertlab_folders(args.out, f"--out {args.out}", "Name a folder of its own")
        except ConfigError as err:
            parser.error(str(err))
    targets = {"samples": SAMPLES_DIR, "fixtures": FIXTURES_DIR}
    status = 0
    for kind in [args.only] if args.only else ["samples", "fixtures"]:
        files, root = generate(kind), args.out or targets[kind]
        if args.check:
            stale = differences(files, root)
            for path in stale:
                print(f"out of date: {root / path}", file=sys.stderr)
            status |= bool(stale)
        else:
            write(files, root)
            size = sum(len(text.encode()) for text in files.values())
            print(f"wrote {len(files)} files ({size / 1024:.0f} KiB) to {root}")
    return status


if __name__ == "__main__":
    sys.exit(main())
