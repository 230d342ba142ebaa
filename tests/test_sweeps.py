"""Sweeps from the command line: a Hydra multirun grid + compare, and an Optuna study that survives a diverged
trial and resumes from its journal storage. Also the sweeper's trial bookkeeping, the search space syntax and
the experiment configs."""

from __future__ import annotations

import csv
import json
import math
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_DATA, ROOT, main_in_process

from bertlab.runtime.config import ConfigError
from bertlab.sweeps.space import parse_search_space
from hydra_plugins.bertlab_optuna.optuna_sweeper import build_pruner, normalize_direction, trial_values


def train_cli(*overrides: str, tmp: Path, multirun: bool = True) -> subprocess.CompletedProcess:
    """``python train.py [-m] <overrides>`` on the fixtures, everything written under ``tmp``, run in this process
    (conftest.main_in_process; tests/test_sweeps_scale.py runs sweeps as real processes, killed and resumed)."""
    env = {"TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "offline", "BERTLAB_DATA_DIR": str(FIXTURE_DATA),
           "HYDRA_FULL_ERROR": "1"}
    args = [*(["-m"] if multirun else []), "model=bert_tiny", "task=sst2", "trainer.max_epochs=1",
            "trainer.accelerator=cpu", "trainer.enable_progress_bar=false", "logger=csv",
            f"paths.log_dir={tmp / 'logs'}", f"paths.cache_dir={tmp / 'cache'}", *overrides]
    return main_in_process(args, env=env)


def check(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


# ---------------------------------------------------------------- grid multirun → compare


def test_multirun_grid_then_compare(tmp_path):
    sweep = tmp_path / "sweep"
    check(train_cli("freeze=none,encoder", "seed=1,2", f"hydra.sweep.dir={sweep}", tmp=tmp_path))

    runs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert [p.name for p in runs] == ["0", "1", "2", "3"]
    metrics = [json.loads((p / "metrics.json").read_text()) for p in runs]
    assert sorted((m["freeze"], m["seed"]) for m in metrics) == [
        ("encoder", 1), ("encoder", 2), ("none", 1), ("none", 2)]
    for m in metrics:
        assert m["task"] == "sst2" and m["model"] == "bert_tiny" and m["tags"] == []
        assert math.isfinite(m["monitor"]["value"])

    proc = main_in_process([str(sweep)], module="bertlab.compare", env={"COLUMNS": "200"})
    check(proc)
    with open(sweep / "comparison.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["freeze"] for r in rows) == ["encoder", "none"]
    assert all(r["n"] == "2" for r in rows)
    assert all(r["val/accuracy_mean"] and r["val/accuracy_std"] for r in rows)
    assert (sweep / "comparison.md").is_file() and (sweep / "comparison.png").is_file()


# ---------------------------------------------------------------- Optuna: failed trial, resume

# TPE's first trials are random draws from its seeded sampler: with seed 9 and these three choices the
# trials are lr=3e-3, lr=1e6 (diverges: NaN loss -> NonFiniteLossError), lr=1e-3.
OPTUNA_ARGS = ("hparams_search=optuna", "hydra.sweeper.params=null", "optim.lr=choice(1e-3,3e-3,1e6)",
               "hydra.sweeper.sampler.seed=9", "data.batch_size=8")


def _study(sweep: Path, name: str = "sst2_bert_tiny_none"):
    import optuna
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(sweep / "optuna.journal")))
    return optuna.load_study(study_name=name, storage=storage)


