"""``run(cfg)``: the training recipe, top to bottom.

seed → typed settings and the run's start (resolved once: bertlab.training.start) → tokenizer → data → model
(+ freeze policy) → trainer → fit → final validation → best checkpoint → validate (+ test) → metrics.json →
export → return the monitored value (for sweepers).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from omegaconf import DictConfig, OmegaConf

from bertlab.data.datamodule import TaskDataModule
from bertlab.data.files import DataFiles
from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.data.windows import window_bound_text
from bertlab.inference.export import export_checkpoint
from bertlab.inference.inputs import predict_checkpoint, run_predict
from bertlab.inference.onnx import export_format, export_onnx, gate_line
from bertlab.inference.rerank import first_stage_run, mined_negatives
from bertlab.inference.teacher import Teacher, load_teacher
from bertlab.models.assemble import describe_encoder
from bertlab.models.heads import TaskModel
from bertlab.runtime.checks import check_epoch_length, preflight
from bertlab.runtime.config import (
    DataConfig,
    DistillConfig,
    FreezeConfig,
    HeadConfig,
    ModelConfig,
    OptimConfig,
    TaskSpec,
)
from bertlab.runtime.console import AutoLogInterval, ProgressBar, configure_console, console_mode
from bertlab.runtime.errors import ConfigError
from bertlab.runtime.files import RUN_DIR_FIX, write_text_atomic, writing
from bertlab.runtime.fingerprints import write_record
from bertlab.runtime.launch import HydraDDPJob
from bertlab.runtime.loggers import build_loggers, continue_csv_logs, finish_wandb
from bertlab.runtime.overrides import apply_policy_defaults, build_typed
from bertlab.runtime.paths import refuse_chdir
from bertlab.runtime.progress import RunEstimate
from bertlab.runtime.run_dir import TokenizerFingerprint, hold_log_files
from bertlab.runtime.targets import check_run_config
from bertlab.tasks.base import Family
from bertlab.tasks.distill import DistilledFamily
from bertlab.tasks.distill_match import LayerMatching
from bertlab.tasks.families import build_family
from bertlab.training.audit import UpdateScopeAuditCallback
from bertlab.training.build import (
    build_model,
    build_student,
    build_tokenizer,
    resolve_head_config,
    resolve_task_defaults,
)
from bertlab.training.callbacks import FreezeModeGuard, ReleaseFreedHeap, Throughput
from bertlab.training.checkpoints import (
    AtomicCheckpointIO,
    CheckpointInfo,
    LastCheckpoint,
    ValidateFinalStep,
    check_resume_checkpoint,
    checkpoint_settings,
)
from bertlab.training.debug_hooks import debug_hooks_from_env
from bertlab.training.distributed import (
    BatchSizeReport,
    SameTokenizerOnEveryRank,
    build_strategy,
    check_precision,
    resolve_pad_multiple,
)
from bertlab.training.freeze import FreezePlan, apply_freeze
from bertlab.training.module import TaskModule, evaluate_extra_split
from bertlab.training.results import choices_line, finished_train_block, metrics_json
from bertlab.training.results import print_summary as _print_summary  # looked up here: tests wrap it
from bertlab.training.resume import ResumeStateCallback
from bertlab.training.start import RunStart, model_config, resolve_start
from bertlab.training.stopping import end_of_run, start_of_run

log = logging.getLogger(__name__)


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def _instantiate_group(group: DictConfig | None) -> list[Any]:
    out = []
    for _, node in (group or {}).items():
        if isinstance(node, DictConfig) and "_target_" in node:
            out.append(hydra.utils.instantiate(node))
    return out


def _filter_known_warnings() -> None:
    # Lightning 2.6's own pytree helper calls an API torch 2.13 deprecated; nothing bertlab can change.
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated")
    # Frozen modules run in eval mode on purpose (dropout off for fixed features; see bertlab.training.freeze).
    warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode at the start of training")
    # The data module saves and restores the training order itself (TaskDataModule.state_dict), which
    # Lightning's check for a stateful DataLoader cannot see.
    warnings.filterwarnings("ignore", message=r"You're resuming from a checkpoint that ended before the epoch")
    # val/* and test/* are logged after all ranks' predictions were gathered and scored once (exact
    # evaluation): every rank logs the same value, so Lightning's advice to average them is moot.
    warnings.filterwarnings("ignore", message=r"It is recommended to use `self.log\('(val|test)/")
    # Tiny demo/test runs have fewer batches than the logging interval; the logged step curve is still right.
    warnings.filterwarnings("ignore", message=r"The number of training batches .* is smaller than the logging")


def run(cfg: DictConfig) -> float | None:
    """Train and/or evaluate one configuration; returns the monitored validation value.

    The warning filters it sets last for this run only. ``TOKENIZERS_PARALLELISM=false`` unless the caller chose:
    the tokenizers' thread pool and forked DataLoader workers do not mix (the library warns and stops using it).
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    hold_log_files(cfg)  # train.log gets this run's lines only once the run dir is claimed
    failed = True
    job: HydraDDPJob | None = None
    try:
        with warnings.catch_warnings(), HydraDDPJob() as job:  # Hydra + DDP: the ranks re-create this job here
            _filter_known_warnings()
            value = _run(cfg, job)
        failed = False
        return value
    finally:
        trained = job is not None and job.trainer is not None and job.trainer.global_step > 0
        # Stop-signal handlers back to their owners; the run dir records the end (a folder made for a run that
        # failed before its first step is removed).
        end_of_run(failed, trained)
        # Multirun jobs share one process: an unfinished wandb run would swallow the next job's logs.
        finish_wandb(failed=failed)


