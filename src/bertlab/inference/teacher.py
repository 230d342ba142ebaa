"""The teacher of a distillation run (``distill.teacher``, docs/distillation.md): loaded with the loaders that
predict with a run or an export, and checked against the student's run before the first step.

A teacher is refused, with what differs and what to do, when its folder does not exist or holds nothing
bertlab wrote; when it was trained for another task (another task name, family, or regression against
classification: its outputs would not mean what the student's mean; an export with a stock head records no
task name, so there the family and labels decide); when its labels differ from the task's
in names or order (logit i must be the same label on both sides); when its tokenizer's vocabulary differs from
the student's (the teacher reads the student's batches: the same ids must mean the same pieces — bertlab does
not re-tokenize for the teacher); and when the run's windows are longer than the teacher's position table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.data.tokenizer import EncoderTokenizer
from bertlab.models.keys import legacy_key
from bertlab.runtime.config import (
    DISTILL_FAMILIES,
    TRANSFORMER,
    DataConfig,
    DistillConfig,
    ModelConfig,
    TaskSpec,
)
from bertlab.runtime.errors import CheckpointError, ConfigError
from bertlab.tasks.distill import TeacherOutputs, parameter_checksum

log = logging.getLogger(__name__)

WHAT_A_TEACHER_IS = ("a bertlab run dir (with checkpoints/ or metrics.json), one of its .ckpt files, or a folder "
                     "export=true / python -m bertlab.export wrote")


@dataclass
class Teacher:
    """A loaded teacher: its model (a ``TaskModel``, eval mode), tokenizer, task and labels."""

    model: Any
    tokenizer: EncoderTokenizer
    task: TaskSpec
    labels: list[str] | None
    source: str

    def gives_tokenizer(self, model_cfg: ModelConfig, settings: DistillConfig) -> bool:
        """Whether the student reads the teacher's tokenizer: a student built from the teacher's layers, or a
        scratch student (no checkpoint of its own: its vocabulary would be trained anew, with other ids)."""
        scratch = not (model_cfg.pretrained or model_cfg.init_from or model_cfg.tokenizer)
        return settings.student_layers is not None or (scratch and model_cfg.kind == TRANSFORMER)

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def megabytes(self) -> float:
        return sum(p.numel() * p.element_size() for p in self.model.parameters()) / 2**20

    def activation_bytes(self, batch_size: int, length: int, matching: bool = False) -> int:
        """An estimate of the activations one teacher forward holds at its peak (no gradients: one layer's at a
        time): the (B, T, H) input and output, q/k/v, the (B, T, intermediate) MLP input and the (B, heads, T, T)
        attention scores and probabilities; with layer matching also every layer's hidden states, kept for the
        loss, and one mapped layer's attention probabilities again. At the teacher's parameter dtype."""
        config = getattr(self.model.encoder, "config", None)
        width = int(getattr(config, "hidden_size", 0) or 0)
        layers = int(getattr(config, "num_hidden_layers", 0) or 0)
        inner = int(getattr(config, "intermediate_size", 0) or 4 * width)
        heads = int(getattr(config, "num_attention_heads", 0) or 1)
        first = next(self.model.parameters(), None)
        size = first.element_size() if first is not None else 4
        tokens = batch_size * length
        elements = tokens * (5 * width + inner) + 2 * batch_size * heads * length * length
        if matching:
            elements += (layers + 1) * tokens * width + batch_size * heads * length * length
        return elements * size

    def memory_text(self, batch_size: int, length: int, matching: bool = False) -> str:
        """The run plan's words for the teacher's memory: its parameters and its activations on one batch."""
        params = self.megabytes()
        acts = self.activation_bytes(batch_size, length, matching) / 2**20
        return (f"teacher: {params:.1f} MiB parameters + ~{acts:.1f} MiB activations a batch of {batch_size} × "
                f"{length} tokens (no gradients)" + (", every layer's hidden states kept" if matching else ""))

    def output_cache(self, datamodule: Any, data: DataConfig) -> TeacherOutputs:
        """Where the teacher's outputs on this run's training split are kept: in memory, and in
        ``<data.cache_dir>/teacher_outputs/`` under the teacher's checksum and the split's key (its files, data
        and task settings, ``data.max_seq_length`` among them, and the tokenizer)."""
        path = None
        if data.cache_dir is not None:
            # Hashed over the names the first runs gave the tensors (models.keys.legacy_key): caches written
            # before the encoder's keys became encoder.* are found again.
            checksum = parameter_checksum(self.model, legacy_key)
            key = f"{self.task.name}-{checksum}-{datamodule.split_key('train')}"
            path = Path(data.cache_dir) / "teacher_outputs" / f"{key}.safetensors"
        return TeacherOutputs(path, len(datamodule.splits["train"].features))

    def check(self, labels: list[str] | None, tokenizer: EncoderTokenizer, data: DataConfig) -> None:
        """Refuse a teacher whose labels, vocabulary or position table do not fit the student's run."""
        if (labels or None) != (self.labels or None):
            raise ConfigError(_labels_message(self.source, self.labels, labels))
        ours, theirs = tokenizer.tokenizer.get_vocab(), self.tokenizer.tokenizer.get_vocab()
        if ours != theirs:
            raise ConfigError(_vocab_message(self.source, theirs, ours))
        longest = getattr(getattr(self.model.encoder, "config", None), "max_sequence_length", None)
        if longest is not None and data.max_seq_length > longest:
            raise ConfigError(
                f"distill.teacher={self.source}: data.max_seq_length={data.max_seq_length} is longer than the "
                f"teacher's position table ({longest} tokens), so the teacher cannot read the student's windows: "
                f"set data.max_seq_length={longest} or less")


