"""export=true / python -m bertlab.export: Hugging Face folders that transformers loads and that predict
exactly what bertlab predicts, for every stock head; custom heads and LoRA runs export the encoder plus
bertlab's own head file.

Each case trains bert_tiny for a few steps on a fixture, loads the export with the transformers Auto class,
and compares logits with the bertlab checkpoint (float32, 1e-5) and tokenization with bertlab's tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_DATA, run_train

from bertlab.data.tokenizer import load_tokenizer
from bertlab.export import main
from bertlab.inference.export import (
    HEAD_CONFIG_NAME,
    HEAD_WEIGHTS_NAME,
    export_checkpoint,
    load_checkpoint_model,
)

transformers = pytest.importorskip("transformers")

QUICK = ("model=bert_tiny", "trainer.max_epochs=1", "trainer.limit_train_batches=2", "export=true")
CONLL_LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def _texts(n: int = 6) -> list[str]:
    lines = (FIXTURE_DATA / "sst2" / "dev.tsv").read_text().splitlines()[1:]
    return [line.split("\t")[0] for line in lines[:n]] + ["Ünïcode ACCENTS, Mixed-Case & punctuation!!"]


def _conll_words() -> list[list[str]]:
    sentences, words = [], []
    for line in (FIXTURE_DATA / "conll2003" / "eng.testa").read_text().splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(words)
            words = []
        else:
            words.append(line.split()[0])
    return sentences[:6]


def _squad_pairs() -> tuple[list[str], list[str]]:
    data = json.loads((FIXTURE_DATA / "squad_v1.1" / "dev.json").read_text())
    paragraph = data["data"][0]["paragraphs"][0]
    questions = [qa["question"] for qa in paragraph["qas"][:4]]
    return questions, [paragraph["context"]] * len(questions)


CASES = {
    # name: (overrides, transformers class, expected architecture, inputs)
    "sequence": (("task=sst2",), "AutoModelForSequenceClassification", "BertForSequenceClassification"),
    "token": (("task=conll2003",), "AutoModelForTokenClassification", "BertForTokenClassification"),
    "span": (("task=squad", "data.max_seq_length=128", "data.doc_stride=32"), "AutoModelForQuestionAnswering",
             "BertForQuestionAnswering"),
    "mlm": (("task=mlm", "task.nsp=false"), "AutoModelForMaskedLM", "BertForMaskedLM"),
    "pretraining": (("task=mlm", "task.nsp=true"), "BertForPreTraining", "BertForPreTraining"),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Train each case once per module; name → (run dir, export dir)."""
    root = tmp_path_factory.mktemp("export")
    cache: dict[str, tuple[Path, Path]] = {}

    def get(name: str) -> tuple[Path, Path]:
        if name not in cache:
            run_dir = root / name
            run_train([*QUICK, *CASES[name][0]], run_dir)
            cache[name] = (run_dir, run_dir / "export")
        return cache[name]

    return get


def _hf_inputs(tok, name: str) -> tuple[dict[str, torch.Tensor], list[list[int]], list[list[int]]]:
    """A padded HF batch plus, unpadded, HF's ids and bertlab's ids for the same inputs."""
    if name == "token":
        words = _conll_words()
        batch = tok(words, is_split_into_words=True, padding=True, return_tensors="pt")
        plain = tok(words, is_split_into_words=True)
        return batch, plain["input_ids"], words
    if name in ("span", "pretraining"):
        a, b = _squad_pairs() if name == "span" else (_texts()[:3], _texts()[3:6])
        batch = tok(a, b, padding=True, return_tensors="pt")
        return batch, tok(a, b)["input_ids"], (a, b)
    texts = _texts()
    return tok(texts, padding=True, return_tensors="pt"), tok(texts)["input_ids"], texts


def _bertlab_ids(tokenizer, name: str, raw) -> tuple[list[list[int]], list[list[int]]]:
    if name == "token":
        encodings = tokenizer.encode_words_batch(raw)
    elif name in ("span", "pretraining"):
        encodings = tokenizer.encode_batch(raw[0], raw[1])
    else:
        encodings = tokenizer.encode_batch(raw)
    return [e.ids for e in encodings], [e.type_ids for e in encodings]


