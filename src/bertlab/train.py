"""``run(cfg)``: the training recipe, top to bottom.

seed → tokenizer → data → model (+ freeze policy) → trainer → fit → final validation → best checkpoint →
validate (+ test) → metrics.json → return the monitored value (for sweepers).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from bertlab.builders import build_model, build_tokenizer, init_dir_for_tokenizer, resolve_head_config
from bertlab.config import ConfigError, DataConfig, FreezeConfig, HeadConfig, OptimConfig, TaskSpec
from bertlab.data.datamodule import TaskDataModule
from bertlab.distributed import (
    BatchSizeReport,
    HydraDDPJob,
    SameTokenizerOnEveryRank,
    build_strategy,
    check_precision,
    resolve_pad_multiple,
)
from bertlab.encoder import num_parameters
from bertlab.export import export_checkpoint
from bertlab.freeze import FreezeModeGuard, UpdateScopeAuditCallback, apply_freeze
from bertlab.hf_weights import CheckpointError
from bertlab.loggers import build_loggers, finish_wandb
from bertlab.module import BertTaskModule
from bertlab.predict import run_predict
from bertlab.reliability import (
    AtomicCheckpointIO,
    ResumeStateCallback,
    check_resume_checkpoint,
    continue_csv_logs,
    debug_hooks_from_env,
    end_of_run,
    preflight,
    start_of_run,
)
from bertlab.run_dir import TokenizerFingerprint
from bertlab.targets import check_run_config
from bertlab.tasks.families import build_family

log = logging.getLogger(__name__)


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


class Throughput(Callback):
    """Training throughput over the whole loop (data loading, host syncs, optimizer), validation excluded.

    Wall time runs from the start of the first training batch to the end of the last one, minus the
    validations that ran in between (a validation after the last batch is not inside that span).
    """

    def __init__(self) -> None:
        self.t0: float | None = None
        self.t_end: float | None = None
        self.validations: list[tuple[float, float]] = []
        self._val_t0: float | None = None
        self.samples = 0
        self.tokens = 0
        self.epochs: dict[int, list[float]] = {}  # epoch → [first batch start, last batch end]
        self.feature_extraction_s: float | None = None  # the frozen-feature cache's encoder pass, before training

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        now = time.perf_counter()
        if self.t0 is None:
            self.t0 = now
        self.epochs.setdefault(trainer.current_epoch, [now, now])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.samples += len(batch["index"])
        self.tokens += int(batch.get("num_tokens", 0))
        self.t_end = time.perf_counter()
        self.epochs[trainer.current_epoch][1] = self.t_end

    def _without_validation(self, start: float, end: float) -> float:
        inside = sum(b - a for a, b in self.validations if a >= start and b <= end)
        return max(end - start - inside, 1e-9)

    def on_validation_start(self, trainer, pl_module):
        self._val_t0 = time.perf_counter()

    def on_validation_end(self, trainer, pl_module):
        if self._val_t0 is not None:
            self.validations.append((self._val_t0, time.perf_counter()))
        self._val_t0 = None

    def summary(self, world_size: int) -> dict[str, float]:
        if self.t0 is None or self.t_end is None:
            return {"wall_s": 0.0, "samples_per_s": 0.0, "tokens_per_s": 0.0}
        wall = self._without_validation(self.t0, self.t_end)
        # Counted on this rank; every rank processes the same number of batches, so scale by world size.
        return {"wall_s": round(wall, 3), "samples_per_s": round(self.samples * world_size / wall, 3),
                "tokens_per_s": round(self.tokens * world_size / wall, 3)}

    def timing(self) -> dict[str, Any]:
        """Each epoch's training wall time (validation excluded) and the feature cache's pass, if any."""
        return {"epoch_wall_s": [round(self._without_validation(a, b), 3) for _, (a, b) in sorted(self.epochs.items())],
                "feature_extraction_s": self.feature_extraction_s}


def _instantiate_group(group: DictConfig | None) -> list[Any]:
    out = []
    for _, node in (group or {}).items():
        if isinstance(node, DictConfig) and "_target_" in node:
            out.append(hydra.utils.instantiate(node))
    return out


def _filter_known_warnings() -> None:
    # Lightning 2.6's own pytree helper calls an API torch 2.13 deprecated; nothing bertlab can change.
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated")
    # Frozen modules run in eval mode on purpose (dropout off for fixed features; see bertlab.freeze).
    warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode at the start of training")
    # The data module saves and restores the training order itself (TaskDataModule.state_dict), which
    # Lightning's check for a stateful DataLoader cannot see.
    warnings.filterwarnings("ignore", message=r"You're resuming from a checkpoint that ended before the epoch")
    # val/* and test/* are logged after all ranks' predictions were gathered and scored once (exact
    # evaluation): every rank logs the same value, so Lightning's advice to average them is moot.
    warnings.filterwarnings("ignore", message=r"It is recommended to use `self.log\('(val|test)/")
    # Tiny demo/test runs have fewer batches than the logging interval; the logged step curve is still right.
    warnings.filterwarnings("ignore", message=r"The number of training batches .* is smaller than the logging")


def _quiet_lightning_logging() -> None:
    # Lightning attaches its own console handlers; under Hydra the root logger already prints (and writes
    # train.log), so every line would appear twice.
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True


def run(cfg: DictConfig) -> float | None:
    """Train and/or evaluate one configuration; returns the monitored validation value."""
    failed = True
    try:
        with HydraDDPJob() as job:  # Hydra + DDP: the ranks re-create this job in this job's run folder
            value = _run(cfg, job)
        failed = False
        return value
    finally:
        end_of_run(failed)  # stop-signal handlers back to their owners; the run dir records the end
        # Multirun jobs share one process: an unfinished wandb run would swallow the next job's logs.
        finish_wandb(failed=failed)


def _run(cfg: DictConfig, job: HydraDDPJob | None = None) -> float | None:
    _quiet_lightning_logging()
    _filter_known_warnings()
    check_run_config(cfg)  # a config file may only instantiate allowed classes (bertlab.targets)
    L.seed_everything(cfg.seed, workers=True)
    if cfg.trainer.get("deterministic"):
        torch.use_deterministic_algorithms(True, warn_only=True)
    run_dir = Path(cfg.paths.output_dir)
    graceful_stop = start_of_run(run_dir, cfg)  # settings checked; stale partial files removed; SIGTERM/SIGINT save last.ckpt

    task = TaskSpec(**_plain(cfg.task))
    data_cfg = DataConfig(**_plain(cfg.data))
    if not cfg.get("predict"):
        data_cfg = dataclasses.replace(data_cfg, predict_file=None)  # read only when predictions are asked for
    check_precision(cfg.trainer.precision, cfg.trainer.accelerator)  # 16-mixed needs a GPU: fail before any work
    data_cfg = dataclasses.replace(data_cfg, pad_to_multiple_of=resolve_pad_multiple(
        data_cfg.pad_to_multiple_of, cfg.trainer.precision, cfg.trainer.accelerator))
    head_cfg = HeadConfig(**_plain(cfg.head))
    freeze_cfg = FreezeConfig(**_plain(cfg.freeze))
    optim_cfg = OptimConfig(**_plain(cfg.optim))
    model_cfg = _plain(cfg.model)
    head_cfg = resolve_head_config(head_cfg, model_cfg)  # head.pooling=auto → the checkpoint's own pooling

    # Tokenizer: the checkpoint's, or one trained on the training split only (a scratch model).
    datamodule: TaskDataModule | None = None

    def training_texts() -> list[str]:
        return datamodule.training_texts()

    datamodule = TaskDataModule(task, data_cfg, tokenizer=None, seed=cfg.seed)  # type: ignore[arg-type]
    # A checkpoint to resume or evaluate brings its run's tokenizer: a scratch WordPiece vocabulary trained
    # again (in another process, with another cache) can differ, as the trainer breaks ties at random.
    tokenizer_from = model_cfg.get("init_from") or _checkpoint_file(cfg.get("ckpt_path"), run_dir)
    tokenizer = build_tokenizer(model_cfg, init_dir_for_tokenizer(tokenizer_from), training_texts,
                                data_cfg.cache_dir)
    datamodule.tokenizer = tokenizer

    family = build_family(task, datamodule.num_labels, datamodule.labels, data_cfg)
    model, load_report = build_model(model_cfg, head_cfg, family, tokenizer)
    preflight(task, data_cfg, model.bert.config.max_position_embeddings)
    freeze_plan = apply_freeze(model.bert, model.head, freeze_cfg)
    # Every split this run uses is read now: a bad example fails in seconds, not after an epoch of training.
    _read_splits(datamodule, cfg, data_cfg)
    hparams = {
        "encoder_config": dataclasses.asdict(model.bert.config),
        "task": dataclasses.asdict(task),
        "labels": datamodule.labels,
        "head": dataclasses.asdict(head_cfg),
        "head_kind": model.head_kind,
        "freeze": dataclasses.asdict(freeze_cfg),
        "model_name": model_cfg.get("name"),
        # Where the frozen weights come from: LoRA checkpoints store only what trained plus this reference.
        "base_weights": model_cfg.get("pretrained") or model_cfg.get("init_from"),
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    feature_extraction_s = None
    if head_cfg.cache_features:
        started = time.perf_counter()
        _attach_cached_features(model, freeze_plan, family, datamodule, data_cfg, head_cfg)
        feature_extraction_s = round(time.perf_counter() - started, 3)  # encoder over every split (or cache hits)
    module = BertTaskModule(model, family, freeze_plan, optim_cfg, splits=datamodule.splits, output_dir=run_dir,
                            on_nonfinite_loss=cfg.on_nonfinite_loss, hparams=hparams)

    checkpoint = ModelCheckpoint(
        dirpath=run_dir / "checkpoints",
        # No "=" in names (they must pass as Hydra overrides) and no metric name (its "/" makes folders).
        filename="epoch_{epoch:03d}_step_{step:06d}",
        auto_insert_metric_name=False,
        monitor=task.monitor, mode=task.mode, save_last=True, save_top_k=1,
        enable_version_counter=False,  # one last.ckpt, overwritten (atomically), never last-v1.ckpt
    )
    throughput = Throughput()
    throughput.feature_extraction_s = feature_extraction_s
    callbacks = [checkpoint, throughput, FreezeModeGuard(), UpdateScopeAuditCallback(run_dir / "update_scope.json")]
    callbacks += [BatchSizeReport(data_cfg.batch_size), SameTokenizerOnEveryRank(tokenizer.fingerprint())]
    if cfg.get("save_every_n_steps"):
        # last.ckpt inside long epochs, from a checkpoint of its own: the monitored one above would rank
        # "best" at these steps on the score of the previous validation (stale).
        callbacks.append(ModelCheckpoint(dirpath=run_dir / "checkpoints", save_last=True, save_top_k=0,
                                         every_n_train_steps=int(cfg.save_every_n_steps),
                                         enable_version_counter=False))
    callbacks += [ResumeStateCallback(), *debug_hooks_from_env(), graceful_stop, TokenizerFingerprint(tokenizer)]
    callbacks += _instantiate_group(cfg.get("callbacks"))
    loggers = build_loggers(cfg.get("logger"), run_dir, cfg.get("ckpt_path"))
    trainer_kwargs = {k: v for k, v in _plain(cfg.trainer).items() if v is not None}
    trainer_kwargs["strategy"] = build_strategy(trainer_kwargs.get("strategy", "auto"))  # a name or a _target_
    if "deepspeed" not in str(trainer_kwargs.get("strategy", "")):  # DeepSpeed writes its own checkpoints
        trainer_kwargs.setdefault("plugins", [AtomicCheckpointIO()])
    trainer = L.Trainer(
        **trainer_kwargs, callbacks=callbacks, logger=loggers or False, default_root_dir=str(run_dir),
        # bertlab's own samplers split training batches across ranks and evaluate every example exactly once.
        use_distributed_sampler=False,
    )
    if job is not None:
        job.trainer = trainer

    if trainer.is_global_zero:
        run_dir.mkdir(parents=True, exist_ok=True)
        tokenizer.save(run_dir / "tokenizer")
    if not cfg.train and not cfg.get("ckpt_path"):
        raise ConfigError("train=false needs ckpt_path=<checkpoint to evaluate>")

    resumed_from = None
    ckpt_path = _resolve_ckpt(cfg.get("ckpt_path"), run_dir)
    # Another architecture's checkpoint is refused here, with what differs, not by a strict load mid-fit.
    ckpt_step = check_resume_checkpoint(ckpt_path, module) if ckpt_path is not None else None
    best_path = ckpt_path
    if cfg.train:
        resumed_from = ckpt_step
        if resumed_from is not None and trainer.is_global_zero:
            continue_csv_logs(trainer.loggers, resumed_from)  # the resumed run extends the same metrics.csv
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
        best_path = _final_validation(trainer, module, datamodule, checkpoint)

    metrics: dict[str, Any] = {}
    val = trainer.validate(module, datamodule=datamodule, ckpt_path=best_path, verbose=False)
    metrics["val"] = module.last_metrics.get("val", val[0] if val else {})
    if cfg.test and data_cfg.test_file:
        trainer.test(module, datamodule=datamodule, ckpt_path=best_path, verbose=False)
        metrics["test"] = module.last_metrics.get("test", {})
    if cfg.get("predict"):
        run_predict(trainer, module, datamodule, best_path, run_dir)  # <run_dir>/predictions/predict_*

    if trainer.is_global_zero:
        result = _metrics_json(cfg, task, data_cfg, datamodule, module, throughput, trainer, metrics,
                               best_path, resumed_from)
        result.update(family.run_summary(module.model, tokenizer))  # clm: greedy samples of the best model
        (run_dir / "metrics.json").write_text(json.dumps(result, indent=2) + "\n")
        _print_summary(run_dir, result)
    if cfg.get("export") and trainer.is_global_zero:
        export_checkpoint(best_path, run_dir / "export", tokenizer_dir=run_dir / "tokenizer")
    value = metrics["val"].get(task.monitor.split("/", 1)[-1])
    return float(value) if value is not None else None


def _attach_cached_features(model, freeze_plan, family, datamodule, data_cfg, head_cfg) -> None:
    """freeze=encoder + head.cache_features: run the frozen encoder once per split, train the head on the result."""
    from bertlab.feature_cache import attach_features, check_cacheable, weights_fingerprint
    from bertlab.tokenization import content_hash

    check_cacheable(family.task.family, freeze_plan.encoder_frozen)
    datamodule.setup("fit")
    if data_cfg.test_file:
        datamodule.setup("test")
    weights = weights_fingerprint(model.bert)
    for name, split in datamodule.splits.items():
        key = content_hash(weights, datamodule.split_key(name), head_cfg.pooling, str(head_cfg.layers))
        attach_features(model, split, datamodule.collator(train=False), data_cfg.eval_batch_size, key,
                        data_cfg.cache_dir)


def _read_splits(datamodule: TaskDataModule, cfg: DictConfig, data_cfg: DataConfig) -> None:
    """Read and featurize the splits this run will use (Lightning's setup later finds them done)."""
    datamodule.setup("fit" if cfg.train else "validate")
    if cfg.test and data_cfg.test_file:
        datamodule.setup("test")
    if cfg.get("predict") and data_cfg.predict_file:
        datamodule.setup("predict")


def _checkpoint_file(ckpt_path: str | None, run_dir: Path) -> str | None:
    """``ckpt_path`` as an existing .ckpt file (``last`` → this run's last.ckpt), else None."""
    if not ckpt_path:
        return None
    path = run_dir / "checkpoints" / "last.ckpt" if ckpt_path == "last" else Path(str(ckpt_path))
    return str(path) if path.is_file() and path.suffix == ".ckpt" else None


def _resolve_ckpt(ckpt_path: str | None, run_dir: Path) -> str | None:
    if ckpt_path is None:
        return None
    if ckpt_path == "last":
        last = run_dir / "checkpoints" / "last.ckpt"
        if not last.is_file():
            raise CheckpointError(
                f"ckpt_path=last: {last} does not exist; pass hydra.run.dir=<the run dir to resume> (its "
                "checkpoints/last.ckpt is resumed) or ckpt_path=<a .ckpt file>"
            )
        return str(last)
    if not Path(ckpt_path).is_file():
        raise CheckpointError(f"ckpt_path={ckpt_path}: no such checkpoint file")
    return str(ckpt_path)


def _final_validation(trainer: L.Trainer, module: BertTaskModule, datamodule: TaskDataModule,
                      checkpoint: ModelCheckpoint) -> str:
    """Validate the final weights when training ended between validations (max_steps, limit batches), save
    them as a checkpoint, and let them compete for "best" — every run ends with validation and a best file."""
    validated_at = getattr(module, "_validated_step", None)
    if checkpoint.best_model_path and checkpoint.last_model_path and validated_at == trainer.global_step:
        return checkpoint.best_model_path
    trainer.validate(module, datamodule=datamodule, verbose=False)
    scores = module.last_metrics.get("val", {})
    value = scores.get(module.family.task.monitor.split("/", 1)[-1])
    path = Path(checkpoint.dirpath) / f"epoch_{trainer.current_epoch:03d}_step_{trainer.global_step:06d}.ckpt"
    trainer.save_checkpoint(path)
    best = checkpoint.best_model_score
    better = best is None or value is None or (
        value > float(best) if checkpoint.mode == "max" else value < float(best)
    ) or not checkpoint.best_model_path
    if better:
        checkpoint.best_model_path = str(path)
        if value is not None:
            checkpoint.best_model_score = torch.tensor(value)
    return checkpoint.best_model_path or str(path)


def _metrics_json(cfg, task, data_cfg, datamodule, module, throughput, trainer, metrics, best_path,
                  resumed_from) -> dict[str, Any]:
    def clean(block: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in block.items():
            k = k.split("/", 1)[-1]
            v = float(v)
            out[k] = int(v) if k == "num_examples" else (v if math.isfinite(v) else None)
        return out

    splits = datamodule.splits
    train_split = splits.get("train")
    val_split = splits.get("val")
    metric_name = task.monitor.split("/", 1)[-1]
    result = {
        "task": task.name,
        "model": cfg.model.get("name"),
        "freeze": module.freeze_plan.policy,
        "seed": cfg.seed,
        "tags": list(_plain(cfg.get("tags")) or []),
        "data_source": data_cfg.source,
        "params": {"total": num_parameters(module.model), "trainable": num_parameters(module.model, True)},
        "val": clean(metrics.get("val", {})),
        "train": {"steps": trainer.global_step, "epochs": trainer.current_epoch,
                  **throughput.summary(trainer.world_size), "resumed_from_step": resumed_from,
                  "skipped_nonfinite_batches": module.skipped_nonfinite},
        "timing": throughput.timing(),
        "data": {"train_examples": train_split.num_examples if train_split else None,
                 "val_examples": val_split.num_examples if val_split else None,
                 "skipped_examples": sum(s.skipped for s in splits.values())},
        "best_checkpoint": str(Path(best_path).resolve()) if best_path else None,
        "monitor": {"metric": task.monitor, "mode": task.mode,
                    "value": clean(metrics.get("val", {})).get(metric_name)},
    }
    if "test" in metrics:
        result["test"] = clean(metrics["test"])
    if data_cfg.source == "sample":
        result["note"] = "trained and evaluated on the small bundled sample: a smoke run, not a result"
    return result


@rank_zero_only
def _print_summary(run_dir: Path, result: dict[str, Any]) -> None:
    monitor = result["monitor"]
    lines = [
        f"run dir:          {run_dir}",
        f"best checkpoint:  {result['best_checkpoint']}",
        f"{monitor['metric']}: {monitor['value']}  ({monitor['mode']})",
        "val:              " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                         for k, v in result["val"].items()),
        f"train:            {result['train']['steps']} steps, {result['train']['samples_per_s']} samples/s",
    ]
    if "test" in result:
        lines.append("test:             " + ", ".join(f"{k}={v}" for k, v in result["test"].items()))
    for sample in result.get("samples", []):
        lines.append(f"sample:           {sample['prompt']!r} → {sample['continuation']!r}")
    if result.get("note"):
        lines.append(f"NOTE: {result['note']}")
    print("\n".join(lines))


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
