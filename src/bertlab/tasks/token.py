"""Token classification (NER): word-level decoding, entity scores, and the token family.

Tags were brought to IOB2 and aligned to sub-words by the data side (:mod:`bertlab.data.tags`). Then:

1. the model predicts a label per token; a sentence read in several windows is stitched back
   (:func:`stitch_windows`: each token is read where its window owns it, the one with the most context);
   :func:`decode_word_predictions` reads each word's label at its first sub-word, giving one tag per
   *word* — also for words that have no sub-word (a word the normalizer deletes, e.g. a lone zero-width
   space) or whose sub-words were cut by ``data.long_text=truncate``: those are predicted ``O`` so the word
   sequence keeps its length and their gold entities count as missed (false negatives), never silently
   dropped;
2. :func:`bertlab.tasks.entities.entity_prf` scores entities, not tokens, exactly like ``seqeval.metrics``
   in its default (conlleval-compatible) mode.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch.nn.functional as F

from bertlab.data.tags import IGNORE_INDEX
from bertlab.models.heads import TokenClassificationHead
from bertlab.tasks import metrics
from bertlab.tasks.base import Family
from bertlab.tasks.entities import decode_word_predictions, stitch_windows

__all__ = ["TokenFamily"]


class TokenFamily(Family):
    head_kind = "token"

    @classmethod
    def logged_metrics(cls, task, data):
        return {"loss": "min", "precision": "max", "recall": "max", "f1": "max", "accuracy": "max", "num_words": None}

    def build_head(self, config, head, word_embeddings):
        return TokenClassificationHead(config, head, self.num_labels)

    def loss(self, logits, batch):
        return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)

    def eval_step(self, logits, batch, state):
        labels = batch["labels"]
        per = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
        state.add_loss(per, (labels != IGNORE_INDEX).sum())
        preds = logits.argmax(-1).cpu()
        lengths = batch["attention_mask"].sum(1).cpu()
        state.index.append(batch["index"].cpu())
        state.outputs.extend(preds[i, : lengths[i]].numpy() for i in range(len(preds)))

    def score(self, index, outputs, split, loss, extra):
        """Entity scores over every word of the sentences evaluated: a sentence's windows are stitched back
        (:func:`stitch_windows`) and decoded per word; ``num_examples`` counts sentences, ``num_words`` the
        words scored (all of them: a word no window reads is predicted ``O``, not dropped)."""
        data = split.eval_data
        o_id = self.labels.index("O") if "O" in self.labels else 0
        windows: dict[int, list[tuple[int, np.ndarray]]] = defaultdict(list)
        for f, pred in zip(index.tolist(), outputs):
            windows[data.sentence[f]].append((f, pred))
        true_seqs, pred_seqs = [], []
        for s in sorted(windows):
            parts = sorted(windows[s], key=lambda fp: fp[0])
            preds, word_ids = stitch_windows([p for _, p in parts], [data.word_ids[f] for f, _ in parts])
            words = decode_word_predictions(preds, word_ids, len(data.gold_tags[s]), o_id=o_id)
            true_seqs.append(data.gold_tags[s])
            pred_seqs.append([self.labels[w] for w in words])
        return {"loss": loss, **metrics.entity_scores(true_seqs, pred_seqs), "num_examples": len(true_seqs),
                "num_words": sum(map(len, true_seqs))}
