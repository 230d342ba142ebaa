"""The training pairs of the embeddings measurement: each question of ``squad_v1.1/train.json`` with its
paragraph (8,582 pairs), or ``--pairs N`` of them drawn at random with a fixed seed (the same file for every seed
and both frameworks), written as JSON lines ``{"text": question, "text_pair": paragraph}``: what ``task=embedding``
reads, and what ``st_train.py`` reads.

    python experiments/embeddings/pairs.py --out PAIRS.jsonl [--pairs N] [--data-dir ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
SUBSET_SEED = 0  # the subset is part of the budget, not of a run's seed


def squad_pairs(path: Path) -> list[tuple[str, str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [(qa["question"].strip(), paragraph["context"].strip()) for article in data["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--pairs", type=int, default=None, help="a random subset of N pairs (default: all)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    pairs = squad_pairs(args.data_dir / "squad_v1.1" / "train.json")
    if args.pairs is not None and args.pairs < len(pairs):
        pairs = random.Random(SUBSET_SEED).sample(pairs, args.pairs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for question, paragraph in pairs:
            f.write(json.dumps({"text": question, "text_pair": paragraph}, ensure_ascii=False) + "\n")
    print(f"{len(pairs)} pairs ({len({p for _, p in pairs})} distinct paragraphs) → {args.out}")


if __name__ == "__main__":
    main()