def _run(cfg: DictConfig, job: HydraDDPJob | None = None) -> float | None:
    mode = console_mode(cfg.get("quiet"), cfg.get("verbose"))
    run_dir, graceful_stop = _open_run(cfg, mode)
    task, data_cfg = _task_and_data(cfg)
    if not cfg.train and cfg.get("predict") and not data_cfg.val_file:
        # Prediction only: the checkpoint brings its tokenizer and label set; no training or validation data.
        start = resolve_start(None, cfg.get("ckpt_path"), run_dir, predict_only=True)
        return predict_checkpoint(_text(start.resume), task, data_cfg, run_dir)
    run = _settings(cfg, task, data_cfg, run_dir)  # every typed group, checked, and the start resolved once
    task, data_cfg, start = run.task, run.data, run.start
    # Loaded before any work (a bad teacher is refused in seconds); an evaluation needs it only to build the student.
    teacher = load_teacher(run.distill, task) if run.distill.enabled and (cfg.train or start.kind == "teacher") \
        else None
    tokenizer = _tokenizer(run, teacher)
    datamodule = TaskDataModule(task, data_cfg, tokenizer, seed=cfg.seed)
    family, model = _model(run, teacher, datamodule, tokenizer)
    freeze_plan = apply_freeze(model.encoder, model.head, run.freeze)
    _read_splits(datamodule, cfg, data_cfg)  # every split this run uses: a bad example fails in seconds
    module, feature_extraction_s = _module(cfg, run, model, family, freeze_plan, datamodule, run_dir)
    ckpt_path = _text(start.resume)
    # Another architecture's checkpoint is refused here, with what differs, not by a strict load mid-fit.
    info = check_resume_checkpoint(ckpt_path, module, resume=bool(cfg.train)) if ckpt_path is not None else None
    finished = None  # a resume of a run that had already reached its end: nothing to train, nothing to log
    if cfg.train and info is not None and info.finished(cfg.trainer.get("max_epochs"), cfg.trainer.get("max_steps")):
        finished = info
    trains = bool(cfg.train) and finished is None
    parts = _trainer(cfg, run, tokenizer, teacher, run_dir, mode, trains, finished, graceful_stop,
                     feature_extraction_s)
    trainer = parts.trainer
    if job is not None:
        job.trainer = trainer
    # One process sees every feature; layer matching runs the teacher on every batch (its layers are not kept).
    if teacher is not None and run.distill.cache and not run.distill.matches and trains and trainer.world_size == 1:
        module.family.cache = teacher.output_cache(datamodule, data_cfg)
    if trains:  # before anything is written: Lightning would refuse it when fit starts
        check_epoch_length(_plain(cfg.trainer), len(datamodule.splits["train"].features), data_cfg.batch_size,
                           trainer.world_size, datamodule.train_batches())
    log.info("%s", choices_line(model_name=run.model.name, seed=cfg.seed, distill=_plain(cfg.get("distill")),
                                task=task, labels=datamodule.labels, policy=freeze_plan.policy, trainer=trainer,
                                encoder=describe_encoder(model.encoder)))

    if trainer.is_global_zero:
        _save_tokenizer(run_dir, tokenizer)
    resumed_from = info.global_step if cfg.train and info is not None else None
    best_path, train_block = ckpt_path, None
    if finished is not None:
        best_path = str(finished.best_file() or ckpt_path)
        log.info("%s: this run already finished training (step %d, %d epochs): nothing to train; evaluating "
                 "its best checkpoint %s. To train further, raise trainer.max_epochs or trainer.max_steps.",
                 ckpt_path, finished.global_step, finished.epochs_done, best_path)
        train_block = finished_train_block(run_dir, finished)
    elif cfg.train:
        best_path = _fit(trainer, module, datamodule, parts, ckpt_path, info, resumed_from)
    metrics = _evaluate(cfg, trainer, module, datamodule, data_cfg, parts, best_path, trains)
    if cfg.get("predict"):
        run_predict(trainer, module, datamodule, best_path, run_dir)  # <run_dir>/predictions/predict_*

    if trainer.is_global_zero:
        if train_block is None:
            train_block = {"steps": trainer.global_step, "epochs": trainer.current_epoch,
                           **parts.throughput.summary(trainer.world_size), "resumed_from_step": resumed_from,
                           "skipped_nonfinite_batches": module.skipped_nonfinite}
        result = metrics_json(model_name=run.model.name, seed=cfg.seed, tags=list(_plain(cfg.get("tags")) or []),
                              distill=_plain(cfg.get("distill")), task=task, data_cfg=data_cfg,
                              datamodule=datamodule, module=module, throughput=parts.throughput,
                              train_block=train_block, metrics=metrics, best_path=best_path)
        result.update(family.run_summary(module.model, tokenizer))  # clm: greedy samples of the best model
        with writing(run_dir / "metrics.json", "the run's results", RUN_DIR_FIX):  # never half a metrics.json
            write_text_atomic(run_dir / "metrics.json", json.dumps(result, indent=2) + "\n")
        graceful_stop.results_complete(run_dir / "metrics.json")  # a stop signal now ends the run normally
    onnx_line = _export(cfg, run, best_path, run_dir) if trainer.is_global_zero else None
    if trains and trainer.is_global_zero:
        parts.last.finish(best_path)  # checkpoint.keep_last=0: the training states go now
    if trainer.is_global_zero:
        _print_summary(run_dir, result, trained=trains)
        if onnx_line:
            print(onnx_line)
    value = metrics["val"].get(task.monitor.split("/", 1)[-1])
    return float(value) if value is not None else None


