"""Long documents in classification, regression and sentence pairs (``data.long_text=windows``): windows at the
edges of the window, a document that fits one window classified exactly as on the plain path (every pooling,
several families), batches bounded by windows, chunked encoding, pairs keeping their first text, truncation
unchanged, and prediction / HF export / ONNX giving what the run's own evaluation computes."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import FIXTURE_DATA, ROOT, run_train

from bertlab.data.batching import Collator, EvalBatchSampler, TrainBatchSampler
from bertlab.data.documents import encode_documents, long_text_report, window_counts
from bertlab.data.features import LabelMap, sequence_split
from bertlab.data.readers import BadExamplePolicy, read_table
from bertlab.data.tokenizer import train_tokenizer
from bertlab.data.windows import window_bounds
from bertlab.inference.export import export_checkpoint, load_checkpoint_model
from bertlab.inference.predictor import Predictor
from bertlab.inference.tasks import sequence
from bertlab.models.assemble import assemble, needs_pooler
from bertlab.models.families import families, family_spec
from bertlab.models.heads import WindowPooling
from bertlab.runtime.config import ConfigError, DataConfig, HeadConfig, TaskSpec
from bertlab.tasks.families import build_family

WORDS = [f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(40)]  # one token each in the vocabularies below


@pytest.fixture(scope="module")
def tokenizers():
    texts = [" ".join(WORDS)] * 3
    return {"wordpiece": train_tokenizer(texts, "wordpiece", vocab_size=200, min_frequency=1),
            "bpe": train_tokenizer(texts, "bpe", vocab_size=400, min_frequency=1)}


def _words(n: int, start: int = 0) -> str:
    return " ".join(WORDS[(start + i) % len(WORDS)] for i in range(n))


# ----------------------------------------------------------------------------------------------------------
# Windows at the edges


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_exactly_the_window_one_more_and_empty(tokenizers, kind):
    tok = tokenizers[kind]
    window = 10 - tok.num_special_tokens()  # content tokens of max_seq_length=10
    assert len(tok.encode_batch([_words(window)], add_special_tokens=False)[0].ids) == window
    texts = [_words(window), _words(window + 1), ""]
    rows, counts = encode_documents(tok, texts, None, 10)
    plain = tok.encode_batch(texts)
    # exactly the window, and the empty text: one flat feature, the tokenizer's own encoding
    for i in (0, 2):
        assert rows[i] == {"input_ids": plain[i].ids, "token_type_ids": plain[i].type_ids}
    # one token more: two windows, each in the family's template, together holding every token
    ids = tok.encode_batch([texts[1]], add_special_tokens=False)[0].ids
    bounds = window_bounds(len(ids), window, window // 4)
    assert len(bounds) == 2 and len(rows[1]["input_ids"]) == 2
    for (ws, we), got in zip(bounds, rows[1]["input_ids"]):
        assert got == tok.template.single(ids[ws:we])[0] and len(got) <= 10
    assert bounds[0][0] == 0 and bounds[-1][1] == len(ids)
    assert (counts.windowed, counts.extra_windows, counts.truncated) == (1, 1, 0)


def test_truncate_keeps_the_tokenizers_cut(tokenizers, tmp_path):
    tok = tokenizers["wordpiece"]
    path = tmp_path / "train.tsv"
    texts = [_words(n, n) for n in (3, 8, 9, 30)]
    path.write_text("text\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(texts)))
    labels = LabelMap(["0", "1"])
    cut = sequence_split("train", path, DataConfig(max_seq_length=10, long_text="truncate"), tok, labels, False)
    want = tok.truncated(10).encode_batch(texts)
    assert [f["input_ids"] for f in cut.features] == [e.ids for e in want]
    assert (cut.truncated, cut.windowed, cut.extra_windows) == (2, 0, 0)
    whole = sequence_split("train", path, DataConfig(max_seq_length=10), tok, labels, False)
    assert (whole.truncated, whole.windowed) == (0, 2)
    assert whole.features[:2] == cut.features[:2]  # texts that fit: the same features either way
    assert list(window_counts(whole.features)) == [1, 1, 2, 5]  # 30 tokens: windows of 8 sharing 2
    report = long_text_report("windows", 10, {"train": whole})
    assert report["splits"]["train"] == {"examples": 4, "windowed": 2, "windows": 7, "truncated": 0}


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_a_pair_keeps_its_first_text_in_every_window(tokenizers, kind):
    tok = tokenizers[kind]
    first, second = _words(3), _words(30, 5)
    rows, counts = encode_documents(tok, [first, _words(20)], [second, _words(2)], 16)
    a = tok.encode_batch([first], add_special_tokens=False)[0].ids
    b = tok.encode_batch([second], add_special_tokens=False)[0].ids
    room = 16 - tok.num_special_tokens(pair=True) - len(a)
    bounds = window_bounds(len(b), room, room // 4)
    assert len(rows[0]["input_ids"]) == len(bounds) > 1
    for (ws, we), ids, types in zip(bounds, rows[0]["input_ids"], rows[0]["token_type_ids"]):
        assert (ids, types) == tok.template.pair(a, b[ws:we])
    # a long first text with a short second: cut as truncation cuts it, the second whole, one window
    room = 16 - tok.num_special_tokens(pair=True)
    long_first = tok.encode_batch([_words(20)], add_special_tokens=False)[0].ids
    short = tok.encode_batch([_words(2)], add_special_tokens=False)[0].ids
    assert rows[1]["input_ids"] == tok.template.pair(long_first[:room - len(short)], short)[0]
    assert rows[1]["input_ids"] == tok.truncated(16).encode_batch([(_words(20), _words(2))])[0].ids
    # both long: the first keeps half the window, the second is windowed in the other half
    both, both_counts = encode_documents(tok, [_words(20)], [second], 16)
    window = room - room // 2
    bounds = window_bounds(len(b), window, window // 4)
    assert both[0]["input_ids"] == [tok.template.pair(long_first[:room // 2], b[ws:we])[0] for ws, we in bounds]
    assert (counts.windowed, counts.truncated) == (1, 1) and (both_counts.windowed, both_counts.truncated) == (1, 1)


def test_a_stride_that_cannot_advance_is_a_config_error(tokenizers):
    with pytest.raises(ConfigError, match="window_stride=8: .* no room to"):
        encode_documents(tokenizers["wordpiece"], [_words(30)], None, 10, window_stride=8)


# ----------------------------------------------------------------------------------------------------------
# Batches: windows counted, not documents


def _windows(n: int = 60, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < 0.5, 1, rng.integers(2, 12, n))


@pytest.mark.parametrize("group", [True, False])
def test_training_batches_hold_at_most_the_cap_and_count_the_same_every_epoch(group):
    windows = _windows()
    windows[7] = 25  # more than the cap: a batch of its own
    lengths = windows * 100 + np.arange(len(windows))
    sampler = TrainBatchSampler(lengths, batch_size=4, seed=1, group_by_length=group, windows=windows, max_windows=8)
    for epoch in range(4):
        sampler.set_epoch(epoch)
        batches = [list(b) for b in sampler]
        assert len(batches) == len(sampler)
        assert sorted(i for b in batches for i in b) == list(range(len(windows)))  # every document, once
        for b in batches:
            assert len(b) <= 4 and (windows[b].sum() <= 8 or len(b) == 1)
        assert [7] in batches
        assert windows[batches[0]].sum() == max(windows[b].sum() for b in batches)  # the biggest first


def test_without_long_documents_batches_are_as_before():
    lengths = np.arange(50) % 13 + 1
    before = TrainBatchSampler(lengths, batch_size=8, seed=3)
    after = TrainBatchSampler(lengths, batch_size=8, seed=3, windows=np.ones(50, dtype=int), max_windows=2)
    assert [list(b) for b in before] == [list(b) for b in after] and len(before) == len(after)


def test_evaluation_batches_hold_at_most_the_cap():
    windows = _windows(seed=2)
    sampler = EvalBatchSampler(windows * 10, batch_size=5, rank=0, world_size=1, windows=windows, max_windows=6)
    assert sorted(i for b in sampler for i in b) == list(range(len(windows)))
    assert all(len(b) <= 5 and (windows[b].sum() <= 6 or len(b) == 1) for b in sampler)


def test_collator_gives_rows_with_their_documents():
    features = [{"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 0], "labels": 1, "index": 4},
                {"input_ids": [[2, 6, 7, 3], [2, 8, 3]], "token_type_ids": [[0] * 4, [0] * 3], "labels": 0,
                 "index": 9}]
    batch = Collator(0, max_windows=7)(features)
    assert batch["input_ids"].tolist() == [[2, 5, 3, 0], [2, 6, 7, 3], [2, 8, 3, 0]]
    assert batch["window_doc"].tolist() == [0, 1, 1] and batch["window_chunk"] == 7
    assert batch["index"].tolist() == [4, 9] and batch["labels"].tolist() == [1, 0]
    plain = Collator(0, max_windows=7)(features[:1])  # no long document: the plain batch
    assert "window_doc" not in plain and plain["input_ids"].tolist() == [[2, 5, 3]]


# ----------------------------------------------------------------------------------------------------------
# Pooling, and the plain path's exactness


@pytest.mark.parametrize("mode", ["max", "mean", "attention"])
def test_pooling_modes(mode):
    torch.manual_seed(0)
    pool = WindowPooling(mode, 6)
    x, docs = torch.randn(7, 6), torch.tensor([0, 1, 1, 1, 2, 3, 3])
    out = pool(x, docs)
    for d in range(4):
        rows = x[docs == d]
        if mode == "max":
            want = rows.max(0).values
        elif mode == "mean":
            want = rows.mean(0)
        else:
            want = (torch.softmax(pool.score(rows).squeeze(-1), 0)[:, None] * rows).sum(0)
        torch.testing.assert_close(out[d], want, rtol=0, atol=1e-6)
    assert torch.equal(out[0], x[0]) and torch.equal(out[2], x[4])  # one window: its own vector, exactly


def _hf_config(model_type: str):
    from test_families import tiny_hf_config

    return family_spec(model_type).read_config(tiny_hf_config(model_type).to_dict(), "test")


def _model(model_type: str, mode: str, unpad: str = "auto"):
    config = _hf_config(model_type)  # the family's tiny model
    task = TaskSpec(name="t", family="sequence", labels=["a", "b", "c"])
    family = build_family(task, 3, task.labels, None)
    head = HeadConfig(pooling="pooler", window_pooling=mode)
    torch.manual_seed(0)
    model = assemble(config, head, family.build_head, family.stock_head_kind(head),
                     add_pooling_layer=needs_pooler(config, "sequence", head), unpad=unpad)
    with torch.no_grad():  # no zero biases: every tensor counts
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model.eval(), family


@pytest.mark.parametrize("model_type,unpad", [*[(t, "auto") for t in families()],
                                              ("bert", "true"), ("bert", "false"), ("roberta", "true")])
@pytest.mark.parametrize("mode", ["max", "mean", "max_logits", "attention"])
def test_a_document_of_one_window_gets_the_plain_paths_logits(model_type, unpad, mode):
    model, family = _model(model_type, mode, unpad)
    pad = model.bert.config.pad_token_id
    short = [5, 17, 23, 42, 8]
    long = [[5, 30, 31, 32, 33, 34, 8], [5, 35, 36, 37, 38, 8], [5, 39, 40, 8]]
    collate = Collator(pad, max_windows=16)
    features = [{"input_ids": short, "token_type_ids": [0] * 5, "index": 0},
                {"input_ids": long, "token_type_ids": [[0] * len(w) for w in long], "index": 1}]
    with torch.no_grad():
        plain = model(Collator(pad)([features[0]]))
        batch = collate(features)
        pooled = model(batch, **family.head_kwargs(batch))
    assert pooled.shape == (2, 3) and batch["input_ids"].shape[0] == 4
    torch.testing.assert_close(pooled[0], plain[0], rtol=0, atol=1e-6)


@pytest.mark.parametrize("model_type", families())
def test_max_logits_takes_each_labels_strongest_window(model_type):
    """window_pooling=max_logits: a document's logit for a label is the largest of its windows' logits, each
    window classified alone on the plain path; max pooling of the vectors gives another answer."""
    model, family = _model(model_type, "max_logits")
    pad = model.bert.config.pad_token_id
    long = [[5, 30, 31, 32, 33, 34, 8], [5, 35, 36, 37, 38, 8], [5, 39, 40, 8]]
    alone = [{"input_ids": w, "token_type_ids": [0] * len(w), "index": i} for i, w in enumerate(long)]
    document = [{"input_ids": long, "token_type_ids": [[0] * len(w) for w in long], "index": 0}]
    vector_max, _ = _model(model_type, "max")  # the same seed: the same weights
    with torch.no_grad():
        windows = model(Collator(pad)(alone))  # (3, 3): each window as a text of its own
        batch = Collator(pad, max_windows=16)(document)
        pooled = model(batch, **family.head_kwargs(batch))
        other = vector_max(batch, **family.head_kwargs(batch))
    torch.testing.assert_close(pooled[0], windows.amax(0), rtol=0, atol=1e-6)
    assert (pooled[0] - other[0]).abs().max() > 1e-6  # another answer (not rounding: those agree to 1e-7)


def test_chunked_encoding_equals_one_pass_and_backpropagates():
    model, family = _model("bert", "attention")
    rng = np.random.default_rng(0)
    windows = [[2, *rng.integers(5, 99, 6).tolist(), 3] for _ in range(7)]
    features = [{"input_ids": windows, "token_type_ids": [[0] * 8] * 7, "labels": 1, "index": 0}]
    whole, chunked = Collator(0, max_windows=64)(features), Collator(0, max_windows=3)(features)
    model.train()  # dropout is 0: both passes compute the same function
    grads = []
    for batch in (whole, chunked):
        model.zero_grad()
        logits = model(batch, **family.head_kwargs(batch))
        torch.nn.functional.cross_entropy(logits, batch["labels"]).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        grads[-1]["logits"] = logits.detach()
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------------------------
# Runs: training, the data report, prediction, export, ONNX

QUICK = ("model=bert_tiny", "trainer.max_epochs=1", "trainer.limit_train_batches=3", "data.max_seq_length=16",
         "data.max_windows_per_batch=2")
RUNS = {"max": ("task=sst2", "export=true"), "attention": ("task=sst2", "model.window_pooling=attention", "export=true"),
        "max_logits": ("task=sst2", "model.window_pooling=max_logits", "export=true"),
        "pairs": ("task=stsb", "model.window_pooling=mean", "export=true")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("long_text")
    done: dict[str, tuple[Path, dict]] = {}

    def get(name: str) -> tuple[Path, dict]:
        if name not in done:
            done[name] = (root / name, run_train([*QUICK, *RUNS[name]], root / name))
        return done[name]

    return get


def _dev(name: str) -> list[tuple[str, str | None]]:
    folder, pair = ("sst2", False) if name != "pairs" else ("stsb", True)
    lines = (FIXTURE_DATA / folder / "dev.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    rows = [dict(zip(header, line.split("\t"))) for line in lines[1:]]
    return [(r["sentence1"], r["sentence2"]) if pair else (r["sentence"], None) for r in rows]


def _evaluated(run_dir: Path) -> dict[int, np.ndarray]:
    """The run's own evaluation forward on its dev split: logits by example index."""
    from bertlab.inference.onnx import dev_evaluator

    loaded = load_checkpoint_model(json.loads((run_dir / "metrics.json").read_text())["best_checkpoint"])
    evaluate, batches = dev_evaluator(loaded)
    _, outputs, _ = evaluate(loaded.model)
    return {int(i): row.numpy() for b, out in zip(batches, outputs) for i, row in zip(b["index"], out)}