def test_optuna_sweep_survives_a_diverged_trial_and_resumes(tmp_path):
    sweep = tmp_path / "optuna"
    check(train_cli(*OPTUNA_ARGS, "hydra.sweeper.n_trials=3", f"hydra.sweep.dir={sweep}", tmp=tmp_path,
                    multirun=False))  # hparams_search=optuna sets hydra.mode=MULTIRUN itself

    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert results["n_trials"] == {"complete": 2, "fail": 1, "pruned": 0, "running": 0}
    failed = [t for t in results["trials"] if t["state"] == "FAIL"]
    assert len(failed) == 1 and failed[0]["params"] == {"optim.lr": 1e6}
    assert "NonFiniteLossError" in failed[0]["fail_reason"]
    # The failed trial's folder says so, in a metrics.json of its own.
    failed_metrics = json.loads((sweep / str(failed[0]["number"]) / "metrics.json").read_text())
    assert failed_metrics["state"] == "failed" and failed_metrics["error"].startswith("NonFiniteLossError")
    assert failed_metrics["trial"] == failed[0]["number"] and "optim.lr=1000000.0" in failed_metrics["overrides"]
    assert failed_metrics["task"] == "sst2" and "val" not in failed_metrics
    for t in results["trials"]:
        if t["state"] == "COMPLETE":
            m = json.loads((sweep / str(t["number"]) / "metrics.json").read_text())
            assert m["state"] == "complete" and m["trial"] == t["number"]
    # The study maximises the task's monitor metric, read from each trial's own run folder.
    values = {t["number"]: json.loads((sweep / str(t["number"]) / "metrics.json").read_text())["monitor"]["value"]
              for t in results["trials"] if t["state"] == "COMPLETE"}
    assert results["directions"] == ["maximize"]
    assert results["best_value"] == pytest.approx(max(values.values()))
    assert results["best_params"]["optim.lr"] in (1e-3, 3e-3)
    first = [(t.number, t.state.name, t.params) for t in _study(sweep).trials]
    assert len(first) == 3

    # Resume: the same storage, a larger n_trials; only the missing trial runs, in a new folder.
    check(train_cli(*OPTUNA_ARGS, "hydra.sweeper.n_trials=4", f"hydra.sweep.dir={sweep}", tmp=tmp_path,
                    multirun=False))
    trials = _study(sweep).trials
    assert [(t.number, t.state.name, t.params) for t in trials[:3]] == first
    assert len(trials) == 4 and trials[3].state.name in ("COMPLETE", "FAIL")
    assert (sweep / "3" / ".hydra" / "overrides.yaml").is_file()
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert [t["number"] for t in results["trials"]] == [0, 1, 2, 3]


# ---------------------------------------------------------------- the sweeper's bookkeeping (no training)


def _job(status: str, value) -> object:
    from hydra.core.utils import JobReturn, JobStatus

    ret = JobReturn(overrides=["optim.lr=1"])
    ret.status = JobStatus[status]
    ret.return_value = value
    return ret


@pytest.mark.parametrize("value", [float("nan"), float("inf"), None, "text"])
def test_a_non_finite_or_missing_value_fails_the_trial(value):
    values, reason = trial_values(_job("COMPLETED", value), 1)
    assert values is None and "returned" in reason


def test_a_raised_job_fails_the_trial_without_reraising():
    ret = _job("FAILED", None)
    ret.return_value = RuntimeError("diverged")  # Hydra stores a failed job's exception as its value
    values, reason = trial_values(ret, 1)
    assert values is None and "RuntimeError: diverged" in reason


def test_finite_values_are_told():
    assert trial_values(_job("COMPLETED", 0.75), 1) == ([0.75], None)
    assert trial_values(_job("COMPLETED", (0.5, 2)), 2) == ([0.5, 2.0], None)
    assert trial_values(_job("COMPLETED", 0.5), 2)[0] is None


def test_direction_takes_a_task_mode():
    assert normalize_direction("max") == "maximize" and normalize_direction("minimize") == "minimize"
    with pytest.raises(ValueError, match="direction"):
        normalize_direction("up")


# ---------------------------------------------------------------- search space syntax (no training)


def test_search_space_from_hydra_sweep_syntax():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    space = parse_search_space([
        "optim.lr=tag(log, interval(1e-5, 3e-4))", "optim.weight_decay=interval(0.0, 0.1)",
        "data.batch_size=choice(16, 32)", "head.pooling=cls,mean", "model.num_layers=range(2, 6, 2)",
        "optim.warmup_ratio=range(0.0, 0.2, 0.1)", "seed=int(interval(1, 9))", "model=bert_tiny",
    ])
    d = space.distributions
    assert d["optim.lr"] == FloatDistribution(1e-5, 3e-4, log=True)
    assert d["optim.weight_decay"] == FloatDistribution(0.0, 0.1)
    assert d["data.batch_size"] == CategoricalDistribution([16, 32])
    assert d["head.pooling"] == CategoricalDistribution(["cls", "mean"])
    assert d["model.num_layers"] == IntDistribution(2, 6, step=2)  # stop included, as hydra-optuna-sweeper
    assert d["optim.warmup_ratio"] == FloatDistribution(0.0, 0.2, step=0.1)
    assert d["seed"] == IntDistribution(1, 9)
    assert space.fixed == {"model": "bert_tiny"}
    assert space.overrides({"optim.lr": 1e-4, "data.batch_size": 16}) == [
        "optim.lr=0.0001", "data.batch_size=16", "model=bert_tiny"]
    # The command line replaces a key of the config's params.
    assert parse_search_space(["optim.lr=choice(1,2)", "optim.lr=interval(0.1, 0.2)"]).distributions == {
        "optim.lr": FloatDistribution(0.1, 0.2)}


