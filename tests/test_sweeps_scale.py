"""Sweeps that scale out and resume: a re-run multirun skips finished jobs; Optuna workers in parallel share
one study, prune, survive being killed and finish the study without running a trial twice; the joblib and
submitit launchers land in the usual layout; every DDP rank of a trial trains with the trial's parameters."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_DATA, ROOT, main_in_process

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "offline",
       "BERTLAB_DATA_DIR": str(FIXTURE_DATA), "HYDRA_FULL_ERROR": "1"}
for _key in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_PORT", "SLURM_PROCID", "BERTLAB_OPTUNA_TRIAL"):
    ENV.pop(_key, None)


def command(*overrides: str, tmp: Path, multirun: bool = True) -> list[str]:
    return [sys.executable, "train.py", *(["-m"] if multirun else []), "model=bert_tiny", "task=sst2",
            "trainer.accelerator=cpu", "trainer.enable_progress_bar=false", "logger=csv", "data.batch_size=8",
            f"paths.log_dir={tmp / 'logs'}", f"paths.cache_dir={tmp / 'cache'}", *overrides]


def train_cli(*overrides: str, tmp: Path, multirun: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(command(*overrides, tmp=tmp, multirun=multirun), cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def train_in_process(*overrides: str, tmp: Path) -> subprocess.CompletedProcess:
    """:func:`train_cli`'s multirun run in this process (conftest.main_in_process): for the checks that need no
    process of their own (the re-run's skips); workers that are killed and launchers stay real processes."""
    env = {k: ENV.get(k) for k in ("OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM", "WANDB_MODE", "BERTLAB_DATA_DIR",
                                   "HYDRA_FULL_ERROR", "LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_PORT",
                                   "SLURM_PROCID", "BERTLAB_OPTUNA_TRIAL")}
    proc = main_in_process(command(*overrides, tmp=tmp)[2:], env=env)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


# ---------------------------------------------------------------- plain multirun: re-run skips finished jobs


def test_rerun_multirun_skips_finished_jobs_and_reruns_crashed_ones(tmp_path):
    sweep = tmp_path / "sweep"
    args = ("seed=1,2", "trainer.max_epochs=1", f"hydra.sweep.dir={sweep}")
    train_in_process(*args, tmp=tmp_path)
    first = {job: (sweep / job / "metrics.json").read_text() for job in ("0", "1")}
    for job, seed in (("0", 1), ("1", 2)):
        m = json.loads(first[job])
        assert m["state"] == "complete" and f"seed={seed}" in m["overrides"] and "trial" not in m

    # Job 1 "crashed": its metrics.json says failed. Job 0 is finished and must not run again.
    crashed = json.loads(first["1"]) | {"state": "failed", "error": "killed"}
    (sweep / "1" / "metrics.json").write_text(json.dumps(crashed))
    train_in_process(*args, tmp=tmp_path)
    assert (sweep / "0" / "metrics.json").read_text() == first["0"]
    assert "skipping this job" in (sweep / "0" / "train.log").read_text()
    rerun = metrics(sweep / "1")
    assert rerun["state"] == "complete" and rerun["val"] == json.loads(first["1"])["val"]
    assert "skipping this job" not in (sweep / "1" / "train.log").read_text()

    # skip_finished=false runs every job again (the flag itself is not part of a job's identity).
    before = (sweep / "0" / "metrics.json").stat().st_mtime_ns
    train_in_process(*args, "skip_finished=false", tmp=tmp_path)
    assert (sweep / "0" / "metrics.json").stat().st_mtime_ns != before
    assert metrics(sweep / "0")["overrides"] == json.loads(first["0"])["overrides"]


# ---------------------------------------------------------------- Optuna: 2 workers, pruning, kill, resume


def _load_study(sweep: Path):
    import optuna
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(sweep / "optuna.journal")))
    return optuna.load_study(study_name="sst2_bert_tiny_none", storage=storage)


