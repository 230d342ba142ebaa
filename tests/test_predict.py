"""Prediction on new text: ``bertlab.Predictor``, ``python -m bertlab.predict`` and ``predict=true``.

Each family is trained once (bert_tiny, two steps) and its records are checked against the checkpoint's own
logits on the same inputs: label strings of the data, probabilities, one valid IOB2 tag per word, answers
that are spans of the context. The agreement test compares with ``transformers.pipeline()`` on an export.
"""

from __future__ import annotations

import functools
import io
import json
import re
import sys
from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_DATA, compose, run_train
from test_entry_imports import heavy_imports

from bertlab import Predictor
from bertlab.data.readers import DataError
from bertlab.data.tags import iob1_to_iob2, validate_iob2
from bertlab.data.tokenizer import load_tokenizer
from bertlab.inference.export import load_checkpoint_model
from bertlab.inference.predictor import word_tags_to_entities
from bertlab.inference.text import split_words
from bertlab.models.hf_weights import CheckpointError
from bertlab.predict import main
from bertlab.runtime.config import ConfigError
from bertlab.train import run

QUICK = ("model=bert_tiny", "trainer.max_epochs=1", "trainer.limit_train_batches=2")
CONLL_LABELS = {"O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"}

RUNS = {
    "sst2": ("task=sst2", "export=true"),
    "rte": ("task=rte",),
    "conll2003": ("task=conll2003", "export=true"),
    "squad": ("task=squad", "data.max_seq_length=128", "data.doc_stride=32", "data.max_query_length=24"),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Train each family once per module: name → run dir."""
    root = tmp_path_factory.mktemp("predict")
    @functools.cache
    def get(name: str) -> Path:
        run_train([*QUICK, *RUNS[name]], root / name)
        return root / name

    return get


def _best(run_dir: Path) -> str:
    return json.loads((run_dir / "metrics.json").read_text())["best_checkpoint"]


def _logits(run_dir: Path, encodings) -> list[torch.Tensor]:
    """The checkpoint's logits for each encoding, one at a time (no padding)."""
    model = load_checkpoint_model(_best(run_dir)).model
    outs = []
    with torch.no_grad():
        for e in encodings:
            batch = {"input_ids": torch.tensor([e.ids]), "token_type_ids": torch.tensor([e.type_ids]),
                     "attention_mask": torch.ones(1, len(e.ids), dtype=torch.long)}
            outs.append(model(batch)[0])
    return outs


def _sst2_sentences(n: int = 8) -> list[str]:
    rows = (FIXTURE_DATA / "sst2" / "dev.tsv").read_text().splitlines()[1:]
    return [r.split("\t")[0].strip() for r in rows[:n]]


def _conll_sentences(path: Path = FIXTURE_DATA / "conll2003" / "eng.testa") -> list[list[str]]:
    sentences, words = [], []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(words)
            words = []
        else:
            words.append(line.split()[0])
    if words:
        sentences.append(words)
    return sentences


def _same(a, b, tol: float = 1e-6) -> bool:
    """Records equal up to float rounding (batches padded differently differ in the last bits)."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= tol
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, tol) for x, y in zip(a, b))
    return a == b


def _run_cli(argv: list[str], capsys, stdin: str | None = None, monkeypatch=None) -> tuple[list[dict], str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()  # what a training inside the test printed before
    main(argv)
    captured = capsys.readouterr()
    return [json.loads(line) for line in captured.out.splitlines()], captured.err


# ----------------------------------------------------------------------------------------------------------
# Sequence classification, pairs, regression


def test_classification_records_carry_label_strings_and_probabilities(trained):
    run_dir = trained("sst2")
    texts = _sst2_sentences()
    records = Predictor.from_run(run_dir)(texts)
    logits = _logits(run_dir, load_tokenizer(run_dir / "tokenizer").encode_batch(texts))
    assert [r["text"] for r in records] == texts
    for record, row in zip(records, logits):
        assert set(record) == {"text", "label", "score", "scores"}
        probs = torch.softmax(row, -1)
        assert list(record["scores"]) == ["0", "1"]
        assert record["scores"]["0"] == pytest.approx(float(probs[0]), abs=1e-6)
        assert record["scores"]["1"] == pytest.approx(float(probs[1]), abs=1e-6)
        assert record["label"] == str(int(row.argmax()))
        assert record["score"] == max(record["scores"].values())
    assert _same(Predictor.from_run(run_dir)(texts[0]), records[0])  # one input, one record (as pipeline())


def test_batch_size_and_padding_do_not_change_the_scores(trained):
    # Sentences of very different lengths in one batch: padding must not leak into the shorter ones.
    texts = _sst2_sentences() + ["ok", "a " * 60 + "film"]
    predictor = Predictor.from_run(trained("sst2"))
    one = predictor(texts, batch_size=1)
    many = predictor(texts, batch_size=64)
    for a, b in zip(one, many):
        assert a["label"] == b["label"]
        for label in a["scores"]:
            assert a["scores"][label] == pytest.approx(b["scores"][label], abs=1e-5)


@pytest.mark.parametrize("name", ["sst2", "rte"])
def test_a_text_cut_to_the_window_is_reported_and_one_that_fits_is_not(trained, caplog, name):
    """data.long_text=truncate: a text past max_seq_length is read up to the window, as the run trained, and the
    predict call says how many it cut (single texts and pairs alike); texts that fit say nothing."""
    predictor = Predictor.from_run(trained(name))
    predictor.settings.long_text = "truncate"
    short = "a fine film" if name == "sst2" else ("a fine film", "the film is fine")
    long = "a " * 600 + "film" if name == "sst2" else ("a " * 600 + "film", "the film is fine")

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "bertlab.inference.predictor"]

    caplog.clear()
    with caplog.at_level("WARNING", logger="bertlab.inference.predictor"):
        predictor([short, short])
        assert warnings() == []
        records = predictor([short, long, long])
    assert len(records) == 3
    assert [w.split(" texts longer")[0] for w in warnings()] == ["2"]
    assert "data.long_text=truncate" in warnings()[0]
    if name == "rte":  # windows: a first text too long for half the window is cut, and said so
        predictor.settings.long_text = "windows"
        caplog.clear()
        with caplog.at_level("WARNING", logger="bertlab.inference.predictor"):
            predictor([short, long])
        assert len(warnings()) == 1 and warnings()[0].startswith("1 texts longer")
        assert "first text of each pair was cut" in warnings()[0]


def test_predictor_runs_in_inference_mode_and_moves_to_a_device(trained):
    predictor = Predictor.from_run(trained("sst2"))
    assert predictor.to("cpu") is predictor and predictor.device == torch.device("cpu")
    seen = []
    predictor.model.register_forward_hook(lambda *_: seen.append(torch.is_inference_mode_enabled()))
    predictor(["a fine film"])
    assert seen == [True]
    assert not predictor.model.training


@pytest.mark.parametrize("where", ["run", "export"])
def test_cli_loads_torch_but_not_lightning_torchmetrics_or_transformers(trained, tmp_path, where):
    """A PyTorch prediction imports torch and the model code, not the training stack (seconds of start-up)."""
    model = trained("sst2") / ("export" if where == "export" else "")
    inputs = tmp_path / "in.txt"
    inputs.write_text("a gorgeous, witty film .\nthe plot is a mess\n")
    heavy, done = heavy_imports(["-m", "bertlab.predict", str(model), str(inputs), "--no-progress", "--output",
                                 str(tmp_path / "out.jsonl")], ("torch", "lightning", "torchmetrics", "transformers"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert heavy == ["torch"]
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2


def test_pair_task_reads_tab_separated_lines_and_tuples(trained, tmp_path, capsys):
    run_dir = trained("rte")
    rows = [line.split("\t") for line in (FIXTURE_DATA / "rte" / "dev.tsv").read_text().splitlines()[1:5]]
    pairs = [(r[1], r[2]) for r in rows]
    plain = tmp_path / "pairs.txt"
    plain.write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
    records, err = _run_cli([str(run_dir), str(plain), "--no-progress"], capsys)
    assert [(r["text"], r["text_pair"]) for r in records] == pairs
    assert Predictor.from_run(run_dir)(pairs) == records  # tuples in Python: the same records
    logits = _logits(run_dir, load_tokenizer(run_dir / "tokenizer").encode_batch(*zip(*pairs)))
    labels = load_checkpoint_model(_best(run_dir)).labels
    assert labels == ["entailment", "not_entailment"]
    for record, row in zip(records, logits):
        assert record["label"] == labels[int(row.argmax())]
        assert record["scores"][labels[1]] == pytest.approx(float(torch.softmax(row, -1)[1]), abs=1e-6)


def test_pair_task_line_without_a_tab_names_the_line(trained, tmp_path, capsys):
    bad = tmp_path / "pairs.txt"
    bad.write_text("first\tsecond\nno pair here\n")
    with pytest.raises(SystemExit):
        main([str(trained("rte")), str(bad), "--no-progress"])
    assert re.search(r"bertlab: error: .*pairs\.txt:2: task rte classifies sentence pairs", capsys.readouterr().err)
    with pytest.raises(DataError, match="input 1: task rte classifies sentence pairs"):
        Predictor.from_run(trained("rte"))([("a", "b"), "no pair"])


def test_regression_records_are_values(tmp_path):
    rows = [{"text": f"a cat sat on mat {i}", "text_pair": f"the dog {i}", "label": float(i % 5)}
            for i in range(24)]
    for name, part in (("train", rows), ("dev", rows[:12])):  # dev: not a copy of train (that is refused)
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    run_dir = tmp_path / "run"
    run_train([*QUICK, "task=text_regression", f"data.train_file={tmp_path}/train.jsonl",
               f"data.val_file={tmp_path}/dev.jsonl", "data.text_pair_column=text_pair", "model.vocab_size=200"],
              run_dir)
    pairs = [("a cat sat", "the dog"), ("mat 3", "dog 4")]
    records = Predictor.from_run(run_dir)(pairs)
    logits = _logits(run_dir, load_tokenizer(run_dir / "tokenizer").encode_batch(*zip(*pairs)))
    assert [set(r) for r in records] == [{"text", "text_pair", "value"}] * 2
    for record, row in zip(records, logits):
        assert record["value"] == pytest.approx(float(row[0]), abs=1e-6)


# ----------------------------------------------------------------------------------------------------------
# NER


def test_word_tags_become_valid_iob2_and_entities():
    # An I- tag that starts an entity (after O, after another type, first word) becomes B-.
    text = "Ann  Lee visited New York with IBM staff"
    words = [("Ann", 0), ("Lee", 5), ("visited", 9), ("New", 17), ("York", 21), ("with", 26), ("IBM", 31),
             ("staff", 35)]
    tags = ["I-PER", "I-PER", "O", "I-LOC", "I-LOC", "O", "I-ORG", "I-PER"]
    probs = [0.9, 0.8, 0.99, 0.6, 0.7, 0.9, 0.5, 0.4]
    fixed, entities = word_tags_to_entities(text, words, tags, probs)
    assert fixed == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG", "B-PER"]
    validate_iob2(fixed, where="test")
    assert [(e["type"], e["text"], e["start"], e["end"]) for e in entities] == [
        ("PER", "Ann  Lee", 0, 8), ("LOC", "New York", 17, 25), ("ORG", "IBM", 31, 34), ("PER", "staff", 35, 40)]
    assert entities[0]["score"] == pytest.approx(0.85)


def test_an_entity_before_a_full_stop_ends_at_its_last_letter():
    text = "He flew to New York."
    words = split_words(text)
    _, entities = word_tags_to_entities(text, words, ["O", "O", "O", "B-LOC", "I-LOC", "O"], [0.9] * 6)
    assert [(e["text"], e["start"], e["end"]) for e in entities] == [("New York", 11, 19)]


def test_ner_plain_text_gives_one_valid_tag_per_word(trained):
    run_dir = trained("conll2003")
    sentences = _conll_sentences()[:6]
    texts = ["  ".join(words) + "  " for words in sentences]  # extra whitespace: words are still the words
    records = Predictor.from_run(run_dir)(texts)
    loaded = load_checkpoint_model(_best(run_dir))
    encodings = load_tokenizer(run_dir / "tokenizer").encode_words_batch(sentences)
    for record, words, enc, row in zip(records, sentences, encodings, _logits(run_dir, encodings)):
        assert set(record) == {"text", "entities", "tags", "words", "offsets"}
        assert len(record["tags"]) == len(words) and record["words"] == words
        assert [record["text"][a:b] for a, b in record["offsets"]] == words
        assert set(record["tags"]) <= CONLL_LABELS
        validate_iob2(record["tags"], where=record["text"])
        # Each word's tag is the prediction at its first sub-word, B- where an I- would start an entity.
        first = {}
        for pos, w in enumerate(enc.word_ids):
            if w is not None:
                first.setdefault(w, pos)
        raw = [loaded.labels[int(row[first[w]].argmax())] for w in range(len(words))]
        for got, want, prev in zip(record["tags"], raw, ["O", *record["tags"]]):
            starts = want.startswith("I-") and (prev == "O" or prev[2:] != want[2:])
            assert got == ("B-" + want[2:] if starts else want)
        for entity in record["entities"]:
            assert record["text"][entity["start"]:entity["end"]] == entity["text"]
            assert 0 < entity["score"] <= 1
        assert len(record["entities"]) == sum(t.startswith("B-") for t in record["tags"])


def test_ner_raw_text_splits_punctuation_off_words_and_keeps_offsets(trained):
    texts = ["He flew to New York.", "“Paris,” she said... (in 2019)!", "Prices rose 3.5% in the U.S. market."]
    records = Predictor.from_run(trained("conll2003"))(texts)
    assert records[0]["words"] == ["He", "flew", "to", "New", "York", "."]
    assert records[1]["words"] == ["“", "Paris", ",", "”", "she", "said", "...", "(", "in", "2019", ")", "!"]
    assert records[2]["words"] == ["Prices", "rose", "3.5", "%", "in", "the", "U.S.", "market", "."]
    for record, text in zip(records, texts):
        assert record["text"] == text
        assert [text[a:b] for a, b in record["offsets"]] == record["words"]
        assert len(record["tags"]) == len(record["words"])
        for entity in record["entities"]:  # entities begin and end at word boundaries
            assert text[entity["start"]:entity["end"]] == entity["text"]
            assert entity["start"] in {a for a, _ in record["offsets"]}
            assert entity["end"] in {b for _, b in record["offsets"]}


def test_ner_list_of_words_is_taken_as_it_is(trained):
    record = Predictor.from_run(trained("conll2003"))([["New", "York."]])[0]
    assert record["words"] == ["New", "York."] and record["offsets"] == [[0, 3], [4, 9]]


def test_ner_text_longer_than_the_model_reads_keeps_one_tag_per_word(trained, caplog):
    """Windows (the default): every word read by the model; data.long_text=truncate: the tail is tagged O."""
    words = " ".join(_conll_sentences()[0] * 40).split()  # far past data.max_seq_length tokens
    predictor = Predictor.from_run(trained("conll2003"))
    record = predictor(" ".join(words), word_scores=True)
    assert len(record["tags"]) == len(words) and None not in record["word_scores"]
    validate_iob2(record["tags"], where="long text")
    predictor.settings.long_text = "truncate"
    with caplog.at_level("WARNING", logger="bertlab.inference.predictor"):
        record = predictor(" ".join(words))
    assert len(record["tags"]) == len(words) and set(record["tags"][-20:]) == {"O"}
    validate_iob2(record["tags"], where="long text")
    assert any("1 texts longer than max_seq_length" in r.getMessage() for r in caplog.records)


def test_ner_reads_an_unlabelled_conll_file(trained, tmp_path, capsys):
    """One token per line and no tag column (-DOCSTART- and blank lines as in CoNLL files)."""
    sentences = _conll_sentences()[:5]
    unlabelled = tmp_path / "new.conll"
    unlabelled.write_text("-DOCSTART-\n\n" + "\n".join("".join(w + "\n" for w in s) for s in sentences))
    out = tmp_path / "out.jsonl"
    records, err = _run_cli([str(trained("conll2003")), str(unlabelled), "--output", str(out)], capsys)
    assert records == []  # --output: nothing on standard output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["text"].split(" ") for r in records] == sentences
    assert [len(r["tags"]) for r in records] == [len(s) for s in sentences]
    assert "5/5" in err  # the progress bar, on standard error


# ----------------------------------------------------------------------------------------------------------
# QA


def _squad_questions() -> tuple[list[dict], dict[str, str]]:
    data = json.loads((FIXTURE_DATA / "squad_v1.1" / "dev.json").read_text())
    rows, contexts = [], {}
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                rows.append({"id": qa["id"], "question": qa["question"], "context": paragraph["context"]})
                contexts[qa["id"]] = paragraph["context"]
    return rows, contexts


def test_qa_jsonl_without_answers(trained, tmp_path, capsys):
    rows, contexts = _squad_questions()
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:12]))
    records, _ = _run_cli([str(trained("squad")), str(path), "--batch-size", "5", "--no-progress"], capsys)
    assert [r["id"] for r in records] == [r["id"] for r in rows[:12]]
    for record, row in zip(records, rows):
        assert set(record) == {"id", "question", "answer", "start", "score"}
        assert record["question"] == row["question"]
        assert record["answer"] and contexts[record["id"]][record["start"]:].startswith(record["answer"])
        assert 0 < record["score"] <= 1


def test_qa_squad_json_without_answers_and_python_dicts_agree(trained, tmp_path, capsys):
    data = json.loads((FIXTURE_DATA / "squad_v1.1" / "dev.json").read_text())
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                del qa["answers"]
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(data))
    records, _ = _run_cli([str(trained("squad")), str(path), "--no-progress"], capsys)
    rows, _ = _squad_questions()
    assert [r["id"] for r in records] == [r["id"] for r in rows]
    assert Predictor.from_run(trained("squad"))(rows) == records


# ----------------------------------------------------------------------------------------------------------
# CLI, predict=true, errors


def test_cli_reads_stdin_and_writes_jsonl_to_stdout_only(trained, capsys, monkeypatch):
    texts = _sst2_sentences(3)
    records, err = _run_cli([str(trained("sst2")), "-"], capsys, stdin="".join(t + "\n" for t in texts),
                            monkeypatch=monkeypatch)
    assert [r["text"] for r in records] == texts
    assert records == Predictor.from_run(trained("sst2"))(texts)


def test_cli_reads_a_glue_test_file_and_jsonl(trained, tmp_path, capsys):
    records, _ = _run_cli([str(trained("sst2")), str(FIXTURE_DATA / "sst2" / "test.tsv"), "--no-progress"],
                          capsys)
    rows = [r.split("\t", 1)[1].strip() for r in (FIXTURE_DATA / "sst2" / "test.tsv").read_text().splitlines()[1:]]
    assert [r["text"] for r in records] == rows
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"sentence": t}) + "\n" for t in rows[:3]))
    again, _ = _run_cli([str(_best(trained("sst2"))), str(jsonl), "--no-progress"], capsys)  # a .ckpt works too
    assert _same(again, records[:3])


def test_predict_true_writes_jsonl_records(trained, tmp_path):
    run_dir = tmp_path / "run"
    run_train([*QUICK, "task=sst2", "predict=true", "trainer.limit_train_batches=1"], run_dir)
    records = [json.loads(line) for line in
               (run_dir / "predictions" / "predict_predictions.jsonl").read_text().splitlines()]
    rows = [r.split("\t", 1)[1].strip() for r in (FIXTURE_DATA / "sst2" / "test.tsv").read_text().splitlines()[1:]]
    assert [r["text"] for r in records] == rows
    assert records == Predictor.from_run(run_dir)(rows)


def test_recurrent_model_predicts_too(tmp_path):
    """model=bilstm (no Hugging Face layout): predict=true and Predictor rebuild it from its checkpoint."""
    run_dir = tmp_path / "run"
    run_train([*QUICK, "model=bilstm", "model.embedding_dim=32", "model.hidden_size=16", "task=sst2",
               "predict=true"], run_dir)
    records = [json.loads(line) for line in
               (run_dir / "predictions" / "predict_predictions.jsonl").read_text().splitlines()]
    assert len(records) == 8 and {r["label"] for r in records} <= {"0", "1"}
    assert _same(Predictor.from_run(run_dir)([r["text"] for r in records]), records)


def test_predict_only_needs_no_training_or_validation_files(tmp_path):
    """train=false predict=true on a generic task with only the checkpoint and an unlabelled CoNLL file."""
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train", "dev"):
        text = (FIXTURE_DATA / "wnut17" / ("wnut17train.conll" if name == "train" else "emerging.dev.conll"))
        (data / f"{name}.conll").write_text(text.read_text())
    run_dir = tmp_path / "run"
    run_train([*QUICK, "task=token_classification", f"data.train_file={data}/train.conll",
               f"data.val_file={data}/dev.conll"], run_dir)
    sentences = _conll_sentences(data / "dev.conll")[:4]
    unlabelled = tmp_path / "new.conll"
    unlabelled.write_text("\n".join("".join(w + "\n" for w in s) for s in sentences))
    for name in ("train", "dev"):
        (data / f"{name}.conll").unlink()  # the training data is gone
    out_dir = tmp_path / "predict_run"
    run(compose(["model=bert_tiny", "task=token_classification", "train=false", "predict=true",
                 f"ckpt_path={_best(run_dir)}", f"data.predict_file={unlabelled}"], out_dir))
    records = [json.loads(line) for line in
               (out_dir / "predictions" / "predict_predictions.jsonl").read_text().splitlines()]
    assert [r["text"].split(" ") for r in records] == sentences
    assert records == Predictor.from_run(run_dir)(sentences)  # the file's words, as a list of words each
    # Evaluating needs the label set of a training file: without one, a message that says how to predict.
    with pytest.raises(ConfigError, match=r"data\.train_file is not set.*data\.val_file=null"):
        run(compose(["model=bert_tiny", "task=token_classification", "train=false", "predict=true",
                     f"ckpt_path={_best(run_dir)}", f"data.predict_file={unlabelled}",
                     f"data.val_file={data}/dev.conll"], tmp_path / "eval_run"))


def test_custom_head_export_predicts_what_its_checkpoint_predicts(tmp_path):
    """An export without a stock class (raw-[CLS] MLP probe): BertModel + bertlab's head file."""
    run_dir = tmp_path / "custom"
    run_train([*QUICK, "task=sst2", "head.pooling=cls", "head.hidden_layers=1", "export=true"], run_dir)
    assert (run_dir / "export" / "bertlab_head.json").is_file()
    texts = _sst2_sentences()
    assert _same(Predictor.from_run(run_dir / "export")(texts), Predictor.from_run(run_dir)(texts), tol=1e-5)


def test_a_path_that_is_no_run_says_what_it_takes(tmp_path):
    with pytest.raises(CheckpointError, match="run dir"):
        Predictor.from_run(tmp_path)


# ----------------------------------------------------------------------------------------------------------
# Agreement with transformers.pipeline() on the exported stock heads


def test_exported_classifier_agrees_with_transformers_pipeline(trained):
    transformers = pytest.importorskip("transformers")
    run_dir = trained("sst2")
    texts = _sst2_sentences() + ["Ünïcode ACCENTS, Mixed-Case & punctuation!!"]
    pipe = transformers.pipeline("text-classification", model=str(run_dir / "export"), device="cpu")
    theirs = pipe(texts, top_k=None)
    for source in (run_dir, run_dir / "export"):
        ours = Predictor.from_run(source)(texts)
        for record, scored in zip(ours, theirs):
            best = max(scored, key=lambda s: s["score"])
            assert record["label"] == best["label"]
            assert record["score"] == pytest.approx(best["score"], abs=1e-5)
            assert {s["label"]: s["score"] for s in scored} == pytest.approx(record["scores"], abs=1e-5)


def test_exported_tagger_agrees_with_transformers_pipeline(trained):
    """Per word: the tag and probability at its first sub-word are the pipeline's (aggregation none)."""
    transformers = pytest.importorskip("transformers")
    run_dir = trained("conll2003")
    sentences = _conll_sentences()[:4]
    pipe = transformers.pipeline("token-classification", model=str(run_dir / "export"), device="cpu",
                                 ignore_labels=[])
    for source in (run_dir, run_dir / "export"):
        records = Predictor.from_run(source)([" ".join(s) for s in sentences], word_scores=True)
        for record, words in zip(records, sentences):
            first = {}
            for token in pipe(record["text"]):  # a word's first sub-word starts where the word starts
                first.setdefault(token["start"], token)
            starts = [len(" ".join(words[:i])) + (1 if i else 0) for i in range(len(words))]
            theirs = [first[start] for start in starts]
            assert record["tags"] == iob1_to_iob2([t["entity"] for t in theirs])  # B- where I- starts one
            assert record["word_scores"] == pytest.approx([t["score"] for t in theirs], abs=1e-5)


def test_squad_v2_predictions_answer_nothing_when_the_null_score_wins(tmp_path):
    run_dir = tmp_path / "v2"
    run_train(["model=bert_tiny", "task=squad_v2", "data.source=sample", "trainer.max_steps=2", "logger=csv"], run_dir)
    predictor = Predictor.from_run(run_dir)
    assert predictor.settings.version_2_with_negative
    inputs = [{"question": "Who wrote it?", "context": "The report was written by Ada in the spring of 1843."}]
    predictor.settings.null_score_diff_threshold = -1e9  # any null score wins
    (record,) = predictor(inputs)
    assert record["answer"] == "" and record["start"] == -1 and "null_score_diff" in record
    predictor.settings.null_score_diff_threshold = 1e9  # the best span always wins
    (record,) = predictor(inputs)
    assert record["answer"] and record["start"] >= 0 and "null_score_diff" not in record


def test_backend_torch_on_an_onnx_folder_says_what_the_folder_is_and_what_runs_it(tmp_path, capsys):
    """Not the generic "not a bertlab run dir": the folder is named an ONNX export, with the backend that runs it
    and the run it came from (which PyTorch can load)."""
    from bertlab.inference.loading import load

    folder = tmp_path / "onnx"
    folder.mkdir()
    (folder / "bertlab_onnx.json").write_text(json.dumps({"format": "bertlab-onnx",
                                                          "source": "/runs/sst2/checkpoints/best.ckpt"}))
    with pytest.raises(ConfigError) as err:
        load(folder, backend="torch")
    message = str(err.value)
    assert "is an ONNX export" in message and "--backend onnx" in message and "/runs/sst2" in message
    assert "not a bertlab run dir" not in message
    with pytest.raises(SystemExit):
        main([str(folder), "-", "--backend", "torch"])
    assert "is an ONNX export" in capsys.readouterr().err
