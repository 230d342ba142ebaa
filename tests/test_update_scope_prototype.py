"""The source-prototype study reproduces the documented golden numbers through bertlab's freeze + audit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "update_scope_prototype.py"


def test_prototype_reproduces_the_golden_update_scope() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert set(result) == {"loss_before", "frozen", "full"}
    assert abs(result["loss_before"] - 0.97189157079009) < 1e-12
    assert result["frozen"] == {"backbone_with_grad": 0, "backbone_changed": 0, "head_with_grad": 2,
                                "head_changed": 2}
    assert result["full"] == {"backbone_with_grad": 14, "backbone_changed": 14, "head_with_grad": 2,
                              "head_changed": 2}
    assert any(line.startswith("frozen") and "0/14" in line for line in lines[:-1])  # the printed table


def test_prototype_header_states_its_command() -> None:
    assert "python experiments/update_scope_prototype.py" in SCRIPT.read_text().split('"""')[1]
