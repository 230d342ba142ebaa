"""Pre-training at corpus scale: streamed reading, prepared Arrow shards (keyed, atomic), BERT example
statistics, disjoint reads across ranks and workers, the datamodule switch, the capped vocabulary sample."""

from __future__ import annotations

import os
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from bertlab.data import pretrain
from bertlab.data.batching import FeatureDataset, TrainBatchSampler
from bertlab.data.datamodule import TaskDataModule
from bertlab.data.mlm import IS_NEXT, NOT_NEXT
from bertlab.data.rawtext import iter_corpus, read_corpus, split_sentences
from bertlab.data.readers import DataError
from bertlab.data.tokenizer import train_wordpiece
from bertlab.runtime.config import ConfigError, DataConfig, TaskSpec

pytest.importorskip("datasets")

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma "
         "tau upsilon phi chi psi omega river stone cloud field light tower").split()


def write_corpus(path: Path, n_docs: int, seed: int = 0, sentences=(3, 12), words=(3, 9)) -> Path:
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        sents = []
        for _ in range(rng.randint(*sentences)):
            ws = [rng.choice(WORDS) for _ in range(rng.randint(*words))]
            sents.append(" ".join([ws[0].capitalize(), *ws[1:]]) + ".")
        # two sentences per line: the sentence splitter has work to do
        docs.append("\n".join(" ".join(sents[i:i + 2]) for i in range(0, len(sents), 2)))
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokenizer():
    rng = random.Random(1)
    texts = [" ".join(rng.choice(WORDS) for _ in range(8)) + "." for _ in range(300)]
    return train_wordpiece(texts, vocab_size=200)


def prep(corpus, tok, cache, **kw):
    args = {"split": "train", "max_seq_length": 32, "nsp": True, "seed": 0, "num_proc": 1, **kw}
    return pretrain.prepare([corpus], tok, cache, **args)


# ----------------------------------------------------------------------------------------------------
# Streaming reader


def test_iter_corpus_streams_the_same_documents_and_lines_split_later(tmp_path):
    text = tmp_path / "c.txt"
    text.write_bytes("\ufeffIt rained. We stayed in.\r\nMr. Moll left.\n\n \nSecond doc here.\rThird line.\n"
                     .encode())
    wiki = tmp_path / "w.tokens"
    wiki.write_text(" = A = \n \n First . Second .\n \n = = Sub = = \n Third .\n = B = \n Fourth .\n")
    for path in (text, wiki):
        docs = list(iter_corpus([path]))
        assert docs == read_corpus([path])
        lines = list(iter_corpus([path], sentences=False))
        assert [[s for line in doc for s in split_sentences(line)] for doc in lines] == docs
    assert read_corpus([text]) == [["It rained.", "We stayed in.", "Mr. Moll left."],
                                   ["Second doc here.", "Third line."]]


def test_iter_corpus_reads_lazily(tmp_path):
    corpus = write_corpus(tmp_path / "c.txt", 50)
    it = iter_corpus([corpus])
    first = next(it)  # one document, without reading and splitting the rest
    assert first == read_corpus([corpus])[0]


# ----------------------------------------------------------------------------------------------------
# Preparation: once, keyed, atomic


def test_second_run_reuses_the_prepared_corpus_without_reading_text(tmp_path, tokenizer, monkeypatch):
    corpus = write_corpus(tmp_path / "c.txt", 30)
    first = prep(corpus, tokenizer, tmp_path / "cache")
    assert (first / "examples").is_dir() and (first / "meta.json").is_file()

    def no_reading(*args, **kwargs):
        raise AssertionError("the corpus text was read again")

    monkeypatch.setattr("bertlab.data.rawtext.iter_corpus", no_reading)
    monkeypatch.setattr(pretrain, "_block_examples", no_reading)
    assert prep(corpus, tokenizer, tmp_path / "cache") == first


