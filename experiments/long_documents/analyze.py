"""Accuracy of the long-document study's runs by where the deciding sentence lies: inside the first window (what a
truncating model reads) or past it, with the time per document of training and of prediction.

    python experiments/long_documents/analyze.py DATA_DIR RUN_DIR [RUN_DIR ...] [--out results.md] [--window-stride N]

DATA_DIR is make_data.py's output (its dev.tsv carries each decider's characters); each RUN_DIR a finished run on
it. Every dev document is predicted again with the run's checkpoint (``bertlab.Predictor``: the run's own windows
or truncation) and timed; the decider is "in the first window" when its last token is among the first
max_seq_length minus the special tokens of the document's tokens. ``--window-stride N`` predicts with windows sharing
N tokens instead of the run's own (a prediction-time change only: the model is the same).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path


def read_dev(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def analyze(run_dir: Path, rows: list[dict[str, str]], window_stride: int | None = None) -> dict[str, object]:
    from bertlab import Predictor

    predictor = Predictor.from_run(run_dir)
    if window_stride is not None:
        predictor.settings.window_stride = window_stride
    settings, tokenizer = predictor.settings, predictor.tokenizer
    window = settings.max_seq_length - tokenizer.num_special_tokens()
    ends = tokenizer.encode_batch([r["text"][:int(r["decider_end"])] for r in rows], add_special_tokens=False)
    inside = [len(e.ids) <= window for e in ends]
    started = time.perf_counter()
    records = predictor([r["text"] for r in rows])
    seconds = time.perf_counter() - started
    right = [rec["label"] == r["label"] for rec, r in zip(records, rows)]
    metrics = json.loads((run_dir / "metrics.json").read_text())

    def accuracy(keep: list[bool]) -> tuple[float | None, int]:
        picked = [ok for ok, k in zip(right, keep) if k]
        return (sum(picked) / len(picked) if picked else None), len(picked)

    train = metrics.get("train") or {}
    return {"run": run_dir.name, "long_text": settings.long_text, "val_accuracy": metrics["val"].get("accuracy"),
            "accuracy": accuracy([True] * len(rows)), "first_window": accuracy(inside),
            "past_first_window": accuracy([not k for k in inside]),
            "train_s_per_doc": 1 / train["samples_per_s"] if train.get("samples_per_s") else float("nan"),
            "predict_s_per_doc": seconds / len(rows)}


def table(results: list[dict[str, object]]) -> str:
    def acc(value: tuple[float | None, int]) -> str:
        return f"{value[0]:.3f} (n={value[1]})" if value[0] is not None else f"– (n={value[1]})"

    lines = ["| run | data.long_text | dev accuracy | decider in the first window | decider past it | "
             "train s/doc | predict s/doc |", "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['run']} | {r['long_text']} | {acc(r['accuracy'])} | {acc(r['first_window'])} | "
                     f"{acc(r['past_first_window'])} | {r['train_s_per_doc']:.3f} | {r['predict_s_per_doc']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (markdown)")
    parser.add_argument("--window-stride", type=int, default=None,
                        help="predict with windows sharing this many tokens instead of each run's own")
    args = parser.parse_args(argv)
    rows = read_dev(args.data_dir / "dev.tsv")
    results = [analyze(run, rows, args.window_stride) for run in args.runs]
    text = table(results)
    for r in results:  # the run's own evaluation and this re-prediction must agree (metrics.json holds float32)
        if args.window_stride is None and r["val_accuracy"] is not None and abs(r["val_accuracy"] - r["accuracy"][0]) > 0.5 / len(rows):
            text += (f"\nNOTE: {r['run']}: metrics.json val accuracy {r['val_accuracy']:.4f} differs from the "
                     f"re-prediction's {r['accuracy'][0]:.4f}\n")
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
