"""No output path replaces what bertlab wrote in a run or an export folder (issue 57, section 2).

Kind: an output the user names (``predict --output``, ``export OUT``, ``compare --out``, the GLUE table,
submission and multirun folders, ``hydra.run.dir``, the doc tools' folders) that lands on, or inside, a file
bertlab wrote in a run folder or an export folder. ``predict --output <run>/.bertlab-run.json`` used to replace the
run record (rc 0), after which resume was refused and advised ``overwrite_run_dir=true``, which deletes the
checkpoints. One guard (``bertlab.runtime.outputs``) recognises the folders by what bertlab writes into them; here
every output-taking command is pointed at many of their files, listed in the issue or not, and each must exit
non-zero with every file byte-identical.

The run is tests/fixtures/main_run (a tiny sst2 run), copied and given the rest of a run's layout.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

from bertlab.compare import main as compare_main
from bertlab.export import main as export_main
from bertlab.glue import main as glue_main
from bertlab.predict import main as predict_main
from bertlab.runtime.errors import ConfigError

TEXT = "a gripping , funny film\nthe plot is a mess\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """A run with the whole layout of one (records, logs, predictions, its HF and ONNX exports), an HF export
    and an ONNX export folder outside it, and an input file."""
    from bertlab.inference.export import export_checkpoint

    root = tmp_path_factory.mktemp("protected")
    run = root / "run"
    shutil.copytree(FIXTURES / "main_run", run)
    for name, text in {".hydra/config.yaml": "task: sst2\n", ".hydra/overrides.yaml": "- task=sst2\n",
                       ".hydra/hydra.yaml": "hydra: {}\n", "csv/metrics.csv": "step,val/loss\n0,0.7\n",
                       "train.log": "[INFO] started\n", "update_scope.json": '{"trainable": 10}\n',
                       "predictions/predict_predictions.jsonl": '{"label": "1"}\n',
                       "predictions/val_predictions.json": "{}\n", "hparams.yaml": "lr: 0.001\n",
                       "tensorboard/events.out": "x", "wandb/run-id": "abc\n"}.items():
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(text)
    export_checkpoint(run, run / "export", overwrite=True)
    (run / "export" / "bertlab_head.json").write_text('{"format": "bertlab-head"}\n')  # as a custom head's
    export_checkpoint(run, root / "hf_export")
    onnx = run / "onnx"  # an ONNX export's files (contents do not matter: nothing is loaded before the refusal)
    onnx.mkdir()
    for name in ("model.onnx", "model.int8.onnx", "bertlab_onnx.json", "export_report.json", "vocab.txt"):
        (onnx / name).write_text(f"{name} of the run's ONNX export\n")
    shutil.copytree(onnx, root / "onnx_export")
    (root / "in.txt").write_text(TEXT)
    return {"root": root, "run": run, "hf": root / "hf_export", "onnx": root / "onnx_export",
            "input": root / "in.txt"}


# Protected files, relative to the world's root: the list and the rest of what bertlab writes.
PROTECTED = [
    "run/.bertlab-run.json", "run/csv/metrics.csv", "run/train.log", "run/update_scope.json", "run/metrics.json",
    "run/checkpoints/last.ckpt", "run/tokenizer/vocab.txt", "run/tokenizer/tokenizer.json", "run/hparams.yaml",
    "run/.hydra/config.yaml", "run/.hydra/overrides.yaml", "run/predictions/predict_predictions.jsonl",
    "run/predictions/val_predictions.json", "run/wandb/run-id", "run/export/config.json",
    "run/export/model.safetensors", "run/export/bertlab_head.json", "run/export/bertlab_export.json",
    "run/onnx/model.onnx", "run/onnx/bertlab_onnx.json", "run/onnx/export_report.json",
    "hf_export/config.json", "hf_export/model.safetensors", "hf_export/bertlab_long_text.json",
    "hf_export/vocab.txt", "hf_export/bertlab_export.json", "onnx_export/model.int8.onnx",
    "onnx_export/bertlab_onnx.json", "onnx_export/export_report.json",
]
# Paths bertlab has not written yet but a run or export will (or whose folder belongs to them).
NOT_YET = ["run/checkpoints/epoch_009.ckpt", "run/tokenizer/special_tokens_map2.json", "run/.hydra/new.yaml",
           "run/csv/version_1/metrics.csv", "run/predictions/test_predictions.json", "run/job.log",
           "hf_export/pytorch_model.bin", "hf_export/notes.jsonl", "onnx_export/predictions.jsonl"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _exit_code(call, argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = call(argv) or 0
    except SystemExit as stop:
        code = int(stop.code or 0) if not isinstance(stop.code, str) else 1
    out = capsys.readouterr()
    return int(code), out.err + out.out


def _commands(world: dict[str, Path], target: Path) -> dict[str, tuple]:
    """Every command that takes an output path, pointed at ``target``."""
    run = world["run"]
    return {
        "predict --output": (predict_main, [str(run), str(world["input"]), "--output", str(target), "--no-progress",
                                            "--device", "cpu"]),
        "export OUT": (export_main, [str(run), str(target), "--overwrite"]),
        "export OUT --format onnx": (export_main, [str(run), str(target), "--format", "onnx", "--overwrite",
                                                   "--no-dev-check"]),
        "compare --out": (compare_main, [str(run), "--out", str(target)]),
        "glue table --out": (glue_main, ["table", str(run), "--out", str(target)]),
        "glue submit --out": (glue_main, ["submit", str(run), "--out", str(target)]),
    }


@pytest.mark.parametrize("rel", PROTECTED + NOT_YET)
def test_no_command_writes_a_file_of_a_run_or_an_export(world, rel, capsys):
    target = world["root"] / rel
    before = _snapshot(world["root"])
    for name, (call, argv) in _commands(world, target).items():
        if name.startswith("export OUT --format onnx"):
            pytest.importorskip("onnxruntime")
        code, err = _exit_code(call, argv, capsys)
        assert code != 0, f"{name} {target}: rc 0\n{err}"
        assert "Traceback" not in err, f"{name}: {err}"
        assert _snapshot(world["root"]) == before, f"{name} {target} changed a file"


@pytest.mark.parametrize("rel", ["run/metrics.json", "run/checkpoints/study.journal", "run/hparams.yaml",
                                 "onnx_export/optuna.journal"])
def test_an_optuna_study_file_is_never_a_file_of_a_run_or_an_export(world, rel):
    pytest.importorskip("optuna")
    from bertlab.sweeps.study import open_storage

    before = _snapshot(world["root"])
    for storage in (str(world["root"] / rel), f"sqlite:///{world['root'] / rel}"):
        with pytest.raises(ConfigError, match="hydra.sweeper.storage"):
            open_storage(storage)
    assert _snapshot(world["root"]) == before


@pytest.mark.parametrize("rel", ["run/.bertlab-run.json", "run/train.log", "hf_export/config.json"])
def test_no_command_writes_there_through_a_symbolic_link(world, rel, capsys, tmp_path):
    link = tmp_path / "out.jsonl"
    link.symlink_to(world["root"] / rel)
    before = _snapshot(world["root"])
    code, err = _exit_code(predict_main, [str(world["run"]), str(world["input"]), "--output", str(link),
                                          "--no-progress"], capsys)
    assert code == 1 and "Traceback" not in err and "folder" in err, err
    assert _snapshot(world["root"]) == before


@pytest.mark.parametrize("rel", ["run", "run/checkpoints", "run/tokenizer", "run/.hydra", "run/export", "hf_export",
                                 "onnx_export", "run/csv/new"])
def test_folders_a_command_fills_are_never_a_run_or_an_export_or_inside_one(world, rel, capsys):
    """glue run's multirun folder, hydra.run.dir (a new run), the doc tools' folders."""
    from bertlab.runtime.run_dir import claim_run_dir, release_run_dir

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import doc_figures_lib as doc_figures
    import make_samples

    target = world["root"] / rel
    before = _snapshot(world["root"])
    train_script = Path(__file__).resolve().parent.parent / "train.py"
    code, err = _exit_code(glue_main, ["run", "--out", str(target), "--train-script", str(train_script)], capsys)
    assert code == 2 and "Traceback" not in err and "folder" in err, err
    code, err = _exit_code(make_samples.main, ["--only", "fixtures", "--out", str(target)], capsys)
    assert code != 0 and "folder" in err, err
    with pytest.raises(doc_figures.FigureError, match="folder"):
        doc_figures._refuse_scratch_in_bertlab_folders(target)
    if rel != "run":  # the run folder itself is claimed again by its own run (a resume): run_dir's business
        with pytest.raises(ConfigError, match="hydra.run.dir"):
            claim_run_dir(target, {"task": {"name": "sst2"}})
        release_run_dir()
    assert _snapshot(world["root"]) == before


def test_what_may_be_written_beside_a_runs_files(world, capsys, tmp_path):
    """New predictions under <run>/predictions/ (again and again), a comparison of the one run in its folder
    (replaced by the next), and exports over the run's own export and over an earlier export."""
    root = tmp_path / "w"
    shutil.copytree(world["root"], root, symlinks=True)
    run = root / "run"
    protected = {rel: (root / rel).read_bytes() for rel in PROTECTED if not rel.startswith(("run/export/",
                                                                                          "hf_export/"))}
    for _ in range(2):
        mine = run / "predictions" / "mine.jsonl"
        code, err = _exit_code(predict_main, [str(run), str(root / "in.txt"), "--output", str(mine),
                                              "--no-progress"], capsys)
        assert code == 0, err
        assert len(mine.read_text().splitlines()) == 2
        code, err = _exit_code(compare_main, [str(run)], capsys)
        assert code == 0, err
        assert (run / "comparison.md").is_file()
    code, err = _exit_code(predict_main, [str(run), str(root / "in.txt"), "--output", str(run / "new.jsonl"),
                                          "--no-progress"], capsys)
    assert code == 0, err
    code, err = _exit_code(predict_main, [str(run), str(root / "in.txt"), "--output", str(run / "new.jsonl"),
                                          "--no-progress"], capsys)
    assert code == 1 and "a file already in the run folder" in err, err  # once there, it is the run's folder's
    for out in (run / "export", root / "hf_export"):
        code, err = _exit_code(export_main, [str(run), str(out), "--overwrite"], capsys)
        assert code == 0, err
    assert {rel: (root / rel).read_bytes() for rel in protected} == protected