@dataclass(frozen=True)
class RunSettings:
    """A run's typed configuration (every group) and its start, each built once from the DictConfig."""

    task: TaskSpec
    data: DataConfig
    head: HeadConfig
    freeze: FreezeConfig
    optim: OptimConfig
    model: ModelConfig
    distill: DistillConfig
    start: RunStart
    export: str | None  # hf | onnx | None (export=)
    release_heap: ReleaseFreedHeap


def _open_run(cfg: DictConfig, mode: str) -> tuple[Path, Any]:
    """The console, the run dir claimed and checked (stale partial files removed; SIGTERM/SIGINT save last.ckpt),
    the seed: returns the run dir and the stop-signal handler."""
    configure_console(mode)
    refuse_chdir()  # relative paths mean the directory the command was typed in (bertlab.runtime.paths)
    check_run_config(cfg)  # a config file may only instantiate allowed classes (bertlab.runtime.targets)
    run_dir = Path(cfg.paths.output_dir)
    graceful_stop = start_of_run(run_dir, cfg)
    L.seed_everything(cfg.seed, workers=True)  # after the check: the seed is one of the settings
    if cfg.trainer.get("deterministic"):
        torch.use_deterministic_algorithms(True, warn_only=True)
    return run_dir, graceful_stop


def _task_and_data(cfg: DictConfig) -> tuple[TaskSpec, DataConfig]:
    """The task and data groups (after the freeze policy's defaults); data.predict_file only when predicting."""
    policy_defaults = apply_policy_defaults(cfg)
    if policy_defaults:
        log.info("freeze=%s: the policy's defaults %s (set a key on the command line to choose another value)",
                 cfg.freeze.policy, ", ".join(policy_defaults))
    task = build_typed(TaskSpec, _plain(cfg.task), "task")
    data_cfg = build_typed(DataConfig, _plain(cfg.data), "data")
    if not cfg.get("predict"):
        data_cfg = dataclasses.replace(data_cfg, predict_file=None)  # read only when predictions are asked for
    return task, data_cfg


