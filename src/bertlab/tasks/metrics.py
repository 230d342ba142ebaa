"""Every metric in one place, named as Hugging Face ``evaluate`` names them.

Accuracy, F1 and MCC come from torchmetrics; entity-level NER scores follow seqeval's default mode
(``bertlab.tasks.entities``); SQuAD EM/F1 follow the official v1.1 script (``bertlab.tasks.qa``).
Fractions for accuracy/precision/recall/F1, percentages for SQuAD, plain values for correlations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torchmetrics is imported where a score is computed, not with this module: every task family imports it, and
# prediction (which scores nothing) should not pay torchmetrics' import, seconds with its scipy dependencies.


def classification_scores(preds: torch.Tensor, target: torch.Tensor, num_labels: int) -> dict[str, float]:
    """accuracy and MCC always; F1 of the positive class (label id 1) for binary tasks, macro F1 otherwise."""
    from torchmetrics.functional import accuracy, f1_score, matthews_corrcoef

    if num_labels == 2:
        out = {
            "accuracy": accuracy(preds, target, task="binary"),
            "f1": f1_score(preds, target, task="binary"),
            "matthews_correlation": matthews_corrcoef(preds, target, task="binary"),
        }
    else:
        out = {
            "accuracy": accuracy(preds, target, task="multiclass", num_classes=num_labels),
            "f1": f1_score(preds, target, task="multiclass", num_classes=num_labels, average="macro"),
            "matthews_correlation": matthews_corrcoef(preds, target, task="multiclass", num_classes=num_labels),
        }
    return {k: float(v) for k, v in out.items()}


def regression_scores(preds: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """Pearson, Spearman and their mean ``combined_score`` (run_glue's STS-B metrics)."""
    from torchmetrics.functional import pearson_corrcoef, spearman_corrcoef

    if len(preds) < 2:
        return {"pearson": 0.0, "spearmanr": 0.0, "combined_score": 0.0}
    out = {"pearson": float(pearson_corrcoef(preds, target)), "spearmanr": float(spearman_corrcoef(preds, target))}
    out = {k: (0.0 if v != v else v) for k, v in out.items()}  # a constant prediction has no correlation
    return {**out, "combined_score": (out["pearson"] + out["spearmanr"]) / 2}


def entity_scores(true_seqs: list[list[str]], pred_seqs: list[list[str]]) -> dict[str, float]:
    from bertlab.tasks.entities import entity_prf

    scores = entity_prf(true_seqs, pred_seqs)
    flat_true = [t for s in true_seqs for t in s]
    flat_pred = [p for s in pred_seqs for p in s]
    token_acc = sum(t == p for t, p in zip(flat_true, flat_pred)) / max(len(flat_true), 1)
    return {"precision": scores["precision"], "recall": scores["recall"], "f1": scores["f1"],
            "accuracy": token_acc}
