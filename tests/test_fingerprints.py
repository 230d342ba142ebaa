"""Runs and exports carry the fingerprints of their tokenizer and weights, and every reader checks them
(bertlab.runtime.fingerprints.check_trusted): a run's tokenizer/ or an export's tokenizer, weights, graph or
records replaced by another model's (same or larger vocabulary) are refused with one paragraph naming the file,
by prediction (PyTorch and ONNX), export and model.init_from; older folders without fingerprints still load,
with a note."""

from __future__ import annotations

import functools
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from conftest import compose, run_train

from bertlab.inference.export import export_checkpoint
from bertlab.inference.predictor import Predictor
from bertlab.runtime.errors import CheckpointError
from bertlab.runtime.fingerprints import FINGERPRINT_KEY, RECORD_NAME, RUN_ID_KEY, recorded_run_id

pytest.importorskip("onnxruntime")

QUICK = ("model=bert_tiny", "trainer.max_epochs=1", "trainer.limit_train_batches=2",
         "trainer.limit_val_batches=2")
# Three tiny runs with three tokenizers: "small" and "same" have WordPiece vocabularies of one size (trained on
# SST-2's and CoLA's sentences), "large" a larger one (its ids run past the small model's embedding table).
RUNS = {"small": ("task=sst2", "model.vocab_size=150"), "same": ("task=cola", "model.vocab_size=150"),
        "large": ("task=sst2", "model.vocab_size=400"),
        "twin": ("task=sst2", "model.vocab_size=150", "seed=7")}  # small's tokenizer, other weights
TEXTS = ["a gorgeous , witty film .", "the plot is a mess"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fingerprints")
    @functools.cache
    def get(name: str) -> Path:
        run_train([*QUICK, *RUNS[name]], root / name)
        return root / name

    return get


def _copy_run(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, ignore=shutil.ignore_patterns("*.lock"))
    return to


def _best(run: Path) -> Path:
    """The run's best checkpoint, in this folder (a copied run's metrics.json names the original's)."""
    return run / "checkpoints" / Path(json.loads((run / "metrics.json").read_text())["best_checkpoint"]).name


def test_a_run_records_its_tokenizer_and_predicts_as_before(runs):
    run = runs("small")
    record = json.loads((run / "tokenizer" / RECORD_NAME).read_text())
    assert set(record["files"]) >= {"tokenizer.json", "vocab.txt"} and record["tokenizer"]
    assert len(Predictor.from_run(run)(TEXTS)) == 2


@pytest.mark.parametrize("other", ["same", "large"])
@pytest.mark.parametrize("files", [("tokenizer.json", "vocab.txt"), ("vocab.txt",), ("tokenizer.json",)])
def test_a_runs_tokenizer_files_swapped_are_refused(runs, tmp_path, other, files):
    run = _copy_run(runs("small"), tmp_path / "run")
    for name in files:
        shutil.copyfile(runs(other) / "tokenizer" / name, run / "tokenizer" / name)
    with pytest.raises(CheckpointError, match=rf"tokenizer/{files[0]} is not the file .* (SHA-256|written with)"):
        Predictor.from_run(run)
    with pytest.raises(CheckpointError, match=rf"tokenizer/{files[0]} is not the file"):  # export ships none
        export_checkpoint(run, tmp_path / "export")
    assert not (tmp_path / "export" / "tokenizer.json").exists()


@pytest.mark.parametrize("other", ["same", "large"])
def test_a_runs_whole_tokenizer_folder_or_checkpoint_swapped_is_refused(runs, tmp_path, other):
    """The other model's folder with its own record (every file matches that record): the vocabulary differs
    from the one the checkpoint was trained with. The same for another model's checkpoint in this run."""
    run = _copy_run(runs("small"), tmp_path / "run")
    shutil.rmtree(run / "tokenizer")
    shutil.copytree(runs(other) / "tokenizer", run / "tokenizer")
    for read in (Predictor.from_run, lambda r: export_checkpoint(r, tmp_path / "export")):
        with pytest.raises(CheckpointError, match=r"trained with another tokenizer than the one loaded from "
                                                  r".*tokenizer \(vocabulary fingerprint"):
            read(run)
    run2 = _copy_run(runs("small"), tmp_path / "run2")
    shutil.copyfile(_best(runs(other)), _best(run2))
    with pytest.raises(CheckpointError, match="was written by another run than the one"):
        Predictor.from_run(run2)
    (run2 / ".bertlab-run.json").unlink()  # a run from before run records: the vocabulary still tells
    with pytest.raises(CheckpointError, match="trained with another tokenizer"):
        Predictor.from_run(run2)
    # A tokenizer given in Python is checked the same way, for a run and for an export.
    other_tok = Predictor.from_run(runs(other)).tokenizer
    with pytest.raises(CheckpointError, match="trained with another tokenizer"):
        Predictor.from_run(runs("small"), tokenizer=other_tok)
    export_checkpoint(runs("small"), tmp_path / "export")
    with pytest.raises(CheckpointError, match="trained with another tokenizer"):
        Predictor.from_run(tmp_path / "export", tokenizer=other_tok)


def test_another_runs_checkpoint_with_the_same_tokenizer_is_refused(runs, tmp_path):
    """Two runs with one tokenizer (two fine-tunes of one start): the checkpoint records the run that wrote
    it, and a run's checkpoints/ holding another run's checkpoint is refused by prediction and export."""
    small, twin = runs("small"), runs("twin")
    assert (small / "tokenizer" / "vocab.txt").read_bytes() == (twin / "tokenizer" / "vocab.txt").read_bytes()
    ckpt = torch.load(_best(small), weights_only=True, map_location="cpu")
    assert ckpt[RUN_ID_KEY] == recorded_run_id(small) != recorded_run_id(twin)
    run = _copy_run(small, tmp_path / "run")
    assert len(Predictor.from_run(run)(TEXTS)) == 2  # a copied run is the same run
    shutil.copyfile(_best(twin), _best(run))
    for read in (Predictor.from_run, lambda r: export_checkpoint(r, tmp_path / "export")):
        with pytest.raises(CheckpointError, match=r"checkpoints/.*ckpt was written by another run than the one "
                                                  r".*/run holds \(run id"):
            read(run)


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory):
    """The HF and ONNX exports of each run."""
    from bertlab.inference.onnx import export_onnx

    root = tmp_path_factory.mktemp("exports")
    out = {}
    for name in ("small", "large", "same"):
        export_checkpoint(runs(name), root / f"{name}-hf")
        out[name, "hf"] = root / f"{name}-hf"
        export_onnx(runs(name), root / f"{name}-onnx", check_dev=False)
        out[name, "onnx"] = root / f"{name}-onnx"
    return out


