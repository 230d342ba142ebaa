"""An int8 graph is listed, and served, only with the record of its passed (or forced) check (issue 57, section
3, second bullet).

Kind: a graph the manifest lists before its check. ``--quantize int8`` whose dev-set check could not run exited 1,
but ``bertlab_onnx.json`` already listed ``model.int8.onnx`` and predict's default backend served it. Now the
export writes the manifest last (after the check), into a folder that replaces OUT only when complete; the manifest
lists int8 with ``int8_check`` (passed or forced, and the SHA-256 of the graph checked); and the reader
(``onnx_session.unchecked_int8``) serves no int8 graph without that record for that very file. Cases: a check that
cannot run (first export, and over an earlier export), a failed gate, ``--no-dev-check`` with and without
``--force``, and manifests edited by hand (record removed, ``passed: false``, the graph file replaced, an export
from before the record).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, run_train

pytest.importorskip("onnxruntime")

from bertlab.export import main as export_main  # noqa: E402
from bertlab.inference import onnx as bonnx  # noqa: E402
from bertlab.inference.predictor import Predictor  # noqa: E402
from bertlab.predict import main as predict_main  # noqa: E402
from bertlab.runtime.errors import CheckpointError  # noqa: E402
from bertlab.runtime.fingerprints import RECORD_NAME  # noqa: E402

SENTENCES = ["a gripping , funny film", "the plot is a mess", "x"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("int8") / "run"
    run_train(["model=bert_tiny", "task=sst2", "trainer.max_epochs=1", "trainer.limit_train_batches=2"], run)
    return run


@pytest.fixture(scope="module")
def checked(run_dir, tmp_path_factory) -> Path:
    """An export whose int8 graph passed its check."""
    out = tmp_path_factory.mktemp("checked") / "onnx"
    bonnx.export_onnx(run_dir, out, quantize="int8", max_drop=100.0)
    return out


def _cli(call, argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        call(argv)
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    out = capsys.readouterr()
    return code, out.err + out.out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _graph(folder: Path, backend: str = "auto") -> str:
    return Predictor.from_run(folder, backend=backend).model.path.name


def test_a_passed_check_is_recorded_and_served(checked):
    info = json.loads((checked / bonnx.INFO_NAME).read_text())
    assert info["files"]["int8"] == bonnx.INT8_NAME
    record = info["int8_check"]
    assert record["passed"] is True and record["forced"] is False and len(record["sha256"]) == 64
    assert _graph(checked) == bonnx.INT8_NAME


def test_a_check_that_cannot_run_writes_nothing(tmp_path, capsys):
    """tests/fixtures/main_run records a data key bertlab no longer has: its dev set cannot be read."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "main_run", run)
    out = tmp_path / "onnx"
    code, err = _cli(export_main, [str(run), str(out), "--format", "onnx", "--quantize", "int8"], capsys)
    assert code == 1 and "Traceback" not in err, err
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["run"]


def test_a_check_that_cannot_run_leaves_the_earlier_export(run_dir, tmp_path, capsys, monkeypatch):
    out = tmp_path / "onnx"
    bonnx.export_onnx(run_dir, out, check_dev=False)  # fp32 only
    before = _snapshot(out)

    def cannot(loaded):
        raise bonnx.ConfigError(f"{loaded.path}: the run has no validation file to check the export on")

    monkeypatch.setattr(bonnx, "dev_evaluator", cannot)
    code, err = _cli(export_main, [str(run_dir), str(out), "--format", "onnx", "--quantize", "int8",
                                   "--overwrite"], capsys)
    assert code == 1 and "validation file" in err, err
    assert _snapshot(out) == before and _graph(out) == bonnx.ONNX_NAME


def test_a_failed_gate_lists_no_int8(run_dir, tmp_path):
    out = tmp_path / "onnx"
    with pytest.raises(bonnx.QualityGateError, match="--force"):
        bonnx.export_onnx(run_dir, out, quantize="int8", max_drop=-1000.0)  # no graph can pass that
    info = json.loads((out / bonnx.INFO_NAME).read_text())
    assert "int8" not in info["files"] and "int8_check" not in info
    assert not (out / bonnx.INT8_NAME).exists() and _graph(out) == bonnx.ONNX_NAME
    report = json.loads((out / bonnx.REPORT_NAME).read_text())
    assert report["onnx_int8_vs_fp32"]["passed"] is False


