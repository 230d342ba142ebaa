"""Does a masked-LM start already know sentiment? Zero-shot SST-2 dev accuracy from its masked-LM head alone.

    python experiments/pretrain_quick/probe_sentiment.py RUN_DIR SST2_DEV_TSV

Each dev sentence is put in a template with one [MASK] ("<sentence> . it is a [MASK] film"), and the sentence is
called positive when the pre-trained head gives the positive words more probability than the negative ones there
(log of the summed probabilities). Two thresholds: 0 (the words as they are) and the median score over the dev
set (calibrated: it takes half the sentences as positive, no labels used). No training, no labels but for
scoring: a start whose masked-LM head reads sentiment from context scores well above 0.5 here.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch

TEMPLATES = ("{} . it is a [MASK] film .", "{} , [MASK] and", "a [MASK] , {}", "{} it 's [MASK] .")
POSITIVE = ("good", "great", "funny", "wonderful", "charming", "beautiful")
NEGATIVE = ("bad", "terrible", "dull", "awful", "boring", "tedious")


def scores(model, tokenizer, texts: list[str], pos: list[int], neg: list[int], batch: int = 64) -> torch.Tensor:
    """Per text: log P(positive words) - log P(negative words) at its [MASK]."""
    out = []
    with torch.no_grad():
        for start in range(0, len(texts), batch):
            enc = tokenizer.encode_batch(texts[start:start + batch])
            width = max(len(e.ids) for e in enc)
            ids = torch.tensor([e.ids + [tokenizer.pad_id] * (width - len(e.ids)) for e in enc])
            mask = torch.tensor([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in enc])
            where = (ids == tokenizer.mask_id).nonzero()  # one [MASK] a text, in text order
            logits, _ = model({"input_ids": ids, "attention_mask": mask}, positions=where)
            logp = logits.log_softmax(-1)
            out.append(logp[:, pos].logsumexp(-1) - logp[:, neg].logsumexp(-1))
    return torch.cat(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("dev", type=Path)
    args = parser.parse_args()
    from bertlab.inference.loading import load

    loaded = load(args.run, backend="torch")
    model, tokenizer = loaded.model.eval(), loaded.tokenizer
    vocab = tokenizer.tokenizer.get_vocab()
    pos, neg = [vocab[w] for w in POSITIVE if w in vocab], [vocab[w] for w in NEGATIVE if w in vocab]
    with args.dev.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    labels = torch.tensor([int(r["label"]) for r in rows])
    mask_token = tokenizer.tokenizer.id_to_token(tokenizer.mask_id)
    print("| template | accuracy, threshold 0 | accuracy, median threshold |\n|---|---|---|")
    for template in TEMPLATES:
        s = scores(model, tokenizer, [template.format(r["sentence"]).replace("[MASK]", mask_token) for r in rows],
                   pos, neg)
        at_zero = ((s > 0).long() == labels).float().mean().item()
        at_median = ((s > s.median()).long() == labels).float().mean().item()
        print(f"| `{template}` | {at_zero:.3f} | {at_median:.3f} |")


if __name__ == "__main__":
    main()
