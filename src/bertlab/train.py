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

from bertlab.data.datamodule import TaskDataModule
from bertlab.data.documents import long_text_report
from bertlab.data.files import DataFiles
from bertlab.data.windows import window_bound_text
from bertlab.inference.export import export_checkpoint
from bertlab.inference.inputs import predict_checkpoint, run_predict
from bertlab.inference.onnx import export_format, export_onnx, gate_line
from bertlab.inference.rerank import first_stage_run
from bertlab.inference.teacher import load_teacher
from bertlab.models.assemble import describe_encoder
from bertlab.models.bert import num_parameters
from bertlab.runtime.checks import check_epoch_length, preflight
from bertlab.runtime.config import DataConfig, DistillConfig, FreezeConfig, HeadConfig, OptimConfig, TaskSpec
from bertlab.runtime.console import (
    AutoLogInterval,
    ProgressBar,
    configure_console,
    console_mode,
    format_value,
)
from bertlab.runtime.errors import CheckpointError, ConfigError
from bertlab.runtime.files import RUN_DIR_FIX, write_text_atomic, writing
from bertlab.runtime.fingerprints import write_record
from bertlab.runtime.launch import HydraDDPJob
from bertlab.runtime.loggers import build_loggers, continue_csv_logs, finish_wandb
from bertlab.runtime.overrides import apply_policy_defaults, build_typed
from bertlab.runtime.paths import existing_path, refuse_chdir
from bertlab.runtime.progress import RunEstimate
from bertlab.runtime.run_dir import TokenizerFingerprint, hold_log_files
from bertlab.runtime.targets import check_run_config
from bertlab.tasks.distill import DistilledFamily
from bertlab.tasks.families import build_family
from bertlab.training.audit import UpdateScopeAuditCallback
from bertlab.training.build import (
    build_model,
    build_student,
    build_tokenizer,
    init_dir_for_tokenizer,
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
    disk_use,
    last_checkpoint,
)
from bertlab.training.debug_hooks import debug_hooks_from_env
from bertlab.training.distributed import (
    BatchSizeReport,
    SameTokenizerOnEveryRank,
    build_strategy,
    check_precision,
    resolve_pad_multiple,
)
from bertlab.training.freeze import apply_freeze
from bertlab.training.module import BertTaskModule, evaluate_extra_split
from bertlab.training.resume import ResumeStateCallback
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
    configure_console(mode)
    refuse_chdir()  # relative paths mean the directory the command was typed in (bertlab.runtime.paths)
    check_run_config(cfg)  # a config file may only instantiate allowed classes (bertlab.runtime.targets)
    run_dir = Path(cfg.paths.output_dir)
    graceful_stop = start_of_run(run_dir, cfg)  # settings checked; stale partial files removed; SIGTERM/SIGINT save last.ckpt
    L.seed_everything(cfg.seed, workers=True)  # after the check: the seed is one of the settings
    if cfg.trainer.get("deterministic"):
        torch.use_deterministic_algorithms(True, warn_only=True)

    policy_defaults = apply_policy_defaults(cfg)
    if policy_defaults:
        log.info("freeze=%s: the policy's defaults %s (set a key on the command line to choose another value)",
                 cfg.freeze.policy, ", ".join(policy_defaults))
    task = build_typed(TaskSpec, _plain(cfg.task), "task")
    data_cfg = build_typed(DataConfig, _plain(cfg.data), "data")
    if not cfg.get("predict"):
        data_cfg = dataclasses.replace(data_cfg, predict_file=None)  # read only when predictions are asked for
    if not cfg.train and cfg.get("predict") and not data_cfg.val_file:
        # Prediction only: the checkpoint brings its tokenizer and label set; no training or validation data.
        return predict_checkpoint(_resolve_ckpt(cfg.get("ckpt_path"), run_dir), task, data_cfg, run_dir)
    release_heap = ReleaseFreedHeap(cfg.get("release_heap", "auto"), task.family)  # checked before any work
    export = export_format(cfg.get("export"), cfg.get("export_quantize"))  # checked before any work
    check_precision(cfg.trainer.precision, cfg.trainer.accelerator)  # 16-mixed needs a GPU: fail before any work
    data_cfg = dataclasses.replace(data_cfg, pad_to_multiple_of=resolve_pad_multiple(
        data_cfg.pad_to_multiple_of, cfg.trainer.precision, cfg.trainer.accelerator))
    head_cfg = build_typed(HeadConfig, _plain(cfg.head), "head")
    freeze_cfg = build_typed(FreezeConfig, _plain(cfg.freeze), "freeze")
    optim_cfg = build_typed(OptimConfig, _plain(cfg.optim), "optim")
    model_cfg = _plain(cfg.model)
    head_cfg = resolve_head_config(head_cfg, model_cfg)  # head.pooling=auto → the checkpoint's own pooling
    # The head pools a long document's windows (data.long_text=windows): it records how, for every reload.
    head_cfg = dataclasses.replace(head_cfg, window_pooling=model_cfg.get("window_pooling") or "max")
    task = resolve_task_defaults(task, model_cfg)  # task.mlm_probability=null → the encoder family's rate
    distill = build_typed(DistillConfig, _plain(cfg.get("distill")) or {}, "distill")
    # Loaded before any work (a bad teacher is refused in seconds); an evaluation needs it only to build the student.
    teacher = load_teacher(distill, task) if distill.enabled and (cfg.train or distill.student_layers) else None
    if data_cfg.distill_file and not distill.enabled:
        raise ConfigError(f"data.distill_file={data_cfg.distill_file}: unlabelled texts are labelled by a "
                          "distillation teacher only: set distill.teacher=<run dir or export> or remove the file")

    # Tokenizer: the checkpoint's, or one trained on the training split only (a scratch model): a function of
    # the configuration and the training files, built before the data module that uses it.
    files = DataFiles(task, data_cfg)
    task = first_stage_run(task, data_cfg, files, run_dir)  # task=rerank: an embedding run's candidates, as a run file
    # A checkpoint to resume or evaluate brings its run's tokenizer: a scratch WordPiece vocabulary trained
    # again (in another process, with another cache) can differ, as the trainer breaks ties at random.
    tokenizer_from = model_cfg.get("init_from") or _checkpoint_file(cfg.get("ckpt_path"), run_dir)
    if teacher is not None and teacher.gives_tokenizer(model_cfg, distill):  # the ids the teacher reads
        tokenizer = teacher.tokenizer
    else:
        tokenizer = build_tokenizer(model_cfg, init_dir_for_tokenizer(tokenizer_from),
                                    lambda: files.training_texts(max_bytes=model_cfg.get("vocab_train_bytes")),
                                    data_cfg.cache_dir)
    datamodule = TaskDataModule(task, data_cfg, tokenizer, seed=cfg.seed)

    family = build_family(task, datamodule.num_labels, datamodule.labels, data_cfg)
    if teacher is not None:  # its labels, vocabulary and positions must fit this run (docs/distillation.md)
        teacher.check(datamodule.labels, tokenizer, data_cfg)
        if head_cfg.cache_features:
            raise ConfigError("distill.teacher and head.cache_features=true: the teacher reads the tokens the "
                              "cached features replace; set head.cache_features=false")
    if teacher is not None and distill.student_layers is not None:
        model, load_report = build_student(teacher.model, distill.student_layers, model_cfg, head_cfg, family), None
    else:
        model, load_report = build_model(model_cfg, head_cfg, family, tokenizer)
    if teacher is not None:  # the teacher's term joins the family's loss; the teacher is in no checkpoint
        family = DistilledFamily(family, teacher.model, distill)
    preflight(task, data_cfg, getattr(model.bert.config, "max_sequence_length", None))  # recurrent: none
    freeze_plan = apply_freeze(model.bert, model.head, freeze_cfg)
    # Every split this run uses is read now: a bad example fails in seconds, not after an epoch of training.
    _read_splits(datamodule, cfg, data_cfg)
    hparams = {
        "encoder_config": dataclasses.asdict(model.bert.config),
        "task": dataclasses.asdict(task),
        "labels": datamodule.labels,
        "head": dataclasses.asdict(head_cfg),
        "head_kind": model.head_kind,
        "has_pooler": getattr(model.bert, "pooler", None) is not None,
        "freeze": dataclasses.asdict(freeze_cfg),
        "model_name": model_cfg.get("name"),
        # Where the frozen weights come from: LoRA checkpoints store only what trained plus this reference.
        "base_weights": None if distill.student_layers else model_cfg.get("pretrained") or model_cfg.get("init_from"),
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    feature_extraction_s = None
    if head_cfg.cache_features:
        started = time.perf_counter()
        _attach_cached_features(model, freeze_plan, family, datamodule, data_cfg, head_cfg)
        feature_extraction_s = round(time.perf_counter() - started, 3)  # encoder over every split (or cache hits)
    module = BertTaskModule(model, family, freeze_plan, optim_cfg, splits=datamodule.splits, output_dir=run_dir,
                            on_nonfinite_loss=cfg.on_nonfinite_loss, hparams=hparams)

    if not cfg.train and not cfg.get("ckpt_path"):
        raise ConfigError("train=false needs ckpt_path=<checkpoint to evaluate>")
    ckpt_path = _resolve_ckpt(cfg.get("ckpt_path"), run_dir)
    # Another architecture's checkpoint is refused here, with what differs, not by a strict load mid-fit.
    info = check_resume_checkpoint(ckpt_path, module, resume=bool(cfg.train)) if ckpt_path is not None else None
    ckpt_step = info.global_step if info is not None else None
    finished = None  # a resume of a run that had already reached its end: nothing to train, nothing to log
    if cfg.train and info is not None and info.finished(cfg.trainer.get("max_epochs"), cfg.trainer.get("max_steps")):
        finished = info
    trains = bool(cfg.train) and finished is None

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
    estimate = RunEstimate(bounds=window_bound_text(data_cfg, task.family))
    callbacks.append(estimate)
    callbacks += [throughput, FreezeModeGuard(), UpdateScopeAuditCallback(run_dir / "update_scope.json")]
    callbacks += [BatchSizeReport(data_cfg.batch_size), SameTokenizerOnEveryRank(tokenizer.fingerprint())]
    callbacks += [ResumeStateCallback(), *debug_hooks_from_env(), graceful_stop, TokenizerFingerprint(tokenizer)]
    callbacks.append(release_heap)
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
    if job is not None:
        job.trainer = trainer
    if teacher is not None and distill.cache and trains and trainer.world_size == 1:  # one process sees every feature
        module.family.cache = teacher.output_cache(datamodule, data_cfg)
    if trains:  # before anything is written: Lightning would refuse it when fit starts
        check_epoch_length(_plain(cfg.trainer), len(datamodule.splits["train"].features), data_cfg.batch_size,
                           trainer.world_size, datamodule.train_batches())
    log.info("%s", _choices_line(cfg, task, datamodule.labels, freeze_plan.policy, trainer,
                                 describe_encoder(model.bert)))

    if trainer.is_global_zero:
        run_dir.mkdir(parents=True, exist_ok=True)
        with writing(run_dir / "tokenizer", "the run's tokenizer", RUN_DIR_FIX):
            tokenizer.save(run_dir / "tokenizer")
            write_record(run_dir / "tokenizer", tokenizer)  # what predict and export check its files against
    resumed_from = ckpt_step if cfg.train else None
    best_path = ckpt_path
    train_block: dict[str, Any] | None = None
    if finished is not None:
        best_path = str(finished.best_file() or ckpt_path)
        log.info("%s: this run already finished training (step %d, %d epochs): nothing to train; evaluating "
                 "its best checkpoint %s. To train further, raise trainer.max_epochs or trainer.max_steps.",
                 ckpt_path, finished.global_step, finished.epochs_done, best_path)
        train_block = _finished_train_block(run_dir, finished)
    elif cfg.train:
        if resumed_from is not None and info is not None:
            log.info("resuming from %s: global step %d, %d epoch%s done", ckpt_path, resumed_from,
                     info.epochs_done, "" if info.epochs_done == 1 else "s")
        if resumed_from is not None and trainer.is_global_zero:
            continue_csv_logs(trainer.loggers, resumed_from)  # the resumed run extends the same metrics.csv
        with warnings.catch_warnings():
            # A resume continues in its own checkpoint folder, which is not empty: that is the point.
            warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
            trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
        best_path = _best_after_fit(trainer, checkpoint, last, final_validation)

    metrics: dict[str, Any] = {}
    with warnings.catch_warnings():
        # Evaluation loads the checkpoint's weights only; its training callbacks are not needed.
        warnings.filterwarnings("ignore", message=r"Be aware that when using `ckpt_path`, callbacks used")
        # The best weights are usually the final ones, which fit's last validation has just scored: scoring
        # them again would only repeat every validation batch.
        known = final_validation.scores_of(trainer, best_path) if trains else None
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
    if cfg.get("predict"):
        run_predict(trainer, module, datamodule, best_path, run_dir)  # <run_dir>/predictions/predict_*

    if trainer.is_global_zero:
        if train_block is None:
            train_block = {"steps": trainer.global_step, "epochs": trainer.current_epoch,
                           **throughput.summary(trainer.world_size), "resumed_from_step": resumed_from,
                           "skipped_nonfinite_batches": module.skipped_nonfinite}
        result = _metrics_json(cfg, task, data_cfg, datamodule, module, throughput, train_block, metrics,
                               best_path)
        result.update(family.run_summary(module.model, tokenizer))  # clm: greedy samples of the best model
        with writing(run_dir / "metrics.json", "the run's results", RUN_DIR_FIX):  # never half a metrics.json
            write_text_atomic(run_dir / "metrics.json", json.dumps(result, indent=2) + "\n")
        graceful_stop.results_complete(run_dir / "metrics.json")  # a stop signal now ends the run normally
    onnx_line = None
    if export == "hf" and trainer.is_global_zero:
        export_checkpoint(best_path, run_dir / "export", tokenizer_dir=run_dir / "tokenizer", overwrite=True,
                          run_dir=run_dir)
    elif export == "onnx" and trainer.is_global_zero:
        report = export_onnx(best_path, run_dir / "onnx", quantize=cfg.get("export_quantize"),
                             max_drop=float(cfg.get("export_max_drop", 1.0)), tokenizer_dir=run_dir / "tokenizer",
                             overwrite=True, run_dir=run_dir)
        onnx_line = f"onnx:             {run_dir / 'onnx'}; {gate_line(report)}"
    if trains and trainer.is_global_zero:
        last.finish(best_path)  # checkpoint.keep_last=0: the training states go now
    if trainer.is_global_zero:
        _print_summary(run_dir, result, trained=trains)
        if onnx_line:
            print(onnx_line)
    value = metrics["val"].get(task.monitor.split("/", 1)[-1])
    return float(value) if value is not None else None


def _attach_cached_features(model, freeze_plan, family, datamodule, data_cfg, head_cfg) -> None:
    """freeze=encoder + head.cache_features: run the frozen encoder once per split, train the head on the result."""
    from bertlab.data.tokenizer import content_hash
    from bertlab.training.feature_cache import attach_features, check_cacheable, weights_fingerprint

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


def _checkpoint_file(ckpt_path: str | None, run_dir: Path) -> str | None:
    """``ckpt_path`` as an existing .ckpt file (``last`` → this run's last.ckpt), else None."""
    if not ckpt_path:
        return None
    path = last_checkpoint(run_dir) if ckpt_path == "last" else Path(str(ckpt_path))
    return str(path) if path.is_file() and path.suffix == ".ckpt" else None


def _resolve_ckpt(ckpt_path: str | None, run_dir: Path) -> str | None:
    if ckpt_path is None:
        return None
    if ckpt_path == "last":
        last = last_checkpoint(run_dir)
        if not last.is_file():
            raise CheckpointError(
                f"ckpt_path=last: {last} does not exist; pass hydra.run.dir=<the run dir to resume> (its "
                "checkpoints/last.ckpt is resumed) or ckpt_path=<a .ckpt file>"
            )
        return str(last)
    path = existing_path(ckpt_path, f"ckpt_path={ckpt_path}", CheckpointError)
    if not path.is_file():
        raise CheckpointError(f"ckpt_path={ckpt_path}: {path} is not a file; pass a .ckpt file (a run dir's "
                              "checkpoints/last.ckpt, or ckpt_path=last with hydra.run.dir=<the run dir>)")
    return str(ckpt_path)


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


def _finished_train_block(run_dir: Path, info: CheckpointInfo) -> dict[str, Any]:
    """metrics.json's ``train`` block for a resume of a run that had already finished: the original run's."""
    previous = run_dir / "metrics.json"
    block: dict[str, Any] = {}
    if previous.is_file():
        try:
            block = dict(json.loads(previous.read_text()).get("train") or {})
        except (OSError, ValueError):
            block = {}
    if block.get("steps") != info.global_step:  # no record of this run's training: what the checkpoint says
        block = {"steps": info.global_step, "epochs": info.epochs_done, "wall_s": 0.0, "samples_per_s": 0.0,
                 "tokens_per_s": 0.0, "skipped_nonfinite_batches": 0}
    block["resumed_from_step"] = info.global_step
    return block


def _metrics_json(cfg, task, data_cfg, datamodule, module, throughput, train_block, metrics,
                  best_path) -> dict[str, Any]:
    def clean(block: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in block.items():
            k = k.split("/", 1)[-1]
            v = float(v)
            out[k] = int(v) if k in ("num_examples", "num_words") else (v if math.isfinite(v) else None)
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
        "labels": None if task.regression else datamodule.labels,
        "positive_label": positive_label(task, datamodule.labels),
        "params": {"total": num_parameters(module.model), "trainable": num_parameters(module.model, True)},
        "distill": _distill_block(cfg, module),
        "val": clean(metrics.get("val", {})),
        "train": train_block,
        "timing": throughput.timing(),
        "data": {"train_examples": train_split.num_examples if train_split else None,
                 "val_examples": val_split.num_examples if val_split else None,
                 "skipped_examples": sum(s.skipped for s in splits.values()),
                 "long_text": long_text_report(data_cfg.long_text, data_cfg.max_seq_length, splits)},
        "best_checkpoint": str(Path(best_path).resolve()) if best_path else None,
        "monitor": {"metric": task.monitor, "mode": task.mode,
                    "value": clean(metrics.get("val", {})).get(metric_name)},
    }
    for name in data_cfg.val_extra_files or {}:
        result[name] = clean(metrics.get(name, {}))
    if "test" in metrics:
        result["test"] = clean(metrics["test"])
    if data_cfg.source == "sample":
        result["note"] = "trained and evaluated on the small bundled sample: a smoke run, not a result"
    return result


def positive_label(task: TaskSpec, labels: list[str] | None) -> str | None:
    """The class whose F1 a binary task reports (label id 1), else None."""
    return labels[1] if task.family == "sequence" and not task.regression and labels and len(labels) == 2 else None


def _distill_block(cfg: DictConfig, module: BertTaskModule) -> dict[str, Any] | None:
    """metrics.json's record of distillation: the teacher, its size and the settings (None: no teacher)."""
    settings = _plain(cfg.get("distill")) or {}
    if not settings.get("teacher"):
        return None
    teacher = getattr(module.family, "teacher", None)
    return {**settings, "teacher_parameters": num_parameters(teacher) if teacher is not None else None}


def _choices_line(cfg: DictConfig, task: TaskSpec, labels: list[str] | None, policy: str, trainer: L.Trainer,
                  encoder: str = "") -> str:
    """The run's resolved choices in one line: what a reader of the log needs to know it ran what they meant."""
    if task.regression:
        label_text = "regression"
    elif labels:
        shown = ", ".join(labels[:8]) + (f", … ({len(labels)} in all)" if len(labels) > 8 else "")
        positive = positive_label(task, labels)
        label_text = f"labels {shown}" + (f"; F1 of positive class {positive!r}" if positive else "")
    else:
        label_text = task.family
    accelerator = type(trainer.accelerator).__name__.removesuffix("Accelerator").lower()
    model = f"{cfg.model.get('name')} ({encoder})" if encoder else cfg.model.get("name")
    distill = cfg.get("distill") or {}
    if distill.get("teacher"):
        layers = distill.get("student_layers")
        student = f"the teacher's layers {list(layers)}" if layers else model
        model = f"{student} distilled from {distill.teacher} (alpha {distill.alpha}, T {distill.temperature})"
    return (f"task={task.name} ({label_text}) · model={model} · freeze={policy} · seed={cfg.seed} · "
            f"{accelerator} × {trainer.num_devices * trainer.num_nodes}, precision {trainer.precision}")


@rank_zero_only
def _print_summary(run_dir: Path, result: dict[str, Any], trained: bool = True) -> None:
    monitor = result["monitor"]
    lines = [
        f"run dir:          {run_dir}",
        (f"best checkpoint:  {result['best_checkpoint']}" if trained
         else f"evaluated checkpoint: {result['best_checkpoint']}"),
        f"{monitor['metric']}: {format_value(monitor['value'])}  ({monitor['mode']})",
        "val:              " + ", ".join(f"{k}={format_value(v)}" for k, v in result["val"].items()),
    ]
    for name, block in result.items():  # data.val_extra_files blocks (MNLI: val_mismatched)
        if name.startswith("val_") and isinstance(block, dict):
            lines.append(f"{name}: " + ", ".join(f"{k}={format_value(v)}" for k, v in block.items()))
    if trained:
        lines.append(f"train:            {result['train']['steps']} steps, "
                     f"{format_value(float(result['train']['samples_per_s']))} samples/s")
    if "test" in result:
        lines.append("test:             " + ", ".join(f"{k}={v}" for k, v in result["test"].items()))
    for sample in result.get("samples", []):
        lines.append(f"sample:           {sample['prompt']!r} → {sample['continuation']!r}")
    lines.append(f"disk:             {disk_use(run_dir)}")
    if result.get("note"):
        lines.append(f"NOTE: {result['note']}")
    print("\n".join(lines))

