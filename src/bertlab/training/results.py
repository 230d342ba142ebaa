"""What a finished run reports: its ``metrics.json`` record, the choices line at its start, and the summary it
prints at its end (``bertlab.train`` writes and prints them)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.utilities import rank_zero_only

from bertlab.data.documents import long_text_report
from bertlab.models.bert import num_parameters
from bertlab.runtime.config import DataConfig, TaskSpec
from bertlab.runtime.console import format_value
from bertlab.training.checkpoints import CheckpointInfo, disk_use


def finished_train_block(run_dir: Path, info: CheckpointInfo) -> dict[str, Any]:
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


def metrics_json(*, model_name: str | None, seed: int, tags: list[str], distill: dict[str, Any] | None,
                 task: TaskSpec, data_cfg: DataConfig, datamodule, module, throughput, train_block, metrics,
                 best_path) -> dict[str, Any]:
    """The run's ``metrics.json`` record (``distill``: the ``distill.*`` settings)."""
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
        "model": model_name,
        "freeze": module.freeze_plan.policy,
        "seed": seed,
        "tags": tags,
        "data_source": data_cfg.source,
        "labels": None if task.regression else datamodule.labels,
        "positive_label": positive_label(task, datamodule.labels),
        "params": {"total": num_parameters(module.model), "trainable": num_parameters(module.model, True)},
        "distill": distill_block(distill, module),
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


def distill_block(settings: dict[str, Any] | None, module) -> dict[str, Any] | None:
    """metrics.json's record of distillation: the teacher, its size and the settings (None: no teacher)."""
    settings = settings or {}
    if not settings.get("teacher"):
        return None
    teacher = getattr(module.family, "teacher", None)
    source = getattr(module.family, "outputs_source", None)
    return {**settings, "teacher_parameters": num_parameters(teacher) if teacher is not None else None,
            "teacher_outputs": source() if callable(source) else None}


def choices_line(*, model_name: str | None, seed: int, distill: dict[str, Any] | None, task: TaskSpec,
                 labels: list[str] | None, policy: str, trainer: L.Trainer, encoder: str = "") -> str:
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
    model = f"{model_name} ({encoder})" if encoder else model_name
    distill = distill or {}
    if distill.get("teacher"):
        layers = distill.get("student_layers")
        student = f"the teacher's layers {list(layers)}" if layers else model
        model = (f"{student} distilled from {distill['teacher']} (alpha {distill.get('alpha')}, "
                 f"T {distill.get('temperature')})")
    return (f"task={task.name} ({label_text}) · model={model} · freeze={policy} · seed={seed} · "
            f"{accelerator} × {trainer.num_devices * trainer.num_nodes}, precision {trainer.precision}")


@rank_zero_only
def print_summary(run_dir: Path, result: dict[str, Any], trained: bool = True) -> None:
    monitor = result["monitor"]
    lines = [
        f"run dir:          {run_dir}",
        (f"best checkpoint:  {result['best_checkpoint']}" if trained
         else f"evaluated checkpoint: {result['best_checkpoint']}"),
        f"{monitor['metric']}: {format_value(monitor['value'])}  ({monitor['mode']})",
        "val:              " + ", ".join(f"{k}={format_value(v)}" for k, v in result["val"].items()),
    ]
    if not result["val"]:  # data.val_file=null: nothing scored, so the last checkpoint is the run's
        lines[1:] = [f"last checkpoint:  {result['best_checkpoint']}",
                     "val:              none (no validation data: data.val_file is not set)"]
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
