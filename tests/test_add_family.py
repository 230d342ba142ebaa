"""Adding an encoder family is a spec module + a registry line + a preset, nothing else (docs/models.md, "Adding a
family"). A throwaway eighth family, CamemBERT (transformers' ``camembert``: RoBERTa's layers under the Camembert*
class names), is written as exactly those three things in temporary folders, registered as a new line of the
registry would register it, and then picked up, with no other change, by the parity tests' machinery, the settings
check, a scratch training run that predicts and exports (the export loads in ``AutoModelFor*``), FSDP's wrapping and
the families benchmark. A source scan fails on any hand-kept list of families outside ``models/families/``."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_train

import bertlab.models.families as registry
from bertlab.models.families import families, family_spec, scratch_families

transformers = pytest.importorskip("transformers")

# 1. The spec module: what a contributor writes (models/families/camembert.py).
SPEC_MODULE = '''"""CamemBERT (``camembert``): RoBERTa's layers, positions and heads under transformers' Camembert* names."""

from bertlab.models.families.bert import BASE, TINY, bert_like_config, bert_like_hf_dict
from bertlab.models.families.spec import FamilySpec, HeadLayout

_CLASSIFIER = (("classifier.", "head.classifier."),)


def _read(data, source):
    return bert_like_config(data, source, "camembert", position_style="after_padding")


def _write(config):
    return bert_like_hf_dict(config, bos_token_id=5, eos_token_id=6)


CAMEMBERT = FamilySpec(
    model_type="camembert", display="CamemBERT", prefix="roberta", base_architecture="CamembertModel",
    read_config=_read, write_config=_write, sequence_pooler="dense_tanh", choice_pooler="encoder",
    tokenizer_kind="unigram",
    tiny_config=dict(TINY, type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5),
    base_config=dict(BASE, vocab_size=32005, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                     layer_norm_eps=1e-5),
    heads={
        "sequence": HeadLayout("CamembertForSequenceClassification",
                               (("classifier.dense.", "head.dense."), ("classifier.out_proj.", "head.classifier.")),
                               pooler="dense_tanh"),
        "token": HeadLayout("CamembertForTokenClassification", _CLASSIFIER),
        "span": HeadLayout("CamembertForQuestionAnswering", (("qa_outputs.", "head.qa_outputs."),)),
        "multiple_choice": HeadLayout("CamembertForMultipleChoice", _CLASSIFIER, pooler="encoder"),
        "mlm": HeadLayout("CamembertForMaskedLM",
                          (("lm_head.bias", "head.predictions.bias"),
                           ("lm_head.decoder.bias", "head.predictions.bias"),
                           ("lm_head.dense.", "head.predictions.transform.dense."),
                           ("lm_head.layer_norm.", "head.predictions.transform.LayerNorm.")),
                          tied=("lm_head.decoder.weight",), copies=(("lm_head.decoder.bias", "lm_head.bias"),)),
    },
)
'''

# 3. The preset: conf/model/camembert_tiny.yaml (the shape of bert_tiny, this family and its vocabulary).
PRESET = (ROOT / "conf" / "model" / "bert_tiny.yaml").read_text().replace("name: bert_tiny", "name: camembert_tiny") \
    .replace("model_type: bert ", "model_type: camembert ").replace("tokenizer_kind: wordpiece", "tokenizer_kind: unigram") \
    .replace("type_vocab_size: 2", "type_vocab_size: 1").replace("vocab_size: 8000", "vocab_size: 300")


@pytest.fixture
def camembert(tmp_path, monkeypatch):
    """The throwaway family registered: its module imported from a temporary package, and the registry built with
    one more line (what adding ``camembert.CAMEMBERT`` to ``_registry``'s list does); the preset in a config
    folder on Hydra's search path. Everything is undone after the test."""
    path = tmp_path / "camembert_family.py"
    path.write_text(SPEC_MODULE)
    spec = importlib.util.spec_from_file_location("camembert_family", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    real = registry._registry
    monkeypatch.setattr(registry, "_registry", lambda: {**real(), "camembert": module.CAMEMBERT})  # 2. the line
    monkeypatch.setattr(registry, "FAMILIES", {})
    monkeypatch.setattr(registry, "_ENCODER_TYPES", [])
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "camembert_tiny.yaml").write_text(PRESET)
    return conf


def test_the_new_family_is_native_and_a_scratch_family(camembert):
    assert "camembert" in families() and "camembert" in scratch_families()
    assert family_spec("camembert").display == "CamemBERT"
    assert "CamemBERT (camembert)" in registry.supported_list()


def test_the_parity_tests_take_every_family_of_the_registry(camembert, tmp_path):
    """test_families' parity tests are parametrized by the registry itself (no list of their own), and their
    machinery checks the new family against transformers' Camembert* classes with no branch for it."""
    import test_families as parity

    for test in (parity.test_stock_heads_equal_transformers, parity.test_export_names_are_the_family_class_names,
                 parity.test_encoder_from_pretrained_folder):
        marks = [m for m in test.pytestmark if m.name == "parametrize" and m.args[0] == "model_type"]
        assert marks and marks[0].args[1] is parity.NATIVE
    # The registry when test_families was imported (with the new line when imported now, without it when collected
    # before this test patched it).
    assert [t for t in parity.NATIVE if t != "camembert"] == [t for t in families() if t != "camembert"]
    for head_kind in parity.HEAD_KINDS:
        parity.test_stock_heads_equal_transformers("camembert", head_kind, "true")
        parity.test_export_names_are_the_family_class_names("camembert", head_kind)
    parity.test_encoder_from_pretrained_folder("camembert", tmp_path / "folder")


def test_fsdp_and_the_benchmark_take_the_new_family(camembert):
    from bertlab.training.distributed import fsdp_strategy

    wrapped = fsdp_strategy().kwargs["auto_wrap_policy"]._module_classes
    assert family_spec("camembert").layer_class in wrapped
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import families as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    report = bench.main(["--tiny", "--threads", "1", "--repeats", "1", "--families", "camembert"])
    assert report["families"]["camembert"]["ratio_vs_hf"] > 0


def test_a_scratch_run_of_the_new_family_trains_predicts_and_exports(camembert, tmp_path, caplog):
    """model=camembert_tiny (the preset alone): the settings check accepts model.model_type=camembert, the run
    trains a scratch CamemBERT, predicts, and exports a folder that CamembertForSequenceClassification loads
    (the export's own gate has compared transformers' predictions with bertlab's)."""
    from bertlab.inference.predictor import Predictor

    run_dir = tmp_path / "run"
    metrics = run_train([f"hydra.searchpath=[file://{camembert}]", "model=camembert_tiny", "task=sst2",
                         "model.hidden_size=32", "model.intermediate_size=37", "model.num_attention_heads=4",
                         "trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1",
                         "export=true"], run_dir)
    assert metrics["val"]["accuracy"] is not None
    export = run_dir / "export"
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(export)
    assert type(hf).__name__ == "CamembertForSequenceClassification"
    texts = ["a gorgeous, witty film .", "the plot is a mess"]
    want, got = Predictor.from_run(run_dir)(texts), Predictor.from_run(export)(texts)
    assert [r["label"] for r in want] == [r["label"] for r in got]


def test_the_settings_check_refuses_a_family_the_registry_lacks(tmp_path):
    """Without the registry line, model.model_type=camembert is refused before anything runs."""
    from bertlab.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="model.model_type=camembert: .* one of bert"):
        run_train(["model=bert_tiny", "model.model_type=camembert", "task=sst2"], tmp_path / "run")