def test_an_unchecked_int8_needs_force_and_is_recorded_as_forced(run_dir, tmp_path, capsys):
    out = tmp_path / "onnx"
    code, err = _cli(export_main, [str(run_dir), str(out), "--format", "onnx", "--quantize", "int8",
                                   "--no-dev-check"], capsys)
    assert code == 1 and "--force" in err and not out.exists(), err
    code, err = _cli(export_main, [str(run_dir), str(out), "--format", "onnx", "--quantize", "int8",
                                   "--no-dev-check", "--force"], capsys)
    assert code == 0, err
    record = json.loads((out / bonnx.INFO_NAME).read_text())["int8_check"]
    assert record["forced"] is True and record["passed"] is False and record["checked_on"] is None
    assert _graph(out) == bonnx.INT8_NAME  # forced: the user's choice, on record


def _edit(checked: Path, tmp_path: Path, how: str) -> Path:
    folder = tmp_path / how.replace(" ", "_")
    shutil.copytree(checked, folder)
    info_path = folder / bonnx.INFO_NAME
    info = json.loads(info_path.read_text())
    if how == "record removed":
        del info["int8_check"]
    elif how == "record says failed":
        info["int8_check"]["passed"] = False
    elif how == "record not an object":
        info["int8_check"] = "passed"
    elif how == "graph replaced":
        shutil.copyfile(folder / bonnx.ONNX_NAME, folder / bonnx.INT8_NAME)  # another graph under the name
    elif how == "another graph listed":
        shutil.copyfile(folder / bonnx.ONNX_NAME, folder / "other.onnx")
        info["files"]["int8"] = "other.onnx"
    elif how == "listed graph missing":
        (folder / bonnx.INT8_NAME).unlink()
    info_path.write_text(json.dumps(info))
    return folder


HAND_EDITS = ["record removed", "record says failed", "record not an object", "graph replaced",
              "another graph listed", "listed graph missing"]


@pytest.mark.parametrize("how", HAND_EDITS)
def test_the_reader_never_serves_an_unchecked_int8_graph(checked, tmp_path, capsys, caplog, how):
    """Without the folder's fingerprint record (an export sealed before bertlab recorded fingerprints), the
    int8 record alone decides: auto serves fp32 and says why, onnx-int8 is refused."""
    folder = _edit(checked, tmp_path, how)
    (folder / RECORD_NAME).unlink()
    with caplog.at_level("WARNING"):
        assert _graph(folder) == bonnx.ONNX_NAME  # auto: the fp32 graph, saying why
    assert any("fp32" in r.getMessage() for r in caplog.records)
    with pytest.raises(CheckpointError, match="int8"):
        Predictor.from_run(folder, backend="onnx-int8")
    infile = tmp_path / "in.txt"
    infile.write_text("\n".join(SENTENCES) + "\n")
    code, err = _cli(predict_main, [str(folder), str(infile), "--backend", "onnx-int8", "--no-progress"], capsys)
    assert code == 1 and "Traceback" not in err and "int8" in err, err
    code, err = _cli(predict_main, [str(folder), str(infile), "--no-progress"], capsys)
    assert code == 0, err


@pytest.mark.parametrize("how", HAND_EDITS)
def test_a_sealed_export_edited_by_hand_is_refused_whole(checked, tmp_path, capsys, how):
    """With the fingerprint record every export now holds, a hand-edited manifest or a replaced graph is a
    file that is not the one written (runtime.fingerprints.check_trusted): no backend serves the folder."""
    folder = _edit(checked, tmp_path, how)
    for backend in ("auto", "onnx", "onnx-int8"):
        with pytest.raises(CheckpointError, match="is not the file"):
            Predictor.from_run(folder, backend=backend)
    infile = tmp_path / "in.txt"
    infile.write_text("\n".join(SENTENCES) + "\n")
    code, err = _cli(predict_main, [str(folder), str(infile), "--no-progress"], capsys)
    assert code == 1 and "Traceback" not in err and RECORD_NAME in err, err
