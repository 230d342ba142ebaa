"""Knowledge distillation: the one place a teacher's outputs join a family's loss.

Every family keeps its own loss (the task loss); :class:`DistilledFamily` wraps it through the same seam
(``Family.loss``), runs the teacher on the batch without gradients and adds :func:`teacher_term`:

    loss = alpha · task loss + (1 − alpha) · T² · KL(softmax(teacher / T) ‖ softmax(student / T))

taken per example (classification), per token (tagging: the positions the task loss scores, so padding,
special tokens and ignored word pieces never count), per start and end position (QA: padding masked) and per
choice (multiple choice: padded choices masked); regression uses the MSE to the teacher's value instead of the
KL (no T²). The T² keeps the soft term's gradients on the scale of the task loss's whatever T is (Hinton et al.).

The teacher is a plain attribute of the wrapper, never a submodule of the LightningModule: it is not in the
optimizer, not in ``state_dict`` and so in no checkpoint or export. It stays in eval mode with
``requires_grad=False`` and follows the student's device on the first batch.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertlab.data.safe_cache import CacheCorrupt, load_tree, save_tree
from bertlab.data.tags import IGNORE_INDEX, UNLABELLED_WORD
from bertlab.runtime.config import DistillConfig
from bertlab.tasks.distill_match import LayerMatching, recording

log = logging.getLogger(__name__)

# A masked position's logit: its probability is exactly 0 in float32 at any temperature the schema allows.
MASKED = -1e9


def soft_kl(student: torch.Tensor, teacher: torch.Tensor, temperature: float,
            mask: torch.Tensor | None = None) -> torch.Tensor:
    """T² · KL(softmax(teacher/T) ‖ softmax(student/T)) over the last dimension, averaged over the positions
    ``mask`` keeps (all when None)."""
    t = F.log_softmax(teacher.float() / temperature, dim=-1)
    s = F.log_softmax(student.float() / temperature, dim=-1)
    kl = (t.exp() * (t - s)).sum(-1)
    if mask is not None:
        kl = kl[mask]
    if kl.numel() == 0:  # nothing to compare (a batch of windows without a scored token): no teacher term
        return student.sum() * 0.0
    return temperature ** 2 * kl.mean()


def teacher_term(family: str, regression: bool, student: torch.Tensor, teacher: torch.Tensor,
                 batch: dict[str, torch.Tensor], temperature: float) -> torch.Tensor:
    """The teacher's term of the loss for a task ``family`` (see the module's docstring)."""
    if family == "sequence":
        if regression:
            return F.mse_loss(student.float().squeeze(-1), teacher.float().squeeze(-1))
        return soft_kl(student, teacher, temperature)
    if family == "token":
        return soft_kl(student, teacher, temperature, mask=batch["labels"] != IGNORE_INDEX)
    if family == "qa":  # (B, T, 2): a distribution over positions for the start, and one for the end
        if "attention_mask" in batch:
            pad = ~batch["attention_mask"].bool()[..., None]
            student, teacher = student.float().masked_fill(pad, MASKED), teacher.float().masked_fill(pad, MASKED)
        return (soft_kl(student[..., 0], teacher[..., 0], temperature)
                + soft_kl(student[..., 1], teacher[..., 1], temperature)) / 2
    if family == "multiple_choice":  # (B, C): a distribution over an example's choices
        if "choice_mask" in batch:
            keep = batch["choice_mask"]
            student, teacher = student.float().masked_fill(~keep, MASKED), teacher.float().masked_fill(~keep, MASKED)
        return soft_kl(student, teacher, temperature)
    raise ValueError(f"task family {family!r} has no distillation loss")


def distillation_loss(task_loss: torch.Tensor, family: str, regression: bool, student: torch.Tensor,
                      teacher: torch.Tensor, batch: dict[str, torch.Tensor], alpha: float,
                      temperature: float) -> torch.Tensor:
    """alpha · task loss + (1 − alpha) · the teacher's term."""
    if alpha == 1.0:
        return task_loss
    return alpha * task_loss + (1.0 - alpha) * teacher_term(family, regression, student, teacher, batch,
                                                            temperature)


