"""The LightningModule: one composed class for every task (the family supplies head, loss and metrics)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch

from bertlab.data.features import Split
from bertlab.models.heads import TaskModel
from bertlab.models.hf_weights import CheckpointError
from bertlab.models.keys import MODULE_PREFIX, migrate_checkpoint
from bertlab.models.lora import base_changed_message, base_fingerprint, base_matches
from bertlab.runtime.config import OptimConfig
from bertlab.runtime.errors import NonFiniteLossError
from bertlab.runtime.files import RUN_DIR_FIX, write_text_atomic, writing
from bertlab.tasks.base import EvalState, Evaluation, Family
from bertlab.training.checkpoints import TRAINING_ONLY_PREFIX, last_checkpoint
from bertlab.training.distributed import gather_objects
from bertlab.training.freeze import FreezePlan
from bertlab.training.optim import DEFAULT_ADAMW_KERNEL, adamw_kwargs, optimizer_param_groups

log = logging.getLogger(__name__)


# on_nonfinite_loss=skip stops a run once more than this share of its training batches were skipped, judged
# from this many batches on (and at the end of training, however few there were).
MAX_SKIPPED_FRACTION = 0.5
MIN_BATCHES_JUDGED = 10


class TaskModule(L.LightningModule):
    def __init__(
        self,
        model: TaskModel,
        family: Family,
        freeze_plan: FreezePlan,
        optim: OptimConfig,
        splits: dict[str, Split] | None = None,
        output_dir: str | Path | None = None,
        on_nonfinite_loss: str = "error",
        hparams: dict[str, Any] | None = None,
        adamw_kernel: str = DEFAULT_ADAMW_KERNEL,
    ):
        super().__init__()
        self.adamw_kernel = adamw_kernel  # chosen once: how the optimizer steps, never what (training.optim)
        self.model = model
        self.family = family
        # What trains beside the model without being part of it (distillation's projection): saved in training
        # checkpoints (a resume continues it), in the optimizer, never exported (export reads "model." keys).
        extra = family.trainable_modules() if hasattr(family, "trainable_modules") else {}
        self.family_modules = torch.nn.ModuleDict(extra) if extra else None
        self.freeze_plan = freeze_plan
        self.optim = optim
        self.splits = splits if splits is not None else {}
        self.output_dir = Path(output_dir) if output_dir is not None else None
        if on_nonfinite_loss not in ("error", "skip"):
            raise ValueError(f"on_nonfinite_loss must be 'error' or 'skip', got {on_nonfinite_loss!r}")
        self.on_nonfinite_loss = on_nonfinite_loss
        self.skipped_nonfinite = 0
        self._batches_seen = 0  # training batches of this fit, skipped or not
        self._first_skipped = ""
        # Plain values only (no modules, no DictConfig) so checkpoints stay loadable and small.
        self.save_hyperparameters(hparams or {}, logger=False)
        self._eval: EvalState | None = None
        # LoRA checkpoints hold only what trained (adapters + head) and a reference to the base weights, which
        # the model was built from; Lightning must then accept the missing (frozen) keys.
        # (Without a reference, e.g. a scratch model, the full state is kept.)
        self._slim_checkpoints = freeze_plan.policy == "lora" and (hparams or {}).get("base_weights") is not None
        self.strict_loading = not self._slim_checkpoints
        self._fingerprint: str | None = None
        self.last_metrics: dict[str, dict[str, float]] = {}
        self.val_stage = "val"  # what a validation loop is scoring: "val", or a data.val_extra_files name

    # ------------------------------------------------------------------------------------------------
    # Forward

    def forward(self, batch: dict[str, torch.Tensor]) -> Any:
        kwargs = self.family.head_kwargs(batch)
        if "features" in batch:  # cached frozen-encoder features: only the head runs
            return self.model.head(batch["features"], **kwargs)
        if self.freeze_plan.encoder_frozen:
            # A frozen encoder keeps no activations: no autograd graph below the head.
            with torch.no_grad():
                features = self.model.encode(batch)
            return self.model.head(features, **kwargs)
        return self.model(batch, **kwargs)

    # ------------------------------------------------------------------------------------------------
    # Checkpoints

    def _trained_names(self) -> set[str]:
        """The TaskModel keys of the tensors that train (a slim checkpoint stores these)."""
        return {n for n, p in self.model.named_parameters() if p.requires_grad}

    def _trainable_keys(self) -> set[str]:
        return {MODULE_PREFIX + n for n in self._trained_names()}

    def _base_fingerprint(self) -> str:
        """The hash of the frozen base tensors (they never change during a run: computed once)."""
        if self._fingerprint is None:
            self._fingerprint = base_fingerprint(self.model, self._trained_names())
        return self._fingerprint

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self._slim_checkpoints:
            keep = self._trainable_keys() | {k for k in checkpoint["state_dict"] if k.startswith(TRAINING_ONLY_PREFIX)}
            checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in keep}
            checkpoint["bertlab_base_weights"] = self.hparams.get("base_weights")
            checkpoint["bertlab_base_fingerprint"] = self._base_fingerprint()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Lightning reads the file itself (resume, train=false evaluation): older runs' keys get today's names
        # here, before Lightning loads the state dict.
        migrate_checkpoint(checkpoint)
        if self.family_modules is None:  # e.g. evaluating a distilled run: its projection is training state only
            checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items()
                                        if not k.startswith(TRAINING_ONLY_PREFIX)}
        if not self.strict_loading:
            missing = sorted(self._trainable_keys() - set(checkpoint["state_dict"]))
            if missing:
                raise KeyError(f"LoRA checkpoint lacks trained tensors: {missing[:5]}")
            recorded = checkpoint.get("bertlab_base_fingerprint")
            if recorded is not None and recorded != self._base_fingerprint() \
                    and not base_matches(self.model, self._trained_names(), recorded):
                raise CheckpointError(base_changed_message(checkpoint.get("bertlab_base_weights")))

    # ------------------------------------------------------------------------------------------------
    # Training

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int):
        loss = self.family.training_loss(self, batch)
        self._batches_seen += 1
        # Every rank must take the same branch (a rank that skips while the others step would hang DDP's
        # gradient all-reduce): a non-finite loss on any rank stops, or skips, the batch on all of them.
        if self.trainer.strategy.reduce_boolean_decision(not bool(torch.isfinite(loss)), all=False):
            message = (f"non-finite training loss ({loss.item()}) at global step {self.global_step}, "
                       f"epoch {self.current_epoch + 1}, batch {batch_idx} (example indices "
                       f"{batch['index'][:8].tolist()}…)")
            if self.on_nonfinite_loss == "error":
                raise NonFiniteLossError(
                    message + ". Lower optim.lr, check the data, or set on_nonfinite_loss=skip to skip such "
                    "batches; " + self._checkpoint_note()
                )
            self.skipped_nonfinite += 1
            self._first_skipped = self._first_skipped or message
            log.warning("skipping batch: %s", message)
            if self._batches_seen >= MIN_BATCHES_JUDGED:
                self._stop_if_mostly_skipped()
            return None  # Lightning skips the optimizer step for this batch
        self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True, batch_size=len(batch["index"]))
        return loss

    def _stop_if_mostly_skipped(self) -> None:
        """``on_nonfinite_loss=skip`` is for a rare bad batch: a run that skipped most of its batches learned
        from almost nothing, and its scores (a val/loss of None, chance accuracy) would read as a result."""
        if self.skipped_nonfinite <= MAX_SKIPPED_FRACTION * self._batches_seen:
            return
        raise NonFiniteLossError(
            f"on_nonfinite_loss=skip skipped {self.skipped_nonfinite} of the {self._batches_seen} training batches "
            f"so far (more than {MAX_SKIPPED_FRACTION:.0%}): the loss was NaN or infinite on most of them, so the "
            "model learned from almost nothing and its scores would mislead. The first: "
            f"{self._first_skipped}. Lower optim.lr, check the data (a label or value out of range), or use "
            "on_nonfinite_loss=error to stop at the first such batch; " + self._checkpoint_note()
        )

    def on_train_end(self) -> None:
        if self.skipped_nonfinite:
            self._stop_if_mostly_skipped()

    def _checkpoint_note(self) -> str:
        """Where a stopped run can continue from: only checkpoints that exist are named."""
        last = last_checkpoint(self.output_dir) if self.output_dir is not None else None
        if last is not None and last.is_file():
            return f"the last good checkpoint is kept in {last} (resume with ckpt_path=last)"
        return "no checkpoint had been written before this step, so the run has to start again"

    def configure_optimizers(self):
        groups = optimizer_param_groups(
            self.model, weight_decay=self.optim.weight_decay, lr=self.optim.lr,
            layer_lr_decay=self.optim.layer_lr_decay, head_lr=self.optim.head_lr,
        )
        for g in groups:
            g.pop("name", None)
        if self.family_modules is not None:
            named = [(f"family_modules.{n}", p) for n, p in self.family_modules.named_parameters() if p.requires_grad]
            groups.append({"params": [p for _, p in named], "param_names": [n for n, _ in named],
                           "weight_decay": self.optim.weight_decay, "lr": self.optim.lr})
        kernel = adamw_kwargs(self.adamw_kernel, clips_mixed_precision=bool(self.trainer.gradient_clip_val)
                              and "mixed" in str(self.trainer.precision))
        optimizer = torch.optim.AdamW(groups, lr=self.optim.lr, betas=self.optim.betas, eps=self.optim.eps,
                                      **kernel)
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        warmup = int(math.ceil(total * self.optim.warmup_ratio))

        def linear_warmup_decay(step: int) -> float:
            # BERT's schedule: linear warm-up to the peak lr, then linear decay to 0 at the last step.
            if step < warmup:
                return (step + 1) / (warmup + 1)
            return max(0.0, (total - step) / max(1, total - warmup))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # ------------------------------------------------------------------------------------------------
    # Evaluation (exact under DDP: gather then score once)

    def _eval_start(self) -> None:
        self._eval = EvalState()

    def _eval_step(self, batch: dict[str, torch.Tensor]) -> None:
        self.family.eval_step(self(batch), batch, self._eval)

    def _eval_end(self, stage: str) -> Evaluation:
        state = self._eval
        local = (torch.cat(state.index).numpy() if state.index else np.zeros(0, dtype=np.int64),
                 state.outputs, state.loss_sum, state.loss_count, state.extra)
        parts = gather_objects(local)
        index = np.concatenate([p[0] for p in parts])
        outputs = [o for p in parts for o in p[1]]
        loss_sum = sum(p[2] for p in parts)
        loss_count = sum(p[3] for p in parts)
        extra: dict[str, float] = {}
        for p in parts:
            for k, v in p[4].items():
                extra[k] = extra.get(k, 0.0) + v
        unique, first = np.unique(index, return_index=True)
        if len(unique) != len(index):  # defensive: a sampler that repeated examples must not count twice
            log.warning("%s: %d duplicated examples dropped before scoring", stage, len(index) - len(unique))
            index = index[first]
            outputs = [outputs[i] for i in first] if outputs else outputs
        split = self.splits.get(stage)
        loss = loss_sum / loss_count if loss_count else float("nan")
        evaluation = self.family.evaluate(index, outputs, split, loss, extra)
        evaluation.scores.setdefault("num_examples", len(index))
        self._eval = None
        return evaluation

    def on_validation_epoch_start(self) -> None:
        self._eval_start()

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch)

    def on_validation_epoch_end(self) -> None:
        self._log_scores(self.val_stage, self._eval_end(self.val_stage))

    def on_test_epoch_start(self) -> None:
        self._eval_start()

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch)

    def on_test_epoch_end(self) -> None:
        self._log_scores("test", self._eval_end("test"))

    def _log_scores(self, stage: str, evaluation: Evaluation) -> None:
        if self.trainer.sanity_checking:
            return
        scores, predictions = evaluation.scores, evaluation.predictions
        for name, value in scores.items():
            if name == "num_examples":
                continue
            # Every rank holds the same gathered value: no further reduction needed.
            self.log(f"{stage}/{name}", float(value), prog_bar=name in ("accuracy", "f1", "loss"), sync_dist=False)
        self.last_metrics[stage] = scores
        if predictions is not None and self.output_dir is not None and self.trainer.is_global_zero:
            out = self.output_dir / "predictions" / f"{stage}_predictions.json"
            with writing(out, "the predictions", RUN_DIR_FIX):
                out.parent.mkdir(parents=True, exist_ok=True)
                write_text_atomic(out, json.dumps(predictions, indent=1, ensure_ascii=False) + "\n")


def evaluate_extra_split(trainer: L.Trainer, module: TaskModule, datamodule: Any, name: str,
                         ckpt_path: str | None) -> dict[str, float]:
    """Score the labelled dev set ``name`` (a ``data.val_extra_files`` entry) once, exactly as ``val``.

    It runs as a validation loop (every rank, gathered, de-duplicated) and logs ``<name>/<metric>``.
    """
    module.val_stage = name
    try:
        trainer.validate(module, dataloaders=datamodule.eval_dataloader(name), ckpt_path=ckpt_path, verbose=False,
                         weights_only=True)
    finally:
        module.val_stage = "val"
    return module.last_metrics.get(name, {})
