"""Shared test helpers: compose the real Hydra config and run the real recipe in-process."""

from __future__ import annotations

import json
import os
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
