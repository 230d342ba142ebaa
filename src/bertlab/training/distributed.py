"""Scale: precision checks, padding under mixed precision, strategies, batch-size bookkeeping, rank checks.

- :func:`check_precision`: ``16-mixed`` needs a GPU (CPU autocast has no float16 path worth using), with a
  message that says what to use instead.
- :func:`resolve_pad_multiple`: ``data.pad_to_multiple_of=null`` means 8 under mixed precision on a GPU and
  no extra padding elsewhere (extra pad tokens only cost time on CPU, experiments/pad_multiple).
- :func:`fsdp_strategy`: FSDP that shards per transformer layer (``trainer=fsdp``).
- :class:`BatchSizeReport`: logs what ``data.batch_size`` (per device) means for the optimizer steps.
- :class:`SameTokenizerOnEveryRank`: fails fast when ranks built different tokenizers.
- :func:`gather_objects`: every rank's value of a Python object.

Launching ranks from Hydra (multirun + DDP) is :mod:`bertlab.runtime.launch`.
"""

from __future__ import annotations

import logging
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from bertlab.runtime.config import ConfigError

log = logging.getLogger(__name__)

MIXED = ("16-mixed", "bf16-mixed", "16", "bf16")
FLOAT16 = ("16-mixed", "16", "16-true")
GPU_ACCELERATORS = ("gpu", "cuda")


def _on_gpu(accelerator: str | None) -> bool:
    accelerator = str(accelerator or "auto").lower()
    if accelerator in GPU_ACCELERATORS:
        return True
    return accelerator == "auto" and torch.cuda.is_available()


def check_precision(precision: Any, accelerator: str | None) -> None:
    """Raise :class:`ConfigError` for a precision this accelerator cannot train in (16-bit float off a GPU)."""
    value = str(precision)
    if value in FLOAT16 and not _on_gpu(accelerator):
        raise ConfigError(
            f"trainer.precision={value} needs a GPU (float16 autocast and its loss scaling are CUDA features), "
            f"but this run uses trainer.accelerator={accelerator or 'auto'} "
            f"({'no CUDA device found' if not torch.cuda.is_available() else 'a CPU'}): "
            "use trainer.precision=bf16-mixed on CPU (or 32-true)"
        )


def resolve_pad_multiple(pad_to_multiple_of: int | None, precision: Any, accelerator: str | None) -> int | None:
    """``data.pad_to_multiple_of``: an explicit value wins; ``None`` → 8 under mixed precision on a GPU, else none.

    Tensor-core kernels want sequence lengths that are multiples of 8 in float16/bfloat16. On CPU the extra
    pad tokens only cost time (8-19 % per step in experiments/pad_multiple/results.md), so none are added.
    """
    if pad_to_multiple_of is not None:
        return int(pad_to_multiple_of) if int(pad_to_multiple_of) > 1 else None
    return 8 if str(precision) in MIXED and _on_gpu(accelerator) else None


def fsdp_strategy(sharding_strategy: str = "FULL_SHARD", cpu_offload: bool = False,
                  activation_checkpointing: bool = False, **kwargs: Any):
    """Lightning's FSDP, wrapping each encoder layer as one shard unit (``trainer=fsdp``): the layer class of
    every native family (``FamilySpec.layer_class``), so DeBERTa and ModernBERT layers are sharded and
    checkpointed like BERT's.

    ``use_orig_params=True`` keeps the parameters' names and ``requires_grad`` flags, which the freeze
    policies, LoRA and the optimizer's parameter groups rely on. Checkpoints are saved whole
    (``state_dict_type="full"``), so evaluation, ``init_from`` and export read them like any other.
    """
    from lightning.pytorch.strategies import FSDPStrategy

    from bertlab.models.families import families

    layers = {spec.layer_class for spec in families().values()}
    return FSDPStrategy(
        auto_wrap_policy=layers,
        activation_checkpointing_policy=layers if activation_checkpointing else None,
        sharding_strategy=sharding_strategy,
        cpu_offload=cpu_offload,
        use_orig_params=True,
        state_dict_type="full",
        **kwargs,
    )


def build_strategy(strategy: Any) -> Any:
    """``trainer.strategy``: a Lightning name ("ddp", "deepspeed_stage_2", ...) or a node with ``_target_``."""
    if isinstance(strategy, dict) and "_target_" in strategy:
        import hydra

        return hydra.utils.instantiate(strategy)
    return strategy


class BatchSizeReport(Callback):
    """Logs the batch-size arithmetic once training starts (it needs the world size and the loader length).

    ``data.batch_size`` is per device. One optimizer step sees ``batch_size × devices × num_nodes ×
    accumulate_grad_batches`` examples. bertlab's training sampler deals the epoch's batches out to the
    ranks, so a rank has ``ceil(batches / world_size)`` batches per epoch (the list is cycled to a multiple of
    the world size), and the learning-rate schedule spans Lightning's ``estimated_stepping_batches`` =
    ``ceil(batches per rank / accumulate_grad_batches) × max_epochs`` (or ``max_steps``).
    """

    def __init__(self, batch_size: int):
        self.batch_size = batch_size
        self.summary: dict[str, int] = {}

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        accumulate = int(trainer.accumulate_grad_batches)
        self.summary = {
            "per_device_batch_size": self.batch_size,
            "world_size": int(trainer.world_size),
            "accumulate_grad_batches": accumulate,
            "effective_batch_size": self.batch_size * int(trainer.world_size) * accumulate,
            "batches_per_rank_per_epoch": int(trainer.num_training_batches),
            "optimizer_steps": int(trainer.estimated_stepping_batches),
        }
        s = self.summary
        if not trainer.is_global_zero:
            return
        log.info("batch: %d per device × %d processes × %d accumulation = %d examples per optimizer step; "
                 "%d batches per process per epoch; the lr schedule spans %d optimizer steps",
                 s["per_device_batch_size"], s["world_size"], s["accumulate_grad_batches"],
                 s["effective_batch_size"], s["batches_per_rank_per_epoch"], s["optimizer_steps"])


class SameTokenizerOnEveryRank(Callback):
    """Fail fast when the ranks built different tokenizers (vocabularies differ → the same ids mean different
    words on different ranks, and training silently averages nonsense).

    A scratch WordPiece vocabulary is trained once and cached; the other ranks load it. Ranks that cannot see
    that cache (several nodes without a shared ``paths.cache_dir``) would each train their own, and the
    trainer breaks ties differently from process to process.
    """

    def __init__(self, fingerprint: str):
        self.fingerprint = fingerprint

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if trainer.world_size == 1 or not torch.distributed.is_initialized():
            return
        prints: list[str | None] = [None] * trainer.world_size
        torch.distributed.all_gather_object(prints, self.fingerprint)
        if len(set(prints)) > 1:
            raise ConfigError(
                f"the {trainer.world_size} processes built {len(set(prints))} different tokenizers: a scratch "
                "tokenizer is trained once and shared through paths.cache_dir, which must be on a file system "
                "every node sees (or pass model.tokenizer=<a saved tokenizer folder>, e.g. <run_dir>/tokenizer)"
            )


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (a list of one element without torch.distributed)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        out: list[Any] = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(out, obj)
        return out
    return [obj]