def _finished(sweep: Path) -> list:
    if not (sweep / "optuna.journal").is_file():
        return []
    try:
        return [t for t in _load_study(sweep).trials if t.state.is_finished()]
    except KeyError:  # the study is not created yet
        return []


N_TRIALS = 12
# val/loss (continuous) is the monitor so that the median pruner has values to rank; 4 validations per trial.
OPTUNA = ("hparams_search=optuna", "hydra.sweeper.params=null", "optim.lr=tag(log,interval(1e-5,0.3))",
          "task.monitor=val/loss", "task.mode=min", "trainer.max_epochs=2", "trainer.val_check_interval=2",
          f"hydra.sweeper.n_trials={N_TRIALS}",
          "hydra.sweeper.pruner={_target_:optuna.pruners.MedianPruner,n_startup_trials:2}")


def _workers(sweep: Path, tmp: Path, n: int = 2) -> list[subprocess.Popen]:
    cmd = command(*OPTUNA, f"hydra.sweep.dir={sweep}", tmp=tmp, multirun=False)
    return [subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True) for _ in range(n)]


@pytest.mark.slow
def test_two_workers_share_a_study_prune_and_resume_after_a_kill(tmp_path):
    sweep = tmp_path / "optuna"
    workers = _workers(sweep, tmp_path)
    deadline = time.time() + 400
    while len(_finished(sweep)) < 3 and time.time() < deadline and all(w.poll() is None for w in workers):
        time.sleep(0.5)
    for w in workers:  # killed mid-way: both workers and the jobs they run
        os.killpg(w.pid, signal.SIGKILL)
        w.wait()
    done_before = {t.number: (sweep / str(t.number) / "metrics.json").read_bytes() for t in _finished(sweep)}
    assert 3 <= len(done_before) < N_TRIALS

    running_at_kill = {t.number for t in _load_study(sweep).trials if t.state.name == "RUNNING"}
    assert running_at_kill
    workers = _workers(sweep, tmp_path)  # the same command again
    output = ""
    for w in workers:
        out, _ = w.communicate(timeout=600)
        assert w.returncode == 0, out[-5000:]
        output += out
    # The trials the kill interrupted ran again under their own numbers, in their own folders.
    rerun = {int(n) for n in re.findall(r"Trial (\d+) was left running by a worker that stopped", output)}
    assert rerun == running_at_kill

    trials = _load_study(sweep).trials
    assert [t.number for t in trials] == list(range(N_TRIALS))
    states = [t.state.name for t in trials]
    assert set(states) <= {"COMPLETE", "PRUNED"} and "PRUNED" in states and "COMPLETE" in states, states
    for number, text in done_before.items():  # finished before the kill: never run again
        assert (sweep / str(number) / "metrics.json").read_bytes() == text
    workers_seen = {t.user_attrs["worker"] for t in trials}
    assert len(workers_seen) >= 3  # two workers before the kill, two after (each may not have got a trial)
    for t in trials:
        m = metrics(sweep / str(t.number))
        assert m["trial"] == t.number and m["state"] == t.state.name.lower()
        assert f"optim.lr={t.params['optim.lr']!r}" in m["overrides"]
        if t.state.name == "PRUNED":
            # Pruned with its last reported value, which the study keeps as the trial's value. (A trial the kill
            # interrupted keeps the reports of its first attempt too, so its last_step may be a later one.)
            step = m["pruned"]["step"]
            assert t.intermediate_values[step] == pytest.approx(m["pruned"]["value"])
            assert t.value == pytest.approx(m["pruned"]["value"])
            assert m["train"]["steps"] < 10  # stopped before the end (2 epochs × 5 batches)
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert results["n_trials"]["complete"] + results["n_trials"]["pruned"] == N_TRIALS
    assert results["n_trials"]["running"] == 0


# ---------------------------------------------------------------- launchers


def _one_sweep(tmp: Path) -> Path:
    """The only sweep folder under <tmp>/logs/sst2/multiruns/ (the usual <time> name)."""
    sweeps = list((tmp / "logs" / "sst2" / "multiruns").iterdir())
    assert len(sweeps) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", sweeps[0].name), sweeps
    return sweeps[0]


