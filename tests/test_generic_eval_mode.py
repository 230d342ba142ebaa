"""The generic path's wrapped AutoModel follows train() / eval(): XLM and FlauBERT apply dropout in their own
top-level forward (``training=self.training`` of the model itself, which the wrapper does not register as a
child), so before the fix their predictions changed from call to call. Handled in one place:
``AutoEncoder.train`` (bertlab.models.families.generic)."""

from __future__ import annotations

import pytest
import torch
from conftest import run_train, tiny_hf_folder

transformers = pytest.importorskip("transformers")

ENCODERS = ["xlm", "flaubert", "mpnet", "convbert", "albert"]


def _modes(encoder) -> set[bool]:
    return {m.training for m in encoder._model[0].modules()} | {m.training for m in encoder.modules()}


@pytest.mark.parametrize("model_type", ENCODERS)
def test_eval_reaches_the_wrapped_model_and_turns_dropout_off(model_type, tmp_path):
    from bertlab.models.families.generic import AutoEncoder, GenericEncoderConfig, generic_config_from_record

    folder = tiny_hf_folder(tmp_path / model_type, model_type, dropout=0.5, hidden_dropout_prob=0.5)
    encoder = AutoEncoder.from_pretrained(folder)
    ids = torch.randint(5, 300, (2, 12))
    assert _modes(encoder) == {True}  # one mode from the start, as any new module (transformers loads in eval)
    encoder.eval()
    encoder.train()
    assert _modes(encoder) == {True}
    if model_type in ("xlm", "flaubert", "mpnet", "albert"):  # dropout acts in training: the check can see it
        assert not torch.equal(encoder(ids).last_hidden_state, encoder(ids).last_hidden_state)
    encoder.eval()
    assert _modes(encoder) == {False}
    with torch.no_grad():
        outs = [encoder(ids).last_hidden_state for _ in range(3)]
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    # The same for an encoder rebuilt from a run's record (predict and export build it so).
    record = generic_config_from_record({**vars(encoder.config), "encoder": "hf_auto"})
    rebuilt = AutoEncoder.from_config(GenericEncoderConfig(**vars(record))).eval()
    assert _modes(rebuilt) == {False}


def test_a_trained_xlm_predicts_the_same_every_time(tmp_path):
    """The issue's symptom end to end: three predictions of the same inputs agree, from the run and from its
    export."""
    from bertlab.inference.predictor import Predictor

    folder = tiny_hf_folder(tmp_path / "xlm", "xlm", dropout=0.5)
    run_dir = tmp_path / "run"
    run_train(["model=auto", f"model.pretrained={folder}", "task=sst2", "trainer.max_epochs=1",
               "trainer.limit_train_batches=2", "trainer.limit_val_batches=2", "data.max_seq_length=64",
               "export=true"], run_dir)
    texts = ["a gorgeous, witty film .", "the plot is a mess", "awful film"]
    for source in (run_dir, run_dir / "export"):
        predictor = Predictor.from_run(source)
        runs = [[r["score"] for r in predictor(texts)] for _ in range(3)]
        assert runs[0] == runs[1] == runs[2], (source, runs)
