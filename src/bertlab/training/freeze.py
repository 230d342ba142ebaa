"""Freeze policies: which encoder tensors train (``freeze.policy``), and the plan the rest of a run follows.

``eval()`` is not freezing and ``no_grad()`` is not parameter selection. Freezing here means three things:

1. ``requires_grad_(False)`` on the frozen tensors (``apply_freeze``);
2. those tensors never reach the optimizer (:func:`bertlab.training.optim.optimizer_param_groups` /
   ``FreezePlan.trainable_parameters`` take ``requires_grad=True`` tensors only, so weight decay cannot move
   them either);
3. modules whose parameters are *all* frozen run in eval mode (dropout off), set again at every training
   step because Lightning restores or resets modes around validation (``FreezePlan.set_modes``,
   :class:`bertlab.training.callbacks.FreezeModeGuard`). When no encoder tensor trains,
   ``FreezePlan.encoder_frozen`` tells the LightningModule to run the encoder under ``torch.no_grad()``.

Whether a tensor really changed is what the update-scope audit checks (:mod:`bertlab.training.audit`).

Policies only rely on the module names that their structure needs: ``embeddings`` (embeddings),
``embeddings`` + ``encoder.layer.N`` (bottom_k), where an encoder may name them otherwise (``layer_stack`` and
``embeddings_path``: ModernBERT's ``layers.N``; :mod:`bertlab.models.encoder`); ``none``, ``encoder``, ``bitfit``
and ``lora`` work on any ``nn.Module`` encoder. An encoder declares the policies that do not apply to it, with the reason, in
``unsupported_freeze_policies`` (the recurrent encoder has no ``nn.Linear`` for LoRA).
"""


from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from torch import nn

from bertlab.models.encoder import embeddings_path, layer_stack_path
from bertlab.models.lora import ADAPTER_PARAMETER_NAMES, inject_lora, lora_modules
from bertlab.runtime.config import ConfigError, FreezeConfig

log = logging.getLogger(__name__)



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
        ``on_validation_model_train``."""
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
    path = layer_stack_path(encoder)
    layers = _submodule(encoder, path, policy, "a layer stack")
    if not isinstance(layers, nn.ModuleList):
        raise ConfigError(
            f"freeze={policy}: `{path}` of {type(encoder).__name__} is not an nn.ModuleList"
        )
    return layers


def _policy_none(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    return []


def _policy_encoder(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    encoder.requires_grad_(False)  # pooler included: it belongs to the encoder
    return [""]


def _policy_embeddings(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    _submodule(encoder, embeddings_path(encoder), cfg.policy, "an embeddings module").requires_grad_(False)
    return [embeddings_path(encoder)]


def _policy_bottom_k(encoder: nn.Module, cfg: FreezeConfig) -> list[str]:
    embeddings = _submodule(encoder, embeddings_path(encoder), cfg.policy, "an embeddings module")
    layers = _layers(encoder, cfg.policy)
    if cfg.k > len(layers):
        raise ConfigError(
            f"freeze.k={cfg.k} exceeds the encoder's {len(layers)} layers: use k <= {len(layers)}"
        )
    embeddings.requires_grad_(False)
    for i in range(cfg.k):
        layers[i].requires_grad_(False)
    return [embeddings_path(encoder)] + [f"{layer_stack_path(encoder)}.{i}" for i in range(cfg.k)]


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


__all__ = ["FreezePlan", "POLICIES", "apply_freeze"]
