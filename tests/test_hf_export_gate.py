"""The Hugging Face export's gate (bertlab.inference.hf_check): for every family of the registry and every head
with a transformers class, the exported folder loaded the standard way (AutoTokenizer + AutoModelFor*,
is_split_into_words for words, the pipeline for raw text) predicts what bertlab predicts; a broken export (a
perturbed weight, a tokenizer config that reads words otherwise) fails it, and the command line exits non-zero.

Models are tiny random ones built in-process (no training): each family's encoder with its own kind of tokenizer
(WordPiece, byte-level BPE whose raw text has no prefix space, as ModernBERT's and RoBERTa's, or Unigram).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_DATA

from bertlab.data.tokenizer import train_tokenizer
from bertlab.inference.export import CheckpointModel, _write_export, check_export
from bertlab.inference.hf_check import TOLERANCE, check_transformers_parity
from bertlab.models.assemble import assemble, needs_pooler
from bertlab.models.families import families, family_spec, tiny_config
from bertlab.runtime.config import HeadConfig, TaskSpec
from bertlab.runtime.errors import CheckpointError
from bertlab.tasks.families import build_family

transformers = pytest.importorskip("transformers")

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
HEADS = {  # case: (task, labels)
    "sequence": (TaskSpec(name="cls", family="sequence", labels=["neg", "pos", "mid"]), ["neg", "pos", "mid"]),
    "regression": (TaskSpec(name="sts", family="sequence", regression=True), None),
    "token": (TaskSpec(name="ner", family="token", labels=TAGS), TAGS),
    "span": (TaskSpec(name="qa", family="qa"), None),
    "multiple_choice": (TaskSpec(name="mc", family="multiple_choice"), None),
}
def _texts() -> list[str]:
    lines = (FIXTURE_DATA / "sst2" / "train.tsv").read_text().splitlines()[1:]
    return [line.split("\t")[0] for line in lines] + ["John Smith visited New York in 2019 -- and loved Paris!"]


_TOKENIZERS: dict[str, object] = {}


def _tokenizer(kind: str):
    if kind not in _TOKENIZERS:
        _TOKENIZERS[kind] = train_tokenizer(_texts(), kind, vocab_size=400, lowercase=False)
    return _TOKENIZERS[kind]


def build_export(tmp_path: Path, model_type: str, case: str) -> tuple[CheckpointModel, Path, Path]:
    """A random tiny model of the family with the head of ``case``, its tokenizer in ``tmp_path/tokenizer`` and
    the export written (not yet checked) to ``tmp_path/export``."""
    spec = family_spec(model_type)
    tok = _tokenizer(spec.tokenizer_kind)
    tok_dir = tmp_path / "tokenizer"
    tok.save(tok_dir)
    # The family's tiny model (FamilySpec.tiny_config) with this vocabulary's size and special ids.
    hf_config = transformers.AutoConfig.for_model(**tiny_config(model_type, tok))
    config = spec.read_config(hf_config.to_dict(), "test")
    task, labels = HEADS[case]
    head_cfg = HeadConfig()
    num_labels = 1 if task.regression or task.family == "multiple_choice" else len(labels or [])
    family = build_family(task, num_labels, labels, None)
    torch.manual_seed(0)
    model = assemble(config, head_cfg, family.build_head, family.stock_head_kind(head_cfg),
                     add_pooling_layer=needs_pooler(config, task.family, head_cfg))
    with torch.no_grad():  # every tensor away from its initial value (LayerNorm at 1, biases at 0)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    loaded = CheckpointModel(model.eval(), {"config": {"data": {"max_seq_length": 64}}}, task, head_cfg, labels,
                             tmp_path / "fake.ckpt")
    out = tmp_path / "export"
    _write_export(loaded, loaded.path, out, tok_dir)
    return loaded, tok_dir, out


CASES = [(t, case) for t in families() for case in HEADS
         if case != "multiple_choice" or "multiple_choice" in family_spec(t).heads]


@pytest.mark.parametrize("model_type, case", CASES)
def test_transformers_predicts_what_bertlab_predicts_for_every_family_and_head(tmp_path, model_type, case):
    loaded, tok_dir, out = build_export(tmp_path, model_type, case)
    report = check_export(loaded, tok_dir, out)
    assert report.checked and not report.failures
    assert report.max_delta <= TOLERANCE and report.inputs >= 2
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert ("token_type_ids" in config["model_input_names"]) == (loaded.model.encoder.config.type_vocab_size > 1)


# The families whose vocabulary is byte-level BPE (raw text without a prefix space: RoBERTa's, ModernBERT's).
BYTE_LEVEL = [name for name, spec in families().items() if spec.tokenizer_kind == "bpe"]


@pytest.mark.parametrize("model_type", BYTE_LEVEL)
def test_byte_level_token_exports_read_words_with_a_space_before_each(tmp_path, model_type):
    """The issue's case and its fresh sibling: a byte-level BPE tokenizer whose raw text has no prefix space.
    The token export's tokenizer reads pre-split words (and raw text) with one, as bertlab does, while a
    classification export keeps the run's own raw-text setting."""
    loaded, tok_dir, out = build_export(tmp_path / "token", model_type, "token")
    assert json.loads((out / "tokenizer_config.json").read_text())["add_prefix_space"] is True
    hf = transformers.AutoTokenizer.from_pretrained(str(out))
    words = ["Paris", "visited", "John", "2019"]
    ours = _tokenizer("bpe").encode_words_batch([words])[0].ids
    assert hf(words, is_split_into_words=True)["input_ids"] == ours
    assert hf(" ".join(words))["input_ids"] == ours
    _, _, out_seq = build_export(tmp_path / "seq", model_type, "sequence")
    assert json.loads((out_seq / "tokenizer_config.json").read_text())["add_prefix_space"] is False
    text = "Paris visited John"
    assert transformers.AutoTokenizer.from_pretrained(str(out_seq))(text)["input_ids"] == \
        _tokenizer("bpe").encode_batch([text])[0].ids


