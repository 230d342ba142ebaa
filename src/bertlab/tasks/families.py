"""The task families by name (``task.family``) and :func:`build_family`, which picks one for a run.

Each family lives in a module of its own (``tasks/<family>.py``): the head it builds, the loss, the
evaluation step and the scores; :mod:`bertlab.tasks.base` says what every family provides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertlab.runtime.config import TaskSpec
from bertlab.tasks.base import EvalState, Family
from bertlab.tasks.clm import CLMFamily
from bertlab.tasks.embedding import EmbeddingFamily
from bertlab.tasks.mlm import MLMFamily
from bertlab.tasks.multiple_choice import MultipleChoiceFamily
from bertlab.tasks.qa import QAFamily
from bertlab.tasks.rerank import RerankFamily
from bertlab.tasks.rtd import RTDFamily
from bertlab.tasks.sequence import SequenceFamily
from bertlab.tasks.token import TokenFamily

__all__ = ["FAMILIES", "CLMFamily", "EmbeddingFamily", "EvalState", "Family", "MLMFamily", "MultipleChoiceFamily", "QAFamily",
           "RTDFamily", "RerankFamily", "SequenceFamily", "TokenFamily", "build_family",
           "logged_metrics"]

FAMILIES = {"sequence": SequenceFamily, "token": TokenFamily, "qa": QAFamily, "mlm": MLMFamily, "clm": CLMFamily,
            "rtd": RTDFamily, "multiple_choice": MultipleChoiceFamily, "embedding": EmbeddingFamily}


def _family_class(family: Any, rerank: Any) -> type[Family] | None:
    """The class of ``task.family``; a sequence task with ``task.rerank`` is the cross-encoder reranker."""
    cls = FAMILIES.get(str(family))
    return RerankFamily if cls is SequenceFamily and rerank else cls


def build_family(task: TaskSpec, num_labels: int, labels: list[str] | None, data_cfg: Any) -> Family:
    cls = _family_class(task.family, task.rerank)
    if cls is None:
        raise ValueError(f"task family {task.family!r} has no implementation yet")
    return cls(task, num_labels, labels, data_cfg)


def logged_metrics(task: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, str | None]:
    """What a run of ``task`` logs as ``val/<name>``, each with its better direction (None: not a score):
    the family's scores and ``num_examples`` (training.module logs it with them)."""
    cls = _family_class(task.get("family"), task.get("rerank"))
    return {**cls.logged_metrics(task, data), "num_examples": None} if cls else {}