def _predicted(predictor: Predictor, name: str) -> list[np.ndarray]:
    return sequence.forward(predictor, sequence.features(predictor, _dev(name)), predictor.settings.batch_size)


@pytest.mark.parametrize("name", list(RUNS))
def test_a_run_reports_its_long_texts_and_predicts_as_it_evaluates(runs, name):
    run_dir, metrics = runs(name)
    report = metrics["data"]["long_text"]
    assert report["mode"] == "windows" and report["splits"]["val"]["windowed"] > 0
    assert report["splits"]["val"]["windows"] > report["splits"]["val"]["examples"] / 2
    assert metrics["val"]["num_examples"] == report["splits"]["val"]["examples"]
    evaluated = _evaluated(run_dir)
    predicted = _predicted(Predictor.from_run(run_dir), name)
    assert len(predicted) == len(evaluated)
    for i, logits in enumerate(predicted):
        np.testing.assert_allclose(logits, evaluated[i], rtol=0, atol=1e-5)


def test_cached_frozen_features_keep_one_vector_per_window(train_run):
    """freeze=encoder: the head trained on cached features scores as the head on the encoder's output."""
    frozen = ("freeze=encoder", "model.window_pooling=attention", "task=sst2")
    plain = train_run(*QUICK, *frozen, name="frozen")
    cached = train_run(*QUICK, *frozen, "head.cache_features=true", name="cached")
    assert cached["data"]["long_text"]["splits"]["val"]["windowed"] > 0
    # Cached features come from evaluation batches (other padding than training's): equal to float32 rounding,
    # which Adam carries into ~1e-3 (as tests/test_feature_cache.py allows).
    assert cached["val"]["loss"] == pytest.approx(plain["val"]["loss"], rel=2e-3)


