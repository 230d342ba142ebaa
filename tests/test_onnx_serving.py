"""An ONNX export served without bertlab: the graph requires the standard inputs only (window_doc is optional, with
a default that reads every row as its own text), and docs/predict.md's plain onnxruntime example, run as the page
shows it in a fresh process, gives the labels and scores bertlab gives, for a family with segments (BERT) and one
without (ModernBERT with local windows shorter than the texts, a byte-level BPE vocabulary)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_train

ort = pytest.importorskip("onnxruntime")

from bertlab.inference import onnx as bonnx  # noqa: E402
from bertlab.inference.predictor import Predictor  # noqa: E402

QUICK = ("task=sst2", "trainer.max_epochs=1", "trainer.limit_train_batches=3")
RUNS = {
    "bert_tiny": ("model=bert_tiny",),
    "modernbert_tiny": ("model=modernbert_tiny", "model.global_attn_every_n_layers=2", "model.local_attention=16",
                   "model.tokenizer_kind=bpe", "model.lowercase=false"),
}
LONG = ("it is a film whose every scene , every line and every one of its many turns is longer than the local "
        "window of the model that reads it , and still it is a gorgeous , witty and moving film")


def doc_example() -> str:
    """The python block of docs/predict.md's section on serving the graph without bertlab."""
    page = (ROOT / "docs" / "predict.md").read_text()
    section = page.split("### The graph's inputs and outputs (serving without bertlab)", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("serving")
    cache: dict[str, tuple[Path, Path]] = {}

    def get(name: str) -> tuple[Path, Path]:
        if name not in cache:
            run_train([*QUICK, *RUNS[name]], root / name)
            out = root / f"{name}_export" / "onnx_export"
            bonnx.export_onnx(root / name, out)  # the fp32 check runs here, past every window
            cache[name] = (root / name, out)
        return cache[name]

    return get


def test_the_example_imports_nothing_of_bertlab():
    code = doc_example()
    assert "import bertlab" not in code and "from bertlab" not in code
    assert 'folder = "onnx_export"' in code


@pytest.mark.parametrize("name", list(RUNS))
def test_a_classifier_graph_requires_the_standard_inputs_only(exports, tmp_path, name):
    run_dir, out = exports(name)
    session = ort.InferenceSession(str(out / bonnx.ONNX_NAME), providers=["CPUExecutionProvider"])
    required = [i.name for i in session.get_inputs()]
    assert required == (["input_ids", "attention_mask", "token_type_ids"] if name == "bert_tiny"
                        else ["input_ids", "attention_mask"])
    assert [i.name for i in session.get_overridable_initializers()] == ["window_doc"]
    info = json.loads((out / bonnx.INFO_NAME).read_text())
    assert info["optional_inputs"] == ["window_doc"] and info["inputs"] == [*required, "window_doc"]
    # Fed or left out: one row per text, the same logits; fed with documents: one row per document.
    ids = np.random.default_rng(0).integers(5, 200, (3, 20))
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    feed = {k: v for k, v in feed.items() if k in required}
    (plain,) = session.run(["logits"], feed)
    (each,) = session.run(["logits"], {**feed, "window_doc": np.arange(3)})
    (docs,) = session.run(["logits"], {**feed, "window_doc": np.array([0, 0, 1])})
    assert plain.shape == (3, 2) and docs.shape == (2, 2)
    np.testing.assert_allclose(plain, each, atol=1e-6)
    np.testing.assert_allclose(docs[1], plain[2], atol=1e-6)  # a document of one window is its row
    assert Predictor.from_run(out).model.reads_windows  # bertlab still reads long texts in windows
    bonnx.quantize_int8(out / bonnx.ONNX_NAME, tmp_path / "int8.onnx")  # int8 keeps the optional input
    int8 = ort.InferenceSession(str(tmp_path / "int8.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in int8.get_inputs()] == required
    assert [i.name for i in int8.get_overridable_initializers()] == ["window_doc"]


@pytest.mark.parametrize("name", list(RUNS))
def test_the_documented_example_predicts_what_bertlab_predicts(exports, name):
    run_dir, out = exports(name)
    code = doc_example()
    texts = ["a gorgeous, witty film .", "the plot is a mess"]
    for variant in (code, code.replace('texts = ["a gorgeous, witty film .", "the plot is a mess"]',
                                       f"texts = [{LONG!r}, 'x']")):
        if variant is not code:
            texts = [LONG, "x"]
        done = subprocess.run([sys.executable, "-c", variant], cwd=out.parent, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        lines = [line.split("\t") for line in done.stdout.strip().splitlines()]
        assert [line[0] for line in lines] == texts
        for backend_dir in (out, run_dir):  # the export through bertlab, and the run itself (PyTorch)
            records = Predictor.from_run(backend_dir)(texts)
            assert [line[1] for line in lines] == [r["label"] for r in records], (lines, records)
            assert all(abs(float(line[2]) - r["score"]) < 1e-4 for line, r in zip(lines, records)), (lines, records)