def test_key_follows_corpus_tokenizer_and_settings(tmp_path, tokenizer):
    corpus = write_corpus(tmp_path / "c.txt", 20)
    base = prep(corpus, tokenizer, tmp_path / "cache")
    assert prep(corpus, tokenizer, tmp_path / "cache", max_seq_length=48) != base
    assert prep(corpus, tokenizer, tmp_path / "cache", nsp=False) != base
    other_tok = train_wordpiece(["omega psi chi. " * 20, "tower light field."], vocab_size=120)
    assert prep(corpus, other_tok, tmp_path / "cache") != base
    text = corpus.read_text()
    corpus.write_text(text.replace("Alpha", "Omega", 1) if "Alpha" in text else "Z" + text[1:])  # same size
    edited = prep(corpus, tokenizer, tmp_path / "cache")
    assert edited != base
    with open(corpus, "a") as f:
        f.write("\nNew final doc here.\n")
    assert prep(corpus, tokenizer, tmp_path / "cache") not in (base, edited)
    # A copy elsewhere (another machine's disk, another modification time) keeps the key.
    copy = tmp_path / "elsewhere" / corpus.name
    copy.parent.mkdir()
    copy.write_bytes(corpus.read_bytes())
    os.utime(copy, (1, 1))
    assert pretrain.corpus_fingerprint([copy]) == pretrain.corpus_fingerprint([corpus])


def test_interrupted_preparation_leaves_no_usable_cache_and_the_next_run_restarts(tmp_path, tokenizer,
                                                                                  monkeypatch):
    corpus = write_corpus(tmp_path / "c.txt", 20)
    settings = {"split": "train", "fmt": "auto", "max_seq_length": 32, "nsp": True, "short_seq_prob": 0.1,
                "seed": 0, "block_documents": 1000}
    final = pretrain.prepared_dir(tmp_path / "cache", "train", pretrain.preparation_key([corpus], tokenizer,
                                                                                       settings))

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(pretrain, "_block_examples", crash)
        with pytest.raises(KeyboardInterrupt):
            prep(corpus, tokenizer, tmp_path / "cache")
    assert not final.exists()
    # A process killed outright leaves its temporary folder behind: the next run removes it.
    stale = final.with_name(final.name + ".tmp999999")
    (stale / "examples").mkdir(parents=True)
    assert prep(corpus, tokenizer, tmp_path / "cache") == final
    assert not stale.exists() and (final / "examples").is_dir()


def test_one_document_with_nsp_is_a_data_error(tmp_path, tokenizer):
    corpus = tmp_path / "one.txt"
    corpus.write_text("Only one document here. It has two sentences.\n")
    with pytest.raises(DataError, match="two documents"):
        prep(corpus, tokenizer, tmp_path / "cache")


# ----------------------------------------------------------------------------------------------------
# Example statistics


def _rows(folder):
    ex = pretrain.ArrowExamples(folder, nsp=True)
    return [ex[i] for i in range(len(ex))], ex


def test_nsp_pairs_are_half_is_next_and_within_max_seq_length(tmp_path, tokenizer):
    corpus = write_corpus(tmp_path / "c.txt", 400, seed=3)
    rows, ex = _rows(prep(corpus, tokenizer, tmp_path / "cache", max_seq_length=48, block_documents=50))
    labels = Counter(r["next_sentence_label"] for r in rows)
    assert set(labels) == {IS_NEXT, NOT_NEXT}
    is_next = labels[IS_NEXT] / len(rows)
    assert len(rows) > 500 and 0.44 < is_next < 0.56, (len(rows), is_next)
    assert ex.meta["is_next_fraction"] == pytest.approx(is_next)
    for r in rows:
        ids, types = r["input_ids"], r["token_type_ids"]
        assert len(ids) <= 48 and ids[0] == tokenizer.cls_id and ids.count(tokenizer.sep_id) == 2
        first_b = types.index(1)
        assert ids[first_b - 1] == tokenizer.sep_id and ids[-1] == tokenizer.sep_id
        assert first_b >= 3 and len(ids) - first_b >= 2  # A and B both hold tokens
    assert np.array_equal(ex.lengths(), [len(r["input_ids"]) for r in rows])
    assert (ex.lengths() == 48).mean() > 0.3  # packed: full-length pairs are the most common length