def test_grid_needs_enumerable_values():
    space = parse_search_space(["a=choice(1, 2)", "b=range(0, 4, 2)"])
    assert space.grid() == {"a": [1, 2], "b": [0, 2, 4]} and space.size() == 6
    with pytest.raises(ConfigError, match="GridSampler"):
        parse_search_space(["a=interval(0.0, 1.0)"]).grid()


def test_pruner_by_name_or_node():
    import optuna

    assert isinstance(build_pruner(None), optuna.pruners.NopPruner)  # Optuna's own default would prune
    assert isinstance(build_pruner("median"), optuna.pruners.MedianPruner)
    assert isinstance(build_pruner("hyperband"), optuna.pruners.HyperbandPruner)
    node = build_pruner({"_target_": "optuna.pruners.MedianPruner", "n_startup_trials": 2})
    assert isinstance(node, optuna.pruners.MedianPruner)
    with pytest.raises(ConfigError, match="pruner=fast"):
        build_pruner("fast")


# ---------------------------------------------------------------- configs compose


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=True)


def test_optuna_config_follows_the_task(tmp_path):
    cfg = _compose(["hparams_search=optuna", "task=mlm", "model=bert_tiny", f"hydra.sweep.dir={tmp_path}"])
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_.endswith("BertlabOptunaSweeper")
    assert sweeper.direction == "min" and sweeper.sampler._target_ == "optuna.samplers.TPESampler"
    assert sweeper.storage == f"{tmp_path}/optuna.journal" and sweeper.pruner is None
    assert cfg.callbacks.optuna_trial.monitor == "val/loss"
    assert sweeper.study_name == "mlm_bert_tiny_none" and cfg.hydra.mode.name == "MULTIRUN"


def test_experiment_configs_compose():
    cfg = _compose(["experiment=freeze_comparison", "freeze=lora"])
    assert cfg.model.name == "minilm_l6" and cfg.task.name == "sst2"
    assert cfg.data.max_train_samples == 8000 and cfg.trainer.max_epochs == 1
    assert cfg.freeze.recommended["optim.lr"] == 1e-3  # the policy's own default, applied when the run starts
    assert set(cfg.hydra.sweeper.params) == {"freeze", "seed"}
    assert len(cfg.hydra.sweeper.params.freeze.split(",")) == 6 and cfg.hydra.sweeper.params.seed == "1,2"

    cfg = _compose(["experiment=pretrain_then_finetune"])
    assert cfg.model.name == "bert_mini" and cfg.task.name == "sst2"
    assert set(cfg.hydra.sweeper.params) == {"model.init_from", "seed"}
    for name in ("freeze_comparison", "pretrain_then_finetune"):
        header = (ROOT / "conf" / "experiment" / f"{name}.yaml").read_text()
        assert f"python train.py -m experiment={name}" in header


# ---------------------------------------------------------------- the trial callback (no training)


def _trainer(rank: int = 0, value: float | None = None, step: int = 4):
    from types import SimpleNamespace

    from lightning.pytorch.trainer.states import TrainerFn

    return SimpleNamespace(
        is_global_zero=rank == 0, global_rank=rank, global_step=step, sanity_checking=False, should_stop=False,
        state=SimpleNamespace(fn=TrainerFn.FITTING), callback_metrics={"val/loss": value},
        strategy=SimpleNamespace(broadcast=lambda obj, src=0: obj))


def _module(lr: float):
    from types import SimpleNamespace

    return SimpleNamespace(hparams={"config": {"optim": {"lr": lr}, "seed": 1}})


@pytest.fixture
def in_process_trial(monkeypatch):
    """An in-memory study whose trial 0 (lr=0.01) is this process's job, as the sweeper hands it over."""
    import optuna
    from optuna.distributions import FloatDistribution

    from bertlab.sweeps import trial as trial_mod

    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(study_name="s", storage=storage, direction="minimize",
                                pruner=optuna.pruners.ThresholdPruner(upper=1.0))
    study.enqueue_trial({"optim.lr": 0.01})
    study.ask(fixed_distributions={"optim.lr": FloatDistribution(1e-4, 1.0, log=True)})
    trial_mod.register_in_process(study, storage)
    monkeypatch.setenv(trial_mod.TRIAL_ENV, "0")
    monkeypatch.setenv(trial_mod.STUDY_ENV, "s")
    monkeypatch.setenv(trial_mod.STORAGE_ENV, "")
    trial_mod.reset_outcome()
    yield study
    trial_mod._IN_PROCESS.clear()


