"""SQuAD 2.0: the null answer in decoding, the official evaluate-v2.0.py metric, and task=squad_v2 end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_qa import CLS, SEP, answer, make_tokenizer

from bertlab.data.qa import QAExample, prepare_qa_features
from bertlab.tasks.qa import (
    null_scores,
    postprocess_qa_predictions_v2,
    squad_v2_scores,
)

TINY = ("model=bert_tiny", "trainer.max_epochs=1", "data.batch_size=8", "data.eval_batch_size=5")

# Hand-built questions (the official script's cases): id → (gold answers, prediction, na_prob)
CASES = {
    "q1": (["the Eiffel Tower", "Eiffel Tower"], "Eiffel tower", -3.0),  # exact after normalisation
    "q2": (["in 1889"], "1889 it was", -1.0),  # partial: F1 = 2 * (1/3 * 1/2) / (1/3 + 1/2) = 0.4
    "q3": ([], "", 2.0),  # unanswerable, answered "" → 1, 1
    "q4": ([], "Paris", 0.5),  # unanswerable, answered → 0, 0
    "q5": (["1889"], "", 1.0),  # answerable, answered "" → 0, 0
    "q6": (["A"], "", -2.0),  # the only gold normalizes to nothing: counts as unanswerable → 1, 1
}


def _split():
    refs = {q: golds for q, (golds, _, _) in CASES.items()}
    preds = {q: pred for q, (_, pred, _) in CASES.items()}
    probs = {q: p for q, (_, _, p) in CASES.items()}
    return preds, refs, probs


def test_official_v2_metrics_on_hand_built_questions():
    preds, refs, probs = _split()
    s = squad_v2_scores(preds, refs, na_probs=probs)
    assert s["exact_match"] == pytest.approx(100 * 3 / 6) and s["f1"] == pytest.approx(100 * 3.4 / 6)
    assert s["HasAns_exact"] == pytest.approx(100 / 3) and s["HasAns_f1"] == pytest.approx(100 * 1.4 / 3)
    assert s["NoAns_exact"] == pytest.approx(200 / 3) and s["NoAns_f1"] == pytest.approx(200 / 3)
    assert (s["total"], s["HasAns_total"], s["NoAns_total"]) == (6, 3, 3)
    # find_best_thresh: "no answer" everywhere scores the 3 unanswerable; then in na_prob order q1 (+1 → 4),
    # q6 (±0), q2 (+0.4 → 4.4 best F1 at -1; exact stays 4, best at -3), q4 (-1), q5 (±0), q3 (±0).
    assert s["best_f1"] == pytest.approx(100 * 4.4 / 6) and s["best_f1_thresh"] == -1.0
    assert s["best_exact"] == pytest.approx(100 * 4 / 6) and s["best_exact_thresh"] == -3.0


def test_empty_predictions_and_no_na_probs():
    _, refs, _ = _split()
    s = squad_v2_scores({q: "" for q in refs}, refs)
    # "" is right exactly for the unanswerable (q3, q4, q6) and wrong for the answerable ones.
    assert s["exact_match"] == s["f1"] == pytest.approx(50.0)
    assert s["HasAns_f1"] == 0.0 and s["NoAns_f1"] == 100.0 and "best_f1" not in s
    only_answerable = {"q1": refs["q1"], "q2": refs["q2"]}
    s = squad_v2_scores({"q1": "Eiffel Tower"}, only_answerable)  # q2 has no prediction: it scores 0
    assert s["exact_match"] == 50.0 and "NoAns_f1" not in s and s["HasAns_total"] == 2


def _one_window(ctx="the cat sat on the mat"):
    tok = make_tokenizer()
    examples = [QAExample("a", "who", ctx, [answer(ctx, "cat")]), QAExample("n", "what", ctx, [], is_impossible=True)]
    feats = prepare_qa_features(examples, tok, cls_id=CLS, sep_id=SEP, train=True, max_query_length=4)
    return examples, feats


def test_unanswerable_windows_are_trained_towards_cls():
    _, feats = _one_window()
    assert feats.start_positions[1] == feats.end_positions[1] == 0  # the unanswerable question → [CLS]
    assert feats.start_positions[0] > 0


def _logits(feats, f, span_score, null_score):
    """Start/end logits of feature f: the labelled span scores span_score, [CLS] null_score."""
    n = len(feats.input_ids[f])
    s, e = np.full(n, -5.0), np.full(n, -5.0)
    s[0] = e[0] = null_score / 2
    s[feats.context_start[f]] = e[feats.context_start[f] + 1] = span_score / 2
    return s, e


def test_null_score_against_best_span_with_the_threshold():
    examples, feats = _one_window()
    starts, ends = zip(*[_logits(feats, 0, 3.0, 5.0), _logits(feats, 1, 4.0, 1.0)])
    preds, diffs = postprocess_qa_predictions_v2(examples, feats, starts, ends)
    assert diffs == {"a": pytest.approx(2.0), "n": pytest.approx(-3.0)}
    assert preds == {"a": "", "n": "the cat"}  # "a": null wins by 2 > 0; "n": the span wins
    preds, _ = postprocess_qa_predictions_v2(examples, feats, starts, ends, null_score_diff_threshold=2.5)
    assert preds["a"] == "the cat"
    preds, _ = postprocess_qa_predictions_v2(examples, feats, starts, ends, null_score_diff_threshold=-3.5)
    assert preds == {"a": "", "n": ""}


def test_null_score_is_the_minimum_over_windows_and_only_arrived_windows_count():
    ctx = " ".join(f"w{i}" for i in range(30))
    tok = make_tokenizer()
    ex = [QAExample("long", "who", ctx, [answer(ctx, "w3")])]
    feats = prepare_qa_features(ex, tok, cls_id=CLS, sep_id=SEP, train=False, max_seq_length=16,
                                max_query_length=4, doc_stride=4)
    assert len(feats) >= 3
    starts = [np.r_[float(k), np.zeros(len(feats.input_ids[k]) - 1)] for k in range(len(feats))]
    ends = [np.zeros(len(feats.input_ids[k])) for k in range(len(feats))]
    assert null_scores(feats, starts, ends) == {0: 0.0}
    assert null_scores(feats, starts[1:], ends[1:], feature_indices=range(1, len(feats))) == {0: 1.0}
    preds, _ = postprocess_qa_predictions_v2(ex, feats, [], [], feature_indices=[])
    assert preds == {}  # nothing arrived: the example is not scored


def test_rethresholding_at_best_f1_thresh_reaches_best_f1():
    """The threshold reported on dev is the one to pass back: decoding with it scores best_f1."""
    rng = np.random.default_rng(0)
    ctx = "the cat sat on the mat"
    tok = make_tokenizer()
    examples = [QAExample(f"q{i}", "who", ctx, [answer(ctx, "cat")] if i % 2 else [], is_impossible=not i % 2)
                for i in range(12)]
    feats = prepare_qa_features(examples, tok, cls_id=CLS, sep_id=SEP, train=True, max_query_length=4)
    starts, ends = zip(*[_logits(feats, f, float(rng.normal(0, 2)), float(rng.normal(0, 2)))
                         for f in range(len(feats))])
    refs = {e.id: [a["text"] for a in e.answers] for e in examples}
    preds, diffs = postprocess_qa_predictions_v2(examples, feats, starts, ends)
    best = squad_v2_scores(preds, refs, na_probs=diffs)
    assert best["best_f1_thresh"] <= 0.0 and best["best_f1"] > best["f1"]
    again, _ = postprocess_qa_predictions_v2(examples, feats, starts, ends,
                                             null_score_diff_threshold=best["best_f1_thresh"])
    assert squad_v2_scores(again, refs)["f1"] == pytest.approx(best["best_f1"])


def test_squad_v2_runs_end_to_end_with_the_official_metric_names(train_run, tmp_path):
    m = train_run(*TINY, "task=squad_v2")
    names = {"exact_match", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact", "best_f1",
             "best_f1_thresh", "loss", "num_examples"}
    assert names <= set(m["val"]) and m["monitor"]["metric"] == "val/f1"
    assert m["val"]["num_examples"] == 13 and m["val"]["NoAns_total"] == 3  # the fixture's dev set
    assert m["val"]["loss"] is not None  # unanswerable dev questions still give a span loss (towards [CLS])
    preds = json.loads((tmp_path / "run" / "predictions" / "val_predictions.json").read_text())
    assert len(preds) == 13
    # Evaluating again at the reported best threshold scores the reported best F1.
    again = train_run(*TINY, "task=squad_v2", "train=false", f"ckpt_path={m['best_checkpoint']}",
                      f"data.null_score_diff_threshold={m['val']['best_f1_thresh']}", name="again")
    assert again["val"]["f1"] == pytest.approx(m["val"]["best_f1"])


def test_squad_v1_is_unchanged_by_the_v2_option(train_run):
    m = train_run(*TINY, "task=squad")
    assert "HasAns_f1" not in m["val"] and "best_f1" not in m["val"]


@pytest.mark.slow
def test_ddp_squad_v2_is_scored_exactly_once(tmp_path):
    """2 DDP ranks with windows cut between the shards: the same v2 metrics as one process."""
    from test_distributed import _check_run_dir, _cli, _same_metrics, _single_process_eval

    args = ["task=squad_v2", "data.max_seq_length=64", "data.max_query_length=24", "data.doc_stride=16",
            "data.eval_batch_size=3"]
    _cli([*args, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    m = _check_run_dir(tmp_path / "run", extra={"predictions"})
    assert m["val"]["num_examples"] == 13 and "best_f1_thresh" in m["val"]
    single = _single_process_eval(m, args[:4], tmp_path / "eval")
    _same_metrics(m["val"], single["val"])


@pytest.mark.parametrize("extra", [("trainer.precision=bf16-mixed",), ("freeze=lora",)])
def test_squad_v2_under_bf16_and_lora(train_run, tmp_path, extra):
    m = train_run(*TINY, "task=squad_v2", "trainer.max_steps=2", *extra)
    assert m["val"]["num_examples"] == 13 and m["val"]["loss"] is not None and "best_f1" in m["val"]
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    assert scope["frozen_changed"] == []


def test_when_answering_nothing_is_best_the_threshold_reproduces_it():
    """The official script reports 0.0 there; with null-score differences (here all negative) 0.0 would keep
    every wrong answer, so the threshold reported sits below every difference."""
    refs = {"a": [], "b": [], "c": ["x"]}
    preds = {"a": "wrong", "b": "wrong", "c": "also wrong"}
    s = squad_v2_scores(preds, refs, na_probs={"a": -2.0, "b": -1.0, "c": -0.5})
    assert s["best_f1"] == pytest.approx(200 / 3) and s["best_f1_thresh"] == -3.0
    assert s["best_exact_thresh"] == -3.0


def test_the_span_rules_are_best_spans_keywords_and_a_mistyped_one_is_refused():
    """postprocess_qa_predictions(_v2) pass n_best_size / max_answer_length / use_max_context on to best_spans
    (one place for the rules and their defaults); a keyword best_spans does not take is an error, not ignored."""
    from bertlab.tasks.spans import best_spans, postprocess_qa_predictions

    examples, feats = _one_window()
    starts, ends = zip(*[_logits(feats, 0, 3.0, -9.0), _logits(feats, 1, 4.0, -9.0)])
    for rules in ({}, {"max_answer_length": 1}, {"n_best_size": 1, "use_max_context": True}):
        want = {k: s.text for k, s in best_spans(examples, feats, starts, ends, **rules).items()}
        assert postprocess_qa_predictions(examples, feats, starts, ends, **rules) == want
        assert postprocess_qa_predictions_v2(examples, feats, starts, ends, **rules)[0] == want  # null loses
    for decode in (postprocess_qa_predictions, postprocess_qa_predictions_v2):
        with pytest.raises(TypeError, match="max_answer_len"):
            decode(examples, feats, starts, ends, max_answer_len=5)


def test_predictor_decodes_each_example_once_and_answers_as_postprocess_v2(monkeypatch):
    """A SQuAD 2.0 predictor finds each example's best span once (then weighs it against the null score), and
    its records carry the answers and null-score differences postprocess_qa_predictions_v2 gives for the same
    windows and logits, at any threshold."""
    import torch

    from bertlab.data.tokenizer import EncoderTokenizer
    from bertlab.inference.loading import PredictSettings
    from bertlab.inference.predictor import Predictor
    from bertlab.runtime.config import TaskSpec
    from bertlab.tasks import spans

    class RowWise(torch.nn.Module):
        """Logits of each token from its id alone (as the features give them), (B, T, 2)."""

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(()))

        def forward(self, batch):
            ids = batch["input_ids"].double() * self.w
            return torch.stack([torch.sin(ids), torch.cos(1.3 * ids)], -1)

    def logits(ids):
        ids = np.asarray(ids, dtype=np.float64)
        return np.sin(ids), np.cos(1.3 * ids)

    tokenizer = EncoderTokenizer(make_tokenizer())
    contexts = [" ".join(f"w{(7 * i + j) % 60}" for j in range(12 + 5 * i)) for i in range(6)]
    inputs = [{"question": "who did", "context": c} for c in contexts]
    calls = []
    real = spans.best_spans
    monkeypatch.setattr(spans, "best_spans", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    examples = [QAExample(str(k), x["question"], x["context"]) for k, x in enumerate(inputs)]
    feats = prepare_qa_features(examples, tokenizer.tokenizer, template=tokenizer.template, train=False,
                                max_seq_length=16, doc_stride=4, max_query_length=4)
    assert len(feats) > len(examples)  # windows
    starts, ends = zip(*[logits(ids) for ids in feats.input_ids])
    answered, unanswered = set(), set()
    for threshold in (-1e9, -0.5, 0.0, 0.5, 1e9):
        settings = PredictSettings(max_seq_length=16, doc_stride=4, max_query_length=4, batch_size=4,
                                   version_2_with_negative=True, null_score_diff_threshold=threshold)
        predictor = Predictor(RowWise(), tokenizer, TaskSpec(name="squad_v2", family="qa"), None, settings)
        calls.clear()
        records = predictor(inputs)
        assert len(calls) == 1  # one decoding of the spans per chunk of inputs
        want, diffs = postprocess_qa_predictions_v2(examples, feats, starts, ends,
                                                    null_score_diff_threshold=threshold, use_max_context=True)
        assert [r["answer"] for r in records] == [want[str(k)] for k in range(len(inputs))]
        for k, record in enumerate(records):
            if want[str(k)] == "":
                assert record["null_score_diff"] == pytest.approx(diffs[str(k)])
                unanswered.add(k)
            else:
                assert "null_score_diff" not in record
                answered.add(k)
    assert answered and unanswered  # the thresholds give both kinds of answer
