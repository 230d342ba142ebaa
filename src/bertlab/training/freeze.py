"""Update scope: freeze policies, the optimizer's parameter groups, and the audit that proves what changed.

BERT-SEMANTICS.md "Update scope": ``eval()`` is not freezing and ``no_grad()`` is not parameter selection.
Freezing here means three things, owned by this module:

1. ``requires_grad_(False)`` on the frozen tensors (``apply_freeze``);
2. those tensors never reach the optimizer (``optimizer_param_groups`` / ``FreezePlan.trainable_parameters``
   take ``requires_grad=True`` tensors only, so weight decay cannot move them either);
3. modules whose parameters are *all* frozen run in eval mode (dropout off), set again at every training
   step because Lightning restores or resets modes around validation (``FreezePlan.set_modes``,
   ``FreezeModeGuard``). When no encoder tensor trains, ``FreezePlan.encoder_frozen`` tells the
   LightningModule to run the encoder under ``torch.no_grad()`` (no autograd graph).

``requires_grad=True`` alone does not mean a tensor changes; only comparing tensors before and after a step
shows that. ``ScopeAudit`` does that comparison (plain PyTorch), and ``UpdateScopeAuditCallback`` runs it in a
Lightning fit and writes ``update_scope.json``.

Policies only rely on the module names that their structure needs: ``embeddings`` (embeddings),
``embeddings`` + ``encoder.layer.N`` (bottom_k); ``none``, ``encoder``, ``bitfit`` and ``lora`` work on any
``nn.Module`` encoder. An encoder declares the policies that do not apply to it, with the reason, in
``unsupported_freeze_policies`` (the recurrent encoder has no ``nn.Linear`` for LoRA).
"""

from __future__ import annotations

import json
import logging
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn

from bertlab.config import ConfigError, FreezeConfig
from bertlab.lora import ADAPTER_PARAMETER_NAMES, inject_lora, lora_modules

log = logging.getLogger(__name__)

COUNT_KEYS = ("tensors", "trainable", "in_optimizer", "with_grad", "changed")


# --------------------------------------------------------------------------------------------------------
# Freeze policies
# --------------------------------------------------------------------------------------------------------


