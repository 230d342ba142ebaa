"""Token classification (NER): word-level decoding, entity scores, and the token family.

Tags were brought to IOB2 and aligned to sub-words by the data side (:mod:`bertlab.data.tags`). Then:

1. the model predicts a label per token; a sentence read in several windows is stitched back
   (:func:`stitch_windows`: each token is read where its window owns it, the one with the most context);
   :func:`decode_word_predictions` reads each word's label at its first sub-word, giving one tag per
   *word* — also for words that have no sub-word (a word the normalizer deletes, e.g. a lone zero-width
   space) or whose sub-words were cut by ``data.long_text=truncate``: those are predicted ``O`` so the word
   sequence keeps its length and their gold entities count as missed (false negatives), never silently
   dropped;
2. :func:`entity_scores` scores entities, not tokens, exactly like ``seqeval.metrics`` in its default
   (conlleval-compatible) mode.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch.nn.functional as F

from bertlab.data.tags import IGNORE_INDEX
from bertlab.models.heads import TokenClassificationHead
from bertlab.tasks import metrics
from bertlab.tasks.base import Family
from bertlab.tasks.entities import decode_word_predictions, extract_entities, stitch_windows

__all__ = ["decode_word_predictions", "entity_scores", "extract_entities", "stitch_windows", "TokenFamily"]


def _prf(tp: int, n_pred: int, n_true: int) -> dict[str, float]:
    # 0.0 where undefined, as seqeval (zero_division="warn" -> 0, without the warning).
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _entity_sets(
    true_seqs: Sequence[Sequence[str]], pred_seqs: Sequence[Sequence[str]]
) -> tuple[dict[str, set], dict[str, set]]:
    if len(true_seqs) != len(pred_seqs):
        raise ValueError(f"{len(true_seqs)} gold sequences but {len(pred_seqs)} predicted ones")
    true: dict[str, set] = defaultdict(set)
    pred: dict[str, set] = defaultdict(set)
    for n, (t, p) in enumerate(zip(true_seqs, pred_seqs)):
        if len(t) != len(p):
            raise ValueError(f"sequence {n}: {len(t)} gold tags but {len(p)} predicted tags (one per word)")
        for type_, start, end in extract_entities(t):
            true[type_].add((n, start, end))
        for type_, start, end in extract_entities(p):
            pred[type_].add((n, start, end))
    return true, pred


def entity_scores(true_seqs: Sequence[Sequence[str]], pred_seqs: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro ``{"precision", "recall", "f1"}`` (fractions 0-1) over exact entity matches (type and span).

    Equals ``seqeval.metrics.{precision,recall,f1}_score`` in default mode; 0.0 where undefined (no
    predicted or no gold entity).
    """
    true, pred = _entity_sets(true_seqs, pred_seqs)
    tp = sum(len(true[k] & pred[k]) for k in true.keys() & pred.keys())
    return _prf(tp, sum(map(len, pred.values())), sum(map(len, true.values())))


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
