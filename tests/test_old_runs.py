"""Runs written before the encoder's attribute of ``TaskModel`` was named ``encoder`` (their state-dict keys start
``model.`` + ``bert.``, :data:`bertlab.models.keys.RENAMED_PREFIXES`) still resume, predict as the old code did,
export, serve as ``model.init_from`` and keep their feature caches.

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
    from bertlab.models.keys import ENCODER_PREFIX, MODULE_PREFIX, RENAMED_PREFIXES

    old = MODULE_PREFIX + RENAMED_PREFIXES[0][0]
    for run in ("run", "lora"):
        keys = old_keys(FIXTURE / run / "checkpoints" / "last.ckpt")
        assert any(k.startswith(old) for k in keys) and not any(k.startswith(MODULE_PREFIX + ENCODER_PREFIX)
                                                                  for k in keys)
    assert any("lora_" in k for k in old_keys(FIXTURE / "lora" / "checkpoints" / "last.ckpt"))


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


def test_old_caches_stay_valid(runs):
    """The frozen-encoder feature cache is keyed by a fingerprint of the encoder's own tensors and names (no
    TaskModel prefix), a distillation's teacher outputs by a checksum of the teacher's tensors under the names the
    first runs gave them: an old run hashes as the old code hashed it, so what it cached is found again."""
    from bertlab.inference.export import load_checkpoint_model
    from bertlab.models.keys import legacy_key
    from bertlab.tasks.distill import parameter_checksum
    from bertlab.training.feature_cache import weights_fingerprint

    model = load_checkpoint_model(runs / "run" / "checkpoints" / "last.ckpt").model
    assert weights_fingerprint(model.encoder) == EXPECTED["feature_cache_fingerprint"]
    assert parameter_checksum(model, legacy_key) == EXPECTED["teacher_cache_checksum"]


# ----------------------------------------------------------------------------------------------------------
# The kinds behind it, one case each beyond the fixture


def _old(key: str) -> str:
    """``key`` (a TaskModel key of today) as the first runs named it."""
    from bertlab.models.keys import legacy_key

    return legacy_key(key)


def test_the_migration_renames_old_roots_only_and_twice_is_once():
    from bertlab.models.keys import migrate_checkpoint, migrate_state_dict

    state = {f"model.{_old('encoder.embeddings.word_embeddings.weight')}": 1, "model.head.classifier.weight": 2,
             "model.encoder.pooler.dense.bias": 3, "other.bert.kept": 4, "_orig_mod.x": 5}  # rename.sh: keep
    ckpt = migrate_checkpoint({"state_dict": state, "global_step": 6})
    assert list(ckpt["state_dict"]) == ["model.encoder.embeddings.word_embeddings.weight",
                                        "model.head.classifier.weight", "model.encoder.pooler.dense.bias",
                                        "other.bert.kept", "_orig_mod.x"]  # rename.sh: keep
    assert list(ckpt["state_dict"].values()) == [1, 2, 3, 4, 5] and ckpt["global_step"] == 6
    assert migrate_state_dict(ckpt["state_dict"], "model.") == ckpt["state_dict"]
    assert migrate_checkpoint({"no": "state dict"}) == {"no": "state dict"}


def test_every_reader_of_a_bertlab_checkpoint_migrates(tmp_path):
    """Both doors a checkpoint comes in by: bertlab's own read (init_from, predict, export, the resume check) and
    Lightning's (resume, train=false), whose hook runs before Lightning loads the tensors."""
    from types import SimpleNamespace

    from bertlab.training.checkpoint_files import read_checkpoint
    from bertlab.training.module import TaskModule

    path = tmp_path / "old.ckpt"
    torch.save({"state_dict": {f"model.{_old('encoder.x')}": torch.zeros(1)}}, path)
    assert list(read_checkpoint(path)["state_dict"]) == ["model.encoder.x"]
    ckpt = torch.load(path, weights_only=True)
    TaskModule.on_load_checkpoint(SimpleNamespace(strict_loading=True, family_modules=None), ckpt)
    assert list(ckpt["state_dict"]) == ["model.encoder.x"]