def _settings(cfg: DictConfig, task: TaskSpec, data_cfg: DataConfig, run_dir: Path) -> RunSettings:
    """Every other group typed and checked before any work, and the run's start resolved (once)."""
    release_heap = ReleaseFreedHeap(cfg.get("release_heap", "auto"), task.family)
    export = export_format(cfg.get("export"), cfg.get("export_quantize"))
    check_precision(cfg.trainer.precision, cfg.trainer.accelerator)  # 16-mixed needs a GPU: fail before any work
    data_cfg = dataclasses.replace(data_cfg, pad_to_multiple_of=resolve_pad_multiple(
        data_cfg.pad_to_multiple_of, cfg.trainer.precision, cfg.trainer.accelerator))
    head_cfg = build_typed(HeadConfig, _plain(cfg.head), "head")
    freeze_cfg = build_typed(FreezeConfig, _plain(cfg.freeze), "freeze")
    optim_cfg = build_typed(OptimConfig, _plain(cfg.optim), "optim")
    model_cfg = model_config(_plain(cfg.model))
    distill = build_typed(DistillConfig, _plain(cfg.get("distill")) or {}, "distill")
    if not cfg.train and not cfg.get("ckpt_path"):
        raise ConfigError("train=false needs ckpt_path=<checkpoint to evaluate>")
    start = resolve_start(model_cfg, cfg.get("ckpt_path"), run_dir, from_teacher=distill.student_layers is not None)
    head_cfg = resolve_head_config(head_cfg, start)  # head.pooling=auto → the checkpoint's own pooling
    # The head pools a long document's windows (data.long_text=windows): it records how, for every reload.
    head_cfg = dataclasses.replace(head_cfg, window_pooling=model_cfg.window_pooling or "max")
    task = resolve_task_defaults(task, start)  # task.mlm_probability=null → the encoder family's rate
    if data_cfg.distill_file and not distill.enabled:
        raise ConfigError(f"data.distill_file={data_cfg.distill_file}: unlabelled texts are labelled by a "
                          "distillation teacher only: set distill.teacher=<run dir or export> or remove the file")
    files = DataFiles(task, data_cfg)
    if cfg.train:  # task.negatives_from: data.train_file's pairs with mined negatives (training reads them)
        data_cfg = mined_negatives(task, data_cfg, files, run_dir)
    task = first_stage_run(task, data_cfg, files, run_dir)  # task=rerank: its candidates
    return RunSettings(task, data_cfg, head_cfg, freeze_cfg, optim_cfg, model_cfg, distill, start, export,
                       release_heap)


def _tokenizer(run: RunSettings, teacher: Teacher | None) -> EncoderTokenizer:
    """The start's tokenizer, the teacher's (the ids it reads), or one trained on the training split only (a
    scratch model): a function of the configuration and the training files, built before the data module."""
    files = DataFiles(run.task, run.data)
    if teacher is not None and teacher.gives_tokenizer(run.model, run.distill):
        return teacher.tokenizer
    return build_tokenizer(run.model, run.start, lambda: files.training_texts(max_bytes=run.model.vocab_train_bytes),
                           run.data.cache_dir)