@pytest.mark.parametrize("name", list(CASES))
def test_export_loads_in_transformers_with_identical_outputs(exported, name):
    run_dir, export_dir = exported(name)
    _, auto_class, architecture = CASES[name]
    config = json.loads((export_dir / "config.json").read_text())
    assert config["architectures"] == [architecture]
    for f in ("model.safetensors", "tokenizer.json", "vocab.txt", "tokenizer_config.json",
              "special_tokens_map.json"):
        assert (export_dir / f).is_file(), f
    assert not (export_dir / HEAD_CONFIG_NAME).exists()

    hf, info = getattr(transformers, auto_class).from_pretrained(export_dir, output_loading_info=True)
    hf.eval()
    assert type(hf).__name__ == architecture
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info

    # The tokenizer: AutoTokenizer on the export tokenizes exactly as bertlab's run tokenizer.
    tok = transformers.AutoTokenizer.from_pretrained(export_dir)
    ours = load_tokenizer(run_dir / "tokenizer")
    batch, hf_ids, raw = _hf_inputs(tok, name)
    our_ids, our_types = _bertlab_ids(ours, name, raw)
    assert hf_ids == our_ids
    if "token_type_ids" in batch:
        types = [row[: len(ids)].tolist() for row, ids in zip(batch["token_type_ids"], our_ids)]
        assert types == our_types

    best = json.loads((run_dir / "metrics.json").read_text())["best_checkpoint"]
    model = load_checkpoint_model(best).model
    with torch.no_grad():
        out = model({k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")})
        hf_out = hf(**batch)
    mask = batch["attention_mask"].bool()
    if name == "sequence":
        torch.testing.assert_close(out, hf_out.logits, atol=1e-5, rtol=0)
    elif name == "token":
        torch.testing.assert_close(out[mask], hf_out.logits[mask], atol=1e-5, rtol=0)
    elif name == "span":
        torch.testing.assert_close(out[..., 0][mask], hf_out.start_logits[mask], atol=1e-5, rtol=0)
        torch.testing.assert_close(out[..., 1][mask], hf_out.end_logits[mask], atol=1e-5, rtol=0)
    elif name == "mlm":
        torch.testing.assert_close(out[0][mask], hf_out.logits[mask], atol=1e-5, rtol=0)
        assert out[1] is None
    else:
        torch.testing.assert_close(out[0][mask], hf_out.prediction_logits[mask], atol=1e-5, rtol=0)
        torch.testing.assert_close(out[1], hf_out.seq_relationship_logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name,labels", [("sequence", ["0", "1"]), ("token", CONLL_LABELS)])
def test_id2label_holds_the_labels_of_the_data_files(exported, name, labels):
    _, export_dir = exported(name)
    config = json.loads((export_dir / "config.json").read_text())
    assert config["id2label"] == {str(i): label for i, label in enumerate(labels)}
    assert config["label2id"] == {label: i for i, label in enumerate(labels)}
    assert config["num_labels"] == len(labels)
    hf_config = transformers.AutoConfig.from_pretrained(export_dir)
    assert hf_config.id2label == dict(enumerate(labels))


def test_cli_exports_a_run_dir(exported, tmp_path, capsys):
    run_dir, export_dir = exported("sequence")
    out = tmp_path / "cli"
    main([str(run_dir), str(out)])
    assert "BertForSequenceClassification" in capsys.readouterr().out
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (out / f).read_bytes() == (export_dir / f).read_bytes(), f


def test_custom_head_with_lora_exports_encoder_and_bertlab_head(tmp_path, caplog):
    """Raw-[CLS] MLP probe (no stock class) on a LoRA-adapted encoder: BertModel with merged adapters +
    bertlab_head.{safetensors,json}, and the export says so."""
    from safetensors.torch import load_file

    run_dir = tmp_path / "custom"
    with caplog.at_level("INFO", logger="bertlab.inference.export"):
        run_train([*QUICK, "task=sst2", "freeze=lora", "head.pooling=cls", "head.hidden_layers=1"], run_dir)
    assert any("no stock transformers class" in r.getMessage() for r in caplog.records)
    export_dir = run_dir / "export"
    config = json.loads((export_dir / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]
    assert config["id2label"] == {"0": "0", "1": "1"}
    head_info = json.loads((export_dir / HEAD_CONFIG_NAME).read_text())
    assert head_info["head"]["pooling"] == "cls" and head_info["head"]["hidden_layers"] == 1
    assert head_info["labels"] == ["0", "1"]

    best = json.loads((run_dir / "metrics.json").read_text())["best_checkpoint"]
    loaded = load_checkpoint_model(best)
    model = loaded.model
    assert any("lora_A" in k for k in model.state_dict())  # the run really trained adapters
    head_tensors = load_file(str(export_dir / HEAD_WEIGHTS_NAME))
    assert set(head_tensors) == {k[len("head."):] for k in model.state_dict() if k.startswith("head.")}
    for key, value in head_tensors.items():
        torch.testing.assert_close(value, model.state_dict()["head." + key], atol=0, rtol=0)

    hf, info = transformers.BertModel.from_pretrained(export_dir, output_loading_info=True,
                                                      add_pooling_layer=False)
    hf.eval()
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    tok = transformers.AutoTokenizer.from_pretrained(export_dir)
    batch = tok(_texts(), padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(dict(batch))  # the unmerged LoRA model
        hidden = hf(**batch).last_hidden_state
        from_hf = model.head(hidden[:, 0])  # bertlab's head applied to the exported encoder's [CLS]
    torch.testing.assert_close(from_hf, logits, atol=1e-5, rtol=0)


def test_export_without_tokenizer_names_the_folder(exported, tmp_path):
    from bertlab.models.hf_weights import CheckpointError

    run_dir, _ = exported("sequence")
    with pytest.raises(CheckpointError, match="--tokenizer"):
        export_checkpoint(run_dir, tmp_path / "out", tokenizer_dir=tmp_path / "nowhere")
