"""An export replaces its folder whole, and only a folder that is an export (issue 57, section 3, first bullet).

Kind: files of an earlier export that survive a new one. ``bertlab.export RUN_B OUT --overwrite`` over an
export of RUN_A kept RUN_A's ``bertlab_head.*`` (or ``bertlab_onnx.json``), and predict on OUT then answered with
RUN_A's task. Now every export is written into a new folder beside OUT that replaces OUT once complete
(``runtime.files.replaced_folder``): nothing stale survives, a failed or killed export leaves the old one, and
``--overwrite`` replaces only a folder that is an export. Cases: HF over HF (custom head → stock head, another
task), ONNX over HF, HF over ONNX, ONNX with int8 over ONNX without; a failure in the middle, a SIGKILL in the
middle, a swap killed between its two renames; folders that are not exports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_train

from bertlab.export import main as export_main
from bertlab.inference.predictor import Predictor

QUICK = ["model=bert_tiny", "trainer.max_epochs=1", "trainer.limit_train_batches=2"]
SENTENCES = ["a gripping , funny film", "the plot is a mess"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """run_a: sentiment with a raw-[CLS] head (bertlab_head.* in its export); run_b: NER, a stock head."""
    root = tmp_path_factory.mktemp("replace")
    run_train([*QUICK, "task=sst2", "head.pooling=cls", "head.hidden_layers=1"], root / "run_a")
    run_train([*QUICK, "task=conll2003"], root / "run_b")
    return {"a": root / "run_a", "b": root / "run_b", "root": root}


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


def _family(folder: Path) -> str:
    return Predictor.from_run(folder, device="cpu").task.family


def test_hf_over_hf_keeps_nothing_of_the_earlier_export(runs, tmp_path, capsys):
    out = tmp_path / "out"
    code, err = _export([str(runs["a"]), str(out)], capsys)
    assert code == 0, err
    assert (out / "bertlab_head.json").is_file() and _family(out) == "sequence"
    code, err = _export([str(runs["b"]), str(out)], capsys)  # not empty: only with --overwrite
    assert code == 1 and "--overwrite" in err and (out / "bertlab_head.json").is_file(), err
    code, err = _export([str(runs["b"]), str(out), "--overwrite"], capsys)
    assert code == 0, err
    assert not list(out.glob("bertlab_head.*")) and not (out / "bertlab_long_text.json").exists()
    assert _family(out) == "token"  # predict answers with run_b's task
    assert json.loads((out / "bertlab_export.json").read_text())["source"].startswith(str(runs["b"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary or old folder left


def test_onnx_and_hf_exports_replace_each_other_whole(runs, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "out"
    code, err = _export([str(runs["a"]), str(out), "--format", "onnx", "--quantize", "int8", "--no-dev-check",
                         "--force"], capsys)
    assert code == 0, err
    assert (out / "model.int8.onnx").is_file() and (out / "bertlab_onnx.json").is_file()
    code, err = _export([str(runs["b"]), str(out), "--format", "onnx", "--no-dev-check", "--overwrite"], capsys)
    assert code == 0, err
    assert not (out / "model.int8.onnx").exists()
    assert "int8" not in json.loads((out / "bertlab_onnx.json").read_text())["files"]
    assert _family(out) == "token"
    code, err = _export([str(runs["a"]), str(out), "--overwrite"], capsys)  # HF over ONNX
    assert code == 0, err
    assert not list(out.glob("*.onnx")) and not (out / "bertlab_onnx.json").exists()
    assert _family(out) == "sequence"  # read as an HF export, not as the ONNX folder it was
    code, err = _export([str(runs["b"]), str(out), "--format", "onnx", "--no-dev-check", "--overwrite"], capsys)
    assert code == 0, err  # ONNX over HF
    assert not (out / "model.safetensors").exists() and not list(out.glob("bertlab_head.*"))
    assert _family(out) == "token"


def test_a_failed_export_leaves_the_earlier_one_as_it_was(runs, tmp_path, capsys, monkeypatch):
    from bertlab.inference import export as bexport

    out = tmp_path / "out"
    assert _export([str(runs["a"]), str(out)], capsys)[0] == 0
    before = _snapshot(out)

    def half(loaded, ckpt, folder, tok):
        (folder / "config.json").write_text("{half")
        raise RuntimeError("killed in the middle")

    monkeypatch.setattr(bexport, "_write_export", half)
    with pytest.raises(RuntimeError, match="in the middle"):
        bexport.export_checkpoint(runs["b"], out, overwrite=True)
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_killed_export_leaves_the_earlier_one_and_the_next_export_cleans_up(runs, tmp_path, capsys):
    out = tmp_path / "out"
    assert _export([str(runs["a"]), str(out)], capsys)[0] == 0
    before = _snapshot(out)
    script = (
        "import sys, time\n"
        "from bertlab.inference import export as e\n"
        "def slow(loaded, ckpt, folder, tok):\n"
        "    (folder / 'config.json').write_text('{half')\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(600)\n"
        "e._write_export = slow\n"
        "e.export_checkpoint(sys.argv[1], sys.argv[2], overwrite=True)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", script, str(runs["b"]), str(out)], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "writing"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _snapshot(out) == before  # the old export, whole
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]  # the killed writer's folder
    code, err = _export([str(runs["b"]), str(out), "--overwrite"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and _family(out) == "token"


def test_a_swap_killed_between_its_renames_is_put_back(tmp_path):
    """Killed after moving the old folder aside and before moving the new one in: the next replacement
    puts the old one back first (then replaces it as asked)."""
    from bertlab.runtime.files import replaced_folder

    out = tmp_path / "out"
    old = tmp_path / "out.old-999999999"  # no such process
    old.mkdir()
    (old / "config.json").write_text("old")
    (tmp_path / "out.tmp-999999999").mkdir()
    with pytest.raises(RuntimeError):
        with replaced_folder(out) as tmp:
            assert (out / "config.json").read_text() == "old"  # put back before the new one is written
            (tmp / "x").write_text("new")
            raise RuntimeError("fails")
    assert (out / "config.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with replaced_folder(out) as tmp:
        (tmp / "config.json").write_text("new")
    assert [p.name for p in out.iterdir()] == ["config.json"] and (out / "config.json").read_text() == "new"


@pytest.mark.parametrize("case", ["a user's files", "export files and a README", "a folder of runs", "a subfolder",
                                  "a lone config.json"])
def test_overwrite_replaces_only_an_export(runs, tmp_path, capsys, case):
    from bertlab.inference.export import export_checkpoint

    out = tmp_path / "out"
    if case == "a folder of runs":
        out.mkdir()
        (out / "r1").mkdir()
        (out / "r1" / "metrics.json").write_text("{}")
    elif case == "export files and a README":
        export_checkpoint(runs["a"], out)
        (out / "README.md").write_text("my notes\n")
    elif case == "a subfolder":
        export_checkpoint(runs["a"], out)
        (out / "extra").mkdir()
        (out / "extra" / "x").write_text("x")
    elif case == "a lone config.json":
        out.mkdir()
        (out / "config.json").write_text("{}")
    else:
        out.mkdir()
        (out / "thesis.tex").write_text("chapter one\n")
        (out / "data.csv").write_text("a,b\n")
    before = _snapshot(out)
    for fmt in (["--format", "hf"], ["--format", "onnx", "--no-dev-check"]):
        if "onnx" in fmt:
            pytest.importorskip("onnxruntime")
        code, err = _export([str(runs["b"]), str(out), "--overwrite", *fmt], capsys)
        assert code == 1 and "not an export" in err and "Traceback" not in err, err
        assert _snapshot(out) == before


def test_export_true_and_a_resumed_run_replace_the_runs_own_export(runs):
    """export=true writes <run>/export with overwrite: the run's own folder, replaced whole each time."""
    from bertlab.inference.export import export_checkpoint

    run = runs["a"]
    export_checkpoint(run, run / "export", overwrite=True)
    (run / "export" / "bertlab_stale.json").write_text("{}")  # bertlab's name, not in this export's record
    export_checkpoint(run, run / "export", overwrite=True)
    assert not (run / "export" / "bertlab_stale.json").exists()
    assert time.time() - (run / "export" / "bertlab_export.json").stat().st_mtime < 600


