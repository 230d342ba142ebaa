"""``predict=true``: predictions of the best checkpoint for ``data.predict_file`` (an unlabelled file).

Written to ``<run_dir>/predictions/`` by rank 0, after every rank's outputs are gathered:

- sequence family: ``predict_predictions.tsv``, GLUE-submission style: ``index<TAB>prediction`` with the label
  strings of the data files (a number for regression); ``index`` is the file's own ``index`` column when it has
  one (GLUE ``test.tsv``), else the row's position.
- token family: ``predict_predictions.conll``: ``word<TAB>predicted tag`` per line, a blank line after each
  sentence (a word's tag is the prediction at its first sub-word).
- qa family: ``predict_predictions.json``: question id → answer text.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np

from bertlab.config import ConfigError
from bertlab.data.datamodule import TaskDataModule
from bertlab.data.features import Split
from bertlab.module import BertTaskModule, gather_objects

log = logging.getLogger(__name__)

STAGE = "predict"


def collect_outputs(batches: list[dict[str, Any]]) -> dict[int, np.ndarray]:
    """Feature index → its logits: (num_labels,) for sequences, (T_i, C) cropped to the real tokens otherwise.

    ``batches`` are ``BertTaskModule.predict_step`` outputs of every rank; an index seen twice keeps the first.
    """
    out: dict[int, np.ndarray] = {}
    for batch in batches:
        logits = batch["logits"].numpy()
        lengths = batch["lengths"].tolist()
        for row, index in enumerate(batch["index"].tolist()):
            if index in out:
                continue
            out[index] = logits[row] if logits.ndim == 2 else logits[row, : lengths[row]]
    return out


def _row_ids(path: Path, dm: TaskDataModule, count: int) -> list[str]:
    """The ``index`` column of the rows that became examples (GLUE test files), else 0..count-1."""
    from bertlab.data.readers import BadExamplePolicy, _table_rows, read_table

    header, rows = _table_rows(path)
    if "index" not in header:
        return [str(i) for i in range(count)]
    # The same reading as the features' (an "error" policy would already have failed): example i ↔ row.
    examples = read_table(path, dm.cfg.text_column, dm.cfg.text_pair_column, None, BadExamplePolicy("skip"))
    by_line = dict(rows)
    return [by_line[int(e.where.rsplit(":", 1)[1])]["index"].strip() for e in examples[:count]]


def write_sequence(outputs: dict[int, np.ndarray], split: Split, dm: TaskDataModule, out_dir: Path) -> Path:
    ids = _row_ids(dm.split_file(STAGE), dm, split.num_examples)
    lines = ["index\tprediction"]
    for i in sorted(outputs):
        logits = outputs[i]
        value = f"{float(logits[0]):.6g}" if dm.task.regression else dm.labels[int(logits.argmax())]
        lines.append(f"{ids[i]}\t{value}")
    path = out_dir / f"{STAGE}_predictions.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_token(outputs: dict[int, np.ndarray], split: Split, dm: TaskDataModule, out_dir: Path) -> Path:
    from bertlab.tasks.ner import decode_word_predictions

    labels = dm.labels
    o_id = labels.index("O") if "O" in labels else 0
    if "words" not in split.meta:  # a feature cache written before predictions existed
        raise ConfigError(f"the cached features of {dm.split_file(STAGE)} lack the words to write predictions "
                          f"for: delete {dm.cfg.cache_dir}/features and run again")
    words, word_ids = split.meta["words"], split.meta["word_ids"]
    blocks = []
    for i in sorted(outputs):
        tags = decode_word_predictions(outputs[i].argmax(-1), word_ids[i], len(words[i]), o_id=o_id)
        blocks.append("".join(f"{w}\t{labels[t]}\n" for w, t in zip(words[i], tags)))
    path = out_dir / f"{STAGE}_predictions.conll"
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path


def write_qa(outputs: dict[int, np.ndarray], split: Split, dm: TaskDataModule, out_dir: Path) -> Path:
    from bertlab.tasks.qa import postprocess_qa_predictions

    indices = sorted(outputs)
    answers = postprocess_qa_predictions(
        split.meta["examples"], split.meta["qa_features"], [outputs[i][:, 0] for i in indices],
        [outputs[i][:, 1] for i in indices], feature_indices=indices, n_best_size=dm.cfg.n_best_size,
        max_answer_length=dm.cfg.max_answer_length, use_max_context=True,
    )
    path = out_dir / f"{STAGE}_predictions.json"
    path.write_text(json.dumps(answers, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


WRITERS: dict[str, Callable[[dict[int, np.ndarray], Split, TaskDataModule, Path], Path]] = {
    "sequence": write_sequence,
    "token": write_token,
    "qa": write_qa,
}


def run_predict(trainer: L.Trainer, module: BertTaskModule, datamodule: TaskDataModule, ckpt_path: str | None,
                run_dir: Path) -> Path | None:
    """Predict ``data.predict_file`` with ``ckpt_path`` and write the file; returns its path on rank 0."""
    family = datamodule.task.family
    if family not in WRITERS:
        raise ConfigError(f"predict=true supports the {', '.join(WRITERS)} task families, not {family!r}")
    if not datamodule.cfg.predict_file:
        raise ConfigError("predict=true needs data.predict_file (an unlabelled file, e.g. GLUE test.tsv)")
    with warnings.catch_warnings():
        # Lightning cannot see that EvalBatchSampler keeps every example (no drop_last): it always does.
        warnings.filterwarnings("ignore", message=r"You are using a custom batch sampler .* for prediction")
        local = trainer.predict(module, datamodule=datamodule, ckpt_path=ckpt_path, return_predictions=True)
    batches = [b for part in gather_objects(local or []) for b in part]  # every rank's shard
    if not trainer.is_global_zero:
        return None
    out_dir = run_dir / "predictions"
    out_dir.mkdir(parents=True, exist_ok=True)
    split = datamodule.splits[STAGE]
    path = WRITERS[family](collect_outputs(batches), split, datamodule, out_dir)
    log.info("predictions for %s (%d examples) → %s", datamodule.split_file(STAGE), split.num_examples, path)
    return path
