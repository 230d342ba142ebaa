"""``model=auto`` end to end: a tiny random checkpoint of each family (built offline with transformers, a WordPiece
tokenizer saved beside it) trains through train.py, its header names the family, and ``export=true`` writes a
folder that the family's ``AutoModelFor*`` class loads and that predicts what bertlab predicts. A model_type that
is no native family runs through the generic AutoModel path."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_DATA, assert_onnx_like_torch, run_train

from bertlab.data.tokenizer import train_wordpiece
from bertlab.inference.export import load_checkpoint_model
from bertlab.models.families import families, is_native, tiny_config
from bertlab.runtime.errors import ConfigError

transformers = pytest.importorskip("transformers")

QUICK = ("model=auto", "trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=2")


def _texts() -> list[str]:
    lines = (FIXTURE_DATA / "sst2" / "train.tsv").read_text().splitlines()[1:]
    return [line.split("\t")[0] for line in lines]


def tiny_folder(root: Path, model_type: str) -> Path:
    """A random tiny checkpoint of the family with a WordPiece tokenizer (pad id 0, as the config says)."""
    folder = root / model_type
    if folder.is_dir():
        return folder
    tok = train_wordpiece(_texts(), vocab_size=300)
    if is_native(model_type):  # the family's tiny model, with this vocabulary's size and special ids
        cfg = transformers.AutoConfig.for_model(**tiny_config(model_type, tok))
    else:  # a model_type of transformers' that no native family has (the generic path)
        cfg = transformers.AutoConfig.for_model(model_type, vocab_size=tok.vocab_size, max_position_embeddings=130,
                                                pad_token_id=0, hidden_size=32, num_hidden_layers=2,
                                                num_attention_heads=4, intermediate_size=37)
    torch.manual_seed(0)
    transformers.AutoModel.from_config(cfg).save_pretrained(folder)
    tok.save(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return lambda model_type: tiny_folder(root, model_type)


@pytest.mark.parametrize("model_type", families())  # the registry: a family added there runs here too
def test_auto_trains_and_exports_each_family(folders, tmp_path, model_type, caplog):
    folder = folders(model_type)
    run_dir = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        metrics = run_train([*QUICK, f"model.pretrained={folder}", "task=sst2", "export=true"], run_dir)
    assert metrics["val"]["accuracy"] is not None
    spec = families()[model_type]
    assert f"model=auto ({spec.display})" in caplog.text
    export = run_dir / "export"
    config = json.loads((export / "config.json").read_text())
    assert config["architectures"] == [spec.heads["sequence"].architecture] and config["model_type"] == model_type
    hf, info = transformers.AutoModelForSequenceClassification.from_pretrained(export, output_loading_info=True)
    assert not any(info.values()), info
    hf.eval()
    ours = load_checkpoint_model(metrics["best_checkpoint"]).model
    assert ours.bert.config.model_type == model_type
    tok = transformers.AutoTokenizer.from_pretrained(export)
    batch = tok(_texts()[:5], padding=True, return_tensors="pt")
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        want = hf(**inputs).logits
        got = ours({**inputs, "token_type_ids": batch.get("token_type_ids")})
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


ONNX_INPUTS = {"sst2": ["a gorgeous, witty film .", "the plot is a mess", "x"],
               "conll2003": ["John Smith visited New York .", "Paris"]}


# Every family on a sequence task; a token task for those whose token heads transform each position first.
@pytest.mark.parametrize("model_type, task", [*[(t, "sst2") for t in families()],
                                              *[(t, "conll2003") for t, spec in families().items()
                                                if spec.token_transform]])
def test_onnx_export_of_each_family_equals_pytorch(folders, tmp_path, model_type, task):
    """Every native family exports to ONNX with its own embeddings, attention and head (ModernBERT's local
    windows included; the graph is the padded path): fp32 logits as PyTorch's, the same records from both backends."""
    pytest.importorskip("onnxruntime")
    run_dir = tmp_path / "run"
    run_train([*QUICK, f"model.pretrained={folders(model_type)}", f"task={task}", "data.max_seq_length=64"], run_dir)
    assert_onnx_like_torch(run_dir, tmp_path / "onnx", ONNX_INPUTS[task])