@pytest.mark.parametrize("fmt", ["hf", "onnx"])
def test_exports_record_their_files_and_predict_as_before(exports, fmt):
    folder = exports["small", fmt]
    record = json.loads((folder / RECORD_NAME).read_text())
    weights = "model.safetensors" if fmt == "hf" else "model.onnx"
    assert {weights, "tokenizer.json", "vocab.txt"} <= set(record["files"])
    assert len(Predictor.from_run(folder)(TEXTS)) == 2


@pytest.mark.parametrize("fmt", ["hf", "onnx"])
@pytest.mark.parametrize("other", ["same", "large"])
@pytest.mark.parametrize("name", ["tokenizer.json", "vocab.txt", "weights", "record"])
def test_an_export_file_swapped_for_another_models_is_refused(exports, tmp_path, fmt, other, name):
    folder = tmp_path / "export"
    shutil.copytree(exports["small", fmt], folder)
    if name == "weights":
        name = "model.safetensors" if fmt == "hf" else "model.onnx"
    if name == "record":  # the description of the model: config.json (labels) or bertlab_onnx.json
        name = "config.json" if fmt == "hf" else "bertlab_onnx.json"
    if (exports[other, fmt] / name).read_bytes() == (folder / name).read_bytes():
        # SST-2's and CoLA's config.json are byte for byte one file (two labels "0" and "1", one size): the
        # same bytes are the file the export was written with.
        assert name == "config.json" and len(Predictor.from_run(folder)(TEXTS)) == 2
        return
    shutil.copyfile(exports[other, fmt] / name, folder / name)
    with pytest.raises(CheckpointError, match=rf"export/{name} is not the file .* was written with"):
        Predictor.from_run(folder)


@pytest.mark.parametrize("fmt", ["hf", "onnx"])
def test_an_export_with_another_models_whole_tokenizer_and_record_is_refused(exports, tmp_path, fmt):
    """Every tokenizer file and the record itself copied from the other export: the weights' digests differ."""
    folder = tmp_path / "export"
    shutil.copytree(exports["small", fmt], folder)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json", RECORD_NAME):
        shutil.copyfile(exports["large", fmt] / name, folder / name)
    with pytest.raises(CheckpointError, match="is not the file .*its weights|is not the file .*a record"):
        Predictor.from_run(folder)


def test_init_from_a_run_or_export_with_a_swapped_tokenizer_is_refused(runs, exports, tmp_path):
    from bertlab.train import run as train

    run = _copy_run(runs("small"), tmp_path / "run")
    shutil.copyfile(runs("large") / "tokenizer" / "vocab.txt", run / "tokenizer" / "vocab.txt")
    shutil.copyfile(runs("large") / "tokenizer" / "tokenizer.json", run / "tokenizer" / "tokenizer.json")
    with pytest.raises(CheckpointError, match=r"tokenizer/tokenizer.json is not the file"):
        train(compose([*QUICK, "task=sst2", f"model.init_from={run}"], tmp_path / "next"))
    folder = tmp_path / "export"
    shutil.copytree(exports["small", "hf"], folder)
    shutil.copyfile(exports["same", "hf"] / "model.safetensors", folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"export/model.safetensors is not the file"):
        train(compose([*QUICK, "task=sst2", f"model.init_from={folder}"], tmp_path / "next2"))


@pytest.mark.parametrize("fmt", ["hf", "onnx"])
def test_older_exports_and_runs_without_fingerprints_load_with_a_note(runs, exports, tmp_path, fmt, caplog):
    folder = tmp_path / "export"
    shutil.copytree(exports["small", fmt], folder)
    (folder / RECORD_NAME).unlink()
    with caplog.at_level(logging.WARNING, logger="bertlab.runtime.fingerprints"):
        assert len(Predictor.from_run(folder)(TEXTS)) == 2
    assert "carries no fingerprint of its tokenizer and weights" in caplog.text
    if fmt == "onnx":
        return
    run = _copy_run(runs("small"), tmp_path / "run")
    (run / "tokenizer" / RECORD_NAME).unlink()
    ckpt = torch.load(_best(run), weights_only=True, map_location="cpu")
    del ckpt[FINGERPRINT_KEY]
    torch.save(ckpt, _best(run))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bertlab.runtime.fingerprints"):
        assert len(Predictor.from_run(run)(TEXTS)) == 2
    assert "carries no fingerprint" in caplog.text


def test_a_damaged_record_is_refused(exports, tmp_path):
    folder = tmp_path / "export"
    shutil.copytree(exports["small", "hf"], folder)
    (folder / RECORD_NAME).write_text('{"files": ')
    with pytest.raises(CheckpointError, match=rf"{RECORD_NAME}: the record of fingerprints is damaged: it ends in the middle.*is not used"):
        Predictor.from_run(folder)
