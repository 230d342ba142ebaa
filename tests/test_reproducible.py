"""Same machine, same thread count, same command → the same numbers: two separate processes of one training
command write identical scores (metrics.json's val block, losses included) and identical weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import FIXTURE_DATA, ROOT

COMMAND = ["model=bert_tiny", "task=sst2", "trainer.max_epochs=2", "logger=csv", "trainer.enable_progress_bar=false",
           f"paths.data_dir={FIXTURE_DATA}"]


def _train(run_dir, cache_dir):
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "offline"}
    subprocess.run([sys.executable, str(ROOT / "train.py"), *COMMAND, f"hydra.run.dir={run_dir}",
                    f"paths.cache_dir={cache_dir}"], check=True, env=env, capture_output=True, cwd=run_dir.parent)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    weights = torch.load(metrics["best_checkpoint"], map_location="cpu", weights_only=True)["state_dict"]
    return metrics, weights


@pytest.mark.slow
def test_two_processes_of_one_command_give_identical_results(tmp_path):
    # Separate caches: the second run trains its scratch vocabulary again instead of reading the first's.
    first, w1 = _train(tmp_path / "a", tmp_path / "cache_a")
    second, w2 = _train(tmp_path / "b", tmp_path / "cache_b")
    assert first["val"] == second["val"]
    assert first["train"]["steps"] == second["train"]["steps"]
    assert w1.keys() == w2.keys()
    assert all(torch.equal(w1[k], w2[k]) for k in w1)
