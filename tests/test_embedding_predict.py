"""``bertlab.predict`` on an embedding run writes JSONL records, or a ``.npy`` matrix with an ids file (the rule of
``bertlab.inference.embedding_output``: ``--output-format npy``, an ``--output`` ending in .npy, or a large input)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_train

from bertlab.inference import embedding_output
from bertlab.predict import main

TEXTS = ["Where is the town of Wrenfield?", "A market has been held in the square every Saturday.", "wool",
         "Ünïcödé text, with punctuation!", "a fifth text"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("emb_predict") / "run"
    run_train(["model=bert_tiny", "task=embedding", "data.source=sample", "trainer.max_steps=1", "data.batch_size=8"],
              run)
    return run


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        main(argv)
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    out = capsys.readouterr()
    return code, out.err + out.out


@pytest.fixture(scope="module")
def jsonl_embeddings(run_dir, tmp_path_factory) -> np.ndarray:
    folder = tmp_path_factory.mktemp("want")
    (folder / "in.txt").write_text("".join(t + "\n" for t in TEXTS))
    main([str(run_dir), str(folder / "in.txt"), "--output", str(folder / "out.jsonl"), "--no-progress"])
    return np.array([json.loads(line)["embedding"] for line in (folder / "out.jsonl").read_text().splitlines()],
                    dtype=np.float32)


def test_an_npy_output_is_the_jsonl_embeddings_as_a_matrix_with_line_ids(run_dir, tmp_path, jsonl_embeddings):
    (tmp_path / "in.txt").write_text("\n" + "".join(t + "\n" for t in TEXTS))  # a blank first line: ids are lines
    main([str(run_dir), str(tmp_path / "in.txt"), "--output", str(tmp_path / "emb.npy"), "--no-progress",
          "--batch-size", "2"])
    matrix = np.load(tmp_path / "emb.npy")
    assert matrix.dtype == np.float32 and matrix.shape == jsonl_embeddings.shape
    assert np.abs(matrix - jsonl_embeddings).max() <= 1e-6
    assert (tmp_path / "emb.ids.txt").read_text().splitlines() == ["2", "3", "4", "5", "6"]


def test_npy_format_takes_a_jsonl_input_ids_and_any_output_name(run_dir, tmp_path, jsonl_embeddings):
    rows = [{"id": f"doc {k}\tx", "text": t} for k, t in enumerate(TEXTS)]
    rows[2].pop("id")  # no id: its line number
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    main([str(run_dir), str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "vectors"), "--output-format", "npy",
          "--no-progress"])
    assert np.abs(np.load(tmp_path / "vectors.npy") - jsonl_embeddings).max() <= 1e-6
    assert (tmp_path / "vectors.ids.txt").read_text().splitlines() == ["doc 0 x", "doc 1 x", "3", "doc 3 x",
                                                                       "doc 4 x"]


def test_a_large_input_is_written_as_a_matrix_beside_the_output(run_dir, tmp_path, jsonl_embeddings, monkeypatch,
                                                                 capsys, caplog):
    monkeypatch.setattr(embedding_output, "LARGE_INPUT", 4)
    (tmp_path / "in.tsv").write_text("id\ttext\n" + "".join(f"{k}\t{t}\n" for k, t in enumerate(TEXTS)))
    code, out = _cli([str(run_dir), str(tmp_path / "in.tsv"), "--output", str(tmp_path / "emb.jsonl"),
                      "--no-progress"], capsys)
    assert code == 0 and "5 inputs (more than 4): embeddings written as a matrix" in out + caplog.text
    assert not (tmp_path / "emb.jsonl").exists()
    assert np.abs(np.load(tmp_path / "emb.npy") - jsonl_embeddings).max() <= 1e-6
    assert (tmp_path / "emb.ids.txt").read_text().splitlines() == ["2", "3", "4", "5", "6"]  # table lines
    main([str(run_dir), str(tmp_path / "in.tsv"), "--output", str(tmp_path / "emb.jsonl"), "--no-progress",
          "--output-format", "jsonl"])
    assert len((tmp_path / "emb.jsonl").read_text().splitlines()) == 5


def test_standard_input_is_held_and_written(run_dir, tmp_path, jsonl_embeddings, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(t + "\n" for t in TEXTS)))
    main([str(run_dir), "-", "--output", str(tmp_path / "emb.npy"), "--no-progress"])
    assert np.abs(np.load(tmp_path / "emb.npy") - jsonl_embeddings).max() <= 1e-6


def test_bad_npy_requests_are_refused(run_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a text\n")
    code, out = _cli([str(run_dir), str(tmp_path / "in.txt"), "--output-format", "npy"], capsys)
    assert code != 0 and "give --output OUT" in out
    # the ids file would replace the input
    (tmp_path / "emb.ids.txt").write_text("a text\n")
    code, out = _cli([str(run_dir), str(tmp_path / "emb.ids.txt"), "--output", str(tmp_path / "emb.npy")], capsys)
    assert code != 0 and "the input file" in out and (tmp_path / "emb.ids.txt").read_text() == "a text\n"
    with pytest.raises(Exception, match="writes an embedding matrix, and this is a sequence model"):
        embedding_output.output_kind("npy", "x.npy", "sequence", 3)
    assert embedding_output.output_kind("auto", "x.npy", "sequence", 10**6) == "jsonl"  # records, as before
    assert embedding_output.output_kind("auto", None, "embedding", 10**6) == "jsonl"  # standard output: text
