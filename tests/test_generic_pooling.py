"""What trains must predict and export: a generic-path encoder that transformers builds without a pooler
(ConvBERT, RoFormer, DeBERTa v1) with ``head.pooling=pooler`` trains, predicts from its run and its export, and
exports to ONNX, because every build of the model resolves the head through one function
(``bertlab.models.assemble.head_for_encoder``)."""

from __future__ import annotations

import pytest
from conftest import assert_onnx_like_torch, run_train, tiny_hf_folder

from bertlab.models.assemble import head_for_encoder
from bertlab.runtime.config import HeadConfig

transformers = pytest.importorskip("transformers")

QUICK = ("model=auto", "trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=2",
         "data.max_seq_length=64", "head.pooling=pooler")
TEXTS = ["a gorgeous, witty film .", "the plot is a mess", "x"]


@pytest.mark.parametrize("model_type", ["convbert", "roformer"])
def test_a_pooler_less_encoder_trains_predicts_and_exports(model_type, tmp_path):
    """train → predict (run and export=true folder) → ONNX export equal to PyTorch; the issue's ConvBERT and a
    fresh one (RoFormer)."""
    from bertlab.inference.export import load_checkpoint_model
    from bertlab.inference.predictor import Predictor

    folder = tiny_hf_folder(tmp_path / model_type, model_type)
    run_dir = tmp_path / "run"
    metrics = run_train([*QUICK, f"model.pretrained={folder}", "task=sst2", "export=true"], run_dir)
    loaded = load_checkpoint_model(metrics["best_checkpoint"]).model
    assert loaded.encoder.pooler is None and loaded.head.pooling == "cls"
    from_run = Predictor.from_run(run_dir)(TEXTS)
    from_export = Predictor.from_run(run_dir / "export")(TEXTS)
    for a, b in zip(from_run, from_export, strict=True):
        assert a["label"] == b["label"] and abs(a["score"] - b["score"]) < 1e-5
    pytest.importorskip("onnxruntime")
    assert_onnx_like_torch(run_dir, tmp_path / "onnx", TEXTS)


@pytest.mark.parametrize("model_type, has_pooler", [("convbert", False), ("deberta", False), ("roformer", False),
                                                    ("mpnet", True), ("albert", True)])
def test_the_head_follows_the_encoder_alone(model_type, has_pooler, tmp_path):
    """The decision reads the encoder: pooler → cls exactly where the built encoder has no pooler; other
    poolings are kept."""
    from bertlab.models.families.generic import AutoEncoder

    encoder = AutoEncoder.from_pretrained(tiny_hf_folder(tmp_path / model_type, model_type))
    assert (encoder.pooler is not None) == has_pooler
    assert head_for_encoder(encoder, HeadConfig(pooling="pooler")).pooling == ("pooler" if has_pooler else "cls")
    for pooling in ("cls", "mean"):
        assert head_for_encoder(encoder, HeadConfig(pooling=pooling)).pooling == pooling