def test_a_damaged_run_record_is_not_mended_by_deleting_the_checkpoints(tmp_path):
    """The resume refusal for a run record something else wrote over names the record, and never advises
    overwrite_run_dir=true without saying that it deletes the checkpoints."""
    from bertlab.runtime.run_dir import claim_run_dir, release_run_dir

    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "main_run", run)
    cfg = json.loads((run / ".bertlab-run.json").read_text())["config"]
    for damage in ('{"label": "1", "score": 0.9}\n{"label": "0"}\n', "", "[1, 2]\n", '{"label": "1"}\n'):
        (run / ".bertlab-run.json").write_text(damage)
        before = {**_snapshot(run), ".bertlab-run.lock": b""}  # the claim's lock file stays (runtime.files.try_lock)
        with pytest.raises(ConfigError) as err:
            claim_run_dir(run, {**cfg, "ckpt_path": "last"})
        release_run_dir()
        text = str(err.value)
        assert "damaged" in text and ".bertlab-run.json" in text and "ckpt_path=last" in text
        assert "overwrite_run_dir=true is no repair: it deletes checkpoints/" in text
        assert _snapshot(run) == before
    # Another configuration: the advice says what overwrite_run_dir=true deletes.
    (run / ".bertlab-run.json").write_bytes((FIXTURES / "main_run" / ".bertlab-run.json").read_bytes())
    with pytest.raises(ConfigError, match=r"overwrite_run_dir=true to delete its outputs \(checkpoints/"):
        claim_run_dir(run, {**cfg, "seed": 12345})
    release_run_dir()


def test_the_guard_recognises_folders_by_what_bertlab_wrote(tmp_path):
    """A run from before run records (checkpoints/ beside metrics.json) and a Hugging Face model folder are
    protected too; a folder that merely holds runs is not one."""
    from bertlab.runtime.outputs import bertlab_folders, refuse_replacing_bertlab_files

    old_run = tmp_path / "runs" / "old"
    (old_run / "checkpoints").mkdir(parents=True)
    (old_run / "metrics.json").write_text("{}\n")
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}\n")
    (hf / "model.safetensors").write_bytes(b"x")
    assert [k for k, _ in bertlab_folders(old_run / "metrics.json")] == ["run"]
    assert [k for k, _ in bertlab_folders(hf / "x.json")] == ["export"]
    assert bertlab_folders(tmp_path / "runs" / "comparison.md") == []
    for path in (old_run / "metrics.json", old_run / "checkpoints" / "x.ckpt", hf / "out.jsonl"):
        with pytest.raises(ConfigError, match="folder"):
            refuse_replacing_bertlab_files(path, str(path), "Elsewhere.")
    refuse_replacing_bertlab_files(tmp_path / "runs" / "comparison.md", "x", "y")  # beside runs: fine
    assert os.path.isdir(old_run / "checkpoints")