def test_trial_callback_refuses_a_rank_with_other_parameters(in_process_trial, caplog):
    from bertlab.sweeps.trial import OptunaTrialCallback

    caplog.set_level("INFO")
    OptunaTrialCallback("val/loss").setup(_trainer(), _module(0.01), "fit")
    assert "optuna trial 0, rank 0: hyper-parameters optim.lr=0.01" in caplog.text
    with pytest.raises(ConfigError, match=r"rank 0 trains with optim.lr=0.02 but the study asked for optim.lr=0.01"):
        OptunaTrialCallback("val/loss").setup(_trainer(), _module(0.02), "fit")


def test_trial_callback_reports_and_stops_a_pruned_trial(in_process_trial):
    from bertlab.sweeps import trial as trial_mod

    callback = trial_mod.OptunaTrialCallback("val/loss")
    callback.setup(_trainer(), _module(0.01), "fit")
    good = _trainer(value=0.5, step=2)
    callback.on_validation_end(good, None)
    assert not good.should_stop and trial_mod.OUTCOME.pruned is None
    bad = _trainer(value=3.0, step=4)  # above the ThresholdPruner's upper bound: pruned
    callback.on_validation_end(bad, None)
    assert bad.should_stop and trial_mod.OUTCOME.pruned == {"step": 4, "value": 3.0}
    (frozen,) = in_process_trial.trials
    assert frozen.intermediate_values == {2: 0.5, 4: 3.0}
    assert frozen.user_attrs[trial_mod.PRUNED_ATTR] == {"step": 4, "value": 3.0}


def test_trial_callback_does_nothing_outside_a_sweep(monkeypatch):
    from bertlab.sweeps import trial as trial_mod

    monkeypatch.delenv(trial_mod.TRIAL_ENV, raising=False)
    callback = trial_mod.OptunaTrialCallback("val/loss")
    callback.setup(_trainer(), _module(0.01), "fit")
    trainer = _trainer(value=100.0)
    callback.on_validation_end(trainer, None)
    assert callback.trial is None and not trainer.should_stop


# ---------------------------------------------------------------- workers and storage (no training)


def test_a_worker_is_alive_while_it_holds_its_lock(tmp_path):
    from bertlab.sweeps.study import Worker

    with Worker(tmp_path) as first, Worker(tmp_path) as second:
        assert second.others() == [first.id] and first.others() == [second.id]
        assert second.alive(first.id) and second.alive(second.id)
    # A lock file nobody holds is what a killed worker leaves: that worker is gone.
    (tmp_path / ".workers" / "host-1-abcdef.lock").write_text("")
    with Worker(tmp_path) as third:
        assert not third.alive("host-1-abcdef") and not third.alive(None) and third.others() == []
        assert not (tmp_path / ".workers" / "host-1-abcdef.lock").exists()


def test_sqlite_is_refused_for_parallel_trials():
    from bertlab.sweeps.study import check_storage_for_workers, describe

    check_storage_for_workers("sqlite:///x.db", 1, [])
    check_storage_for_workers("/tmp/optuna.journal", 4, ["other"])
    with pytest.raises(ConfigError, match="n_jobs=2 on this study. Use a journal file"):
        check_storage_for_workers("sqlite:///x.db", 2, [])
    with pytest.raises(ConfigError, match="1 other worker"):
        check_storage_for_workers("sqlite:///x.db", 1, ["w"])
    assert describe("postgresql://user:secret@db:5432/optuna") == "postgresql://***@db:5432/optuna"


@pytest.mark.parametrize("env", [{"WORLD_SIZE": "2", "RANK": "1"}, {"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}])
def test_a_sweep_started_once_per_rank_is_refused(monkeypatch, env):
    from hydra_plugins.bertlab_optuna.optuna_sweeper import refuse_rank_launched_sweep

    for key in ("WORLD_SIZE", "RANK", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(key, raising=False)
    refuse_rank_launched_sweep()  # one process: fine
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match="every rank would ask the study for a different trial"):
        refuse_rank_launched_sweep()


def test_a_trial_left_with_some_parameters_gets_the_rest():
    import optuna

    from bertlab.sweeps.space import suggest_missing

    space = parse_search_space(["a=interval(0.1, 0.2)", "b=choice(x, y)", "c=range(1, 5)"])
    study = optuna.create_study()
    trial = study.ask()
    trial.suggest_categorical("b", ["x", "y"])  # a worker killed while asking: only b was drawn
    b = trial.params["b"]
    assert suggest_missing(trial, space.distributions) == ["a", "c"]
    assert set(trial.params) == {"a", "b", "c"} and trial.params["b"] == b
    assert 0.1 <= trial.params["a"] <= 0.2 and trial.params["c"] in range(1, 6)
    assert suggest_missing(trial, space.distributions) == []
