"""What an export folder holds, by name, and how a run read long texts: the facts both the writer
(:mod:`bertlab.inference.export`) and the readers (:mod:`bertlab.inference.loading`) go by, kept below both so
that neither imports the other for them. No torch here."""

from __future__ import annotations

from typing import Any

from bertlab.inference.tasks import pools_windows
from bertlab.runtime.config import TaskSpec
from bertlab.runtime.fingerprints import TOKENIZER_FILES  # the tokenizer's files, which exports copy

# An export folder's files (export=true, python -m bertlab.export): transformers' config and weights (the names
# models.hf_weights reads, repeated here so that this module imports no torch), bertlab's head files for a head
# without a transformers class, and the tokenizer's files.
HF_EXPORT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")
HEAD_WEIGHTS_NAME = "bertlab_head.safetensors"
HEAD_CONFIG_NAME = "bertlab_head.json"
LONG_TEXT_NAME = "bertlab_long_text.json"  # how the run read text longer than its window (sequence tasks)


def reads_windows(task: TaskSpec, data: dict[str, Any]) -> bool:
    """Whether a run (its recorded ``data.*`` settings) pools a long text's windows: classification and
    regression trained with ``data.long_text=windows``. A run recorded before the setting existed truncated."""
    return pools_windows(task.family) and data.get("long_text", "truncate") == "windows"


__all__ = ["HEAD_CONFIG_NAME", "HEAD_WEIGHTS_NAME", "HF_EXPORT_FILES", "LONG_TEXT_NAME", "TOKENIZER_FILES",
           "reads_windows"]
