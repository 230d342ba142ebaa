"""The work one example can cause is bounded (bertlab.data.windows.WindowCap, data.max_windows_per_example):
long documents (single texts and pairs), QA contexts and long token-task sentences are read in at most that many
windows — over it an error naming the example, or with data.on_bad_example=skip their first windows, warned and
counted — and a huge text is never tokenized whole. The run's plan states the cap, and a stop signal is
answered inside a step that runs on (training.stopping.STEP_GRACE_S)."""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest
from conftest import run_train

from bertlab.data.documents import encode_documents
from bertlab.data.qa import QAExample, prepare_qa_features
from bertlab.data.tags import tag_features
from bertlab.data.tokenizer import train_tokenizer
from bertlab.data.windows import CHARS_PER_TOKEN, WindowCap, window_bound_text
from bertlab.runtime.config import DataConfig
from bertlab.runtime.errors import DataError, JobStopped

WORDS = [f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(40)]  # one token each


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer([" ".join(WORDS)] * 3, "wordpiece", vocab_size=200, min_frequency=1)


def _words(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


# max_seq_length 10 with [CLS] .. [SEP]: 8 tokens a window, stride 2 (a quarter): windows advance by 6 tokens.
# 8 + 6 * 2 = 20 tokens fit 3 windows; 21 need a fourth.


def test_a_document_over_the_cap_is_an_error_naming_it(tok):
    texts = [_words(5), _words(20), _words(21)]
    rows, counts = encode_documents(tok, texts[:2], None, 10, cap=WindowCap(3))
    assert len(rows[1]["input_ids"]) == 3 and counts.capped == 0  # at the cap: read whole
    with pytest.raises(DataError, match=r"train.tsv:4: an example of 4 windows of 8 tokens \(21 tokens\), over "
                                        r"data.max_windows_per_example=3: .*data.on_bad_example=skip"):
        encode_documents(tok, texts, None, 10, cap=WindowCap(3, "error", "train.tsv"),
                         names=["train.tsv:2", "train.tsv:3", "train.tsv:4"])


def test_skip_reads_the_first_windows_warns_and_counts(tok, caplog):
    texts = [_words(21), _words(5), _words(400), _words(20)]
    uncapped, _ = encode_documents(tok, texts, None, 10)
    with caplog.at_level(logging.WARNING, logger="bertlab.data.windows"):
        rows, counts = encode_documents(tok, texts, None, 10, cap=WindowCap(3, "skip"))
    assert counts.capped == 2 and counts.windowed == 3 and counts.extra_windows == 2 * 3
    assert rows[0]["input_ids"] == uncapped[0]["input_ids"][:3]  # the first windows, as without the cap
    assert rows[2]["input_ids"] == uncapped[2]["input_ids"][:3]
    assert rows[1] == uncapped[1] and rows[3] == uncapped[3]  # under the cap: unchanged
    assert "read its first 3 windows" in caplog.text and caplog.text.count("over data.max_windows") == 2


def test_a_pairs_windowed_second_text_is_capped(tok):
    rows, counts = encode_documents(tok, [_words(3)] * 2, [_words(200), _words(4)], 12, cap=WindowCap(2, "skip"))
    assert len(rows[0]["input_ids"]) == 2 and counts.capped == 1
    with pytest.raises(DataError, match="max_windows_per_example=2"):
        encode_documents(tok, [_words(3)], [_words(200)], 12, cap=WindowCap(2))


def test_a_huge_text_is_never_tokenized_whole(tok, monkeypatch):
    """A 4 MB single line: what the tokenizer is given is cut to what the cap's windows hold."""
    seen: list[int] = []
    encode = type(tok).encode_batch

    def spy(self, texts, pairs=None, add_special_tokens=True):
        seen.extend(len(t) for t in texts)
        return encode(self, texts, pairs, add_special_tokens)

    monkeypatch.setattr(type(tok), "encode_batch", spy)
    huge = _words(1_000_000)
    cap = WindowCap(3, "skip")
    start = time.perf_counter()
    rows, counts = encode_documents(tok, [huge, _words(5)], None, 10, cap=cap)
    assert time.perf_counter() - start < 5
    assert max(seen) <= cap.char_limit(8, 2) == (8 + 2 * 6) * CHARS_PER_TOKEN
    assert len(rows[0]["input_ids"]) == 3 and counts.capped == 1  # counted once (cut, then windowed)
    # Truncated (data.long_text=truncate) and the first text of a pair: one window's worth is tokenized.
    seen.clear()
    encode_documents(tok, [huge], None, 10, long_text="truncate")
    encode_documents(tok, [huge], [_words(4)], 10, cap=cap)
    assert max(seen) <= 10 * CHARS_PER_TOKEN


def test_no_cap_reads_every_window(tok):
    rows, counts = encode_documents(tok, [_words(400)], None, 10, cap=WindowCap(None))
    assert len(rows[0]["input_ids"]) == 1 + -(-(400 - 8) // 6) and counts.capped == 0


def test_a_qa_context_over_the_cap(tok):
    """A QA context is read in at most the cap's windows (its answer past them: the windows say no answer)."""
    context = _words(300)
    examples = [QAExample(id="long", question="wab wbb", context=context,
                          answers=[{"text": WORDS[5], "answer_start": context.index(WORDS[5])}]),
                QAExample(id="short", question="wab", context=_words(6),
                          answers=[{"text": WORDS[1], "answer_start": 4}])]
    kw = dict(template=tok.template, train=True, max_seq_length=16, doc_stride=4, max_query_length=4)
    with pytest.raises(DataError, match=r"QA example 'long': an example of 1,199 characters \(more than the 992 that 3 windows of 13 "
                                        r"tokens can hold\), over data.max_windows_per_example=3"):
        prepare_qa_features(examples, tok.tokenizer, cap=WindowCap(3), **kw)
    qa = prepare_qa_features(examples, tok.tokenizer, cap=WindowCap(3, "skip"), **kw)
    assert qa.example_index.count(0) == 3 and qa.example_index.count(1) == 1 and qa.capped == 1
    assert qa.start_positions[0] > 0  # the answer in the first window is still labelled
    whole = prepare_qa_features(examples, tok.tokenizer, **kw)
    assert whole.example_index.count(0) > 3 and whole.capped == 0


def test_a_long_token_task_sentence_over_the_cap(tok):
    words = [[WORDS[i % 40] for i in range(100)], WORDS[:3]]
    encodings = tok.encode_words_batch(words, add_special_tokens=False)
    with pytest.raises(DataError, match=r"train.conll:1: an example of \d+ windows .*=2"):
        tag_features(encodings, tok.template, 10, cap=WindowCap(2), names=["train.conll:1", "train.conll:103"])
    features, _, sentence, counts = tag_features(encodings, tok.template, 10, cap=WindowCap(2, "skip"))
    assert sentence.count(0) == 2 and sentence.count(1) == 1 and counts.capped == 1


def test_the_plan_states_the_cap():
    assert window_bound_text(DataConfig(max_windows_per_example=5), "sequence") == \
        "at most 5 windows an example (data.max_windows_per_example; over: an error)"
    assert "its first windows read, counted" in window_bound_text(
        DataConfig(max_windows_per_example=5, on_bad_example="skip"), "qa")
    assert "no cap" in window_bound_text(DataConfig(max_windows_per_example=None), "token")
    assert window_bound_text(DataConfig(long_text="truncate"), "sequence") is None
    assert window_bound_text(DataConfig(), "mlm") is None


QUICK = ("model=bert_tiny", "task=sst2", "trainer.max_epochs=1", "trainer.limit_train_batches=2",
         "data.max_seq_length=16", "data.max_windows_per_example=1")


def test_a_run_refuses_or_counts_examples_over_the_cap(tmp_path, caplog):
    with pytest.raises(DataError, match=r"train.tsv:\d+: an example of 2 windows .*max_windows_per_example=1"):
        run_train(list(QUICK), tmp_path / "refused")
    with caplog.at_level(logging.INFO):
        metrics = run_train([*QUICK, "data.on_bad_example=skip"], tmp_path / "skipped")
    train = metrics["data"]["long_text"]["splits"]["train"]
    assert train["capped"] > 0 and train["windows"] == train["windowed"]  # one window each: the cap
    assert "at most 1 windows an example (data.max_windows_per_example; over: its first windows read" in caplog.text


def test_a_stop_signal_is_answered_inside_a_step_that_runs_on(tmp_path, monkeypatch):
    """SIGTERM while a step runs: the step may end (then last.ckpt is saved), but one that runs on past the
    grace period is stopped inside it, between two Python operations (a forward over chunks of windows)."""
    from bertlab.training import stopping

    monkeypatch.setattr(stopping, "STEP_GRACE_S", 0.2)
    stop = stopping.GracefulStop(tmp_path, "python train.py ... ckpt_path=last")
    stop.install()
    stop.training = True
    try:
        start = time.perf_counter()
        with pytest.raises(JobStopped, match=r"did not end within 0.2 s of SIGTERM.*stopped inside it") as err:
            os.kill(os.getpid(), signal.SIGTERM)
            while time.perf_counter() - start < 10:  # a step over thousands of windows, a chunk at a time
                sum(range(1000))
        assert err.value.signum == signal.SIGTERM and time.perf_counter() - start < 5
    finally:
        stop.uninstall()
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
