"""The update-scope audit: which named parameter tensors could train, reached the optimizer, got a gradient,
and changed, over a fit (``update_scope.json``).

``requires_grad=True`` alone does not mean a tensor changes; only comparing tensors before and after a step
shows that. :class:`ScopeAudit` does that comparison (plain PyTorch), and :class:`UpdateScopeAuditCallback`
runs it in a Lightning fit and writes ``update_scope.json``.
"""

from __future__ import annotations

import json
import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn

from bertlab.models.encoder import layer_stack_path
from bertlab.models.keys import ENCODER, HEAD
from bertlab.models.lora import ADAPTER_PARAMETER_NAMES
from bertlab.runtime.files import RUN_DIR_FIX, write_text_atomic, writing
from bertlab.tasks.distill import parameter_checksum

log = logging.getLogger(__name__)

COUNT_KEYS = ("tensors", "trainable", "in_optimizer", "with_grad", "changed")



class FrozenTensorChanged(RuntimeError):
    """A tensor that was frozen (requires_grad=False) when the audit started changed during training."""


class UpdateScopeWarning(UserWarning):
    """A trainable tensor never got a gradient, or the optimizer disagrees with requires_grad."""


@dataclass
class _Tracked:
    name: str  # full name: "<encoder_prefix>.<name in encoder>" or "<head_prefix>.<name in head>"
    part: str  # "encoder" | "head" | "adapters"
    group: str
    param: nn.Parameter = field(repr=False)
    module: nn.Module = field(repr=False)  # the module that owns the tensor (its training flag)
    frozen: bool  # requires_grad=False at start()


def _encoder_group(rel_name: str, stack: str = "encoder.layer") -> str:
    """``encoder.layer.N.*`` (``stack``: the encoder's ``layer_stack``, ModernBERT's ``layers``) → ``layer.N``;
    otherwise the first name component (``embeddings``, ``pooler``; for other encoders e.g. ``token_embedding``)."""
    m = re.match(re.escape(stack) + r"\.(\d+)\.", rel_name)
    return f"layer.{m.group(1)}" if m else rel_name.split(".", 1)[0]


def _owner(root: nn.Module, rel_name: str) -> nn.Module:
    module_name = rel_name.rpartition(".")[0]
    return root.get_submodule(module_name) if module_name else root


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "tensors": len(rows),
        "trainable": sum(r["requires_grad"] for r in rows),
        "in_optimizer": sum(r["in_optimizer"] for r in rows),
        "with_grad": sum(r["with_grad"] for r in rows),
        "changed": sum(r["changed"] for r in rows),
    }