def test_generic_path_for_a_model_type_that_is_not_native(folders, tmp_path, caplog):
    """mpnet: no bertlab module; transformers' AutoModel under bertlab's head, named so in the header; export
    writes the encoder as transformers saves it plus bertlab's head file, and reloads with equal outputs."""
    folder = folders("mpnet")
    run_dir = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        metrics = run_train([*QUICK, f"model.pretrained={folder}", "task=sst2", "export=true"], run_dir)
    assert "generic transformers AutoModel path" in caplog.text
    loaded = load_checkpoint_model(metrics["best_checkpoint"]).model
    assert getattr(loaded.bert, "generic", False)
    export = run_dir / "export"
    assert (export / "bertlab_head.safetensors").is_file()
    base = transformers.AutoModel.from_pretrained(export).eval()
    ids = torch.tensor([[0, 5, 6, 7, 2]])
    with torch.no_grad():
        a = base(input_ids=ids).last_hidden_state
        b = loaded.bert(ids).last_hidden_state
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_auto_without_a_checkpoint_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="model.pretrained=<hub id"):
        run_train([*QUICK, "task=sst2"], tmp_path / "run")


def test_generic_export_predicts_like_the_run(folders, tmp_path):
    from bertlab.inference.predictor import Predictor

    folder = folders("mpnet")
    run_dir = tmp_path / "run"
    metrics = run_train([*QUICK, f"model.pretrained={folder}", "task=sst2", "export=true"], run_dir)
    texts = _texts()[:4]
    from_run = Predictor.from_run(metrics["best_checkpoint"])(texts)
    from_export = Predictor.from_run(run_dir / "export")(texts)
    for a, b in zip(from_run, from_export):
        assert a["label"] == b["label"] and abs(a["score"] - b["score"]) < 1e-5


def test_modernbert_mlm_lora_init_from_predict_and_export(folders, tmp_path, caplog):
    """ModernBERT through every other part of a run: task=mlm masks 30 % (its family's rate, the task leaving
    task.mlm_probability null) and exports a ModernBertForMaskedLM that predicts bertlab's logits; a fine-tuning run
    starts from that run (init_from) with LoRA on [query, value] (→ Wqkv), predicts, and exports merged weights."""
    from bertlab.inference.predictor import Predictor

    folder = folders("modernbert")
    mlm_dir = tmp_path / "mlm"
    with caplog.at_level(logging.INFO):
        metrics = run_train([*QUICK, f"model.pretrained={folder}", "task=mlm", "export=true",
                             "data.max_seq_length=32"], mlm_dir)
    assert "task.mlm_probability=null → 0.3 (ModernBERT's masking rate)" in caplog.text
    ckpt = torch.load(metrics["best_checkpoint"], map_location="cpu", weights_only=True)
    assert ckpt["hyper_parameters"]["task"]["mlm_probability"] == 0.3
    hf = transformers.AutoModelForMaskedLM.from_pretrained(mlm_dir / "export").eval()
    assert type(hf).__name__ == "ModernBertForMaskedLM"
    ours = load_checkpoint_model(metrics["best_checkpoint"]).model
    ids = torch.tensor([[2, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 3]])
    with torch.no_grad():
        want = hf(input_ids=ids).logits[0]
        got = ours.head((ours.bert(ids).last_hidden_state, None))[0][0]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)

    run_dir = tmp_path / "lora"
    caplog.clear()
    with caplog.at_level(logging.INFO):
        metrics = run_train([*QUICK, f"model.init_from={mlm_dir}", "task=sst2", "freeze=lora", "export=true"], run_dir)
    assert "LoRA r=8 alpha=16 on 12 modules (Wi, Wo, Wqkv)" in caplog.text  # the policy's [query, key, value, dense]
    assert "model=auto (ModernBERT)" in caplog.text
    scope = json.loads((run_dir / "update_scope.json").read_text())
    assert not scope["frozen_changed"] and scope["groups"]["layer.0"]["changed"] == 0  # base frozen, per layer
    assert scope["totals"]["adapters"]["changed"] == scope["totals"]["adapters"]["tensors"] > 0
    texts = _texts()[:4]
    from_run = Predictor.from_run(metrics["best_checkpoint"])(texts)
    from_export = Predictor.from_run(run_dir / "export")(texts)
    for a, b in zip(from_run, from_export):
        assert a["label"] == b["label"] and abs(a["score"] - b["score"]) < 1e-5
