"""A config file cannot run code through ``_target_`` (issue: reliability, round two, item 2): the nodes
bertlab instantiates (callbacks, logger, trainer.strategy; the sweeper's sampler and pruner through the same
function) only name allowed classes, and user classes need an opt-in from the command line."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from conftest import compose
from test_bad_input import cli_in_process as cli

from bertlab.runtime.config import ConfigError
from bertlab.runtime.targets import ALLOW_ENV, check_run_config, check_targets, refusal


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _evil_experiment(tmp_path: Path, node: str = "callbacks") -> tuple[Path, Path]:
    """An experiment file (as a colleague might send one) whose callback is ``torch.load`` of a pickle."""
    marker = tmp_path / "code-ran"
    payload = tmp_path / "evil.pkl"
    payload.write_bytes(pickle.dumps(_Payload(marker)))
    conf = tmp_path / "extra_conf" / "experiment"
    conf.mkdir(parents=True)
    body = {"callbacks": f"callbacks:\n  evil:\n    _target_: torch.load\n    f: {payload}\n    weights_only: false\n",
            "logger": f"logger:\n  evil:\n    _target_: torch.load\n    f: {payload}\n    weights_only: false\n",
            "strategy": f"trainer:\n  strategy:\n    _target_: torch.load\n    f: {payload}\n    weights_only: false\n",
            "nested": "callbacks:\n  lr:\n    _target_: lightning.pytorch.callbacks.LearningRateMonitor\n"
                      f"    logging_interval:\n      _target_: torch.load\n      f: {payload}\n"}[node]
    (conf / "evil.yaml").write_text("# @package _global_\n" + body)
    return conf.parent, marker


@pytest.mark.parametrize("node", ["callbacks", "logger", "strategy", "nested"])
def test_experiment_file_naming_torch_load_is_refused(tmp_path, node):
    conf_dir, marker = _evil_experiment(tmp_path, node)
    out = cli(tmp_path, "model=bert_tiny", "task=sst2", "trainer.max_epochs=1", f"hydra.run.dir={tmp_path / 'run'}",
              f"hydra.searchpath=[file://{conf_dir}]", "experiment=evil")
    assert out.returncode == 1, out.stderr[-2000:]
    assert not marker.exists()
    assert "_target_=torch.load: refused (it is not on bertlab's allow-list)" in out.stderr
    assert "allow_targets=[torch.load]" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_shipped_configs_pass():
    for overrides in ([], ["callbacks=early_stopping"], ["logger=many"], ["logger=tensorboard"], ["trainer=fsdp"]):
        check_run_config(compose(["model=bert_tiny", *overrides], Path("/tmp/unused")))
    check_targets({"sampler": {"_target_": "optuna.samplers.TPESampler", "seed": 1},
                   "pruner": {"_target_": "optuna.pruners.MedianPruner"}}, "hydra.sweeper")


@pytest.mark.parametrize("target", ["os.system", "subprocess.run", "builtins.eval", "torch.load",
                                    "lightning.fabric.utilities.cloud_io._load",
                                    "lightning.pytorch.LightningModule.load_from_checkpoint",
                                    "bertlab.training.debug_hooks.os.system", "optuna.load_study"])
def test_functions_and_foreign_names_are_refused(target):
    assert refusal(target) is not None
    with pytest.raises(ConfigError, match="refused"):
        check_targets({"x": {"_target_": target}}, "callbacks")


def test_user_class_needs_a_command_line_opt_in(tmp_path, monkeypatch):
    node = ["+callbacks.mine._target_=collections.OrderedDict"]
    with pytest.raises(ConfigError, match=r"callbacks.mine._target_=collections.OrderedDict: refused"):
        check_run_config(compose(["model=bert_tiny", *node], tmp_path))
    check_run_config(compose(["model=bert_tiny", *node, "allow_targets=[collections.OrderedDict]"], tmp_path))
    check_run_config(compose(["model=bert_tiny", *node, "allow_targets=[collections.]"], tmp_path))
    monkeypatch.setenv(ALLOW_ENV, "collections.OrderedDict")
    check_run_config(compose(["model=bert_tiny", *node], tmp_path))


def test_a_config_file_cannot_grant_itself_the_opt_in(tmp_path):
    conf = tmp_path / "extra_conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "sneaky.yaml").write_text("# @package _global_\nallow_targets: [torch.load]\n")
    out = cli(tmp_path, "model=bert_tiny", "task=sst2", f"hydra.run.dir={tmp_path / 'run'}",
              f"hydra.searchpath=[file://{conf.parent}]", "experiment=sneaky")
    assert out.returncode == 1
    assert "is set in a config file" in out.stderr and "Traceback" not in out.stderr


def test_the_sweepers_sampler_and_pruner_nodes_are_checked_too():
    import optuna
    import pytest as _pytest

    from bertlab.runtime.config import ConfigError
    from hydra_plugins.bertlab_optuna.optuna_sweeper import build_pruner

    with _pytest.raises(ConfigError, match=r"hydra\.sweeper\.pruner\._target_=torch\.load: refused"):
        build_pruner({"_target_": "torch.load", "f": "evil.pkl", "weights_only": False})
    assert isinstance(build_pruner({"_target_": "optuna.pruners.MedianPruner"}), optuna.pruners.MedianPruner)


# ----------------------------------------------------------------------------------------------------------
# The allow-list goes by what a path leads to, not by how the path starts (issue #33, item 7): a module under
# an allowed package imports foreign modules (logging, subprocess, os, pathlib), and a dotted path through
# such an import names the foreign class.

BYPASSES = [
    "lightning.pytorch.callbacks.model_checkpoint.logging.FileHandler",  # truncated a user's file
    "lightning.pytorch.accelerators.cuda.subprocess.Popen",              # runs a program
    "lightning.pytorch.loggers.csv_logs.os.PathLike",
    "lightning.pytorch.callbacks.model_checkpoint.Path",
    "lightning.pytorch.callbacks.ModelCheckpoint.__init__.__globals__",  # private: refused already
    "bertlab.runtime.launch.subprocess.Popen",
    "bertlab.runtime.files.Path",
]


@pytest.mark.parametrize("target", BYPASSES)
def test_a_path_through_a_reexported_module_is_refused(target):
    why = refusal(target)
    assert why is not None, target
    with pytest.raises(ConfigError, match="refused"):
        check_targets({"x": {"_target_": target}}, "callbacks")


def test_the_refusal_names_the_class_the_path_leads_to():
    why = refusal("lightning.pytorch.callbacks.model_checkpoint.logging.FileHandler")
    assert "logging.FileHandler" in why and "defined in" in why


@pytest.mark.parametrize("target", ["lightning.pytorch.callbacks.ModelCheckpoint",
                                    "lightning.pytorch.callbacks.model_checkpoint.ModelCheckpoint",
                                    "lightning.pytorch.loggers.CSVLogger",
                                    "lightning.pytorch.plugins.environments.SLURMEnvironment",  # from fabric
                                    "lightning.fabric.plugins.environments.SLURMEnvironment",
                                    "lightning.pytorch.strategies.DDPStrategy",
                                    "bertlab.training.callbacks.SamplesPerSecond",
                                    "bertlab.training.distributed.fsdp_strategy",
                                    "optuna.pruners.MedianPruner"])
def test_reexported_allowed_classes_still_pass(target):
    assert refusal(target) is None


def test_every_public_class_of_the_allowed_packages_passes():
    """Whatever Lightning re-exports from its plug-in packages is its own class (save the removed ones in
    ``_graveyard``, which only raise), so checking identity refuses nothing a config could use."""
    import importlib
    import inspect

    checked = 0
    for package in ("lightning.pytorch.callbacks", "lightning.pytorch.loggers", "lightning.pytorch.strategies",
                    "lightning.pytorch.plugins", "lightning.pytorch.accelerators", "lightning.pytorch.profilers",
                    "lightning.fabric.plugins", "lightning.fabric.strategies", "optuna.samplers", "optuna.pruners"):
        module = importlib.import_module(package)
        for name in dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or not inspect.isclass(obj) or "_graveyard" in obj.__module__:
                continue
            assert refusal(f"{package}.{name}") is None, (package, name)
            checked += 1
    assert checked > 40


def test_a_granted_prefix_does_not_reach_through_imports(monkeypatch, tmp_path):
    """``allow_targets=[mypkg.]`` grants mypkg's classes, not what mypkg imports."""
    pkg = tmp_path / "mypkg_h7"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import subprocess\n\nclass Mine:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert refusal("mypkg_h7.Mine", ["mypkg_h7."]) is None
    assert refusal("mypkg_h7.subprocess.Popen", ["mypkg_h7."]) is not None
    assert refusal("mypkg_h7.subprocess.Popen", ["mypkg_h7.subprocess.Popen"]) is None  # named exactly: granted