class ScopeAudit:
    """Which named parameter tensors could train, reached the optimizer, got a gradient, and changed.

    Plain PyTorch (``UpdateScopeAuditCallback`` drives it from Lightning). Use::

        audit = ScopeAudit(encoder, head, optimizer, policy="lora")
        audit.start()                      # snapshot every tensor (CPU copies)
        ... loss.backward(); audit.record_grads(); optimizer.step() ...
        audit.after_step("first_step")     # compare with the snapshot; raises if a frozen tensor changed
        report = audit.report()

    Names: encoder tensors are ``<encoder_prefix>.<name in the encoder>``, head tensors
    ``<head_prefix>.<name in the head>`` (the callback uses ``encoder`` / ``head``, i.e. ``TaskModel``'s own
    parameter names). A tensor tied into the head appears once, under its encoder name.

    Groups: ``layer.N`` for ``encoder.layer.N.*`` (or the encoder's ``layer_stack``), else the first component
    of the encoder name (``embeddings``, ``pooler``, …), ``head`` for the head, ``adapters`` for LoRA tensors (``lora_A`` /
    ``lora_B``). Totals: ``encoder`` (pooler included, adapters excluded), ``head``, ``adapters``.

    Counts per set, over named parameter tensors: ``tensors``; ``trainable`` (requires_grad now);
    ``in_optimizer`` (in one of the optimizer's param groups now); ``with_grad`` (``p.grad is not None`` at
    some recorded moment since ``start``: ``record_grads`` and ``after_step`` both look; record right after
    backward, before gradients are zeroed); ``changed`` (not ``torch.equal`` to the snapshot). "Frozen"
    means requires_grad=False at ``start``.
    """

    def __init__(
        self,
        encoder: nn.Module,
        head: nn.Module,
        optimizer: torch.optim.Optimizer | None,
        policy: str,
        encoder_prefix: str = "encoder",
        head_prefix: str = "head",
    ):
        self.encoder, self.head, self.optimizer, self.policy = encoder, head, optimizer, policy
        self.encoder_prefix, self.head_prefix = encoder_prefix, head_prefix
        self._tracked: list[_Tracked] = []
        self._snapshot: dict[str, torch.Tensor] = {}
        self._ever_grad: set[str] = set()
        self._rows: list[dict[str, Any]] = []
        self._checkpoints: dict[str, dict[str, Any]] = {}
        self._steps_recorded = 0
        self.teacher: dict[str, Any] | None = None  # a distillation teacher's audit (UpdateScopeAuditCallback)

    def _track(self) -> list[_Tracked]:
        tracked: list[_Tracked] = []
        seen: set[int] = set()
        roots = ((self.encoder_prefix, self.encoder, "encoder"), (self.head_prefix, self.head, "head"))
        for prefix, root, part in roots:
            for rel, p in root.named_parameters():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                leaf = rel.rsplit(".", 1)[-1]
                if leaf in ADAPTER_PARAMETER_NAMES:
                    kind, group = "adapters", "adapters"
                else:
                    kind, group = part, (_encoder_group(rel, layer_stack_path(self.encoder)) if part == "encoder"
                                         else "head")
                frozen = not p.requires_grad
                tracked.append(_Tracked(f"{prefix}.{rel}", kind, group, p, _owner(root, rel), frozen))
        return tracked

    def start(self) -> None:
        """Snapshot every named parameter tensor (a CPU copy) and record the ``before`` checkpoint."""
        self._tracked = self._track()
        self._snapshot = {t.name: t.param.detach().to("cpu", copy=True) for t in self._tracked}
        self._ever_grad.clear()
        self._checkpoints.clear()
        self._steps_recorded = 0
        self._record("before")

    def record_grads(self) -> int:
        """Note which tensors hold a gradient now (after backward, before zero_grad); returns how many."""
        self._require_started()
        n = 0
        for t in self._tracked:
            if t.param.grad is not None:
                self._ever_grad.add(t.name)
                n += 1
        return n

    def after_step(self, label: str, check: bool = True) -> dict[str, Any]:
        """Record the state after an optimizer step under ``label`` (e.g. ``first_step``, ``last_step``).

        Raises ``FrozenTensorChanged`` when ``check`` and a frozen tensor differs from its snapshot.
        Returns the checkpoint summary (``totals``, ``groups``, ``frozen_changed``, ``modules_in_eval_mode``).
        """
        self._require_started()
        self.record_grads()
        self._steps_recorded += 1
        summary = self._record(label)
        if check and summary["frozen_changed"]:
            raise FrozenTensorChanged(self._frozen_message(summary["frozen_changed"]))
        return summary

    def _require_started(self) -> None:
        if not self._tracked:
            raise RuntimeError("ScopeAudit.start() was not called (or the model has no parameters)")

    def _optimizer_ids(self) -> set[int]:
        if self.optimizer is None:
            return set()
        return {id(p) for group in self.optimizer.param_groups for p in group["params"]}

    def _record(self, label: str) -> dict[str, Any]:
        in_opt = self._optimizer_ids()
        rows = []
        for t in self._tracked:
            current = t.param.detach()
            rows.append({
                "name": t.name,
                "part": t.part,
                "group": t.group,
                "shape": list(t.param.shape),
                "frozen": t.frozen,
                "requires_grad": bool(t.param.requires_grad),
                "in_optimizer": id(t.param) in in_opt,
                "with_grad": t.name in self._ever_grad,
                "changed": not torch.equal(current.to("cpu"), self._snapshot[t.name]),
                "module_training": bool(t.module.training),
            })
        self._rows = rows
        summary = {
            "totals": self._totals(rows),
            "groups": self._groups(rows),
            "frozen_changed": [r["name"] for r in rows if r["frozen"] and r["changed"]],
            # Tensors whose owning module is in eval mode (dropout off) at this moment.
            "tensors_in_eval_mode_modules": sum(not r["module_training"] for r in rows),
        }
        self._checkpoints[label] = summary
        return summary

    @staticmethod
    def _totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
        parts = ("encoder", "head", "adapters")
        return {part: _counts([r for r in rows if r["part"] == part]) for part in parts}

    @staticmethod
    def _groups(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
        names: list[str] = []
        for r in rows:
            if r["group"] not in names and r["group"] not in ("head", "adapters"):
                names.append(r["group"])
        names += [g for g in ("head", "adapters") if any(r["group"] == g for r in rows)]
        return {g: _counts([r for r in rows if r["group"] == g]) for g in names}

    @property
    def frozen_changed(self) -> list[str]:
        """Full names of frozen tensors that differ from their snapshot (as of the last record)."""
        return [r["name"] for r in self._rows if r["frozen"] and r["changed"]]

    @property
    def trainable_without_grad(self) -> list[str]:
        """Trainable tensors that never had a gradient (empty until a step was recorded)."""
        if not self._steps_recorded:
            return []
        return [r["name"] for r in self._rows if r["requires_grad"] and not r["with_grad"]]

    def _frozen_message(self, names: list[str]) -> str:
        shown = ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
        return (f"freeze={self.policy}: {len(names)} frozen tensor(s) changed during training: {shown}. "
                "Something other than the optimizer's trainable set wrote to them.")

    def check(self, raise_on_frozen_change: bool = True) -> None:
        """Warn about trainable tensors without a gradient and optimizer/requires_grad disagreements; raise
        ``FrozenTensorChanged`` (or only warn, when ``raise_on_frozen_change`` is False) if a frozen tensor
        changed."""
        missing = self.trainable_without_grad
        if missing:
            warnings.warn(
                f"freeze={self.policy}: {len(missing)} trainable tensor(s) never got a gradient "
                f"(unused in the forward pass?): {', '.join(missing[:20])}", UpdateScopeWarning, stacklevel=2,
            )
        if self.optimizer is not None:
            outside = [r["name"] for r in self._rows if r["requires_grad"] and not r["in_optimizer"]]
            inside = [r["name"] for r in self._rows if not r["requires_grad"] and r["in_optimizer"]]
            if outside or inside:
                warnings.warn(
                    f"freeze={self.policy}: optimizer and requires_grad disagree: trainable but not in the "
                    f"optimizer {outside[:20]}; frozen but in the optimizer {inside[:20]}",
                    UpdateScopeWarning, stacklevel=2,
                )
        changed = self.frozen_changed
        if changed:
            if raise_on_frozen_change:
                raise FrozenTensorChanged(self._frozen_message(changed))
            warnings.warn(self._frozen_message(changed), UpdateScopeWarning, stacklevel=2)

    def report(self) -> dict[str, Any]:
        """The ``update_scope.json`` content: per-tensor rows and counts per part, as of the last record."""
        self._require_started()
        params = {}
        for part in ("encoder", "head", "adapters"):
            tensors = [t.param for t in self._tracked if t.part == part]
            params[part] = {"total": sum(p.numel() for p in tensors),
                            "trainable": sum(p.numel() for p in tensors if p.requires_grad)}
        return {
            "policy": self.policy,
            "totals": self._totals(self._rows),
            "groups": self._groups(self._rows),
            "frozen_changed": self.frozen_changed,
            "trainable_without_grad": self.trainable_without_grad,
            "names": {"encoder_prefix": self.encoder_prefix, "head_prefix": self.head_prefix},
            "optimizer": type(self.optimizer).__name__ if self.optimizer is not None else None,
            "steps_recorded": self._steps_recorded,
            "parameters": params,
            "checkpoints": {label: dict(s) for label, s in self._checkpoints.items()},
            "tensors": [dict(r) for r in self._rows],
            # distillation: the teacher's size and checksums before / after (never updated: "updated": false)
            **({"teacher": dict(self.teacher)} if self.teacher is not None else {}),
        }

    def write(self, path: str | Path) -> Path:
        """Write ``report()`` as JSON (the caller decides the rank: write on global rank 0 only)."""
        path = Path(path)
        with writing(path, "the update-scope report", RUN_DIR_FIX):
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, json.dumps(self.report(), indent=2) + "\n")
        return path