def load_teacher(settings: DistillConfig, task: TaskSpec) -> Teacher:
    """The teacher ``distill.teacher`` names, checked against the run's task (labels and vocabulary are checked
    by :meth:`Teacher.check` once the run's data and tokenizer exist)."""
    from bertlab.inference.loading import load

    assert settings.teacher is not None
    if task.family not in DISTILL_FAMILIES:
        raise ConfigError(
            f"distill.teacher is set, but task={task.name} is a {task.family} task: distillation learns from a "
            f"teacher's outputs on fine-tuning tasks ({', '.join(DISTILL_FAMILIES)}); remove distill.teacher")
    path = Path(str(settings.teacher)).expanduser()
    if not path.exists():
        raise ConfigError(f"distill.teacher={settings.teacher}: no such file or folder. Give {WHAT_A_TEACHER_IS} "
                          "(train the teacher first, e.g. python train.py task=<task> model=<model>)")
    try:
        loaded = load(path, backend="torch")
    except CheckpointError as err:
        raise ConfigError(f"distill.teacher={settings.teacher}: cannot be read as a teacher ({err}). Give "
                          f"{WHAT_A_TEACHER_IS}") from None
    theirs = loaded.task
    # An export with a stock transformers head records no task name (it reads as the family's): there the
    # family, regression and the labels (Teacher.check) say what its outputs mean.
    named = theirs.name != theirs.family
    if (theirs.family, theirs.regression) != (task.family, task.regression) or (named and theirs.name != task.name):
        trained = (f"was trained for task={theirs.name} ({_kind(theirs)})" if named else
                   f"is a {_kind(theirs)} teacher (an export with a stock head records no task name)")
        raise ConfigError(
            f"distill.teacher={settings.teacher} {trained}, but this run is task={task.name} ({_kind(task)}): a "
            f"teacher's outputs only teach a student of the same task. Distil a teacher of task={task.name}"
            + (f", or run this task with task={theirs.name}" if named else ""))
    teacher = Teacher(loaded.model, loaded.tokenizer, theirs, loaded.labels, str(path))
    log.info("distill: teacher %s (%s parameters, %.1f MiB, eval mode, no gradients; alpha=%s, temperature=%s)",
             path, f"{teacher.parameter_count():,}", teacher.megabytes(), settings.alpha, settings.temperature)
    return teacher


def _kind(task: TaskSpec) -> str:
    return f"{task.family}, regression" if task.regression else task.family


def _labels_message(source: str, theirs: list[str] | None, ours: list[str] | None) -> str:
    if theirs and ours and sorted(theirs) == sorted(ours):
        what = "the same labels in another order"
        fix = f"declare the teacher's order for this run with task.labels=[{','.join(theirs)}]"
    else:
        missing = sorted(set(ours or []) - set(theirs or []))
        extra = sorted(set(theirs or []) - set(ours or []))
        what = (f"other labels (only the task has {missing or 'none'}, only the teacher has {extra or 'none'})")
        fix = "distil a teacher trained on this task's label set"
    return (f"distill.teacher={source}: the teacher's labels {theirs} differ from this run's {ours}: "
            f"{what}. Output i of the teacher must be label i of the student; {fix}")


def _vocab_message(source: str, theirs: dict[str, int], ours: dict[str, int]) -> str:
    differing = sorted(set(theirs.items()) ^ set(ours.items()), key=lambda kv: kv[1])[:3]
    shown = ", ".join(f"{tok!r}→{i}" for tok, i in differing)
    return (f"distill.teacher={source}: the teacher's tokenizer ({len(theirs)} pieces) is not the student's "
            f"({len(ours)} pieces; first differences: {shown}), and the teacher reads the student's token ids, so "
            "its outputs would be about other text. Use a student with the teacher's tokenizer: the same "
            "pre-trained checkpoint family (e.g. model.pretrained=<the teacher's base>), a scratch model= "
            "(it takes the teacher's tokenizer), or distill.student_layers=[...] (built from the teacher)")