def test_val_check_interval_counts_the_packed_batches(train_run):
    """40 documents at data.batch_size=32 make 2 batches by count, but packed by their windows (at most 2 a batch)
    they make more: an interval inside the packed epoch is accepted, one past it refused with the packed count."""
    from bertlab.runtime.checks import check_epoch_length

    metrics = train_run(*QUICK, "task=sst2", "trainer.val_check_interval=3")  # limit_train_batches=3
    assert metrics["data"]["long_text"]["splits"]["train"]["windowed"] > 0
    trainer = {"val_check_interval": 41}
    check_epoch_length({"val_check_interval": 40}, 40, 32, 1, batches=40)
    with pytest.raises(ConfigError, match=r"\(40 examples, data.batch_size=32, long documents packed by their "
                                          r"windows\) makes 40 batches per epoch"):
        check_epoch_length(trainer, 40, 32, 1, batches=40)
    with pytest.raises(ConfigError, match="makes 20 batches per epoch"):
        check_epoch_length(trainer, 40, 32, 2, batches=40)  # per process


def test_the_truncating_run_reports_its_cuts(train_run):
    metrics = train_run(*QUICK, "task=sst2", "data.long_text=truncate")
    val = metrics["data"]["long_text"]["splits"]["val"]
    assert metrics["data"]["long_text"]["mode"] == "truncate" and val["windowed"] == 0 and val["truncated"] > 0