def test_one_block_gives_exactly_the_in_memory_examples(tmp_path, tokenizer):
    # Within a block the streamed builder is BERT's in-memory one (data/mlm.py), on the same random stream.
    from bertlab.data.mlm import build_nsp_examples, pack_pair

    corpus = write_corpus(tmp_path / "c.txt", 80, seed=4)
    rows, _ = _rows(prep(corpus, tokenizer, tmp_path / "cache", max_seq_length=40, block_documents=1000))
    docs = [[tokenizer.encode_batch([s], add_special_tokens=False)[0].ids for s in doc]
            for doc in read_corpus([corpus])]
    expected = build_nsp_examples(docs, None, 37, random.Random("0-train-0"), short_seq_prob=0.1, nsp=True)
    assert [r["input_ids"] for r in rows] == [pack_pair(e.tokens_a, e.tokens_b, tokenizer.cls_id,
                                                        tokenizer.sep_id)[0] for e in expected]
    assert [r["next_sentence_label"] for r in rows] == [e.next_sentence_label for e in expected]


def test_short_seq_prob_shortens_that_fraction_of_documents(tmp_path, tokenizer):
    # One-word sentences ("Alpha." = 2 tokens): a document's first segment is its target length, or one less.
    corpus = write_corpus(tmp_path / "c.txt", 1500, seed=5, sentences=(40, 40), words=(1, 1))
    max_len = 34  # max_num_tokens = 32 without NSP

    def first_segment_lengths(p):
        folder = prep(corpus, tokenizer, tmp_path / f"cache{p}", nsp=False, max_seq_length=max_len,
                      short_seq_prob=p)
        ex = pretrain.ArrowExamples(folder, nsp=False)
        lengths = ex.lengths()
        # 40 sentences of 2 tokens = 80 tokens per document: documents restart where a row follows
        # a row shorter than the target, so take rows in order and cut at each document's 80 tokens.
        firsts, used = [], 0
        for n in lengths:
            if used == 0:
                firsts.append(n - 2)
            used += n - 2
            if used >= 80:
                used = 0
        return np.asarray(firsts)

    assert len(first_segment_lengths(0.0)) == 1500 and (first_segment_lengths(0.0) >= 31).all()
    short = (first_segment_lengths(0.3) < 30).mean()
    expected = 0.3 * 28 / 31  # randint(2, 32) < 30 (the odd target loses one token to whole sentences)
    assert abs(short - expected) < 4 * np.sqrt(expected * (1 - expected) / 1500), short


def test_examples_do_not_depend_on_the_number_of_processes(tmp_path, tokenizer):
    corpus = write_corpus(tmp_path / "c.txt", 60, seed=7)
    one, _ = _rows(prep(corpus, tokenizer, tmp_path / "a", block_documents=10, num_proc=1))
    two, _ = _rows(prep(corpus, tokenizer, tmp_path / "b", block_documents=10, num_proc=2))
    assert one == two


# ----------------------------------------------------------------------------------------------------
# Distributed reads


def _indices(batch):
    return [f["index"] for f in batch]


def test_two_ranks_two_workers_read_each_example_once_per_epoch(tmp_path, tokenizer):
    corpus = write_corpus(tmp_path / "c.txt", 60, seed=9)
    ex = pretrain.ArrowExamples(prep(corpus, tokenizer, tmp_path / "cache"), nsp=True, limit=40)
    assert len(ex) == 40
    for epoch in (0, 1):
        seen: Counter[int] = Counter()
        per_rank = []
        for rank in (0, 1):
            sampler = TrainBatchSampler(ex.lengths(), batch_size=5, seed=0, rank=rank, world_size=2)
            sampler.set_epoch(epoch)
            loader = DataLoader(FeatureDataset(ex), batch_sampler=sampler, num_workers=2, collate_fn=_indices,
                                multiprocessing_context="fork" if sys.platform == "linux" else None)
            got = [i for batch in loader for i in batch]
            per_rank.append(set(got))
            seen.update(got)
        assert per_rank[0].isdisjoint(per_rank[1])
        assert seen == Counter(range(40))


# ----------------------------------------------------------------------------------------------------
# The datamodule