def _model(run: RunSettings, teacher: Teacher | None, datamodule: TaskDataModule, tokenizer: EncoderTokenizer,
           ) -> tuple[Family, TaskModel]:
    """The task family and the model: the start's encoder (or the teacher's layers) + the family's head."""
    family = build_family(run.task, datamodule.num_labels, datamodule.labels, run.data)
    if teacher is not None:  # its labels, vocabulary and positions must fit this run (docs/distillation.md)
        teacher.check(datamodule.labels, tokenizer, run.data)
        if run.head.cache_features:
            raise ConfigError("distill.teacher and head.cache_features=true: the teacher reads the tokens the "
                              "cached features replace; set head.cache_features=false")
    if run.start.kind == "teacher":
        model = build_student(teacher.model, run.distill.student_layers, run.model, run.head, family)
    else:
        model, _ = build_model(run.model, run.head, family, tokenizer, run.start)
    if teacher is not None:  # the teacher's term joins the family's loss; the teacher is in no checkpoint
        family = DistilledFamily(family, teacher.model, run.distill,
                                 matching=LayerMatching.build(model, teacher.model, run.distill))
        if family.matching is not None:
            log.info("distill: %s; the teacher runs on every batch", family.matching.describe())
    preflight(run.task, run.data, getattr(model.encoder.config, "max_sequence_length", None))  # recurrent: none
    return family, model