@pytest.mark.parametrize("name", list(RUNS))
def test_the_hf_export_says_what_a_pipeline_does_and_predicts_the_same(runs, name):
    run_dir, _ = runs(name)
    record = json.loads((run_dir / "export" / "bertlab_long_text.json").read_text())
    assert record["long_text"] == "windows" and record["window_pooling"] == {"pairs": "mean"}.get(name, name)
    assert "transformers pipeline" in record["note"] and "cuts the text" in record["note"]
    assert (run_dir / "export" / "bertlab_head.json").is_file() == (name == "attention")  # attention: no stock head
    want = _predicted(Predictor.from_run(run_dir), name)
    got = _predicted(Predictor.from_run(run_dir / "export"), name)
    np.testing.assert_allclose(np.stack(got), np.stack(want), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["attention", "max_logits", "pairs"])
def test_onnx_pools_windows_as_pytorch(runs, tmp_path, name):
    pytest.importorskip("onnxruntime")
    from bertlab.inference.onnx import export_onnx

    run_dir, _ = runs(name)
    report = export_onnx(run_dir, tmp_path / "onnx")
    assert report["onnx_fp32_vs_pytorch"]["max_abs_logit_diff"] <= 1e-4
    assert "window_doc" in json.loads((tmp_path / "onnx" / "bertlab_onnx.json").read_text())["inputs"]
    want = _predicted(Predictor.from_run(run_dir), name)
    got = _predicted(Predictor.from_run(tmp_path / "onnx"), name)
    np.testing.assert_allclose(np.stack(got), np.stack(want), rtol=0, atol=1e-4)


