"""Prediction per task family is one table (bertlab.inference.tasks): every backend and reader takes its list of
families and its per-family facts from it, and a family added to the table is predicted with no other change."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from bertlab.data.readers import DataError
from bertlab.inference import inputs, onnx_check, predictor
from bertlab.inference.settings import PredictSettings
from bertlab.inference.tasks import (
    ONNX_FAMILIES,
    OUTPUTS,
    PREDICT_FAMILIES,
    PREDICTION_TASKS,
    TaskPrediction,
    pools_windows,
)
from bertlab.runtime.config import RAW_TEXT_FAMILIES, TASK_FAMILIES, ConfigError, TaskSpec

INFERENCE = Path(predictor.__file__).parent
# The modules that predict, export or read inputs by family: none may keep a list of its own.
BACKENDS = ("predictor", "onnx", "onnx_check", "onnx_session", "inputs", "layout", "loading", "batches", "settings")


def test_every_list_of_families_is_the_tables():
    assert PREDICT_FAMILIES == tuple(PREDICTION_TASKS) == predictor.FAMILIES
    assert ONNX_FAMILIES == tuple(f for f, t in PREDICTION_TASKS.items() if t.onnx)
    pytest.importorskip("onnx")
    from bertlab.inference import onnx

    assert onnx.FAMILIES == ONNX_FAMILIES


def test_every_task_family_predicts_or_is_pretraining():
    """A task family added to the config is in the table, or is one that gives no records (pre-training)."""
    assert set(PREDICT_FAMILIES) <= set(TASK_FAMILIES)
    assert set(TASK_FAMILIES) - set(PREDICT_FAMILIES) <= set(RAW_TEXT_FAMILIES)
    for family, task in PREDICTION_TASKS.items():
        assert task.family == family and task.output in OUTPUTS and callable(task.records)


def _family_literals(tree: ast.AST, families: set[str]) -> list[str]:
    """Where a module compares with a family's name or writes a collection of two or more of them."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in families:
                    found.append(f"line {node.lineno}: compares with {side.value!r}")
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in families]
            if len(names) >= 2:
                found.append(f"line {node.lineno}: lists {names}")
    return found


@pytest.mark.parametrize("module", BACKENDS)
def test_no_backend_keeps_its_own_family_list(module):
    tree = ast.parse((INFERENCE / f"{module}.py").read_text(encoding="utf-8"))
    assert _family_literals(tree, set(PREDICTION_TASKS)) == [], \
        f"inference/{module}.py decides by family name: read the fact from inference.tasks.PREDICTION_TASKS"


def test_the_drift_check_catches_a_copied_list():
    planted = ast.parse('FAMILIES = ("sequence", "token")\nif family == "qa":\n    pass\n')
    assert len(_family_literals(planted, set(PREDICTION_TASKS))) == 2


def test_the_facts_the_backends_read():
    assert [f for f in PREDICT_FAMILIES if pools_windows(f)] == ["sequence"]
    assert not pools_windows("mlm")
    assert {f: t.output for f, t in PREDICTION_TASKS.items()} == {
        "sequence": "row", "token": "tokens", "qa": "spans", "multiple_choice": "choices", "embedding": "row"}
    assert PREDICTION_TASKS["qa"].output_names == ["start_logits", "end_logits"]
    assert PREDICTION_TASKS["token"].output_names == ["logits"]
    with pytest.raises(ValueError, match="output must be one of"):
        TaskPrediction("x", lambda *a: iter(()), output="cube")


class _Tokenizer:
    pad_id = 0


def _predictor(family: str) -> predictor.Predictor:
    task = TaskSpec(name=family, family=family, labels=None)
    return predictor.Predictor(torch.nn.Linear(2, 2), _Tokenizer(), task, None, PredictSettings(batch_size=3), "here")


def test_a_new_family_is_one_table_entry(monkeypatch):
    """A family's records come from its entry alone: the predictor, its family list and the ONNX check follow."""
    seen = []

    def records(reading, chunk, size, word_scores=False):
        seen.append((len(chunk), size))
        for where, x in chunk:
            yield {"where": where, "input": x, "family": reading.task.family}

    entry = TaskPrediction("sequence", records, output="choices", file_format="table")
    monkeypatch.setitem(PREDICTION_TASKS, "sequence", entry)
    p = _predictor("sequence")
    assert p(["a", "b", "c", "d"]) == [{"where": f"input {i}", "input": x, "family": "sequence"}
                                       for i, x in enumerate("abcd")]
    assert seen == [(4, 3)]  # one chunk (READ_AHEAD batches), the batch size
    # the ONNX check reads the family's output shape from the same entry: choices get a (B, K, T) batch
    model = type("M", (), {"bert": type("E", (), {"config": type("C", (), {"vocab_size": 50})()})()})()
    case, batch, kwargs = next(onnx_check.check_batches(model, "sequence", 8, False, False))
    assert batch["input_ids"].dim() == 3 and kwargs == {"num_choices": 2}


def test_a_family_without_prediction_is_refused():
    with pytest.raises(ConfigError, match="gives no prediction records.*init_from"):
        _predictor("mlm")


def test_the_input_reader_detects_each_familys_own_format(tmp_path):
    settings = PredictSettings(text_column="sentence")
    table = tmp_path / "x.tsv"
    table.write_text("sentence\tlabel\nok\t1\n")
    conll = tmp_path / "x.conll"
    conll.write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n")
    squad = tmp_path / "x.json"
    squad.write_text('{"data": []}')
    own = {f: PREDICTION_TASKS[f].file_format for f in PREDICT_FAMILIES}
    for family in PREDICT_FAMILIES:
        assert inputs.detect_format(table, family, settings) == ("table" if own[family] == "table" else "text")
        assert inputs.detect_format(conll, family, settings) == ("conll" if own[family] == "conll" else "text")
        if own[family] == "squad":
            assert inputs.detect_format(squad, family, settings) == "squad"
        else:
            with pytest.raises(DataError, match="a JSON document"):
                inputs.detect_format(squad, family, settings)