def test_a_runs_export_of_another_runs_checkpoint_goes_to_its_own_folder(runs, capsys):
    """train=false ckpt_path=<run_a's checkpoint> export=true in run_b writes run_b/export (run_dir says whose);
    the command line cannot write another run's export folder."""
    from bertlab.inference.export import export_checkpoint, resolve_checkpoint

    ckpt = resolve_checkpoint(runs["a"])
    code, err = _export([str(ckpt), str(runs["b"] / "export"), "--overwrite"], capsys)
    assert code == 1 and "run folder" in err, err
    export_checkpoint(ckpt, runs["b"] / "export", tokenizer_dir=runs["a"] / "tokenizer", overwrite=True,
                      run_dir=runs["b"])
    assert _family(runs["b"] / "export") == "sequence"


def test_an_onnx_graph_that_fails_its_check_leaves_the_earlier_export(runs, tmp_path, capsys, monkeypatch):
    pytest.importorskip("onnxruntime")
    from bertlab.inference import onnx as bonnx

    out = tmp_path / "out"
    assert _export([str(runs["a"]), str(out)], capsys)[0] == 0
    before = _snapshot(out)
    monkeypatch.setattr(bonnx, "check_graph", lambda *a, **k: {"passed": False, "lengths": [8], "cases": 1,
                                                                "max_abs_diff": 1.0, "worst_case": None})
    code, err = _export([str(runs["b"]), str(out), "--format", "onnx", "--no-dev-check", "--overwrite"], capsys)
    assert code == 1 and "Traceback" not in err, err
    assert _snapshot(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