def test_a_long_document_gets_one_record(runs):
    run_dir, _ = runs("max")
    predictor = Predictor.from_run(run_dir)
    text = " ".join(t.strip() for t, _ in _dev("max"))  # every dev sentence in one document
    record = predictor(text)
    assert record["text"] == text and math.isclose(sum(record["scores"].values()), 1.0, rel_tol=1e-6)
    features = sequence.features(predictor, [(text, None)])
    assert len(features[0]["input_ids"]) > 10  # read in windows, not cut


def test_an_export_of_a_run_that_truncated_predicts_as_before(tmp_path, train_run):
    train_run(*QUICK, "task=sst2", "data.long_text=truncate", name="cut")
    export_checkpoint(tmp_path / "cut", tmp_path / "export")
    record = json.loads((tmp_path / "export" / "bertlab_long_text.json").read_text())
    assert record["long_text"] == "truncate"
    predictor = Predictor.from_run(tmp_path / "export")
    assert predictor.settings.long_text == "truncate" and predictor.settings.max_seq_length == 512


# ----------------------------------------------------------------------------------------------------------
# The study's data (experiments/long_documents/make_data.py), on the bundled samples


def test_the_study_data_hides_one_labelled_sentence_per_document(tmp_path):
    spec = importlib.util.spec_from_file_location("make_data", ROOT / "experiments" / "long_documents" / "make_data.py")
    make_data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_data)
    samples = ROOT / "src" / "bertlab" / "samples"
    for out in ("a", "b"):
        make_data.main([str(samples), str(tmp_path / out), "--train", "6", "--dev", "4", "--min-tokens", "200",
                        "--max-tokens", "300", "--seed", "3"])
    sst2 = {s: label for name in ("train.tsv", "dev.tsv")
            for s, label in make_data.sst2_sentences(samples / "sst2" / name, 1)}
    for split, n in (("train", 6), ("dev", 4)):
        path = tmp_path / "a" / f"{split}.tsv"
        assert path.read_bytes() == (tmp_path / "b" / f"{split}.tsv").read_bytes()  # deterministic
        examples = read_table(path, "text", None, "label", BadExamplePolicy("error"))
        assert len(examples) == n
        lines = path.read_text().splitlines()
        header = lines[0].split("\t")
        for line, example in zip(lines[1:], examples):
            row = dict(zip(header, line.split("\t")))
            decider = row["text"][int(row["decider_start"]):int(row["decider_end"])]
            assert sst2[decider] == row["label"] == example.label and 0.0 <= float(row["position"]) <= 1.0
