"""Cache files cannot run code, and a damaged one is reported with its path and rebuilt (issue: reliability,
round two, item 1).

The attack: someone who can write to a shared cache folder plants a pickle whose loading runs a command.
Whatever file sits at any cache path bertlab reads, nothing of it runs.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import compose

from bertlab.data.datamodule import TaskDataModule
from bertlab.data.features import Split, TokenEvalData
from bertlab.data.qa import QAEvalData, QAExample, QAFeatures
from bertlab.data.safe_cache import CacheCorrupt, load_tree, save_tree

SRC = Path(__file__).resolve().parents[1] / "src" / "bertlab"


class _Payload:
    """Unpickling this creates the marker file: proof that the file's code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _plant(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(_Payload(marker)))


def test_no_pickle_is_used_anywhere_in_bertlab():
    offenders = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if re.search(r"\b(import pickle|pickle\.|cPickle|dill|import joblib|joblib\.(load|dump)|weights_only\s*=\s*False)", line)]
    assert offenders == []


def test_round_trip_keeps_every_kind_of_value(tmp_path):
    qa = QAFeatures(input_ids=[np.arange(5, dtype=np.int32), np.arange(3, dtype=np.int32)],
                    token_type_ids=[np.zeros(5, np.int8), np.ones(3, np.int8)],
                    offsets=[np.zeros((5, 2), np.int32), np.ones((3, 2), np.int32)], example_index=[0, 0],
                    context_start=[2, 2], context_end=[4, 2], window_start=[0, 1], start_positions=None)
    examples = [QAExample("q1", "why?", "because", [{"text": "b", "answer_start": 0}])]
    split = Split("val", [{"input_ids": [1, 2, 3], "token_type_ids": [0, 0, 0], "labels": 1.5, "index": 0},
                          {"input_ids": [4], "token_type_ids": [1], "labels": float("nan"), "index": 1}],
                  2, skipped=1, truncated=0, extra_windows=1, eval_data=QAEvalData(examples, qa))
    extra = {"texts": ["a", "b"], "tuple": (1, "x"), "ints": {3: [[], [1, 2]]}, "none": None, "big": [2**70],
             "bools": [True, False], "features": [np.ones(4, np.float32)] * 3,
             "tags": TokenEvalData(gold_tags=[["B-PER", "O"]], word_ids=[[-1, 0, 1, -1]], sentence=[0])}
    path = tmp_path / "c.safetensors"
    save_tree(path, {"split": split, "extra": extra})
    tree = load_tree(path)
    back, meta = tree["split"], tree["extra"]
    assert isinstance(back, Split) and back.name == "val" and back.skipped == 1
    assert back.features[0] == split.features[0]
    assert back.features[1]["input_ids"] == [4] and np.isnan(back.features[1]["labels"])
    assert back.eval_data.examples == examples and back.extra_windows == 1
    assert meta["tags"] == extra["tags"] and meta["texts"] == ["a", "b"]
    assert meta["tuple"] == (1, "x") and meta["ints"] == {3: [[], [1, 2]]}
    assert meta["big"] == [2**70] and meta["bools"] == [True, False] and meta["none"] is None
    got = back.eval_data.features
    assert isinstance(got, QAFeatures) and got.start_positions is None and got.window_start == [0, 1]
    for a, b in zip(got.offsets, qa.offsets):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert all(np.array_equal(x, np.ones(4, np.float32)) for x in meta["features"])


@pytest.mark.parametrize("damage", ["truncate", "flip", "pickle", "empty"])
def test_damaged_file_is_detected(tmp_path, damage):
    path = tmp_path / "c.safetensors"
    save_tree(path, {"ids": [[1, 2, 3]] * 100, "x": np.arange(1000, dtype=np.float32)})
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) - 7]
    elif damage == "flip":
        raw[-100] ^= 0x10  # a bit inside a tensor: the header still parses
    elif damage == "pickle":
        raw = bytearray(pickle.dumps(_Payload(tmp_path / "ran")))
    else:
        raw = bytearray()
    path.write_bytes(bytes(raw))
    with pytest.raises(CacheCorrupt):
        load_tree(path)
    assert not (tmp_path / "ran").exists()


def _datamodule(tmp_path: Path, task: str, extra=(), seed: int = 1) -> TaskDataModule:
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.runtime.config import DataConfig, TaskSpec
    from bertlab.train import _plain

    cfg = compose([f"task={task}", "model=bert_tiny", *extra], tmp_path / "run")
    data = DataConfig(**_plain(cfg.data))
    tok_dir = tmp_path / "tok"
    if not tok_dir.exists():
        from bertlab.data.tokenizer import train_wordpiece

        train_wordpiece(["the cat sat on the mat", "a dog"] * 20, vocab_size=200).save(tok_dir)
    return TaskDataModule(TaskSpec(**_plain(cfg.task)), data, load_tokenizer(tok_dir), seed=seed)


