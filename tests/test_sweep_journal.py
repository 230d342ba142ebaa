"""The Optuna journal is read the way a crash leaves it (bertlab.sweeps.journal): a torn last record, wherever
the write was cut, is dropped and cut off so that later workers append whole records; the finished trials
before it are kept and the study resumes. Damage in the middle is one error naming the file and the line."""

from __future__ import annotations

import logging
import shutil

import optuna
import pytest
from conftest import main_in_process

from bertlab.runtime.errors import ConfigError
from bertlab.sweeps.study import open_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)


def objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", -1.0, 1.0)
    trial.report(x * x, 0)
    return x * x


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    """A journal of four finished trials written through bertlab's storage."""
    path = tmp_path_factory.mktemp("journal") / "optuna.journal"
    study = optuna.create_study(study_name="s", storage=open_storage(str(path)),
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=4)
    return path


def _finished(path) -> list[tuple[int, dict]]:
    study = optuna.load_study(study_name="s", storage=open_storage(str(path)))
    return [(t.number, t.params) for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]


def _record_starts(data: bytes) -> list[int]:
    return [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")][:-1]


def test_a_torn_last_record_is_dropped_and_the_study_resumes(journal, tmp_path, caplog):
    data = journal.read_bytes()
    everything = _finished(journal)
    assert len(everything) == 4
    starts = _record_starts(data)
    # Cut inside the last record (the worker killed while writing its trial's end), inside a record in the
    # middle of trial 2, one byte after a record's start, and just before the final newline.
    cuts = {starts[-1] + 7, starts[len(starts) // 2] + 13, starts[3] + 1, len(data) - 1}
    for cut in sorted(cuts):
        path = tmp_path / f"cut{cut}" / "optuna.journal"
        path.parent.mkdir()
        path.write_bytes(data[:cut])
        whole = data[:data.rfind(b"\n", 0, cut) + 1]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="bertlab.sweeps.journal"):
            kept = _finished(path)
        assert path.read_bytes() == whole  # the torn record is cut off the file, nothing else
        assert "half-written record" in caplog.text and f"{cut - len(whole)} bytes" in caplog.text
        assert kept == everything[:len(kept)]  # what was finished before the cut stays finished
        # A later worker appends and runs more trials; the journal stays readable for the next one.
        study = optuna.load_study(study_name="s", storage=open_storage(str(path)),
                                  sampler=optuna.samplers.RandomSampler(seed=1))
        study.optimize(objective, n_trials=2)
        after = _finished(path)
        assert after[:len(kept)] == kept and len(after) == len(kept) + 2
        assert path.read_bytes().endswith(b"\n")


def test_a_worker_killed_while_another_runs_does_not_glue_records(journal, tmp_path):
    """A torn record written after this worker opened the journal is cut before this worker's next append
    (Optuna's own backend glued its record onto the torn one: every later reader failed)."""
    path = tmp_path / "optuna.journal"
    shutil.copyfile(journal, path)
    study = optuna.load_study(study_name="s", storage=open_storage(str(path)),
                              sampler=optuna.samplers.RandomSampler(seed=2))
    with path.open("ab") as f:  # another worker, killed in the middle of its write
        f.write(b'{"op_code":4,"worker_id":"dead","study_id":0,"datetime_st')
    study.optimize(objective, n_trials=1)
    assert len(_finished(path)) == 5


def test_damage_in_the_middle_names_the_file_and_line(journal, tmp_path):
    lines = journal.read_bytes().splitlines(keepends=True)
    for bad in (b'{"op_code": 5, "trial_id\n', b"\x00\x00garbage\n", lines[2][:20] + lines[3]):
        path = tmp_path / "optuna.journal"
        path.write_bytes(b"".join(lines[:2]) + bad + b"".join(lines[3:]))
        with pytest.raises(ConfigError, match=r"optuna.journal: line 3 is not a journal record .*damaged in the "
                                              r"middle.*Restore the file from a backup"):
            _finished(path)


def test_the_sweeper_names_a_damaged_journal_in_one_paragraph(journal, tmp_path):
    lines = journal.read_bytes().splitlines(keepends=True)
    (tmp_path / "optuna.journal").write_bytes(b"".join(lines[:2]) + b"{garbage\n" + b"".join(lines[2:]))
    # python train.py ... typed in tmp_path, run in this process (conftest.main_in_process)
    proc = main_in_process(["hparams_search=optuna", "model=bert_tiny", "task=sst2", f"hydra.sweep.dir={tmp_path}",
                            "hydra.sweeper.n_trials=1"], env={"WANDB_MODE": "offline", "HYDRA_FULL_ERROR": None},
                           cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "bertlab: error: " in proc.stderr and "optuna.journal: line 3 is not a journal record" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
