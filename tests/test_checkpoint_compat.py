"""A run written before the modules moved (tests/fixtures/main_run: a tiny sst2 run made by the code of commit
387e7ab, one epoch of 5 steps) still works with today's code: its checkpoint names no bertlab module, and it
resumes, evaluates, exports and predicts.

The fixture was made with ``git archive 387e7ab`` unpacked to a scratch folder and that tree's own
``tests/conftest.py::run_train(OVERRIDES, <dir>/run, data_dir=tests/fixtures/data)``; it keeps the run's
``checkpoints/last.ckpt``, ``tokenizer/``, ``metrics.json`` and ``.bertlab-run.json``. The checkpoint's recorded
``data_dir`` (an absolute path of the machine that made it) was rewritten to the relative ``tests/fixtures/data``.
"""

from __future__ import annotations

import json
import pickletools
import shutil
import zipfile
from pathlib import Path

import torch
from conftest import FIXTURES, run_train

FIXTURE = FIXTURES / "main_run"
OVERRIDES = ["model=bert_tiny", "task=sst2", "model.hidden_size=16", "model.num_hidden_layers=1",
             "model.num_attention_heads=2", "model.intermediate_size=32", "model.vocab_size=200",
             "model.max_position_embeddings=32",
             "data.max_seq_length=32", "data.batch_size=8", "trainer.max_epochs=1", "seed=1"]


def copy_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    return run_dir


def pickled_modules(ckpt: Path) -> set[str]:
    """The modules whose classes or functions the checkpoint's pickle refers to."""
    with zipfile.ZipFile(ckpt) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    modules, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
            strings.append(arg)
        elif op.name == "GLOBAL":
            modules.add(arg.split(" ")[0])
        elif op.name == "STACK_GLOBAL":
            modules.add(strings[-2])
    return modules


def test_the_old_checkpoint_names_no_bertlab_module():
    modules = pickled_modules(FIXTURE / "checkpoints" / "last.ckpt")
    assert modules and not any(m == "bertlab" or m.startswith("bertlab.") for m in modules), modules
    ckpt = torch.load(FIXTURE / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert ckpt["global_step"] == 5


def test_the_old_run_resumes_with_todays_code(tmp_path):
    run_dir = copy_run(tmp_path)
    # the old run cut long texts: it continues exactly with data.long_text=truncate (windows came later)
    metrics = run_train([*OVERRIDES[:-2], "trainer.max_epochs=2", "seed=1", "ckpt_path=last",
                         "data.long_text=truncate"], run_dir)
    assert metrics["train"]["resumed_from_step"] == 5
    assert metrics["train"]["steps"] == 10
    assert 0.0 <= metrics["val"]["accuracy"] <= 1.0


def test_the_old_checkpoint_evaluates_exports_and_predicts(tmp_path):
    from bertlab import Predictor
    from bertlab.inference.export import export_checkpoint

    run_dir = copy_run(tmp_path)
    last = run_dir / "checkpoints" / "last.ckpt"
    metrics = run_train([*OVERRIDES, "train=false", f"ckpt_path={last}"], tmp_path / "eval")
    assert 0.0 <= metrics["val"]["accuracy"] <= 1.0
    out = export_checkpoint(last, tmp_path / "export", tokenizer_dir=run_dir / "tokenizer")
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForSequenceClassification"]
    record = Predictor.from_run(run_dir)("a fine film")
    assert record["label"] in ("0", "1") and 0.0 <= record["score"] <= 1.0
    assert Predictor.from_run(out)("a fine film")["label"] == record["label"]