@pytest.mark.parametrize("model_type", list(__import__("bertlab.models.families", fromlist=["x"]).families()))
def test_hf_key_mapping_reads_old_and_new_lightning_state_dicts_alike(model_type):
    """A bertlab Lightning state dict (old or new names) is bertlab's already, for every family (whose own prefix
    may be ``bert.``, another, or ``model.`` as ModernBERT's); a ``model.``-wrapped bare BERT encoder is still
    BERT's. The keys are a real tiny model's of the family."""
    from bertlab.models.assemble import assemble
    from bertlab.models.families import family_spec, tiny_config
    from bertlab.models.hf_weights import normalize_hf_keys
    from bertlab.runtime.config import HeadConfig, TaskSpec
    from bertlab.tasks.families import build_family

    spec = family_spec(model_type)
    config = spec.read_config(tiny_config(model_type), "test")
    task = TaskSpec(name="sequence", family="sequence", labels=["a", "b"])
    family = build_family(task, 2, task.labels, None)
    model = assemble(config, HeadConfig(pooling="cls"), family.build_head, "sequence", add_pooling_layer=False)
    ours = {k: torch.full((1,), float(i)) for i, k in enumerate(model.state_dict())}
    assert any(k.startswith("head.") for k in ours) and any(k.startswith("encoder.") for k in ours)
    for state in ({f"model.{k}": v for k, v in ours.items()}, {f"model.{_old(k)}": v for k, v in ours.items()}):
        normalized = normalize_hf_keys(state, spec)[0]
        assert normalized.keys() == ours.keys() and all(torch.equal(normalized[k], ours[k]) for k in ours)
    if spec.prefix == "bert":  # BERT's bare encoder keys (encoder.layer.…) look like a TaskModel's root
        layer = next(k for k in ours if ".layer.0." in k).removeprefix("encoder.")
        wrapped_bare = normalize_hf_keys({f"model.{layer}": torch.zeros(1)}, spec)[0]
        assert list(wrapped_bare) == [f"encoder.{layer}"]


def test_a_lora_fingerprint_of_old_names_matches_and_a_changed_base_still_does_not():
    from bertlab.models.keys import ENCODER, HEAD
    from bertlab.models.lora import base_fingerprint, base_matches

    model = torch.nn.ModuleDict({ENCODER: torch.nn.Linear(2, 2), HEAD: torch.nn.Linear(2, 1)})
    stored = {"head.weight", "head.bias"}
    old = base_fingerprint(model, stored, _old)
    assert old != base_fingerprint(model, stored) and base_matches(model, stored, old)
    with torch.no_grad():
        model[ENCODER].weight.add_(1.0)
    assert not base_matches(model, stored, old)


def test_a_bert_encoder_is_not_mistaken_for_a_task_model():
    """A BERT encoder has an ``encoder`` of its own (its layer stack): the encoder of a model is a TaskModel's
    ``encoder``, or the model itself."""
    from bertlab.models.bert import BertModel
    from bertlab.models.heads import TaskModel
    from bertlab.models.keys import encoder_of
    from bertlab.runtime.config import EncoderConfig

    encoder = BertModel(EncoderConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=16, max_position_embeddings=16))
    assert encoder_of(encoder) is encoder
    assert encoder_of(TaskModel(encoder, torch.nn.Linear(8, 2), None)) is encoder


def test_model_encoder_old_value_reads_as_transformer_logged_once(caplog):
    import logging

    from bertlab.runtime import config
    from bertlab.runtime.config import OLD_ENCODER_KINDS, RECURRENT, TRANSFORMER, ConfigError, encoder_kind

    config._told.clear()
    old = next(iter(OLD_ENCODER_KINDS))
    with caplog.at_level(logging.INFO, logger="bertlab.runtime.config"):
        assert [encoder_kind({"encoder": old}) for _ in range(3)] == [TRANSFORMER] * 3
    assert sum("is read as model.encoder=transformer" in r.getMessage() for r in caplog.records) == 1
    assert encoder_kind({}) == encoder_kind({"encoder": None}) == TRANSFORMER
    assert encoder_kind({"encoder": RECURRENT}) == RECURRENT
    with pytest.raises(ConfigError, match="model.encoder must be one of transformer, recurrent, got 'lstm'"):
        encoder_kind({"encoder": "lstm"})


@pytest.mark.parametrize("value", ["old", "transformer"])
def test_model_encoder_on_the_command_line(tmp_path, value):
    from bertlab.runtime.config import OLD_ENCODER_KINDS

    kind = next(iter(OLD_ENCODER_KINDS)) if value == "old" else value
    metrics = run_train([*OVERRIDES, f"+model.encoder={kind}", "trainer.max_steps=1"], tmp_path / "run")
    assert metrics["train"]["steps"] == 1
