"""Users' own data: CSV/JSONL tables with named columns, regression, CoNLL with derived tags."""

from __future__ import annotations

import json
import random

import pytest
import torch

TINY = ("model=bert_tiny", "trainer.max_epochs=2", "data.batch_size=8")
WORDS = ["good", "great", "fine", "bad", "awful", "poor", "movie", "plot", "actors", "film"]


def _rows(n: int, seed: int):
    rng = random.Random(seed)
    for i in range(n):
        words = rng.sample(WORDS, 4)
        score = sum(w in ("good", "great", "fine") for w in words) - sum(w in ("bad", "awful", "poor") for w in words)
        yield i, " ".join(words), "the review", score


def test_csv_with_named_columns_derives_labels(train_run, tmp_path):
    for split, n in (("train", 48), ("dev", 16)):
        lines = ["review,other,stars"] + [f'"{t}, really",x,{"pos" if s > 0 else "neg"}' for _, t, _, s in _rows(n, len(split))]
        (tmp_path / f"{split}.csv").write_text("\n".join(lines) + "\n")
    m = train_run(*TINY, "task=text_classification", f"data.train_file={tmp_path}/train.csv",
                  f"data.val_file={tmp_path}/dev.csv", "data.text_column=review", "data.label_column=stars")
    assert m["val"]["num_examples"] == 16 and 0.0 <= m["val"]["accuracy"] <= 1.0
    ckpt = torch.load(m["best_checkpoint"], map_location="cpu", weights_only=False)
    assert ckpt["hyper_parameters"]["labels"] == ["neg", "pos"]  # sorted, exactly as in the file


def test_jsonl_regression_reports_correlations(train_run, tmp_path):
    for split, n in (("train", 48), ("dev", 16)):
        with open(tmp_path / f"{split}.jsonl", "w") as f:
            for i, a, b, s in _rows(n, 7 + len(split)):
                f.write(json.dumps({"id": i, "text": a, "text_pair": b, "label": s / 4}) + "\n")
    m = train_run(*TINY, "task=text_regression", f"data.train_file={tmp_path}/train.jsonl",
                  f"data.val_file={tmp_path}/dev.jsonl", "data.text_pair_column=text_pair")
    assert set(m["val"]) >= {"loss", "pearson", "spearmanr", "num_examples"}
    assert -1.0 <= m["val"]["pearson"] <= 1.0 and m["params"]["total"] > 0


def test_unseen_label_in_dev_is_an_error_naming_file_and_line(train_run, tmp_path):
    (tmp_path / "train.tsv").write_text("text\tlabel\na b\tx\nc d\ty\n")
    (tmp_path / "dev.tsv").write_text("text\tlabel\na b\tx\nc d\tz\n")
    with pytest.raises(ValueError, match=r"dev\.tsv:3: label 'z' is not in the task's label set"):
        train_run(*TINY, "task=text_classification", f"data.train_file={tmp_path}/train.tsv",
                  f"data.val_file={tmp_path}/dev.tsv", "data.text_column=text")
