"""The optimizer's parameter groups: trainable tensors only (frozen tensors never reach the optimizer, so
weight decay cannot move them either), no weight decay on biases and normalisation weights, and optional
layer-wise learning-rate decay."""

from __future__ import annotations

import re
from typing import Any

from torch import nn

from bertlab.models.encoder import embeddings_path, layer_stack_path
from bertlab.models.keys import encoder_of
from bertlab.runtime.errors import ConfigError
from bertlab.training.freeze import _is_bias


def _name_patterns(model: nn.Module) -> tuple[re.Pattern, re.Pattern]:
    """Where a parameter name says its layer (``encoder.layer.N.``, or the encoder's own ``layer_stack``) and that
    it belongs to the embeddings (``embeddings.``, or the encoder's ``embeddings_path``), for ``model`` or the
    encoder it holds (a ``TaskModel``)."""
    encoder = encoder_of(model)
    stack, embeddings = re.escape(layer_stack_path(encoder)), re.escape(embeddings_path(encoder))
    return re.compile(rf"(?:^|\.){stack}\.(\d+)\."), re.compile(rf"(?:^|\.){embeddings}\.")


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
      else get ``lr``. Needs ``encoder.layer.N`` names, or those of the encoder's ``layer_stack`` (ModernBERT's
      ``layers.N``; L is inferred from them when ``num_layers`` is None).
    - ``head_lr`` (None = ``lr``) for tensors under the top-level ``head`` submodule.

    Each group: ``params`` (tensors), ``param_names`` (their names; torch ≥ 2.6 keeps it in the optimizer
    state dict), ``lr``, ``weight_decay``, and ``name`` (``"<part>.decay"`` / ``"<part>.no_decay"``).
    """
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    no_decay = _no_decay_names(model)
    layer_re, embeddings_re = _name_patterns(model)
    layer_ids = {n: int(m.group(1)) for n, _ in named if (m := layer_re.search(n))}
    if layer_lr_decay != 1.0:
        if num_layers is None:
            # The encoder's layers only: a head may hold an encoder of its own (RTD's generator, head.generator.*).
            all_layers = {int(m.group(1)) for n, _ in model.named_parameters()
                          if not n.startswith("head.") and (m := layer_re.search(n))}
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
        if embeddings_re.search(name):
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



# torch.optim.AdamW's kernels: "fused" (one kernel over all tensors, on CPU and CUDA; the fastest step, see
# benchmarks/ablations.py), "foreach" (multi-tensor), "for_loop" (one tensor at a time).
ADAMW_KERNELS: dict[str, dict[str, bool]] = {"fused": {"fused": True}, "foreach": {"foreach": True},
                                             "for_loop": {"foreach": False}}
DEFAULT_ADAMW_KERNEL = "fused"


def adamw_kwargs(kernel: str = DEFAULT_ADAMW_KERNEL, clips_mixed_precision: bool = False) -> dict[str, bool]:
    """``torch.optim.AdamW``'s keyword arguments for ``kernel`` (one of :data:`ADAMW_KERNELS`).

    A fused AdamW unscales gradients inside its step, so Lightning's mixed-precision plugin could not clip them
    first (it refuses): with ``clips_mixed_precision`` (16/bf16-mixed and gradient clipping) the fused kernel
    gives way to the foreach one.
    """
    if kernel not in ADAMW_KERNELS:
        raise ConfigError(f"the AdamW kernel must be one of {', '.join(ADAMW_KERNELS)}, got {kernel!r}")
    if kernel == "fused" and clips_mixed_precision:
        kernel = "foreach"
    return dict(ADAMW_KERNELS[kernel])