def _module(cfg: DictConfig, run: RunSettings, model: TaskModel, family: Family, freeze_plan: FreezePlan,
            datamodule: TaskDataModule, run_dir: Path) -> tuple[TaskModule, float | None]:
    """The LightningModule with the hyper-parameters every checkpoint carries; the feature-cache time, if any."""
    hparams = {
        "encoder_config": dataclasses.asdict(model.encoder.config),
        "task": dataclasses.asdict(run.task),
        "labels": datamodule.labels,
        "head": dataclasses.asdict(run.head),
        "head_kind": model.head_kind,
        "has_pooler": getattr(model.encoder, "pooler", None) is not None,
        "freeze": dataclasses.asdict(run.freeze),
        "model_name": run.model.name,
        # Where the frozen weights come from (the start as named): LoRA checkpoints store only what trained.
        "base_weights": run.start.base,
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    feature_extraction_s = None
    if run.head.cache_features:
        started = time.perf_counter()
        _attach_cached_features(model, freeze_plan, family, datamodule, run.data, run.head)
        feature_extraction_s = round(time.perf_counter() - started, 3)  # encoder over every split (or cache hits)
    module = TaskModule(model, family, freeze_plan, run.optim, splits=datamodule.splits, output_dir=run_dir,
                            on_nonfinite_loss=cfg.on_nonfinite_loss, hparams=hparams)
    return module, feature_extraction_s


@dataclass
class TrainerParts:
    """The Trainer and the callbacks the steps after it read."""

    trainer: L.Trainer
    checkpoint: ModelCheckpoint | None
    last: LastCheckpoint
    final_validation: ValidateFinalStep
    throughput: Throughput


def _trainer(cfg: DictConfig, run: RunSettings, tokenizer: EncoderTokenizer, teacher: Teacher | None, run_dir: Path,
             mode: str, trains: bool, finished: CheckpointInfo | None, graceful_stop: Any,
             feature_extraction_s: float | None) -> TrainerParts:
    """The Lightning Trainer with every callback of a run, its loggers and settings."""
    task, data_cfg = run.task, run.data
    throughput = Throughput()
    throughput.feature_extraction_s = feature_extraction_s
    callbacks: list[Callback] = []
    checkpoint: ModelCheckpoint | None = None
    keep = checkpoint_settings(cfg.get("checkpoint"))
    final_validation = ValidateFinalStep()
    if trains:  # an evaluation-only run writes no checkpoints (and restores no checkpointing state)
        checkpoint = ModelCheckpoint(
            dirpath=run_dir / "checkpoints",
            # No "=" in names (they must pass as Hydra overrides) and no metric name (its "/" makes folders).
            filename="epoch_{epoch:03d}_step_{step:06d}",
            auto_insert_metric_name=False,
            monitor=task.monitor, mode=task.mode, save_top_k=1,
            enable_version_counter=False, save_weights_only=keep["best_weights_only"],
        )
    last = LastCheckpoint(run_dir / "checkpoints", every_n_steps=cfg.get("save_every_n_steps"), best=checkpoint,
                          **keep)
    if trains:
        callbacks += [checkpoint, last, final_validation]
    # The planned steps and the time left (train.log; the progress bar), with the bound on one example's work.
    teacher_memory = (teacher.memory_text(data_cfg.batch_size, data_cfg.max_seq_length, run.distill.matches)
                      if teacher is not None and trains else None)
    estimate = RunEstimate(bounds=" · ".join(t for t in (window_bound_text(data_cfg, task.family), teacher_memory)
                                              if t) or None)
    callbacks.append(estimate)
    callbacks += [throughput, FreezeModeGuard(), UpdateScopeAuditCallback(run_dir / "update_scope.json")]
    callbacks += [BatchSizeReport(data_cfg.batch_size), SameTokenizerOnEveryRank(tokenizer.fingerprint())]
    callbacks += [ResumeStateCallback(), *debug_hooks_from_env(), graceful_stop, TokenizerFingerprint(tokenizer)]
    callbacks.append(run.release_heap)
    callbacks += _instantiate_group(cfg.get("callbacks"))
    # A finished run's logs stay as they are: evaluating it again adds nothing to its learning curves.
    loggers = (build_loggers(cfg.get("logger"), run_dir, cfg.get("ckpt_path"), quiet_wandb=mode != "verbose")
               if finished is None else [])
    trainer_kwargs = {k: v for k, v in _plain(cfg.trainer).items() if v is not None}
    if mode == "quiet":
        trainer_kwargs["enable_progress_bar"] = False
    elif mode == "normal" and trainer_kwargs.get("enable_progress_bar", True):
        callbacks.append(ProgressBar(task.monitor, estimate))
    if mode != "verbose":  # parameter counts are in the freeze line; the table adds nothing in normal mode
        trainer_kwargs.setdefault("enable_model_summary", False)
    if trainer_kwargs.get("log_every_n_steps") is None:
        trainer_kwargs["log_every_n_steps"] = 50  # replaced at the start of training
        callbacks.append(AutoLogInterval())
    trainer_kwargs["strategy"] = build_strategy(trainer_kwargs.get("strategy", "auto"))  # a name or a _target_
    if "deepspeed" not in str(trainer_kwargs.get("strategy", "")):  # DeepSpeed writes its own checkpoints
        trainer_kwargs.setdefault("plugins", [AtomicCheckpointIO()])
    if not trains:
        trainer_kwargs["enable_checkpointing"] = False
    trainer = L.Trainer(
        **trainer_kwargs, callbacks=callbacks, logger=loggers or False, default_root_dir=str(run_dir),
        # bertlab's own samplers split training batches across ranks and evaluate every example exactly once.
        use_distributed_sampler=False,
    )
    return TrainerParts(trainer, checkpoint, last, final_validation, throughput)


def _save_tokenizer(run_dir: Path, tokenizer: EncoderTokenizer) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    with writing(run_dir / "tokenizer", "the run's tokenizer", RUN_DIR_FIX):
        tokenizer.save(run_dir / "tokenizer")
        write_record(run_dir / "tokenizer", tokenizer)  # what predict and export check its files against


def _fit(trainer: L.Trainer, module: TaskModule, datamodule: TaskDataModule, parts: TrainerParts,
         ckpt_path: str | None, info: CheckpointInfo | None, resumed_from: int | None) -> str:
    """Train (from the start, or resumed from ``ckpt_path``); returns the checkpoint to evaluate."""
    if resumed_from is not None and info is not None:
        log.info("resuming from %s: global step %d, %d epoch%s done", ckpt_path, resumed_from,
                 info.epochs_done, "" if info.epochs_done == 1 else "s")
    if resumed_from is not None and trainer.is_global_zero:
        continue_csv_logs(trainer.loggers, resumed_from)  # the resumed run extends the same metrics.csv
    with warnings.catch_warnings():
        # A resume continues in its own checkpoint folder, which is not empty: that is the point.
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    return _best_after_fit(trainer, parts.checkpoint, parts.last, parts.final_validation)


def _evaluate(cfg: DictConfig, trainer: L.Trainer, module: TaskModule, datamodule: TaskDataModule,
              data_cfg: DataConfig, parts: TrainerParts, best_path: str | None, trains: bool) -> dict[str, Any]:
    """The best checkpoint's scores: validation, each extra dev set, and the test set when asked for."""
    metrics: dict[str, Any] = {}
    with warnings.catch_warnings():
        # Evaluation loads the checkpoint's weights only; its training callbacks are not needed.
        warnings.filterwarnings("ignore", message=r"Be aware that when using `ckpt_path`, callbacks used")
        # The best weights are usually the final ones, which fit's last validation has just scored: scoring
        # them again would only repeat every validation batch.
        known = parts.final_validation.scores_of(trainer, best_path) if trains else None
        if known is None:
            val = trainer.validate(module, datamodule=datamodule, ckpt_path=best_path, verbose=False,
                                   weights_only=True)
            known = module.last_metrics.get("val", val[0] if val else {})
        metrics["val"] = known
        for name in data_cfg.val_extra_files or {}:  # MNLI's mismatched dev set: its own metrics.json block
            metrics[name] = evaluate_extra_split(trainer, module, datamodule, name, best_path)
        if cfg.test and data_cfg.test_file:
            trainer.test(module, datamodule=datamodule, ckpt_path=best_path, verbose=False, weights_only=True)
            metrics["test"] = module.last_metrics.get("test", {})
    return metrics


def _export(cfg: DictConfig, run: RunSettings, best_path: str | None, run_dir: Path) -> str | None:
    """export=true|onnx: the best checkpoint exported into the run dir (a LoRA checkpoint's base read from the
    run's start); the ONNX gate's line for the summary."""
    if run.export == "hf":
        export_checkpoint(best_path, run_dir / "export", tokenizer_dir=run_dir / "tokenizer", overwrite=True,
                          run_dir=run_dir, start=run.start)
    elif run.export == "onnx":
        report = export_onnx(best_path, run_dir / "onnx", quantize=cfg.get("export_quantize"),
                             max_drop=float(cfg.get("export_max_drop", 1.0)), tokenizer_dir=run_dir / "tokenizer",
                             overwrite=True, run_dir=run_dir, start=run.start)
        return f"onnx:             {run_dir / 'onnx'}; {gate_line(report)}"
    return None


def _text(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def _attach_cached_features(model, freeze_plan, family, datamodule, data_cfg, head_cfg) -> None:
    """freeze=encoder + head.cache_features: run the frozen encoder once per split, train the head on the result."""
    from bertlab.data.tokenizer import content_hash
    from bertlab.training.feature_cache import attach_features, check_cacheable, weights_fingerprint

    check_cacheable(family.task.family, freeze_plan.encoder_frozen)
    datamodule.setup("fit")
    if data_cfg.test_file:
        datamodule.setup("test")
    weights = weights_fingerprint(model.encoder)
    for name, split in datamodule.splits.items():
        key = content_hash(weights, datamodule.split_key(name), head_cfg.pooling, str(head_cfg.layers))
        attach_features(model, split, datamodule.collator(train=False), data_cfg.eval_batch_size, key,
                        data_cfg.cache_dir)


def _read_splits(datamodule: TaskDataModule, cfg: DictConfig, data_cfg: DataConfig) -> None:
    """Read and featurize the splits this run will use (Lightning's setup later finds them done)."""
    datamodule.setup("fit" if cfg.train else "validate")
    if cfg.test and data_cfg.test_file:
        datamodule.setup("test")


def _best_after_fit(trainer: L.Trainer, checkpoint: ModelCheckpoint | None, last: LastCheckpoint,
                    final_validation: ValidateFinalStep) -> str:
    """The checkpoint to evaluate after ``fit``: Lightning's best, or the final state when nothing was scored."""
    if final_validation.validated_step is not None and final_validation.validated_step != trainer.global_step:
        log.warning("the final weights (step %d) were not validated (trainer.check_val_every_n_epoch or "
                    "val_check_interval skipped the last step): the best checkpoint is chosen among the steps "
                    "that were; %s holds the final state", trainer.global_step, last.path)
    if checkpoint is not None and checkpoint.best_model_path:
        return checkpoint.best_model_path
    # No validation ran (no validation data, or limit_val_batches=0): the final state is what there is.
    trainer.save_checkpoint(last.path)
    return str(last.path)