# ----------------------------------------------------------------------------------------------------------
# No hand-kept family lists


def hand_lists(root: Path, names: set[str]) -> list[str]:
    """Literal tuples, lists, sets and dict keys naming two or more families, in src/, tests/, benchmarks/, tools/
    and train.py outside models/families/ (where the registry is the only list): each such literal is a place a new
    family would have to be added by hand, and would silently miss if it were not."""
    def family(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    found = []
    files = [p for d in ("src", "tests", "benchmarks", "tools") for p in (root / d).rglob("*.py")] + [root / "train.py"]
    for path in files:
        rel = path.relative_to(root).as_posix()
        if rel.startswith("src/bertlab/models/families/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            elements = node.keys if isinstance(node, ast.Dict) else \
                node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else []
            if sum(map(family, elements)) >= 2:
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)[:90]}")
    return found


def test_no_hand_kept_list_of_families_outside_the_registry():
    assert hand_lists(ROOT, set(families())) == []


def test_the_scan_finds_a_hand_list(tmp_path):
    """The scan's own check: the kinds of list that used to stand in tests and src are found."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "train.py").write_text("")
    (tmp_path / "tests" / "test_x.py").write_text(
        'NATIVE = ["bert", "roberta"]\nEXTRA = {"distilbert": 1, "modernbert": 2}\n'
        'def f(t):\n    return t in ("bert", "electra")\nOK = ["bert", "true"]\n')
    found = hand_lists(tmp_path, set(families()))
    assert [line.split(":")[1] for line in found] == ["1", "2", "4"], found


def test_the_docs_list_exactly_the_three_steps():
    text = (ROOT / "docs" / "models.md").read_text()
    section = text.split("## Adding a family", 1)[1].split("\n## ", 1)[0]
    steps = [line for line in section.splitlines() if line[:3] in ("1. ", "2. ", "3. ", "4. ")]
    assert len(steps) == 3, steps
    assert "src/bertlab/models/families/" in steps[0] and "_registry" in steps[1] and "conf/model/" in steps[2]
