"""LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"), small and self-contained.

A targeted ``nn.Linear`` ``y = x W^T + b`` becomes ``y = x W^T + b + (dropout(x) A^T B^T) * alpha / r`` with
``A`` (r, in) and ``B`` (out, r). ``B`` starts at zero, so an injected model computes exactly what the base
model did; only ``A`` and ``B`` train (§4). ``LoRALinear`` subclasses ``nn.Linear`` and keeps the names
``weight`` / ``bias``, so Hugging Face checkpoint keys (``...attention.self.query.weight``) still load into an
injected encoder and ``merge_lora`` gives back exactly the plain keys.

bertlab keeps its own implementation rather than depending on ``peft`` (which pulls in ``transformers``).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.models.families import family_spec, is_native
from bertlab.models.keys import legacy_key
from bertlab.runtime.config import ConfigError, LoraConfig

log = logging.getLogger(__name__)

ADAPTER_PARAMETER_NAMES = ("lora_A", "lora_B")


class LoRALinear(nn.Linear):
    """``nn.Linear`` plus a low-rank update; the base ``weight`` / ``bias`` are frozen by ``inject_lora``.

    x: (..., in_features) → (..., out_features).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        r: int = 8,
        alpha: float = 16.0,
        dropout: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        if r <= 0:
            raise ConfigError(f"freeze.lora.r must be positive, got {r}")
        self.r = r
        self.alpha = alpha
        self.scaling = alpha / r
        self.lora_A = nn.Parameter(torch.empty(r, in_features, device=device, dtype=dtype))  # (r, in)
        self.lora_B = nn.Parameter(torch.zeros(out_features, r, device=device, dtype=dtype))  # (out, r)
        # The paper's reference code (and peft) use nn.Linear's default init for A; B = 0 keeps the
        # initial function unchanged.
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        # Dropout on the LoRA path only (the base path is the frozen pretrained computation).
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    @classmethod
    def from_linear(cls, linear: nn.Linear, r: int, alpha: float, dropout: float = 0.0) -> LoRALinear:
        """A LoRALinear computing exactly what ``linear`` computes (weights copied, B = 0)."""
        new = cls(
            linear.in_features,
            linear.out_features,
            bias=linear.bias is not None,
            r=r,
            alpha=alpha,
            dropout=dropout,
            device=linear.weight.device,
            dtype=linear.weight.dtype,
        )
        with torch.no_grad():
            new.weight.copy_(linear.weight)
            if linear.bias is not None:
                new.bias.copy_(linear.bias)
        new.train(linear.training)
        return new

    def delta_weight(self) -> torch.Tensor:
        """B @ A * scaling: (out, in), the update that ``merge_lora`` adds to ``weight``."""
        return (self.lora_B @ self.lora_A) * self.scaling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        base = F.linear(x, self.weight, self.bias)  # (..., out)
        update = F.linear(F.linear(self.lora_dropout(x), self.lora_A), self.lora_B)  # (..., r) → (..., out)
        return base + update * self.scaling

    def merged_linear(self) -> nn.Linear:
        """A plain ``nn.Linear`` with ``weight + B @ A * scaling`` (for export)."""
        linear = nn.Linear(
            self.in_features, self.out_features, bias=self.bias is not None,
            device=self.weight.device, dtype=self.weight.dtype,
        )
        with torch.no_grad():
            linear.weight.copy_(self.weight + self.delta_weight())
            if self.bias is not None:
                linear.bias.copy_(self.bias)
        linear.train(self.training)
        return linear

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, r={self.r}, alpha={self.alpha}"


def lora_targets(encoder: nn.Module, names: list[str]) -> list[str]:
    """``freeze.lora.target_modules`` as the encoder's ``nn.Linear`` attribute names: the role names of BERT's
    modules (``query``, ``key``, ``value``, ``dense``: what conf/freeze/*.yaml names) through the encoder family's
    ``lora_roles`` (ModernBERT: query/key/value → its fused ``Wqkv``); any other name as it is."""
    model_type = getattr(getattr(encoder, "config", None), "model_type", None)
    roles = family_spec(model_type).lora_roles if model_type and is_native(model_type) else {}
    out: list[str] = []
    for name in names:
        out += [m for m in roles.get(name, (name,)) if m not in out]
    return out


