"""Runs written before ``TaskModel.bert`` became ``TaskModel.encoder`` (state-dict keys ``model.bert.*``) still
resume, predict as the old code did, export, serve as ``model.init_from`` and keep their feature caches.

tests/fixtures/run_r4 was written by the code of main at 01412ed (how: its ``make.py``): ``run/`` a tiny sst2
run with its export, ``lora/`` a LoRA run on that export (a slim checkpoint whose base fingerprint hashed the
old names), ``predictions.json`` the old code's predictions of each and its feature-cache fingerprint.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES, records_close, run_train

FIXTURE = FIXTURES / "run_r4"
RELATIVE = Path("tests/fixtures/run_r4")  # where the runs recorded their paths from
EXPECTED = json.loads((FIXTURE / "predictions.json").read_text())
OVERRIDES = ["model=bert_tiny", "task=sst2", "model.hidden_size=16", "model.num_hidden_layers=1",
             "model.num_attention_heads=2", "model.intermediate_size=32", "model.vocab_size=200",
             "model.max_position_embeddings=32", "data.max_seq_length=32", "data.batch_size=8", "seed=1"]


def old_keys(ckpt: Path) -> list[str]:
    return list(torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"])


@pytest.fixture
def runs(tmp_path, monkeypatch) -> Path:
    """A copy of the fixture (resume writes into its run dir) at the same relative place, read from the copy's
    checkout: the paths the runs recorded (the LoRA run's base weights) are relative to it."""
    shutil.copytree(FIXTURE, tmp_path / RELATIVE)
    monkeypatch.chdir(tmp_path)
    return tmp_path / RELATIVE


def test_the_fixture_holds_the_old_names():
    assert any(k.startswith("model.bert.") for k in old_keys(FIXTURE / "run" / "checkpoints" / "last.ckpt"))
    assert any(k.startswith("model.bert.") and "lora_" in k
               for k in old_keys(FIXTURE / "lora" / "checkpoints" / "last.ckpt"))


@pytest.mark.parametrize("name", ["run", "run/export", "lora"])
def test_old_runs_predict_as_the_old_code_did(runs, name):
    from bertlab import Predictor

    predictor = Predictor.from_run(runs / name)
    got = [predictor(t) for t in EXPECTED["texts"]]
    assert records_close(got, EXPECTED["predictions"][name], tol=1e-6), (got, EXPECTED["predictions"][name])


def test_an_old_run_resumes_one_more_step(runs):
    metrics = run_train([*OVERRIDES, "trainer.max_epochs=2", "ckpt_path=last"], runs / "run")
    assert metrics["train"]["resumed_from_step"] == 6 and metrics["train"]["steps"] == 12


def test_an_old_lora_run_resumes_one_more_step(runs):
    metrics = run_train([*OVERRIDES, f"model.pretrained={RELATIVE / 'run' / 'export'}", "freeze=lora", "freeze.lora.r=2",
                         "trainer.max_epochs=2", "ckpt_path=last"], runs / "lora")
    assert metrics["train"]["resumed_from_step"] == 6 and metrics["train"]["steps"] == 12


@pytest.mark.parametrize("name", ["run", "lora"])
def test_old_checkpoints_export_as_the_old_code_did(runs, tmp_path, name):
    from bertlab import Predictor
    from bertlab.inference.export import export_checkpoint

    out = export_checkpoint(runs / name / "checkpoints" / "last.ckpt", tmp_path / "export")
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForSequenceClassification"]
    predictor = Predictor.from_run(out)
    assert records_close([predictor(t) for t in EXPECTED["texts"]], EXPECTED["predictions"][name], tol=1e-6)
    if name == "run":  # the same tensors, by the same names, as the old code's own export
        from safetensors.torch import load_file

        ours, theirs = load_file(out / "model.safetensors"), load_file(runs / "run" / "export" / "model.safetensors")
        assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def tensor(ckpt: Path, suffix: str) -> torch.Tensor:
    """The tensor of a Lightning checkpoint (or an export's safetensors) whose name ends with ``suffix``."""
    if ckpt.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(ckpt)
    else:
        state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    return next(v for k, v in state.items() if k.endswith(suffix))


@pytest.mark.parametrize("start", ["run", "run/export"])
def test_old_runs_and_exports_serve_as_init_from(runs, tmp_path, start):
    metrics = run_train([*OVERRIDES, f"model.init_from={runs / start}", "trainer.max_steps=1"], tmp_path / "new")
    assert metrics["train"]["steps"] == 1
    new = tmp_path / "new" / "checkpoints" / "last.ckpt"
    old = runs / start / ("model.safetensors" if start.endswith("export") else "checkpoints/last.ckpt")
    for suffix in ("embeddings.word_embeddings.weight", "classifier.weight"):  # the encoder's and the head's
        assert torch.allclose(tensor(new, suffix), tensor(old, suffix), atol=1e-3), suffix  # one step of 5e-5


def test_old_feature_caches_stay_valid(runs):
    """The feature cache is keyed by a fingerprint of the encoder's own tensors and names (no TaskModel prefix):
    an old run's encoder hashes as the old code hashed it, so its cached features are found again."""
    from bertlab.inference.export import load_checkpoint_model
    from bertlab.training.feature_cache import weights_fingerprint

    model = load_checkpoint_model(runs / "run" / "checkpoints" / "last.ckpt").model
    assert weights_fingerprint(model.bert) == EXPECTED["feature_cache_fingerprint"]
