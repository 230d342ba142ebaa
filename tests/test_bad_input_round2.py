"""Bad input, round two (issue: reliability, round two, items 7-11): duplicate SQuAD ids, non-finite labels,
records split by each format's own rules, a max_seq_length without room for text, and the remaining
tracebacks turned into one-paragraph errors."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from test_bad_input import TINY, _squad_with, cli_in_process, data_dir

from bertlab.data.readers import BadExamplePolicy, DataError, read_conll, read_table
from bertlab.data.tokenizer import TokenizerError, train_wordpiece
from bertlab.runtime.config import ConfigError, DataConfig


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


# ----------------------------------------------------------------------------------------------------------
# 7. Duplicate SQuAD ids


def _duplicate_id(paragraph):
    paragraph["qas"][1]["id"] = paragraph["qas"][0]["id"]


def test_squad_duplicate_id_names_the_id_and_both_places(train_run, tmp_path):
    root = _squad_with(tmp_path, _duplicate_id)
    with pytest.raises(DataError, match=r"squad_v1\.1/dev\.json: data\[0\]\.paragraphs\[0\]\.qas\[1\]: duplicate "
                                        r"question id 'af77c79141b2a947dc073352', first used at "
                                        r"data\[0\]\.paragraphs\[0\]\.qas\[0\]"):
        train_run(*TINY, "task=squad", data_dir=root)


def test_squad_duplicate_id_skipped_and_counted(tmp_path, caplog):
    from bertlab.data.features import qa_split

    root = _squad_with(tmp_path, _duplicate_id)
    tokenizer = train_wordpiece(["a small vocabulary for a test"] * 4, vocab_size=200)
    cfg = DataConfig(on_bad_example="skip", max_seq_length=128, doc_stride=32, max_query_length=16)
    with caplog.at_level(logging.WARNING):
        split = qa_split("val", root / "squad_v1.1" / "dev.json", cfg, tokenizer, train=False)
    assert split.skipped == 1 and split.num_examples == 9
    assert "duplicate question id" in caplog.text


# ----------------------------------------------------------------------------------------------------------
# 8. Non-finite labels, and the non-finite-loss message (tests/test_reliability.py)


def _regression_files(tmp_path: Path, bad_split: str, value: str) -> Path:
    root = tmp_path / "data" / "sts"
    root.mkdir(parents=True)
    rows = ["text\ttext_pair\tlabel"] + [f"a cat {i}\ta dog {i}\t{i % 5}.0" for i in range(12)]
    for split in ("train", "dev"):
        lines = list(rows)
        if split == bad_split:
            lines[4] = f"a cat\ta dog\t{value}"
        (root / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root.parent


@pytest.mark.parametrize("split,value", [("dev", "nan"), ("train", "inf"), ("train", "-Infinity")])
def test_non_finite_regression_label_is_a_data_error_with_file_and_line(train_run, tmp_path, split, value):
    root = _regression_files(tmp_path, split, value)
    with pytest.raises(DataError, match=rf"sts/{split}\.tsv:5: regression label '{value}' is not a finite number"):
        train_run(*TINY, "task=text_regression", "data.train_file=sts/train.tsv", "data.val_file=sts/dev.tsv",
                  data_dir=root)


def test_non_finite_regression_label_can_be_skipped(train_run, tmp_path):
    root = _regression_files(tmp_path, "dev", "nan")
    metrics = train_run(*TINY, "task=text_regression", "data.train_file=sts/train.tsv", "data.val_file=sts/dev.tsv",
                        "data.on_bad_example=skip", data_dir=root)
    assert metrics["data"]["skipped_examples"] == 1 and metrics["val"]["num_examples"] == 11


# ----------------------------------------------------------------------------------------------------------
# 9. Records are split by the format's own rules


@pytest.mark.parametrize("sep", ["\u2028", "\u0085", "\x0c", "\u2029", "\x1c", "\r"])
def test_unicode_line_separators_do_not_split_rows(tmp_path, sep):
    rows = {".tsv": f"sentence\tlabel\nfirst{sep}half and second half\t1\nother\t0\n",
            ".csv": f"sentence,label\nfirst{sep}half and second half,1\nother,0\n",
            ".jsonl": json.dumps({"sentence": f"first{sep}half and second half", "label": "1"}, ensure_ascii=False)
            + "\n" + json.dumps({"sentence": "other", "label": "0"}) + "\n"}
    for suffix, text in rows.items():
        if sep == "\r" and suffix != ".jsonl":
            continue  # a lone CR ends a CSV/TSV record (the csv module's own rule)
        path = tmp_path / f"data{suffix}"
        path.write_text(text, encoding="utf-8", newline="")
        policy = BadExamplePolicy("skip")
        examples = read_table(path, "sentence", None, "label", policy)
        assert [e.text for e in examples] == [f"first{sep}half and second half", "other"], suffix
        lines = ["1", "2"] if suffix == ".jsonl" else ["2", "3"]  # JSON Lines have no header
        assert [e.where.rsplit(":", 1)[1] for e in examples] == lines, suffix
        assert policy.skipped == 0


def test_quoted_newlines_in_csv_cells_are_kept(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text('sentence,label\n"line one\nline two",1\n"a ""quoted"" word\r\nand more",0\nlast,1\n',
                    encoding="utf-8", newline="")
    examples = read_table(path, "sentence", None, "label", BadExamplePolicy("error"))
    assert [e.text for e in examples] == ["line one\nline two", 'a "quoted" word\r\nand more', "last"]
    assert [e.where.rsplit(":", 1)[1] for e in examples] == ["2", "4", "6"]  # where each record starts


def test_conll_tokens_keep_unicode_whitespace(tmp_path):
    path = tmp_path / "train.conll"
    path.write_text("EU\tB-ORG\nre\u2028jects\tO\n\nPeter\u0085x\tB-PER\n", encoding="utf-8", newline="")
    sentences = read_conll(path, -1, BadExamplePolicy("error"))
    assert [s.words for s in sentences] == [["EU", "re\u2028jects"], ["Peter\u0085x"]]
    assert [s.tags for s in sentences] == [["B-ORG", "O"], ["B-PER"]]


def test_squad_json_with_unicode_separators_in_strings(tmp_path):
    from bertlab.data.readers import read_squad

    def edit(paragraph):
        paragraph["context"] = paragraph["context"].replace(" ", "\u2028", 1)

    root = _squad_with(tmp_path, edit)
    raw = (root / "squad_v1.1" / "dev.json").read_text()
    (root / "squad_v1.1" / "dev.json").write_text(raw.replace("\\u2028", "\u2028"), encoding="utf-8")
    examples = read_squad(root / "squad_v1.1" / "dev.json", train=False, policy=BadExamplePolicy("skip"))
    assert "\u2028" in examples[0].context


# ----------------------------------------------------------------------------------------------------------
# 10. max_seq_length without room for text


@pytest.mark.parametrize("task,length,minimum", [("sst2", 1, 3), ("sst2", 2, 3), ("mrpc", 4, 5),
                                                 ("conll2003", 2, 3)])
def test_max_seq_length_below_the_special_tokens_is_refused_with_the_minimum(train_run, task, length, minimum):
    with pytest.raises(ConfigError, match=rf"data.max_seq_length={length} leaves no room for text: .* Use at "
                                          rf"least {minimum} "):
        train_run(*TINY, f"task={task}", f"data.max_seq_length={length}")


def test_the_minimum_max_seq_length_trains(train_run):
    metrics = train_run(*TINY, "task=sst2", "data.max_seq_length=3")
    assert metrics["val"]["num_examples"] > 0


# ----------------------------------------------------------------------------------------------------------
# 11. The remaining tracebacks


def test_training_split_with_one_class(train_run, tmp_path):
    rows = "sentence\tlabel\n" + "".join(f"text {i}\t1\n" for i in range(10))
    root = data_dir(tmp_path, "sst2", {"train.tsv": rows})
    with pytest.raises(DataError, match=r"sst2/train\.tsv: the training split has only one class \('1' in column "
                                        r"'label'\): a classifier needs examples of at least two classes"):
        train_run(*TINY, "task=text_classification", "data.train_file=sst2/train.tsv",
                  "data.val_file=sst2/dev.tsv", "data.text_column=sentence", data_dir=root)


@pytest.mark.parametrize("override,match", [
    ("trainer.accumulate_grad_batches=0", r"trainer.accumulate_grad_batches=0: .* must be a positive integer"),
    ("data.num_workers=-1", r"data.num_workers=-1: the number of DataLoader worker processes must be 0"),
])
def test_bad_trainer_and_loader_values(train_run, override, match):
    with pytest.raises(ConfigError, match=match):
        train_run(*TINY, "task=sst2", override)


def test_corrupt_tokenizer_json_in_a_run_folder(train_run, tmp_path):
    train_run(*TINY, "task=sst2", name="first")
    tok = tmp_path / "first" / "tokenizer" / "tokenizer.json"
    tok.write_text(tok.read_text()[:200])  # truncated
    with pytest.raises(TokenizerError, match=r"tokenizer/tokenizer\.json could not be read .*the file is damaged"):
        train_run(*TINY, "task=sst2", f"model.init_from={tmp_path / 'first'}", name="second")
    out = cli_in_process(tmp_path, *TINY, "task=sst2", f"model.init_from={tmp_path / 'first'}",
              f"hydra.run.dir={tmp_path / 'third'}")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "bertlab: error: " in out.stderr and "tokenizer.json could not be read" in out.stderr


def test_unreadable_data_file(train_run, monkeypatch):
    original = Path.read_bytes

    def denied(self):
        if self.name == "dev.tsv":
            raise PermissionError(13, "Permission denied", str(self))
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(DataError, match=r"sst2/dev\.tsv: cannot be read \(Permission denied\)"):
        train_run(*TINY, "task=sst2")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_file_without_read_permission(train_run, tmp_path):
    root = data_dir(tmp_path, "sst2")
    (root / "sst2" / "dev.tsv").chmod(0)
    with pytest.raises(DataError, match=r"dev\.tsv: permission denied"):
        train_run(*TINY, "task=sst2", data_dir=root)


def test_data_path_that_is_a_directory(train_run, tmp_path):
    root = data_dir(tmp_path, "sst2")
    (root / "sst2" / "dev.tsv").unlink()
    (root / "sst2" / "dev.tsv").mkdir()
    (root / "sst2" / "dev.tsv" / "part-0.tsv").write_text("sentence\tlabel\n")
    with pytest.raises(DataError, match=r"dev\.tsv: a folder, not a data file; .*\(this folder holds part-0\.tsv\)") as e:
        train_run(*TINY, "task=sst2", data_dir=root)
    assert "data.source=sample" not in str(e.value) and "not found" not in str(e.value)


def test_data_path_that_is_a_symlink_loop(train_run, tmp_path):
    root = data_dir(tmp_path, "sst2")
    dev = root / "sst2" / "dev.tsv"
    dev.unlink()
    os.symlink(root / "sst2" / "loop.tsv", dev)
    os.symlink(dev, root / "sst2" / "loop.tsv")
    with pytest.raises(DataError, match=r"dev\.tsv: a symbolic link that loops back on itself") as e:
        train_run(*TINY, "task=sst2", data_dir=root)
    assert "data.source=sample" not in str(e.value)


def test_dangling_symlink(train_run, tmp_path):
    root = data_dir(tmp_path, "sst2")
    dev = root / "sst2" / "dev.tsv"
    dev.unlink()
    os.symlink(root / "nowhere.tsv", dev)
    with pytest.raises(DataError, match=r"dev\.tsv: a symbolic link that points to nothing"):
        train_run(*TINY, "task=sst2", data_dir=root)




def test_a_cell_longer_than_the_csv_default_is_read_and_the_limit_is_raised_once(tmp_path, monkeypatch):
    import csv

    from bertlab.data import readers

    calls = []
    real = csv.field_size_limit
    monkeypatch.setattr(csv, "field_size_limit", lambda *a: calls.append(a) or real(*a))
    readers._allow_long_cells.cache_clear()
    path = tmp_path / "long.tsv"
    path.write_text("sentence\tlabel\n" + "word " * 40_000 + "\t1\nshort\t0\n", encoding="utf-8")
    for _ in range(3):
        examples = read_table(path, "sentence", None, "label", BadExamplePolicy("error"))
        assert len(examples[0].text) > 128 * 1024 and examples[1].text == "short"
    assert len(calls) == 1  # process-wide state: set once, not around every read