MLM_FILES = ("data.train_file=wikitext2/wiki.valid.tokens", "data.val_file=wikitext2/wiki.test.tokens",
             "data.text_format=wikitext", "data.stream=false")


@pytest.mark.parametrize("task", ["sst2", "mnli", "stsb", "conll2003", "squad", "swag"])
def test_a_split_key_is_the_same_for_every_seed_where_featurizing_reads_no_seed(tmp_path, task):
    """The seed only shuffles these tasks' batches: their cached features, and a distillation teacher's outputs
    kept under the same key, serve every seed of a sweep. A setting that changes the features still counts."""
    keys = {_datamodule(tmp_path, task, seed=seed).split_key("train") for seed in (1, 2, 1234)}
    assert len(keys) == 1
    assert _datamodule(tmp_path, task, ("data.max_seq_length=32",)).split_key("train") not in keys


def test_a_split_key_keeps_the_seed_where_featurizing_reads_it(tmp_path):
    """Masked language modelling draws its masks (and sentence pairs) from the seed when it builds features."""
    keys = {_datamodule(tmp_path, "mlm", MLM_FILES, seed=seed).split_key("train") for seed in (1, 2)}
    assert len(keys) == 2


@pytest.mark.parametrize("task", ["sst2", "conll2003", "squad", "mlm"])
def test_cached_split_equals_the_built_one_and_damage_is_rebuilt(tmp_path, task, caplog):
    extra = ("data.train_file=wikitext2/wiki.valid.tokens", "data.val_file=wikitext2/wiki.test.tokens",
             "data.text_format=wikitext", "data.stream=false") if task == "mlm" else ()  # the in-memory path
    fresh = _datamodule(tmp_path, task, extra)._build("val")
    dm = _datamodule(tmp_path, task, extra)
    cache = dm._cache_path("val")
    assert cache.suffix == ".safetensors" and cache.is_file()
    again = dm._build("val")  # from the file
    assert _same(again, fresh)
    for damage in ("truncate", "flip"):
        raw = bytearray(cache.read_bytes())
        if damage == "truncate":
            raw = raw[: len(raw) // 2]
        else:
            raw[-3] ^= 0x01
        cache.write_bytes(bytes(raw))
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            rebuilt = dm._build("val")
        assert _same(rebuilt, fresh)
        assert any(str(cache) in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
        assert load_tree(cache) is not None  # written again, whole


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, Split | QAFeatures | QAExample | QAEvalData | TokenEvalData):
        return type(a) is type(b) and _same(a.__dict__, b.__dict__)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_planted_pickles_at_every_cache_path_run_nothing(train_run, tmp_path, caplog):
    """Run once to fill the cache (features, frozen features, tokenizer), plant a payload at every file bertlab
    wrote there and at the old ``.pkl`` names, run again: the payload never runs, the run succeeds."""
    common = ("model=bert_tiny", "task=sst2", "freeze=encoder", "head.cache_features=true", "trainer.max_epochs=1",
              "data.test_file=sst2/dev.tsv")
    first = train_run(*common, name="first")
    cache = tmp_path / "cache"
    files = [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert any(p.parent.name == "features" for p in files) and any(p.parent.name == "frozen_features"
                                                                   for p in files)
    marker = tmp_path / "code-ran"
    # The tokenized and frozen features first (the tokenizer kept, so the second run reads the same paths).
    planted = [p for p in files if "tokenizers" not in p.parts]
    for p in planted:
        _plant(p, marker)
        _plant(p.with_suffix(".pkl"), marker)  # the names of the earlier cache format
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        second = train_run(*common, name="second")
    assert not marker.exists()
    assert second["val"] == first["val"]
    warned = " ".join(r.getMessage() for r in caplog.records)
    for p in planted:
        assert str(p) in warned
    # Then the cached scratch tokenizer: it is trained again.
    for p in files:
        if "tokenizers" in p.parts:
            _plant(p, marker)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        third = train_run(*common, name="third")
    assert not marker.exists()
    assert "cached tokenizer" in caplog.text and "trained again" in caplog.text
    # (A scratch WordPiece vocabulary trained again may break ties differently: the scores can differ.)
    assert third["val"]["num_examples"] == first["val"]["num_examples"]
