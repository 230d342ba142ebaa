"""predict=true: predictions of the best checkpoint for an unlabelled file, in <run_dir>/predictions/.

Sequence: GLUE-submission TSV (index column of the file, label strings); token: CoNLL word<TAB>tag;
QA: id → answer text. Each is checked against the checkpoint's own logits on the same inputs.
"""

from __future__ import annotations

import json

import torch
from conftest import FIXTURE_DATA, run_train

from bertlab.export import load_checkpoint_model
from bertlab.tokenization import load_tokenizer

QUICK = ("model=bert_tiny", "trainer.max_epochs=1", "trainer.limit_train_batches=2", "predict=true")


def _best(run_dir):
    return json.loads((run_dir / "metrics.json").read_text())["best_checkpoint"]


def _logits(run_dir, encodings):
    model = load_checkpoint_model(_best(run_dir)).model
    outs = []
    with torch.no_grad():
        for e in encodings:  # one at a time: no padding to reason about
            batch = {"input_ids": torch.tensor([e.ids]), "token_type_ids": torch.tensor([e.type_ids]),
                     "attention_mask": torch.ones(1, len(e.ids), dtype=torch.long)}
            outs.append(model(batch)[0])
    return outs


def test_sequence_predictions_are_a_glue_submission(tmp_path):
    # A GLUE-style test file with non-consecutive indices, to prove the file's own index column is used.
    rows = (FIXTURE_DATA / "sst2" / "test.tsv").read_text().splitlines()[1:]
    sentences = [r.split("\t", 1)[1] for r in rows]
    test_file = tmp_path / "test.tsv"
    test_file.write_text("index\tsentence\n" + "".join(f"{100 + 3 * i}\t{s}\n" for i, s in enumerate(sentences)))
    run_dir = tmp_path / "run"
    run_train([*QUICK, "task=sst2", f"data.predict_file={test_file}"], run_dir)

    lines = (run_dir / "predictions" / "predict_predictions.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction"
    got = [line.split("\t") for line in lines[1:]]
    assert [i for i, _ in got] == [str(100 + 3 * i) for i in range(len(sentences))]
    assert {p for _, p in got} <= {"0", "1"}
    tokenizer = load_tokenizer(run_dir / "tokenizer")
    logits = _logits(run_dir, tokenizer.encode_batch(sentences))
    assert [p for _, p in got] == [str(int(x.argmax())) for x in logits]


def test_sequence_predictions_on_the_preset_test_file(tmp_path):
    # The preset's data.predict_file (sst2/test.tsv: index + sentence, no label column).
    run_dir = tmp_path / "run"
    run_train([*QUICK, "task=sst2", "trainer.limit_train_batches=1"], run_dir)
    lines = (run_dir / "predictions" / "predict_predictions.tsv").read_text().splitlines()
    indices = [r.split("\t")[0] for r in (FIXTURE_DATA / "sst2" / "test.tsv").read_text().splitlines()[1:]]
    assert lines[0] == "index\tprediction"
    assert [line.split("\t")[0] for line in lines[1:]] == indices


def test_token_predictions_are_conll(tmp_path):
    run_dir = tmp_path / "run"
    run_train([*QUICK, "task=conll2003", "data.predict_file=conll2003/eng.testa"], run_dir)
    text = (run_dir / "predictions" / "predict_predictions.conll").read_text()
    predicted = [[line.split("\t") for line in block.splitlines()] for block in text.strip("\n").split("\n\n")]

    sentences, words = [], []
    for line in (FIXTURE_DATA / "conll2003" / "eng.testa").read_text().splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(words)
            words = []
        else:
            words.append(line.split()[0])
    if words:
        sentences.append(words)
    assert [[w for w, _ in s] for s in predicted] == sentences

    # Each word's tag is the checkpoint's prediction at its first sub-word.
    loaded = load_checkpoint_model(_best(run_dir))
    encodings = load_tokenizer(run_dir / "tokenizer").encode_words_batch(sentences)
    for sent, enc, logits in zip(predicted, encodings, _logits(run_dir, encodings)):
        first = {}
        for pos, w in enumerate(enc.word_ids):
            if w is not None and w not in first:
                first[w] = pos
        expected = [loaded.labels[int(logits[first[w]].argmax())] if w in first else "O"
                    for w in range(len(sent))]
        assert [t for _, t in sent] == expected


def test_qa_predictions_map_ids_to_answers(tmp_path):
    # An unlabelled SQuAD file: the dev questions with their answers removed.
    data = json.loads((FIXTURE_DATA / "squad_v1.1" / "dev.json").read_text())
    contexts = {}
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = []
                contexts[qa["id"]] = paragraph["context"]
    unlabelled = tmp_path / "questions.json"
    unlabelled.write_text(json.dumps(data))
    run_dir = tmp_path / "run"
    run_train([*QUICK, "task=squad", "data.max_seq_length=128", "data.doc_stride=32",
               f"data.predict_file={unlabelled}"], run_dir)
    answers = json.loads((run_dir / "predictions" / "predict_predictions.json").read_text())
    assert set(answers) == set(contexts)
    for qid, answer in answers.items():
        assert answer in contexts[qid]
