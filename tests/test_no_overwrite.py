"""No command writes over what it reads or over a user's files (issue #33, item 6).

Kind: an output path that is (by any spelling, symlink or hard link) a file the command reads — the input
file, the checkpoint, the run's tokenizer and records — or a folder holding files the command did not write.
``python -m bertlab.predict RUN in.txt --output in.txt`` used to empty ``in.txt`` and report "0 examples";
``python -m bertlab.export CKPT OUT`` replaced a ``config.json`` already in ``OUT``.

The run is tests/fixtures/main_run (a tiny sst2 run), copied: no training here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from bertlab.export import main as export_main
from bertlab.predict import main as predict_main

TEXT = "a gripping , funny film\nthe plot is a mess\n"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "main_run", run)
    return run


def _predict(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        predict_main([*argv, "--no-progress", "--device", "cpu"])
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    return code, capsys.readouterr().err


def _export(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        export_main(argv)
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    return code, capsys.readouterr().err


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------------------------------------
# predict: the output is never a file the command reads


def _same_file_spellings(tmp_path: Path, run: Path) -> dict[str, tuple[Path, Path]]:
    """name → (the file read, an --output that names it)."""
    data = tmp_path / "p"
    data.mkdir()
    infile = data / "in.txt"
    infile.write_text(TEXT)
    (tmp_path / "link.txt").symlink_to(infile)
    os.link(infile, tmp_path / "hard.txt")
    return {
        "same path": (infile, infile),
        "dot-dot spelling": (infile, tmp_path / "p" / ".." / "p" / "." / "in.txt"),
        "symlink": (infile, tmp_path / "link.txt"),
        "hard link": (infile, tmp_path / "hard.txt"),
        "the checkpoint": (run / "checkpoints" / "last.ckpt", run / "checkpoints" / "last.ckpt"),
        "a tokenizer file": (run / "tokenizer" / "vocab.txt", run / "tokenizer" / "vocab.txt"),
        "the run's metrics.json": (run / "metrics.json", run / "checkpoints" / ".." / "metrics.json"),
    }


@pytest.mark.parametrize("case", ["same path", "dot-dot spelling", "symlink", "hard link", "the checkpoint",
                                  "a tokenizer file", "the run's metrics.json"])
def test_predict_refuses_an_output_that_is_a_file_it_reads(case, run_dir, tmp_path, capsys):
    read, output = _same_file_spellings(tmp_path, run_dir)[case]
    before = _snapshot(tmp_path)
    code, err = _predict([str(run_dir), str(tmp_path / "p" / "in.txt"), "--output", str(output)], capsys)
    assert code == 1, err
    assert _snapshot(tmp_path) == before  # nothing emptied, nothing replaced
    assert "bertlab: error: --output" in err and "Traceback" not in err
    assert "reads" in err and str(output) in err


def test_predict_still_writes_a_new_file_and_replaces_its_own_earlier_output(run_dir, tmp_path, capsys):
    infile = tmp_path / "in.txt"
    infile.write_text(TEXT)
    out = tmp_path / "out" / "preds.jsonl"
    for _ in range(2):  # the second run replaces the first run's predictions: that file is not an input
        code, err = _predict([str(run_dir), str(infile), "--output", str(out)], capsys)
        assert code == 0, err
        assert len(out.read_text().splitlines()) == 2
    assert infile.read_text() == TEXT
    assert not list(out.parent.glob("*.tmp-*"))  # written through a temporary file


def test_predict_true_refuses_a_predict_file_that_is_its_own_output(run_dir):
    from bertlab.inference.inputs import _predict_to_run_dir
    from bertlab.inference.predictor import PREDICTIONS_FILE, Predictor
    from bertlab.runtime.errors import ConfigError

    target = run_dir / "predictions" / PREDICTIONS_FILE
    target.parent.mkdir()
    target.write_text(TEXT)
    with pytest.raises(ConfigError, match="data.predict_file"):
        _predict_to_run_dir(Predictor.from_run(run_dir), target, run_dir)
    assert target.read_text() == TEXT


# ----------------------------------------------------------------------------------------------------------
# export: never over a user's files, never over the run


def test_export_refuses_a_folder_that_holds_other_files(run_dir, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"mine": true}\n')
    code, err = _export([str(run_dir), str(out)], capsys)
    assert code == 1 and "Traceback" not in err
    assert "not empty" in err and "config.json" in err and "--overwrite" in err
    assert (out / "config.json").read_text() == '{"mine": true}\n' and len(list(out.iterdir())) == 1
    # --overwrite replaces an earlier export whole, and this folder is not one (issue 57): still refused
    code, err = _export([str(run_dir), str(out), "--overwrite"], capsys)
    assert code == 1 and "is not an export" in err, err
    assert (out / "config.json").read_text() == '{"mine": true}\n' and len(list(out.iterdir())) == 1


def test_export_into_a_new_or_empty_folder_needs_no_flag(run_dir, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "new" / "deeper", tmp_path / "empty"):
        code, err = _export([str(run_dir), str(out)], capsys)
        assert code == 0, err
        assert (out / "model.safetensors").is_file()


@pytest.mark.parametrize("where", ["run", "tokenizer", "checkpoints"])
def test_export_never_writes_into_the_run_it_reads(where, run_dir, capsys):
    out = {"run": run_dir, "tokenizer": run_dir / "tokenizer", "checkpoints": run_dir / "checkpoints"}[where]
    before = _snapshot(run_dir)
    code, err = _export([str(run_dir / "checkpoints" / "last.ckpt"), str(out), "--overwrite"], capsys)
    assert code == 1 and "Traceback" not in err, err
    assert _snapshot(run_dir) == before
    assert "bertlab: error:" in err


def test_export_true_replaces_the_runs_own_export(run_dir):
    """train.py's export=true writes <run_dir>/export, bertlab's own folder: a resumed run replaces it."""
    from bertlab.inference.export import export_checkpoint

    for _ in range(2):
        export_checkpoint(run_dir, run_dir / "export", tokenizer_dir=run_dir / "tokenizer", overwrite=True)
    assert (run_dir / "export" / "config.json").is_file()


def test_export_never_writes_over_a_tokenizer_it_copies(run_dir, tmp_path, capsys):
    tok = tmp_path / "tok"
    shutil.copytree(run_dir / "tokenizer", tok)
    before = _snapshot(tok)
    code, err = _export([str(run_dir), str(tok), "--tokenizer", str(tok), "--overwrite"], capsys)
    assert code == 1 and "which this command reads" in err, err
    assert _snapshot(tok) == before


def test_onnx_export_refuses_a_users_folder_and_the_run(run_dir, tmp_path, capsys):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "model.onnx").write_bytes(b"a user's graph")
    code, err = _export([str(run_dir), str(out), "--format", "onnx"], capsys)
    assert code == 1 and "is not empty" in err and "--overwrite" in err, err
    assert (out / "model.onnx").read_bytes() == b"a user's graph"
    code, err = _export([str(run_dir), str(run_dir / "tokenizer"), "--format", "onnx", "--overwrite"], capsys)
    assert code == 1 and f"{run_dir / 'onnx'}" in err, err
