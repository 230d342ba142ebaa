"""The planned steps and the time estimate (bertlab.runtime.progress), driven by a fake clock and a stand-in
trainer: the plan is right with gradient accumulation, max_steps, limit_train_batches, validation intervals
and resume; the estimate comes from measured steps (warm-up and validations left out); the progress bar shows
``elapsed<remaining`` and counts epochs from 1."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import pytest

from bertlab.runtime.console import ElapsedRemainingColumn, ProgressBar
from bertlab.runtime.progress import RunEstimate, clock_text, format_duration, plan_run


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_trainer(batches=100, accumulation=1, max_epochs=3, max_steps=-1, global_step=0, val_batches=10,
                 val_check_batch=None, every_n_epoch=1):
    return SimpleNamespace(num_training_batches=batches, accumulate_grad_batches=accumulation,
                           max_epochs=max_epochs, max_steps=max_steps, global_step=global_step,
                           num_val_batches=[val_batches], val_check_batch=val_check_batch or batches,
                           check_val_every_n_epoch=every_n_epoch, limit_val_batches=1.0, enable_validation=True,
                           fast_dev_run=False, sanity_checking=False, current_epoch=0)


@pytest.mark.parametrize("kwargs, total, epochs, validations, text", [
    ({"batches_per_epoch": 13, "accumulation": 1, "max_epochs": 2, "max_steps": -1},
     26, 2, 2, "planned: 26 optimizer steps (2 epochs × 13 batches)"),
    # Accumulation: the last, shorter accumulation of an epoch steps too (ceil).
    ({"batches_per_epoch": 10, "accumulation": 4, "max_epochs": 3, "max_steps": -1},
     9, 3, 3, "planned: 9 optimizer steps (3 epochs × 10 batches ÷ 4 accumulated = 3 steps)"),
    # max_steps stops mid-epoch: the final weights are validated too.
    ({"batches_per_epoch": 13, "accumulation": 1, "max_epochs": 3, "max_steps": 30},
     30, 3, 3, "planned: 30 optimizer steps (trainer.max_steps; 2.31 epochs of 13 batches)"),
    ({"batches_per_epoch": 13, "accumulation": 1, "max_epochs": -1, "max_steps": 5},
     5, 1, 1, "planned: 5 optimizer steps (trainer.max_steps; 0.385 epochs of 13 batches)"),
    # max_steps above what the epochs give: the epochs decide.
    ({"batches_per_epoch": 13, "accumulation": 1, "max_epochs": 1, "max_steps": 1000},
     13, 1, 1, "planned: 13 optimizer steps (1 epoch × 13 batches)"),
    # Resume: the steps left.
    ({"batches_per_epoch": 13, "accumulation": 1, "max_epochs": 2, "max_steps": -1, "start_step": 10},
     26, 2, 2, "planned: 26 optimizer steps (2 epochs × 13 batches); resuming at step 10: 16 to go"),
    # val_check_interval: several validations per epoch.
    ({"batches_per_epoch": 100, "accumulation": 1, "max_epochs": 2, "max_steps": -1,
      "validations_per_epoch": 4.0}, 200, 2, 8, "planned: 200 optimizer steps (2 epochs × 100 batches)"),
])
def test_plan_counts_what_lightning_will_do(kwargs, total, epochs, validations, text):
    plan = plan_run(**kwargs)
    assert (plan.total_steps, plan.epochs, plan.validations) == (total, epochs, validations)
    assert plan.describe() == text


def test_no_plan_without_an_end():
    assert plan_run(float("inf"), 1, 3, -1) is None  # a stream of unknown length
    assert plan_run(13, 1, -1, -1) is None  # max_epochs=-1 and no max_steps


def test_durations_read_at_a_glance():
    assert [format_duration(s) for s in (0.2, 42, 200, 1800, 6300, 7200)] == [
        "<1 s", "42 s", "3 min 20 s", "30 min", "1 h 45 min", "2 h"]
    assert [clock_text(s) for s in (None, math.inf, 65, 3599, 6300)] == ["?", "?", "1:05", "59:59", "1:45:00"]


def run_steps(estimate, trainer, clock, steps, seconds_per_step):
    for _ in range(steps):
        clock.now += seconds_per_step
        trainer.global_step += 1
        estimate.on_train_batch_end(trainer, None, None, None, 0)


def test_estimate_from_measured_steps_leaves_out_warm_up_and_validation(caplog):
    clock = FakeClock()
    trainer = fake_trainer(batches=100, max_epochs=3)  # 300 steps, 3 validations of 10 batches
    estimate = RunEstimate(clock=clock, warmup=2, measure=10, update_after_s=60)
    # The sanity check: 2 batches in 1 s → 10 batches ≈ 5 s per validation until a real one is timed.
    trainer.sanity_checking = True
    estimate.on_sanity_check_start(trainer, None)
    for _ in range(2):
        clock.now += 0.5
        estimate.on_validation_batch_end(trainer, None, None, None, 0)
    estimate.on_sanity_check_end(trainer, None)
    trainer.sanity_checking = False
    with caplog.at_level(logging.INFO, logger="bertlab.runtime.progress"):
        estimate.on_train_start(trainer, None)
        assert estimate.remaining_s() is None  # nothing measured yet: the bar shows "?"
        # Two slow warm-up steps (10 s each), then steps of 2 s.
        for seconds in (10.0, 10.0):
            clock.now += seconds
            trainer.global_step += 1
            estimate.on_train_batch_end(trainer, None, None, None, 0)
        run_steps(estimate, trainer, clock, 10, 2.0)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == ("planned: 300 optimizer steps (3 epochs × 100 batches) · 3 validations of 10 batches "
                        "· time estimate after step 12")
    # 288 steps × 2 s + 3 validations × 5 s (the sanity check) × 288/300 of the run left = 590.4 s.
    assert lines[1] == ("estimated: ~9 min 50 s to go at step 12 of 300 (2 s/step over 10 steps; validation "
                        "~5 s each, from the sanity check; elapsed 40 s)")
    assert estimate.remaining_s() == pytest.approx(288 * 2 + 3 * 5 * 288 / 300)
    # A validation of 30 s inside the measured span is not counted as step time; its duration replaces
    # the sanity check's, and the estimate is updated once.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bertlab.runtime.progress"):
        run_steps(estimate, trainer, clock, 60, 2.0)
        estimate.on_validation_start(trainer, None)
        clock.now += 30.0
        assert estimate.seconds_per_step() == pytest.approx(2.0)  # a validation in progress is left out too
        estimate.on_validation_end(trainer, None)
        run_steps(estimate, trainer, clock, 100, 2.0)
    assert estimate.seconds_per_step() == pytest.approx(2.0)
    assert [r.getMessage() for r in caplog.records] == [
        "updated after a validation: ~8 min 44 s to go at step 72 of 300 (2 s/step over 70 steps; validation "
        "~30 s each, measured; elapsed 3 min 10 s)"]  # printed once only
    assert estimate.remaining_s() == pytest.approx(128 * 2 + 30 * 3 * 128 / 300)
    assert estimate.elapsed_s() == pytest.approx(20 + 170 * 2 + 30)


def test_accumulation_and_resume_count_optimizer_steps_left(caplog):
    clock = FakeClock()
    # Resumed at step 40 of 75 (3 epochs × ceil(100 / 4) steps), one batch = 0.5 s: a step = 2 s.
    trainer = fake_trainer(batches=100, accumulation=4, max_epochs=3, global_step=40, val_batches=0)
    estimate = RunEstimate(clock=clock, warmup=0, measure=5)
    with caplog.at_level(logging.INFO, logger="bertlab.runtime.progress"):
        estimate.on_train_start(trainer, None)
        for _ in range(5):
            for batch in range(4):
                clock.now += 0.5
                if batch == 3:
                    trainer.global_step += 1
                estimate.on_train_batch_end(trainer, None, None, None, batch)
    assert caplog.records[0].getMessage().startswith(
        "planned: 75 optimizer steps (3 epochs × 100 batches ÷ 4 accumulated = 25 steps); resuming at step 40: "
        "35 to go")
    assert caplog.records[1].getMessage().startswith("estimated: ~1 min to go at step 45 of 75 (2 s/step")
    assert estimate.remaining_s() == pytest.approx(30 * 2.0)


def test_short_runs_and_fast_dev_run():
    clock = FakeClock()
    trainer = fake_trainer(batches=13, max_epochs=1)
    estimate = RunEstimate(clock=clock)
    estimate.on_train_start(trainer, None)
    run_steps(estimate, trainer, clock, 13, 0.1)
    assert estimate.remaining_s() == pytest.approx(0.0)
    dev = fake_trainer()
    dev.fast_dev_run = 1
    estimate = RunEstimate(clock=clock)
    estimate.on_train_start(dev, None)
    assert estimate.plan is None and estimate.elapsed_s() is None


def test_progress_bar_counts_epochs_from_one_and_shows_elapsed_and_remaining():
    clock = FakeClock()
    trainer = fake_trainer(batches=100, max_epochs=3, max_steps=150)
    estimate = RunEstimate(clock=clock, warmup=0, measure=2)
    estimate.on_train_start(trainer, None)
    bar = ProgressBar("val/accuracy", estimate)
    bar._trainer = trainer
    trainer.max_epochs = 3
    assert bar._get_train_description(0).startswith("Epoch 1/2")  # max_steps ends the run in epoch 2
    bare = ProgressBar("val/accuracy")
    bare._trainer = fake_trainer(max_epochs=1)
    assert bare._get_train_description(0).strip() == "Epoch 1/1"
    bar.train_progress_bar_id = 7
    column = ElapsedRemainingColumn(bar)
    task = SimpleNamespace(id=7, finished=False, elapsed=3.0, finished_time=None)
    assert column.render(task).plain == "0:00<?"
    run_steps(estimate, trainer, clock, 10, 3.0)
    assert column.render(task).plain == "0:30<7:00"  # 140 steps × 3 s
    other = SimpleNamespace(id=8, finished=True, elapsed=9.0, finished_time=65.0)
    assert column.render(other).plain == "1:05"