def freeze_teacher(teacher: nn.Module) -> nn.Module:
    """The teacher as it must stay: eval mode (no dropout), no parameter that can get a gradient."""
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


def parameter_checksum(model: nn.Module, names: Callable[[str], str] = str) -> str:
    """A hash of every parameter of ``model`` (name as ``names`` gives it, shape, dtype and values): the same
    before and after training exactly when nothing updated it (update_scope.json's ``teacher`` section)."""
    digest = hashlib.sha256()
    for name, p in sorted(((names(n), p) for n, p in model.named_parameters()), key=lambda kv: kv[0]):
        digest.update(f"{name}:{tuple(p.shape)}:{p.dtype}".encode())
        digest.update(p.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


class TeacherOutputs:
    """The teacher's outputs on the training split, one row per feature (``batch["index"]``), kept in memory as
    they are computed and written once every feature has one: a safetensors file (never a pickle) whose name
    holds the teacher's checksum and the training split's key (its files, the data and task settings with
    ``data.max_seq_length``, and the tokenizer), so a changed teacher or data never reads another's outputs.

    A row is what the loss reads of one example: its real tokens (tagging, QA: the padding is cut, as the batch's
    padding is masked in the loss anyway), its real choices (multiple choice), or its logits (classification,
    regression). Batches are rebuilt from the rows, padded with zeros where the loss masks."""

    def __init__(self, path: Path | None, num_features: int):
        self.path, self.num_features = path, num_features
        self.rows: dict[int, np.ndarray] = {}
        self.saved = False
        self.read = False  # the rows came from the file: the teacher never runs in this run
        if path is not None and path.is_file():
            try:
                stored = load_tree(path)
                self.rows = dict(zip(stored["index"].tolist(), stored["rows"]))
                self.saved = self.read = True
                log.info("distill: the teacher's outputs for %d training features read from %s", len(self.rows), path)
            except (CacheCorrupt, KeyError, TypeError) as err:
                log.warning("distill: teacher-output cache %s is unreadable (%s); the teacher runs again", path, err)

    def lookup(self, index: torch.Tensor, like: torch.Tensor) -> torch.Tensor | None:
        """The batch's teacher outputs shaped as the student's ``like``, or None when a row is missing."""
        keys = index.tolist()
        if not all(k in self.rows for k in keys):
            return None
        out = torch.zeros(like.shape, dtype=torch.float32)
        for i, k in enumerate(keys):
            row = torch.from_numpy(self.rows[k])
            out[i][tuple(slice(0, n) for n in row.shape)] = row
        return out.to(like.device)

    def store(self, index: torch.Tensor, outputs: torch.Tensor, batch: dict[str, torch.Tensor]) -> None:
        if self.saved or outputs.shape[0] != index.shape[0]:  # one row per feature, or no cache
            return
        outputs = outputs.detach().float().cpu()
        real = batch.get("attention_mask") if outputs.dim() == 3 else batch.get("choice_mask")
        lengths = real.sum(-1).tolist() if real is not None and real.dim() == 2 else None
        for i, k in enumerate(index.tolist()):
            row = outputs[i] if lengths is None else outputs[i, : int(lengths[i])]
            self.rows[k] = row.numpy().copy()
        if self.path is not None and len(self.rows) >= self.num_features:
            keys = sorted(self.rows)
            save_tree(self.path, {"index": np.asarray(keys, dtype=np.int64), "rows": [self.rows[k] for k in keys]})
            self.saved = True
            log.info("distill: the teacher's outputs for %d training features written to %s", len(keys), self.path)


class DistilledFamily:
    """A task family whose training loss also learns from ``teacher``; everything else (head, evaluation,
    scores, val/loss) is the wrapped family's, so a distilled run scores exactly as a plain one."""

    def __init__(self, inner: Any, teacher: nn.Module, settings: DistillConfig,
                 cache: TeacherOutputs | None = None, matching: LayerMatching | None = None):
        self.inner = inner
        self.teacher = freeze_teacher(teacher)
        self.settings = settings
        self.cache = cache  # None: the teacher runs on every batch
        # Hidden-state / attention matching (tasks/distill_match.py); it needs the teacher's layers, so the
        # teacher then runs on every batch and the cache is not read.
        self.matching = matching

    def outputs_source(self) -> str:
        """Where the training steps got the teacher's outputs (metrics.json's ``distill.teacher_outputs``, so a
        step time says whether it includes a teacher forward): ``none`` (alpha=1: no teacher term), ``read``
        (the kept file: the teacher never ran), ``written`` (the teacher ran until every training feature had
        its row, then they were written: the first epoch), ``live`` (the teacher ran on every batch)."""
        if self.settings.alpha == 1.0:
            return "none"
        if self.cache is None:
            return "live"
        return "read" if self.cache.read else "written" if self.cache.saved else "live"

    def trainable_modules(self) -> dict[str, nn.Module]:
        """The modules that train with the student but are not part of it (the matching's projection)."""
        return self.matching.trainable_modules() if self.matching is not None else {}

    def __getattr__(self, name: str) -> Any:  # head, eval_step, score, task, labels, ...: the family's own
        return getattr(self.__dict__["inner"], name)

    def teacher_outputs(self, batch: dict[str, torch.Tensor], device: torch.device) -> torch.Tensor:
        first = next(self.teacher.parameters(), None)
        if first is not None and first.device != device:
            self.teacher.to(device)
        self.teacher.eval()  # whatever a caller did to it: the teacher never runs dropout
        with torch.no_grad():
            return self.teacher(batch, **self.inner.head_kwargs(batch))

    def task_loss(self, out: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The family's loss over the examples that have a label: the texts of ``data.distill_file`` have none
        (IGNORE_INDEX, NaN for regression; a tagging sentence's words UNLABELLED_WORD) and learn from the
        teacher alone."""
        labels = batch.get("labels")
        if self.inner.task.family == "token" and labels is not None and bool((labels == UNLABELLED_WORD).any()):
            gold = labels.masked_fill(labels == UNLABELLED_WORD, IGNORE_INDEX)  # the teacher's positions only
            if not bool((gold != IGNORE_INDEX).any()):
                return out.sum() * 0.0  # a batch of unlabelled sentences only: no task term
            return self.inner.loss(out, {**batch, "labels": gold})
        if self.inner.task.family != "sequence" or labels is None:
            return self.inner.loss(out, batch)
        has_label = ~torch.isnan(labels) if labels.is_floating_point() else labels != IGNORE_INDEX
        if bool(has_label.all()):
            return self.inner.loss(out, batch)
        if not bool(has_label.any()):
            return out.sum() * 0.0
        return self.inner.loss(out[has_label], {**batch, "labels": labels[has_label]})

    def training_loss(self, forward: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The training step's loss goes through :meth:`loss` (task term + teacher term). Defined here, not
        reached through ``__getattr__``: the wrapped family's own ``training_loss`` would call its own ``loss``
        and leave the teacher out. With layer matching, both models' hidden states are recorded on the way
        (``forward``: the LightningModule, whose ``model`` is the student, or the student itself)."""
        if self.matching is None:
            return self.loss(forward(batch), batch)
        with recording(getattr(forward, "model", forward)) as student:
            out = forward(batch)
        with recording(self.teacher) as teacher:
            teacher_out = self.teacher_outputs(batch, out.device)
        return (self.loss(out, batch, teacher=teacher_out)
                + self.matching.loss(student.states, teacher.states, batch))

    def loss(self, out: torch.Tensor, batch: dict[str, torch.Tensor],
             teacher: torch.Tensor | None = None) -> torch.Tensor:
        """The task term and the teacher's term; ``teacher``: its outputs when already computed."""
        task_loss = self.task_loss(out, batch)
        if self.settings.alpha == 1.0:
            return task_loss
        if teacher is None and self.cache is not None:
            teacher = self.cache.lookup(batch["index"], out)
        if teacher is None:
            teacher = self.teacher_outputs(batch, out.device)
            if self.cache is not None:
                self.cache.store(batch["index"], teacher, batch)
        return distillation_loss(task_loss, self.inner.task.family, self.inner.task.regression, out, teacher,
                                 batch, self.settings.alpha, self.settings.temperature)