@dataclass
class FreezePlan:
    """What a freeze policy did to (encoder, head), and how the training loop must treat it.

    ``frozen_modules`` are the maximal submodules whose parameters are all frozen: the encoder itself for
    ``encoder``, ``embeddings`` for ``embeddings``, ``embeddings`` + ``encoder.layer.0..k-1`` for
    ``bottom_k``.
    They run in eval mode (dropout off: a frozen feature extractor is deterministic). ``bitfit`` and
    ``lora`` leave it empty on purpose: every encoder block still holds trainable tensors (biases, adapters),
    and their papers fine-tune with the model's dropout active, so the encoder stays in train mode.
    """

    policy: str
    frozen_modules: list[nn.Module] = field(repr=False)
    encoder_frozen: bool
    frozen_module_names: list[str] = field(default_factory=list)  # relative to the encoder; "" = the encoder
    adapted_modules: list[str] = field(default_factory=list)  # LoRA: the modules that got adapters
    encoder: nn.Module | None = field(default=None, repr=False, compare=False)
    head: nn.Module | None = field(default=None, repr=False, compare=False)

    def set_modes(self) -> None:
        """Put the frozen modules in eval mode. Call it at every (re)entry into training: Lightning ≥ 2.2
        neither calls ``.train()`` at fit start nor stops a ``.train()`` from an overridden
        ``on_validation_model_train`` (PITFALLS.md)."""
        for module in self.frozen_modules:
            module.eval()

    def trainable_parameters(self, model: nn.Module | None = None) -> list[tuple[str, nn.Parameter]]:
        """(name, parameter) for every trainable tensor of ``model`` (default: encoder then head, named
        ``encoder.*`` / ``head.*``), in registration order; tied tensors once."""
        if model is not None:
            return [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if self.encoder is None or self.head is None:
            raise ValueError("this FreezePlan holds no encoder/head: pass the model")
        return [(n, p) for n, p in _named_tensors(self.encoder, self.head) if p.requires_grad]

    @property
    def num_trainable(self) -> int:
        """Trainable scalar parameters of encoder + head (tied tensors counted once)."""
        return sum(p.numel() for _, p in self.trainable_parameters())

    @property
    def num_total(self) -> int:
        if self.encoder is None or self.head is None:
            raise ValueError("this FreezePlan holds no encoder/head")
        return sum(p.numel() for _, p in _named_tensors(self.encoder, self.head))


def _named_tensors(
    encoder: nn.Module, head: nn.Module, encoder_prefix: str = "encoder", head_prefix: str = "head"
) -> list[tuple[str, nn.Parameter]]:
    """Encoder tensors then head tensors, prefixed; a tensor tied into the head (the MLM decoder shares the
    word embeddings) is listed once, under its encoder name."""
    seen: set[int] = set()
    out: list[tuple[str, nn.Parameter]] = []
    for prefix, module in ((encoder_prefix, encoder), (head_prefix, head)):
        for name, p in module.named_parameters():
            if id(p) not in seen:
                seen.add(id(p))
                out.append((f"{prefix}.{name}", p))
    return out


def _submodule(encoder: nn.Module, path: str, policy: str, what: str) -> nn.Module:
    try:
        return encoder.get_submodule(path)
    except AttributeError:
        raise ConfigError(
            f"freeze={policy} needs {what} (a submodule named `{path}`, BERT layout); "
            f"{type(encoder).__name__} has none. Use freeze=none, encoder, bitfit or lora with this encoder."
        ) from None


def _layers(encoder: nn.Module, policy: str) -> nn.ModuleList:
    layers = _submodule(encoder, "encoder.layer", policy, "a layer stack")
    if not isinstance(layers, nn.ModuleList):
        raise ConfigError(
            f"freeze={policy}: `encoder.layer` of {type(encoder).__name__} is not an nn.ModuleList"
        )
    return layers


def _policy_none(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    return []


def _policy_encoder(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    encoder.requires_grad_(False)  # pooler included: it belongs to the encoder
    return [""]


def _policy_embeddings(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    _submodule(encoder, "embeddings", cfg.policy, "an embeddings module").requires_grad_(False)
    return ["embeddings"]


def _policy_bottom_k(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    embeddings = _submodule(encoder, "embeddings", cfg.policy, "an embeddings module")
    layers = _layers(encoder, cfg.policy)
    if cfg.k > len(layers):
        raise ConfigError(
            f"freeze.k={cfg.k} exceeds the encoder's {len(layers)} layers: use k <= {len(layers)}"
        )
    embeddings.requires_grad_(False)
    for i in range(cfg.k):
        layers[i].requires_grad_(False)
    return ["embeddings"] + [f"encoder.layer.{i}" for i in range(cfg.k)]


# `*bias` also matches fused names such as nn.MultiheadAttention's in_proj_bias; PyTorch's RNNs name theirs
# bias_ih_l0, bias_hh_l0_reverse, ...
_BIAS_RE = re.compile(r"(?:^|\.)[^.]*bias(?:_[ih]h_l\d+(?:_reverse)?)?$")


def _is_bias(name: str) -> bool:
    return _BIAS_RE.search(name) is not None


def _policy_bitfit(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    # BitFit (Ben Zaken et al. 2022): only bias terms of the encoder train.
    biases = 0
    for name, p in encoder.named_parameters():
        is_bias = _is_bias(name)
        p.requires_grad_(is_bias)
        biases += is_bias
    if not biases:
        raise ConfigError(f"freeze=bitfit: {type(encoder).__name__} has no parameters named *bias")
    return []


def _policy_lora(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    inject_lora(encoder, cfg.lora)
    for name, p in encoder.named_parameters():
        p.requires_grad_(name.rsplit(".", 1)[-1] in ADAPTER_PARAMETER_NAMES)
    return []


# Each policy sets requires_grad on the encoder (all True on entry) and returns the names, relative to the
# encoder, of the maximal fully frozen submodules.
POLICIES: dict[str, Callable[[nn.Module, FreezeConfig], list[str]]] = {
    "none": _policy_none,
    "encoder": _policy_encoder,
    "embeddings": _policy_embeddings,
    "bottom_k": _policy_bottom_k,
    "bitfit": _policy_bitfit,
    "lora": _policy_lora,
}


def apply_freeze(encoder: nn.Module, head: nn.Module, cfg: FreezeConfig) -> FreezePlan:
    """Apply ``cfg.policy`` in place (requires_grad; LoRA adapters injected first) and return the plan.

    Call it before the optimizer is built. The head always trains (except tensors tied to a frozen encoder
    tensor, such as an MLM decoder sharing the word embeddings). Frozen modules are put in eval mode now,
    and must be again at each entry into training (``FreezePlan.set_modes`` / ``FreezeModeGuard``).
    """
    if cfg.policy not in POLICIES:
        raise ConfigError(f"freeze.policy must be one of {', '.join(POLICIES)}, got {cfg.policy!r}")
    # An encoder may declare policies that do not apply to it, with the reason (e.g. LoRA without nn.Linear).
    reason = getattr(encoder, "unsupported_freeze_policies", {}).get(cfg.policy)
    if reason:
        raise ConfigError(f"freeze={cfg.policy} does not apply to {type(encoder).__name__}: {reason}")
    # Head first, then the encoder: a tied tensor ends up with the encoder's decision.
    head.requires_grad_(True)
    encoder.requires_grad_(True)
    frozen_names = POLICIES[cfg.policy](encoder, cfg)
    adapted = list(lora_modules(encoder))
    plan = FreezePlan(
        policy=cfg.policy,
        frozen_modules=[encoder.get_submodule(n) if n else encoder for n in frozen_names],
        encoder_frozen=not any(p.requires_grad for p in encoder.parameters()),
        frozen_module_names=frozen_names,
        adapted_modules=adapted,
        encoder=encoder,
        head=head,
    )
    trainable, total = plan.num_trainable, plan.num_total
    if trainable == 0:
        raise ConfigError(
            f"freeze={cfg.policy} leaves nothing to train: no encoder tensor trains and the head "
            f"({type(head).__name__}) has no trainable parameters"
        )
    plan.set_modes()
    log.info("freeze=%s: %d of %d parameters train (%.2f%%); eval-mode modules: %s", cfg.policy, trainable,
             total, 100.0 * trainable / max(total, 1), [n or "<encoder>" for n in frozen_names] or "none")
    return plan


# --------------------------------------------------------------------------------------------------------
# Optimizer parameter groups
# --------------------------------------------------------------------------------------------------------

_LAYER_RE = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")
_EMBEDDINGS_RE = re.compile(r"(?:^|\.)embeddings\.")
_NORM_TYPES: tuple[type[nn.Module], ...] = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase) + (
    (nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()
)


def _no_decay_names(model: nn.Module) -> set[str]:
    """Biases and normalisation weights: no weight decay (BERT's AdamWeightDecayOptimizer excludes
    ``bias``, ``LayerNorm``; HF's ``Trainer`` does the same). Embedding and other weights decay."""
    names: set[str] = set()
    for module_name, module in model.named_modules():
        is_norm = isinstance(module, _NORM_TYPES) or "LayerNorm" in module_name.rsplit(".", 1)[-1]
        for name, _ in module.named_parameters(recurse=False):
            if is_norm or _is_bias(name):
                names.add(f"{module_name}.{name}" if module_name else name)
    return names


def optimizer_param_groups(
    model: nn.Module,
    weight_decay: float,
    lr: float,
    layer_lr_decay: float = 1.0,
    num_layers: int | None = None,
    head_lr: float | None = None,
) -> list[dict[str, Any]]:
    """Parameter groups for ``torch.optim.AdamW(groups)``: trainable tensors only, decay split, optional
    layer-wise learning-rate decay.

    - Only ``requires_grad=True`` tensors (frozen tensors are never in the optimizer, so weight decay cannot
      move them). Tied tensors appear once.
    - ``weight_decay`` on every weight except biases and normalisation (LayerNorm) weights, which get 0.
    - Layer-wise LR decay (ELECTRA; Sun et al. 2019, "How to Fine-Tune BERT"): each step down from the top
      multiplies the lr by ``layer_lr_decay``. With L layers, ``encoder.layer.l`` (0-based) gets
      ``lr * decay**(L - l)``, ``embeddings`` ``lr * decay**(L + 1)``; the pooler, the head and anything
      else get ``lr``. Needs ``encoder.layer.N`` names (L is inferred from them when ``num_layers`` is None).
    - ``head_lr`` (None = ``lr``) for tensors under the top-level ``head`` submodule.

    Each group: ``params`` (tensors), ``param_names`` (their names; torch ≥ 2.6 keeps it in the optimizer
    state dict), ``lr``, ``weight_decay``, and ``name`` (``"<part>.decay"`` / ``"<part>.no_decay"``).
    """
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    no_decay = _no_decay_names(model)
    layer_ids = {n: int(m.group(1)) for n, _ in named if (m := _LAYER_RE.search(n))}
    if layer_lr_decay != 1.0:
        if num_layers is None:
            all_layers = {int(m.group(1)) for n, _ in model.named_parameters() if (m := _LAYER_RE.search(n))}
            if not all_layers:
                raise ConfigError(
                    f"optim.layer_lr_decay={layer_lr_decay} needs an encoder with `encoder.layer.N` layers; "
                    f"{type(model).__name__} has none (set optim.layer_lr_decay=1.0)"
                )
            num_layers = max(all_layers) + 1

    def part_and_lr(name: str) -> tuple[str, float]:
        if name.startswith("head."):
            return "head", lr if head_lr is None else head_lr
        if layer_lr_decay == 1.0 or num_layers is None:
            return "model", lr
        if name in layer_ids:
            return f"layer.{layer_ids[name]}", lr * layer_lr_decay ** (num_layers - layer_ids[name])
        if _EMBEDDINGS_RE.search(name):
            return "embeddings", lr * layer_lr_decay ** (num_layers + 1)
        return "top", lr  # pooler and anything above the layer stack

    groups: dict[tuple[str, bool], dict[str, Any]] = {}
    for name, p in named:
        part, group_lr = part_and_lr(name)
        decay = name not in no_decay
        group = groups.setdefault((part, decay), {
            "params": [], "param_names": [], "lr": group_lr, "weight_decay": weight_decay if decay else 0.0,
            "name": f"{part}.{'decay' if decay else 'no_decay'}",
        })
        group["params"].append(p)
        group["param_names"].append(name)
    return list(groups.values())


# --------------------------------------------------------------------------------------------------------
# Update-scope audit
# --------------------------------------------------------------------------------------------------------


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


def _encoder_group(rel_name: str) -> str:
    """``encoder.layer.N.*`` → ``layer.N``; otherwise the first name component (``embeddings``, ``pooler``;
    for other encoders e.g. ``token_embedding``)."""
    m = re.match(r"encoder\.layer\.(\d+)\.", rel_name)
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
    ``<head_prefix>.<name in the head>`` (the callback uses ``bert`` / ``head``, i.e. ``TaskModel``'s own
    parameter names). A tensor tied into the head appears once, under its encoder name.

    Groups: ``layer.N`` for ``encoder.layer.N.*``, else the first component of the encoder name
    (``embeddings``, ``pooler``, …), ``head`` for the head, ``adapters`` for LoRA tensors (``lora_A`` /
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
                    kind, group = part, (_encoder_group(rel) if part == "encoder" else "head")
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
        """The ``update_scope.json`` content (DESIGN.md): counts as of the last record."""
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
        }

    def write(self, path: str | Path) -> Path:
        """Write ``report()`` as JSON (the caller decides the rank: write on global rank 0 only)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.report(), indent=2) + "\n")
        return path


# --------------------------------------------------------------------------------------------------------
# Lightning callbacks
# --------------------------------------------------------------------------------------------------------


class FreezeModeGuard(pl.Callback):
    """Keeps ``pl_module.freeze_plan``'s frozen modules in eval mode and the rest in train mode.

    Lightning ≥ 2.2 does not call ``.train()`` when fit starts (a model built or loaded in eval mode would
    fine-tune with dropout off) and restores captured modes after validation, unless the module overrides
    ``on_validation_model_train`` (which usually calls ``.train()`` on everything). So: ``train()`` then
    ``set_modes()`` at train start and at each epoch start, and ``set_modes()`` before every training batch
    (cheap: one ``.eval()`` per frozen module) and at the end of validation.
    """

    @staticmethod
    def _plan(pl_module: pl.LightningModule) -> FreezePlan | None:
        return getattr(pl_module, "freeze_plan", None)

    def _reset(self, pl_module: pl.LightningModule) -> None:
        plan = self._plan(pl_module)
        if plan is not None:
            pl_module.train()
            plan.set_modes()

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._reset(pl_module)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._reset(pl_module)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        plan = self._plan(pl_module)
        if plan is not None:
            plan.set_modes()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Harmless during validation (everything is in eval mode then); Lightning restores the modes it
        # captured before validation right after this hook.
        plan = self._plan(pl_module)
        if plan is not None:
            plan.set_modes()


class UpdateScopeAuditCallback(pl.Callback):
    """Runs ``ScopeAudit`` over a fit and writes ``update_scope.json``.

    Reads ``pl_module.model.bert`` / ``.head``, ``trainer.optimizers[0]`` and
    ``pl_module.freeze_plan.policy``.
    Snapshot at ``on_train_start``; gradients at every ``on_before_optimizer_step`` (after backward, before
    the step and the next zero_grad); changes after the first optimizer step (``on_train_batch_end`` once
    ``global_step`` moved) and at ``on_train_end``. Names are ``TaskModel``'s (``bert.*``, ``head.*``).

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

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        plan = getattr(pl_module, "freeze_plan", None)
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        self.audit = ScopeAudit(
            pl_module.model.bert, pl_module.model.head, optimizer,
            policy=plan.policy if plan is not None else "unknown", encoder_prefix="bert", head_prefix="head",
        )
        self.audit.start()
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
        if trainer.is_global_zero:
            self.audit.write(self.output_path)
            log.info("update scope written to %s", self.output_path)
        self.audit.check(raise_on_frozen_change=self.fail_on_frozen_change)


__all__ = [
    "FreezePlan",
    "POLICIES",
    "apply_freeze",
    "optimizer_param_groups",
    "ScopeAudit",
    "FrozenTensorChanged",
    "UpdateScopeWarning",
    "FreezeModeGuard",
    "UpdateScopeAuditCallback",
    "COUNT_KEYS",
]