def _module(tmp_path, tokenizer, **data):
    train = write_corpus(tmp_path / "train.txt", 40, seed=11)
    val = write_corpus(tmp_path / "val.txt", 10, seed=12)
    cfg = DataConfig(train_file=str(train), val_file=str(val), cache_dir=str(tmp_path / "cache"),
                     max_seq_length=32, batch_size=4, eval_batch_size=4, **data)
    task = TaskSpec(name="mlm", family="mlm", nsp=True)
    return TaskDataModule(task, cfg, tokenizer, seed=0)


def test_datamodule_streams_mlm_with_dynamic_train_masks_and_fixed_eval_masks(tmp_path, tokenizer):
    dm = _module(tmp_path, tokenizer, stream=True, prep_num_proc=1)
    assert dm.streamed()
    dm.setup("fit")
    assert isinstance(dm.splits["train"].features, pretrain.ArrowExamples)
    batch = next(iter(dm.train_dataloader()))
    assert batch["input_ids"].shape[0] == 4 and set(batch["next_sentence_label"].tolist()) <= {0, 1}
    assert (batch["labels"] != -100).any()
    first = [b["input_ids"].clone() for b in dm.val_dataloader()]
    again = [b["input_ids"].clone() for b in dm.val_dataloader()]
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


def test_stream_auto_follows_the_size_threshold_and_true_needs_a_cache_dir(tmp_path, tokenizer):
    assert not _module(tmp_path, tokenizer).streamed()  # a small file: the in-memory path, as before
    assert _module(tmp_path, tokenizer, stream_threshold_mb=0.001).streamed()
    assert not _module(tmp_path, tokenizer, stream=False, stream_threshold_mb=0).streamed()
    dm = _module(tmp_path, tokenizer, stream=True)
    dm.cfg.cache_dir = None
    with pytest.raises(ConfigError, match="cache_dir"):
        dm.streamed()
    with pytest.raises(ConfigError, match="data.stream"):
        DataConfig(stream="sometimes")


def test_without_datasets_auto_reads_into_memory_and_true_says_what_to_install(tmp_path, tokenizer, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets → ImportError
    assert not _module(tmp_path, tokenizer, stream_threshold_mb=0).streamed()
    with pytest.raises(ConfigError, match="pip install datasets"):
        _module(tmp_path, tokenizer, stream=True).streamed()


def test_vocabulary_sample_is_capped_spread_and_deterministic(tmp_path, tokenizer):
    dm = _module(tmp_path, tokenizer)
    full = dm.training_texts()
    assert full == [s for doc in read_corpus([dm.cfg.train_file]) for s in doc]
    assert dm.training_texts(max_bytes=10**9) == full
    cap = 2000
    sample = dm.training_texts(max_bytes=cap)
    assert sample == dm.training_texts(max_bytes=cap)
    assert 0 < sum(len(s) + 1 for s in sample) < cap + 1000 and len(sample) < len(full)
    docs = read_corpus([dm.cfg.train_file])
    assert docs[1][0] not in sample  # every k-th document, k > 1: the second one is skipped


@pytest.mark.bench
def test_benchmark_tiny_smoke(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import pretrain_data

    report = pretrain_data.main(["--tiny", "--num-proc", "1", "--no-hf", "--workdir", str(tmp_path),
                                 "--json", str(tmp_path / "r.json")])
    (row,) = report["rows"]
    assert row["bertlab_prep"]["examples"] > 0 and row["bertlab_prep"]["peak_rss_mb"] > 0
    assert row["encode_mb_s"] > 0 and row["first_batch_s"] > 0 and (tmp_path / "r.json").is_file()


def test_mid_epoch_resume_on_prepared_data_continues_with_the_same_batches_and_masks(tmp_path, tokenizer):
    def run(state=None):
        dm = _module(tmp_path, tokenizer, stream=True, prep_num_proc=1)
        dm.setup("fit")
        if state is not None:
            dm.load_state_dict({"labels": None, "train_sampler": state})
        return [(b["index"].tolist(), b["input_ids"], b["labels"]) for b in dm.train_dataloader()]

    full = run()
    assert len(full) > 4
    resumed = run({"seed": 0, "epoch": 0, "batches_done": 3})
    assert len(resumed) == len(full) - 3
    for (i1, x1, y1), (i2, x2, y2) in zip(full[3:], resumed, strict=True):
        assert i1 == i2 and torch.equal(x1, x2) and torch.equal(y1, y2)