def inject_lora(encoder: nn.Module, config: LoraConfig) -> list[str]:
    """Replace, in place, every ``nn.Linear`` whose attribute name is in ``config.target_modules`` (role names
    mapped to the encoder family's own names: :func:`lora_targets`).

    Returns the dotted names (relative to ``encoder``) of the adapted modules. The base ``weight`` / ``bias``
    of each adapted module are frozen; ``lora_A`` / ``lora_B`` are trainable. Other parameters are left as
    they are (the freeze policy decides those). Calling it again keeps existing adapters.

    Only exact ``nn.Linear`` instances are replaced: subclasses such as ``nn.MultiheadAttention.out_proj``
    (``NonDynamicallyQuantizableLinear``) are read as raw weights by their parent, so an adapter there
    would never run.

    The targets name roles as BERT's attributes do (``query``, ``key``, ``value``, ``dense``); an encoder family
    whose modules are named otherwise (DeBERTa's ``query_proj``) maps them (:func:`lora_targets`), so the same
    ``freeze.lora.target_modules`` adapts the same roles in every family and old run configurations still resume.
    """
    targets = set(lora_targets(encoder, config.target_modules))
    adapted: list[str] = []
    for name, module in list(encoder.named_modules()):
        attr = name.rsplit(".", 1)[-1]
        if attr not in targets:
            continue
        if isinstance(module, LoRALinear):
            adapted.append(name)
            continue
        if type(module) is not nn.Linear:
            continue
        parent = encoder.get_submodule(name.rsplit(".", 1)[0]) if "." in name else encoder
        lora = LoRALinear.from_linear(module, r=config.r, alpha=config.alpha, dropout=config.dropout)
        setattr(parent, attr, lora)
        adapted.append(name)
    if not adapted:
        linear_names = sorted({n.rsplit(".", 1)[-1] for n, m in encoder.named_modules()
                               if type(m) is nn.Linear})
        mapped = f" (this family's names: {sorted(targets)})" if targets != set(config.target_modules) else ""
        raise ConfigError(
            f"freeze.lora.target_modules {sorted(config.target_modules)}{mapped} match no nn.Linear in the encoder; "
            f"its nn.Linear attribute names are {linear_names}"
        )
    for name in adapted:
        module = encoder.get_submodule(name)
        module.weight.requires_grad_(False)
        if module.bias is not None:
            module.bias.requires_grad_(False)
        module.lora_A.requires_grad_(True)
        module.lora_B.requires_grad_(True)
    log.info("LoRA r=%d alpha=%g on %d modules (%s)", config.r, config.alpha, len(adapted),
             ", ".join(sorted(targets)))
    return adapted


def lora_modules(module: nn.Module) -> dict[str, LoRALinear]:
    """The LoRALinear submodules of ``module`` by dotted name."""
    return {name: m for name, m in module.named_modules() if isinstance(m, LoRALinear)}


def merge_lora(module: nn.Module, inplace: bool = False) -> dict[str, torch.Tensor]:
    """The plain state dict of ``module`` with every adapter merged: ``weight + B @ A * alpha / r``.

    The keys are those of the model without adapters (no ``lora_A`` / ``lora_B``), so the result loads into
    a plain ``BertModel`` (or, for the encoder, exports as a Hugging Face checkpoint). With
    ``inplace=True`` every LoRALinear is also replaced by the merged ``nn.Linear``.
    """
    adapters = lora_modules(module)
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    for name, lora in adapters.items():
        prefix = f"{name}." if name else ""
        for key in ADAPTER_PARAMETER_NAMES:
            state.pop(prefix + key)
        with torch.no_grad():
            state[prefix + "weight"] = (lora.weight + lora.delta_weight()).detach().clone()
    if inplace:
        for name, lora in adapters.items():
            merged = lora.merged_linear()
            merged.weight.requires_grad_(lora.weight.requires_grad)
            if merged.bias is not None:
                merged.bias.requires_grad_(lora.bias.requires_grad)
            if not name:
                raise ValueError("merge_lora(inplace=True) needs a parent module, got a LoRALinear itself")
            parent_name, _, attr = name.rpartition(".")
            setattr(module.get_submodule(parent_name) if parent_name else module, attr, merged)
    return state


__all__ = [
    "LoRALinear",
    "inject_lora",
    "lora_modules",
    "merge_lora",
    "ADAPTER_PARAMETER_NAMES",
]


def base_fingerprint(model: nn.Module, stored: set[str], names: Callable[[str], str] = str) -> str:
    """A content hash of the frozen base tensors a slim LoRA checkpoint leaves out.

    ``stored``: the model keys the checkpoint holds (adapters, head, whatever trained); every other tensor of
    the model (adapters excluded) comes from the base weights and enters the hash, in key order, with its key as
    ``names`` gives it. A checkpoint records it when saved, and loading refuses a base whose tensors hash
    differently (:func:`base_matches`).
    """
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items(), key=lambda item: names(item[0])):
        if name in stored or name.rsplit(".", 1)[-1] in ADAPTER_PARAMETER_NAMES:
            continue
        h.update(names(name).encode())
        h.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def base_matches(model: nn.Module, stored: set[str], recorded: str) -> bool:
    """Whether ``model``'s frozen base tensors are the ones a LoRA checkpoint recorded the fingerprint ``recorded``
    of: hashed with today's key names, or with the names the checkpoint's own run had (``models.keys.legacy_key``:
    a run written before ``bert.`` became ``encoder.``)."""
    return recorded in (base_fingerprint(model, stored), base_fingerprint(model, stored, legacy_key))


def base_changed_message(base: str | None, where: str = "this LoRA checkpoint") -> str:
    return (f"the base weights {base!r} differ from the ones it was trained on ({where} records a fingerprint "
            "of its frozen base tensors, and the base now hashes differently): the adapters only make sense "
            "on their own base. Point model.pretrained/model.init_from to the original weights, or export the "
            "run where its base is unchanged")
