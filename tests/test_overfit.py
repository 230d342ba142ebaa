"""``debug=overfit``: the same batches every epoch (``trainer.overfit_batches``), and a verdict at the end
that says what the loss tells."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import run_train

from bertlab.data.batching import TrainBatchSampler
from bertlab.training.callbacks import OverfitCheck


def test_the_sampler_gives_the_same_batches_every_epoch_when_overfitting():
    lengths = np.arange(40) % 7 + 3
    for group in (True, False):
        sampler = TrainBatchSampler(lengths, 8, seed=1, group_by_length=group, rank=0, world_size=1)
        sampler.set_epoch(0)
        first = [list(b) for b in sampler]
        sampler.set_epoch(1)
        assert [list(b) for b in sampler] != first  # a normal run reshuffles
        sampler.same_every_epoch = True
        for epoch in (1, 2, 5):
            sampler.set_epoch(epoch)
            assert [list(b) for b in sampler] == first
            assert [b.mask_seed for b in sampler] == [b.mask_seed for b in sampler]


def feed(check: OverfitCheck, per_epoch: list[list[float]]) -> None:
    for epoch, losses in enumerate(per_epoch):
        trainer = SimpleNamespace(current_epoch=epoch)
        for i, loss in enumerate(losses):
            check.on_train_batch_end(trainer, None, {"loss": loss} if i % 2 else loss, None, i)


def test_the_verdict_says_what_the_loss_tells():
    check = OverfitCheck()
    feed(check, [[0.7, 0.66, 0.62], [0.3, 0.2, 0.1], [0.02, 0.01, 0.012]])
    passed, text = check.verdict(3)
    assert passed and text.startswith("overfit check passed: train/loss 0.66 (epoch 1) → 0.014 (epoch 3) on the "
                                      "same 3 batches every epoch, under 0.1 of where it started: the model")
    check = OverfitCheck()
    feed(check, [[0.7, 0.69], [0.69, 0.7], [0.68, 0.69]])
    passed, text = check.verdict(3)
    assert not passed and "overfit check FAILED: train/loss 0.695 (epoch 1) → 0.685 (epoch 3)" in text
    assert "the model, the loss or the labels are wrong, or optim.lr" in text
    one = OverfitCheck()
    feed(one, [[0.7]])
    assert one.verdict(3) is None  # a single epoch says nothing


def test_debug_overfit_fits_a_few_batches_and_says_so(tmp_path, caplog):
    # The fixture's 40 sentences, 3 fixed batches of 4; a scratch bert_tiny at the documented lr.
    with caplog.at_level(logging.INFO, logger="bertlab.training.callbacks"):
        run_train(["debug=overfit", "model=bert_tiny", "task=sst2", "optim.lr=1e-3", "data.batch_size=4",
                   "trainer.detect_anomaly=false"], tmp_path / "run")
    lines = [r.getMessage() for r in caplog.records if r.name == "bertlab.training.callbacks"]
    assert len(lines) == 1 and lines[0].startswith("overfit check passed"), lines


@pytest.mark.parametrize("lr", ["1e-9"])
def test_debug_overfit_says_when_the_loss_does_not_fall(tmp_path, caplog, lr):
    with caplog.at_level(logging.INFO, logger="bertlab.training.callbacks"):
        run_train(["debug=overfit", "model=bert_tiny", "task=sst2", f"optim.lr={lr}", "data.batch_size=4",
                   "trainer.max_epochs=3", "trainer.detect_anomaly=false"], tmp_path / "run")
    warnings = [r for r in caplog.records if r.name == "bertlab.training.callbacks"]
    assert warnings and warnings[0].levelno == logging.WARNING
    assert warnings[0].getMessage().startswith("overfit check FAILED")