def _jobs(sweep: Path) -> list[str]:
    return sorted((p.name for p in sweep.iterdir() if p.is_dir() and p.name.isdigit()), key=int)


@pytest.mark.slow
def test_joblib_and_submitit_local_launchers_write_what_the_basic_launcher_writes(tmp_path):
    # One cache: a scratch tokenizer trained again in another process may break ties differently.
    args = ("trainer.max_epochs=1", f"paths.cache_dir={tmp_path / 'cache'}")
    train_cli("seed=1,2", *args, tmp=tmp_path / "basic")
    train_cli("seed=1,2", *args, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", tmp=tmp_path / "joblib")
    train_cli("seed=1,2,3,4", *args, "hydra/launcher=submitit_local", tmp=tmp_path / "submitit")
    basic = _one_sweep(tmp_path / "basic")
    assert _jobs(basic) == ["0", "1"]
    for name, jobs in (("joblib", ["0", "1"]), ("submitit", ["0", "1", "2", "3"])):
        sweep = _one_sweep(tmp_path / name)
        assert _jobs(sweep) == jobs
        for job in jobs:
            m = metrics(sweep / job)
            assert m["state"] == "complete" and m["seed"] == int(job) + 1
            if job in ("0", "1"):  # the same job as the basic launcher's: the same metrics.json
                b = metrics(basic / job)
                assert m.keys() == b.keys() and m["val"] == b["val"] and m["train"]["steps"] == b["train"]["steps"]
                assert [o for o in m["overrides"] if not o.startswith("paths.log_dir=")] == [
                    o for o in b["overrides"] if not o.startswith("paths.log_dir=")]
    assert (sweep / ".submitit").is_dir()


@pytest.mark.slow
def test_optuna_trials_in_parallel_through_joblib_report_to_the_study(tmp_path):
    sweep = tmp_path / "optuna"
    train_cli("hparams_search=optuna", "hydra.sweeper.params=null", "optim.lr=choice(1e-3,3e-3)",
              "trainer.max_epochs=1", "trainer.val_check_interval=2", "hydra.sweeper.n_trials=2",
              "hydra.sweeper.n_jobs=2", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
              "hydra.sweeper.pruner=median", f"hydra.sweep.dir={sweep}", tmp=tmp_path, multirun=False)
    trials = _load_study(sweep).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]
    for t in trials:  # each job process (a joblib worker) reported its validations to the journal file
        assert len(t.intermediate_values) >= 2
        assert metrics(sweep / str(t.number))["trial"] == t.number


# ---------------------------------------------------------------- DDP inside a trial


@pytest.mark.slow
def test_every_ddp_rank_of_a_trial_trains_with_the_trials_parameters(tmp_path):
    sweep = tmp_path / "ddp"
    train_cli("hparams_search=optuna", "hydra.sweeper.params=null", "optim.lr=tag(log,interval(1e-4,1e-2))",
              "optim.weight_decay=choice(0.0,0.1)", "trainer=ddp_cpu", "trainer.max_epochs=1",
              "hydra.sweeper.n_trials=1", f"hydra.sweep.dir={sweep}", tmp=tmp_path, multirun=False)
    (trial,) = _load_study(sweep).trials
    assert trial.state.name == "COMPLETE"
    run_dir = sweep / "0"
    logged = {}
    for log in ("train.log", "train_ddp_process_1.log"):  # rank 0's log, rank 1's log
        for rank, params in re.findall(r"optuna trial 0, rank (\d): hyper-parameters (.*)",
                                       (run_dir / log).read_text()):
            logged[int(rank)] = params
    expected = f"optim.lr={trial.params['optim.lr']}, optim.weight_decay={trial.params['optim.weight_decay']}"
    assert logged == {0: expected, 1: expected}
    assert metrics(run_dir)["state"] == "complete"
