"""Shared test helpers: compose the real Hydra config and run the real recipe in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
FIXTURE_DATA = FIXTURES / "data"
SHARED_DATA = ROOT.parent / "shared" / "data"

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Several workers share the cores (make test: one a core): one thread each, for the in-process runs and the
    # subprocesses they start, instead of every worker's torch and onnxruntime using every core.
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


def _keep_parsed_config_files() -> None:
    """Hydra parses each YAML file of conf/ again on every compose (about 16 files, half a compose's time), and
    the tests compose hundreds of times in one process (conftest.compose, main_in_process): keep each file's
    parse, keyed by its path, size and modification time (a test that writes or edits a config folder gets a
    fresh parse), and hand Hydra a copy, which it may change. Only the test process; a run composes once."""
    import copy

    from hydra.core.plugins import Plugins

    Plugins.instance()  # its first scan imports the config sources' modules again: patch the classes it keeps
    try:  # Hydra's internals: if they move, the tests compose uncached (slower, the same configs)
        from hydra._internal.core_plugins.file_config_source import FileConfigSource
        from hydra._internal.core_plugins.importlib_resources_config_source import (
            ImportlibResourcesConfigSource,
        )
    except ImportError:
        return

    parsed: dict = {}

    def keep(source_class, identity):
        original = source_class.load_config

        def load_config(self, config_path: str):
            key = identity(self, config_path)
            if key is None:
                return original(self, config_path)  # Hydra's own error for a missing file
            if key not in parsed:
                parsed[key] = original(self, config_path)
            return copy.deepcopy(parsed[key])

        source_class.load_config = load_config

    def file_identity(self, config_path: str):
        try:
            stat = os.stat(os.path.join(self.path, self._normalize_file_name(config_path)))
        except OSError:
            return None
        return self.path, config_path, stat.st_size, stat.st_mtime_ns

    keep(FileConfigSource, file_identity)
    keep(ImportlibResourcesConfigSource, lambda self, config_path: (self.path, config_path))  # installed packages


_keep_parsed_config_files()


def compose(overrides: list[str], run_dir: Path, data_dir: Path = FIXTURE_DATA):
    """The composed training config, as `python train.py <overrides>` would build it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = hydra_compose(
            config_name="train",
            return_hydra_config=True,
            overrides=[
                f"paths.root_dir={ROOT}",
                f"paths.data_dir={data_dir}",
                f"paths.output_dir={run_dir}",
                f"paths.log_dir={run_dir.parent / 'logs'}",
                f"paths.cache_dir={run_dir.parent / 'cache'}",
                "trainer.enable_progress_bar=false",
                "trainer.accelerator=cpu",
                # The default logger (many = csv + wandb) would start wandb: tests choose it explicitly.
                *([] if any(o.startswith("logger=") for o in overrides) else ["logger=csv"]),
                *overrides,
            ],
        )
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def run_train(overrides: list[str], run_dir: Path, data_dir: Path = FIXTURE_DATA) -> dict:
    """Run bertlab.train.run in-process and return the metrics.json it wrote."""
    from bertlab.train import run

    cfg = compose(overrides, run_dir, data_dir)
    run(cfg)
    return json.loads((run_dir / "metrics.json").read_text())


def main_in_process(args: list[str], *, script: Path | None = None, module: str | None = None,
                    env: dict[str, str | None] | None = None, cwd: Path = ROOT,
                    stdin: str | None = None) -> subprocess.CompletedProcess:
    """``python train.py <args>`` (or ``python -m <module> <args>``) run in this process from the script's
    ``__main__`` on: the same code (Hydra's main, its run dir and logging, bertlab's one-paragraph exit), without
    a fresh interpreter's seconds of imports. For tests about what a command does to files and what it prints;
    the few tests about the process itself (exit status seen by a shell, no traceback on the terminal, signals)
    keep a real subprocess. Returns what ``subprocess.run(..., capture_output=True, text=True)`` would, from
    ``sys.stdout`` / ``sys.stderr`` (the logging handlers Hydra makes in the run write there too). ``env``
    adds to this process's environment for the call (a value None unsets the key); ``stdin`` is what is piped
    in (none: an empty pipe).

    Everything a command line changes for its process is put back afterwards: environment, working directory,
    argv, logging handlers and levels, signal handlers, the Hydra singletons, bertlab's end-of-process flag; what
    it registers with ``atexit`` runs when it returns, as at a process's exit."""
    import contextlib
    import io
    import logging
    import runpy
    import signal
    import traceback
    import warnings
    from unittest import mock

    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from bertlab.training import stopping

    saved_env, saved_cwd, saved_argv, saved_stdin = dict(os.environ), os.getcwd(), sys.argv[:], sys.stdin
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved_levels = {name: lg.level for name, lg in logging.root.manager.loggerDict.items()
                    if isinstance(lg, logging.Logger)}
    saved_signals = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
        saved_signals[sig] = signal.getsignal(sig)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    for key, value in (env or {}).items():  # None: unset
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    os.chdir(cwd)
    root.handlers[:] = []  # as in a fresh process: the command's own logging setup (or none) decides what prints
    root.setLevel(logging.WARNING)
    target = module or str(script or ROOT / "train.py")
    sys.argv = [target, *args]
    sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: "found in sys.modules" for -m <module>
            at_exit = []  # what the command registers to run when its process ends: run at its end here
            with mock.patch("atexit.register", lambda fn, *a, **kw: at_exit.append((fn, a, kw)) or fn):
                try:
                    if module:
                        runpy.run_module(module, run_name="__main__", alter_sys=True)
                    else:
                        runpy.run_path(target, run_name="__main__")
                except SystemExit as exit_:
                    code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                    if isinstance(exit_.code, str):
                        err.write(exit_.code + "\n")
                except BaseException:  # what the interpreter prints for an uncaught exception
                    err.write(traceback.format_exc())
                    code = 1
            for fn, a, kw in reversed(at_exit):
                fn(*a, **kw)
    finally:
        for handler in root.handlers:
            if handler not in saved_handlers:
                handler.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        stopping._ANSWER_LATE_SIGNALS = False
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None
        sys.argv, sys.stdin = saved_argv, saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess([sys.executable, target, *args], code, out.getvalue(), err.getvalue())


@pytest.fixture
def train_run(tmp_path):
    def _run(*overrides: str, name: str = "run", data_dir: Path = FIXTURE_DATA) -> dict:
        return run_train(list(overrides), tmp_path / name, data_dir)

    return _run


def pytest_collection_modifyitems(config, items):
    # Tests marked `shared` need ../shared/data (real datasets): skip them cleanly on a fresh clone.
    if SHARED_DATA.is_dir():
        return
    skip = pytest.mark.skip(reason="needs ../shared/data (real datasets)")
    for item in items:
        if "shared" in item.keywords:
            item.add_marker(skip)


def records_close(a, b, tol: float = 1e-5) -> bool:
    """Equal prediction records, floats within ``tol`` (a graph's float32 rounding against PyTorch)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(records_close(a[k], b[k], tol) for k in a)
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(records_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float):
        return isinstance(b, float) and abs(a - b) <= tol
    return a == b


def assert_onnx_like_torch(run_dir: Path, out: Path, inputs: list) -> None:
    """Export the run to ONNX: the fp32 graph's logits within 1e-4 of PyTorch's on the run's dev set (the export
    gate's own measure), and the same prediction records for ``inputs`` from either backend."""
    from bertlab.inference.onnx import export_onnx
    from bertlab.inference.predictor import Predictor

    report = export_onnx(run_dir, out)
    assert report["onnx_fp32_vs_pytorch"]["max_abs_logit_diff"] <= 1e-4, report["onnx_fp32_vs_pytorch"]
    want, got = Predictor.from_run(run_dir)(inputs), Predictor.from_run(out)(inputs)
    assert records_close(want, got), (want, got)


# Sizes of a tiny random checkpoint, by the config keys each model_type names them with (the rest: BERT's keys).
TINY_SIZES = {"xlm": dict(emb_dim=32, n_layers=2, n_heads=4), "flaubert": dict(emb_dim=32, n_layers=2, n_heads=4),
              "convbert": dict(embedding_size=16), "albert": dict(embedding_size=16),
              "squeezebert": dict(embedding_size=32, q_groups=1, k_groups=1, v_groups=1, post_attention_groups=1,
                                  intermediate_groups=1, output_groups=1)}


def tiny_hf_folder(folder: Path, model_type: str, weights: bool = True, **overrides) -> Path:
    """A random tiny transformers checkpoint of ``model_type``, built offline (seed 0), with a WordPiece tokenizer
    of the SST-2 sample beside it (300 tokens, pad id 0); ``weights=False`` writes config.json alone."""
    import torch
    import transformers

    from bertlab.data.tokenizer import train_wordpiece

    if folder.is_dir():
        return folder
    if not weights:  # the model_type's defaults: nothing is built from them
        transformers.AutoConfig.for_model(model_type, **overrides).save_pretrained(folder)
        return folder
    sizes = TINY_SIZES.get(model_type, {})
    if "emb_dim" not in sizes:
        sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, **sizes)
    config = transformers.AutoConfig.for_model(model_type, **{**dict(vocab_size=300, max_position_embeddings=130,
                                                                     pad_token_id=0), **sizes, **overrides})
    torch.manual_seed(0)
    transformers.AutoModel.from_config(config).save_pretrained(folder)
    lines = (FIXTURE_DATA / "sst2" / "train.tsv").read_text().splitlines()[1:]
    train_wordpiece([line.split("\t")[0] for line in lines], vocab_size=300).save(folder)
    return folder


@pytest.fixture(scope="module")
def sst2_teacher(tmp_path_factory):
    """A tiny 4-layer sst2 run with its export: the teacher of the distillation tests (test_distill*.py)."""
    from test_distill import TINY

    run_dir = tmp_path_factory.mktemp("teacher") / "run"
    run_train([*TINY, "task=sst2", "model.num_hidden_layers=4", "export=true"], run_dir)
    return run_dir


@pytest.fixture(scope="module")
def emb_run(tmp_path_factory):
    """A tiny embedding run (bert_tiny, two steps on the bundled sample), once per module that asks for it:
    the retrieval command's and the reranker's mined-negatives tests search with it."""
    run = tmp_path_factory.mktemp("emb") / "run"
    run_train(["model=bert_tiny", "task=embedding", "data.source=sample", "trainer.max_steps=2",
               "data.batch_size=8"], run)
    return run