def test_a_perturbed_weight_fails_the_gate(tmp_path):
    from safetensors.torch import load_file, save_file

    loaded, tok_dir, out = build_export(tmp_path, "modernbert", "sequence")
    tensors = load_file(str(out / "model.safetensors"))
    key = next(k for k in tensors if "layers.1." in k and k.endswith("weight") and tensors[k].dim() == 2)
    tensors[key] = tensors[key] + 0.01 * torch.randn_like(tensors[key])
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"does not compute what the run computes: max \|Δlogits\|"):
        check_transformers_parity(loaded, tok_dir, out)


@pytest.mark.parametrize("model_type", [*BYTE_LEVEL, "bert"])
def test_a_tokenizer_config_that_reads_otherwise_fails_the_gate(tmp_path, model_type):
    """The export before the fix (the run's tokenizer files copied: a byte-level family's words without a prefix
    space, ModernBERT's in the issue), and a fresh case (a WordPiece export told to lower-case a cased vocabulary)."""
    loaded, tok_dir, out = build_export(tmp_path, model_type, "token")
    if family_spec(model_type).tokenizer_kind == "bpe":
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (out / name).write_bytes((tok_dir / name).read_bytes())
    else:
        spec = json.loads((out / "tokenizer.json").read_text())
        spec["normalizer"]["lowercase"] = True
        (out / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(CheckpointError, match="AutoTokenizer gives other token ids than bertlab"):
        check_transformers_parity(loaded, tok_dir, out)


def test_the_command_line_exits_non_zero_when_the_gate_fails(tmp_path, monkeypatch, capsys):
    """python -m bertlab.export runs the same gate: a broken folder is an error paragraph and exit status 1."""
    import bertlab.inference.export as export_module
    from bertlab.export import main

    loaded, tok_dir, _ = build_export(tmp_path, "bert", "sequence")
    monkeypatch.setattr(export_module, "resolve_checkpoint", lambda path: Path(path))
    monkeypatch.setattr(export_module, "load_checkpoint_model", lambda path, start=None: loaded)
    write = export_module._write_export

    def broken(loaded, ckpt_path, out_dir, tok_dir):
        write(loaded, ckpt_path, out_dir, tok_dir)
        config = json.loads((out_dir / "config.json").read_text())
        config["id2label"] = {"0": "pos", "1": "mid", "2": "neg"}  # labels rotated: every label differs
        (out_dir / "config.json").write_text(json.dumps(config))

    monkeypatch.setattr(export_module, "_write_export", broken)
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path / "fake.ckpt"), str(tmp_path / "cli"), "--tokenizer", str(tok_dir)])
    assert exc.value.code == 1
    assert "pipeline predicts" in capsys.readouterr().err


def test_without_transformers_the_check_says_it_did_not_run(tmp_path, monkeypatch):
    import sys

    loaded, tok_dir, out = build_export(tmp_path, "bert", "sequence")
    monkeypatch.setitem(sys.modules, "transformers", None)
    report = check_transformers_parity(loaded, tok_dir, out)
    assert not report.checked and "transformers is not installed" in report.line()
    assert "NOT run" in report.line()


def test_export_true_fails_the_run_when_the_gate_fails(tmp_path, monkeypatch):
    """export=true goes through the same gate: a training run whose export computes otherwise ends in the error."""
    from conftest import run_train
    from safetensors.torch import load_file, save_file

    import bertlab.inference.export as export_module

    write = export_module._write_export

    def perturbed(loaded, ckpt_path, out_dir, tok_dir):
        write(loaded, ckpt_path, out_dir, tok_dir)
        tensors = load_file(str(out_dir / "model.safetensors"))
        tensors["classifier.bias"] = tensors["classifier.bias"] + torch.tensor([1.0, -1.0])
        save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})

    monkeypatch.setattr(export_module, "_write_export", perturbed)
    with pytest.raises(CheckpointError, match="does not compute what the run computes"):
        run_train(["model=bert_tiny", "task=sst2", "trainer.max_epochs=1", "trainer.limit_train_batches=2",
                   "export=true"], tmp_path / "run")