class UpdateScopeAuditCallback(pl.Callback):
    """Runs ``ScopeAudit`` over a fit and writes ``update_scope.json``.

    Reads ``pl_module.model.encoder`` / ``.head``, ``trainer.optimizers[0]`` and
    ``pl_module.freeze_plan.policy``.
    Snapshot at ``on_train_start``; gradients at every ``on_before_optimizer_step`` (after backward, before
    the step and the next zero_grad); changes after the first optimizer step (``on_train_batch_end`` once
    ``global_step`` moved) and at ``on_train_end``. Names are ``TaskModel``'s (``encoder.*``, ``head.*``).

    ``output_path``: the JSON file, or a directory (no ``.json`` suffix) that gets ``update_scope.json``.
    Written on global rank 0 only; then every rank raises ``FrozenTensorChanged`` if a frozen tensor changed
    (only a warning with ``fail_on_frozen_change=False``). A first-step violation stops training at once.
    """

    def __init__(self, output_path: str | Path, fail_on_frozen_change: bool = True):
        path = Path(output_path)
        self.output_path = path if path.suffix == ".json" else path / "update_scope.json"
        self.fail_on_frozen_change = fail_on_frozen_change
        self.audit: ScopeAudit | None = None
        self._start_step = 0
        self._first_step_done = False
        self._teacher: nn.Module | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        plan = getattr(pl_module, "freeze_plan", None)
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        self.audit = ScopeAudit(
            pl_module.model.encoder, pl_module.model.head, optimizer,
            policy=plan.policy if plan is not None else "unknown", encoder_prefix=ENCODER, head_prefix=HEAD,
        )
        self.audit.start()
        self._teacher = _teacher_of(pl_module)
        if self._teacher is not None:
            self.audit.teacher = {"parameters": sum(p.numel() for p in self._teacher.parameters()),
                                  "trainable": sum(p.numel() for p in self._teacher.parameters() if p.requires_grad),
                                  "checksum_before": parameter_checksum(self._teacher)}
        self._start_step = trainer.global_step
        self._first_step_done = False

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                                 optimizer: torch.optim.Optimizer) -> None:
        if self.audit is not None:
            self.audit.record_grads()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        if self.audit is None or self._first_step_done or trainer.global_step <= self._start_step:
            return
        self._first_step_done = True
        self.audit.after_step("first_step", check=False)
        if self.audit.frozen_changed and self.fail_on_frozen_change:
            self._finish(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.audit is None:
            return
        self.audit.after_step("last_step", check=False)
        self._finish(trainer)

    def _finish(self, trainer: pl.Trainer) -> None:
        assert self.audit is not None
        teacher = self.audit.teacher
        if teacher is not None and self._teacher is not None:
            optimized = {id(p) for g in (trainer.optimizers[0].param_groups if trainer.optimizers else [])
                         for p in g["params"]}
            teacher["checksum_after"] = parameter_checksum(self._teacher)
            teacher["in_optimizer"] = sum(p.numel() for p in self._teacher.parameters() if id(p) in optimized)
            teacher["updated"] = teacher["checksum_after"] != teacher["checksum_before"] or teacher["in_optimizer"] > 0
        if trainer.is_global_zero:
            self.audit.write(self.output_path)
            log.info("update scope written to %s", self.output_path)
        self.audit.check(raise_on_frozen_change=self.fail_on_frozen_change)
        if teacher is not None and teacher.get("updated"):
            raise FrozenTensorChanged(f"the distillation teacher changed during training (update_scope.json: "
                                      f"{teacher}): it must only be read; this is a bug in bertlab, please report it")


def _teacher_of(pl_module: pl.LightningModule) -> nn.Module | None:
    """The distillation teacher a module's family runs (``tasks.distill.DistilledFamily``), or None."""
    return getattr(getattr(pl_module, "family", None), "teacher", None)