def test_filehandler_bypass_end_to_end_leaves_the_file_alone(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("a user's file\n")
    out = cli(tmp_path, "model=bert_tiny", "task=sst2", "trainer.max_epochs=1", f"hydra.run.dir={tmp_path / 'run'}",
              "+callbacks.evil._target_=lightning.pytorch.callbacks.model_checkpoint.logging.FileHandler",
              f"+callbacks.evil.filename={victim}", "+callbacks.evil.mode=w")
    assert out.returncode == 1, out.stderr[-2000:]
    assert victim.read_text() == "a user's file\n"
    assert "logging.FileHandler" in out.stderr and "Traceback" not in out.stderr


def test_a_saved_config_naming_a_moved_home_is_rewritten_before_the_check():
    """A trainer=fsdp config saved by an older bertlab names bertlab.distributed.fsdp_strategy, a module that is
    gone: the one rewrite table brings it to the new home, nested and in lists alike."""
    from omegaconf import OmegaConf

    from bertlab.runtime.targets import check_run_config

    cfg = OmegaConf.create({"trainer": {"strategy": {"_target_": "bertlab.distributed.fsdp_strategy"},
                                        "plugins": [{"_target_": "bertlab.distributed.fsdp_strategy"}]},
                            "callbacks": {}, "logger": {}})
    check_run_config(cfg)
    assert cfg.trainer.strategy._target_ == "bertlab.training.distributed.fsdp_strategy"
    assert cfg.trainer.plugins[0]._target_ == "bertlab.training.distributed.fsdp_strategy"
