"""Pre-training at corpus scale: streamed reading, prepared Arrow shards (keyed, atomic), BERT example
statistics, disjoint reads across ranks and workers, the datamodule switch, the capped vocabulary sample."""

from __future__ import annotations

import io
import json
import logging
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import Callback
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

    monkeypatch.setattr(pretrain, "_shard_documents", no_reading)
    monkeypatch.setattr(pretrain, "_prepare_shard", no_reading)
    assert prep(corpus, tokenizer, tmp_path / "cache") == first


def test_key_follows_corpus_tokenizer_and_settings(tmp_path, tokenizer):
    corpus = write_corpus(tmp_path / "c.txt", 20)
    base = prep(corpus, tokenizer, tmp_path / "cache")
    assert prep(corpus, tokenizer, tmp_path / "cache", max_seq_length=48) != base
    assert prep(corpus, tokenizer, tmp_path / "cache", nsp=False) != base
    assert prep(corpus, tokenizer, tmp_path / "cache", shard_bytes=500) != base
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


def _wikitext(path: Path, n_docs: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    parts = []
    for d in range(n_docs):
        parts.append(f" = Article {d} = \n \n")
        for s in range(rng.randint(1, 3)):
            parts.append(f" = = Section {s} = = \n \n")
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30)))
            parts.append(f" {words.capitalize()} . {words} .\n \n")
    path.write_text("".join(parts), encoding="utf-8")
    return path


@pytest.mark.parametrize("shard_bytes", [300, 1000, 4000, 10**6])
def test_shards_cut_at_document_boundaries_and_read_the_corpus_exactly(tmp_path, shard_bytes):
    small = tmp_path / "small.txt"
    small.write_text("One small file. With one document.\n", encoding="utf-8")
    paths = [write_corpus(tmp_path / "a.txt", 40, seed=1), small, _wikitext(tmp_path / "w.tokens", 30),
             write_corpus(tmp_path / "b.txt", 25, seed=2)]
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbf\n\n" + (tmp_path / "a.txt").read_bytes().replace(b"\n", b"\r\n", 9))
    shards = pretrain.plan_shards(paths, "auto", shard_bytes)
    # The shards cover every byte of every file once, in order.
    pieces = [p for shard in shards for p in shard]
    assert [(i, s) for i, s, _ in pieces][0] == (0, 0)
    for (i1, _, e1), (i2, s2, _) in zip(pieces, pieces[1:]):
        assert (i2 == i1 and s2 == e1) or (i2 == i1 + 1 and s2 == 0)
    assert [e for i, _, e in pieces if i == len(paths) - 1][-1] == paths[-1].stat().st_size
    docs = [pretrain._shard_documents(shard, paths, "auto") for shard in shards]
    per_shard = [list(d) for d in docs]
    assert [doc for shard in per_shard for doc in shard] == list(iter_corpus(paths, sentences=False))
    if shard_bytes < 10**6:
        assert len(shards) > 5
        assert all(len(shard) >= 2 for shard in per_shard)  # every shard has a NotNext partner
    else:
        assert len(shards) == 1  # small files grouped whole


def test_interrupted_preparation_resumes_with_the_shards_it_has_not_finished(tmp_path, tokenizer, monkeypatch):
    corpus = write_corpus(tmp_path / "c.txt", 60, seed=8)
    whole = prep(corpus, tokenizer, tmp_path / "whole", shard_bytes=1200)
    n_shards = pretrain.ArrowExamples(whole, nsp=True).meta["shards"]
    assert n_shards >= 6
    settings = pretrain.preparation_settings([corpus], split="train", max_seq_length=32, nsp=True, seed=0,
                                             shard_bytes=1200)
    final = pretrain.prepared_dir(tmp_path / "cache", "train",
                                  pretrain.preparation_key([corpus], tokenizer, settings))
    real = pretrain._prepare_shard
    calls: list[int] = []

    def crash_at_the_fourth_shard(index, *args, **kwargs):
        calls.append(index)
        if len(calls) == 4:
            raise KeyboardInterrupt  # Ctrl-C, or a kill, in the middle of the fourth shard
        return real(index, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(pretrain, "_prepare_shard", crash_at_the_fourth_shard)
        with pytest.raises(KeyboardInterrupt):
            prep(corpus, tokenizer, tmp_path / "cache", shard_bytes=1200)
    assert not final.exists()  # no usable preparation until every shard is done
    partial = final.with_name(final.name + ".partial")
    assert sorted(p.name for p in (partial / "examples").glob("*.json")) == ["00000.json", "00001.json",
                                                                            "00002.json"]
    # A process killed outright in the middle of a shard leaves a half-written file: removed on resume.
    (partial / "examples" / "00003.arrow.tmp999999").write_bytes(b"half")

    calls.clear()
    with monkeypatch.context() as m:
        m.setattr(pretrain, "_prepare_shard", lambda index, *a, **k: calls.append(index) or real(index, *a, **k))
        assert prep(corpus, tokenizer, tmp_path / "cache", shard_bytes=1200) == final
    assert calls == list(range(3, n_shards))  # only the unfinished shards
    assert not partial.exists() and not list((final / "examples").glob("*.tmp*"))
    resumed, ex = _rows(final)
    assert resumed == _rows(whole)[0] and ex.meta["resumed_shards"] == 3
    assert ex.meta["examples"] == len(resumed) and ex.meta["documents"] == 60


def test_a_preparation_left_by_an_earlier_version_is_removed(tmp_path, tokenizer):
    corpus = write_corpus(tmp_path / "c.txt", 20)
    settings = pretrain.preparation_settings([corpus], split="train", max_seq_length=32, nsp=True, seed=0)
    final = pretrain.prepared_dir(tmp_path / "cache", "train",
                                  pretrain.preparation_key([corpus], tokenizer, settings))
    stale = final.with_name(final.name + ".tmp999999")
    (stale / "examples").mkdir(parents=True)
    assert prep(corpus, tokenizer, tmp_path / "cache") == final
    assert not stale.exists() and (final / "examples").is_dir()


def test_bad_utf8_names_the_file_and_line_and_leaves_nothing_to_resume(tmp_path, tokenizer):
    corpus = write_corpus(tmp_path / "c.txt", 30, seed=2)
    lines = corpus.read_bytes().split(b"\n")
    lines[40] = b"Bad \xff byte here."
    corpus.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError, match=r"c\.txt:41: not valid UTF-8"):
        prep(corpus, tokenizer, tmp_path / "cache", shard_bytes=800)
    assert not list((tmp_path / "cache" / "pretrain").glob("*.partial"))


def test_progress_bar_reports_the_corpus_megabytes_and_a_rate(tmp_path, tokenizer, capfd):
    from rich.console import Console

    corpus = write_corpus(tmp_path / "c.txt", 200, seed=6)
    size = corpus.stat().st_size
    out = io.StringIO()
    prep(corpus, tokenizer, tmp_path / "cache", shard_bytes=3000, progress=Console(file=out, width=80))
    text = out.getvalue()
    assert f"{size / 1e6:.2f}/{size / 1e6:.2f} MB" in text and "MB/s" in text and "train: preparing" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    capfd.readouterr()
    prep(corpus, tokenizer, tmp_path / "cache2", shard_bytes=3000, progress=False)  # quiet=true
    assert capfd.readouterr().err == ""


def test_progress_bar_follows_the_console_mode():
    from bertlab.runtime.console import configure_console

    handler = logging.StreamHandler(io.StringIO())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)  # as a run's logging configuration sets it
    try:
        configure_console("normal")
        assert pretrain.console_shows_progress()
        configure_console("quiet")
        assert not pretrain.console_shows_progress()
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_one_document_with_nsp_is_a_data_error(tmp_path, tokenizer):
    corpus = tmp_path / "one.txt"
    corpus.write_text("Only one document here. It has two sentences.\n")
    with pytest.raises(DataError, match="two documents"):
        prep(corpus, tokenizer, tmp_path / "cache")


# ----------------------------------------------------------------------------------------------------
# Example statistics


def _rows(folder):
    ex = pretrain.ArrowExamples(folder, nsp=True)
    # The id sequences are numpy views into the memory map; lists compare and search more plainly here.
    return [{k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in ex[i].items()} for i in range(len(ex))], ex


def test_rows_are_read_by_row_not_mapped_and_survive_pickling(tmp_path, tokenizer):
    # Rows come back as the Arrow files hold them (compared with pyarrow's own reading), the shard files are
    # never memory-mapped (a mapping would grow the resident set with every row read in random order), and
    # a pickled copy (a spawned rank or worker) reads the same rows.
    import pickle

    import pyarrow as pa

    corpus = write_corpus(tmp_path / "c.txt", 60, seed=5)
    folder = prep(corpus, tokenizer, tmp_path / "cache", shard_bytes=1500, block_documents=5)
    ex = pretrain.ArrowExamples(folder, nsp=True)
    expected = []
    for name in ex.meta["shard_files"]:
        with pa.OSFile(str(folder / name)) as f:
            expected += pa.ipc.open_stream(f).read_all().to_pylist()
    assert len(ex) == len(expected) > 100 and ex.meta["shards"] > 2
    order = np.random.default_rng(0).permutation(len(ex))
    for i in order:
        row = ex[i]
        assert row["index"] == i and row["input_ids"].tolist() == expected[i]["input_ids"]
        assert row["token_type_ids"].tolist() == expected[i]["token_type_ids"]
        assert row["next_sentence_label"] == expected[i]["next_sentence_label"]
    assert ex.lengths().tolist() == [r["length"] for r in expected]
    if os.path.exists("/proc/self/maps"):
        maps = Path("/proc/self/maps").read_text()
        assert str(folder) not in maps and "examples/00000.arrow" not in maps
    copy = pickle.loads(pickle.dumps(ex))
    assert [copy[i]["input_ids"].tolist() for i in order[:20]] == [ex[i]["input_ids"].tolist() for i in order[:20]]
    with pytest.raises(IndexError):
        ex[len(ex)]
    limited = pretrain.ArrowExamples(folder, nsp=False, limit=7)
    assert len(limited) == 7 and len(limited.lengths()) == 7 and "next_sentence_label" not in limited[6]


def test_a_truncated_shard_is_an_error_that_says_to_prepare_again(tmp_path, tokenizer):
    folder = prep(write_corpus(tmp_path / "c.txt", 20, seed=6), tokenizer, tmp_path / "cache")
    ex = pretrain.ArrowExamples(folder, nsp=True)
    last = folder / ex.meta["shard_files"][-1]
    last.write_bytes(last.read_bytes()[: last.stat().st_size - 600])  # the tail of the last record batch
    with pytest.raises(DataError, match="shorter than its own index.*prepare it anew"):
        for i in range(len(ex)):
            ex[i]
    with pytest.raises(DataError, match="cannot be read.*prepare it anew"):
        pretrain.ArrowExamples(folder, nsp=True)


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
    expected = build_nsp_examples(docs, None, 37, random.Random("0-train-0-0"), short_seq_prob=0.1, nsp=True)
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
    one, _ = _rows(prep(corpus, tokenizer, tmp_path / "a", block_documents=10, num_proc=1, shard_bytes=2000))
    two, meta = _rows(prep(corpus, tokenizer, tmp_path / "b", block_documents=10, num_proc=2, shard_bytes=2000))
    assert one == two and meta.meta["num_proc"] == 2 and meta.meta["shards"] > 2


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


class RecordExampleIds(Callback):
    """Writes, per rank, the example ids of every training batch and the loader's worker count (the DDP
    test below loads it into both ranks by its dotted name)."""

    def __init__(self, out: str):
        self.out = Path(out)
        self.seen: list[list[int]] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.seen.append([trainer.current_epoch, *batch["index"].tolist()])

    def on_train_end(self, trainer, pl_module):
        self.out.mkdir(parents=True, exist_ok=True)
        info = {"world_size": trainer.world_size, "num_workers": trainer.train_dataloader.num_workers,
                "seen": self.seen}
        (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(info))


@pytest.mark.slow
def test_ddp_cpu_with_two_workers_trains_on_each_example_once_per_epoch(tmp_path):
    # The real command line: 2 DDP processes (Lightning starts rank 1 as a second train.py), each with a
    # DataLoader of 2 worker processes, on a prepared corpus; 2 epochs of 48 examples in batches of 4.
    train = write_corpus(tmp_path / "train.txt", 60, seed=21)
    val = write_corpus(tmp_path / "val.txt", 10, seed=22)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "offline",
           "PYTHONPATH": os.pathsep.join([str(root / "tests"), os.environ.get("PYTHONPATH", "")]),
           "BERTLAB_ALLOW_TARGETS": "test_pretrain.RecordExampleIds"}
    for key in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_PORT", "SLURM_PROCID"):
        env.pop(key, None)
    ids = tmp_path / "ids"
    cmd = [sys.executable, str(root / "train.py"), "task=mlm", "task.nsp=true", "model=bert_tiny",
           "trainer=ddp_cpu", "logger=csv", "quiet=true", f"data.train_file={train}", f"data.val_file={val}",
           "data.text_format=plain", "data.stream=true", "data.prep_num_proc=1", "data.num_workers=2",
           "data.max_seq_length=32", "data.batch_size=4", "data.max_train_samples=48",
           "trainer.max_epochs=2", "trainer.limit_val_batches=1", f"paths.cache_dir={tmp_path / 'cache'}",
           f"hydra.run.dir={tmp_path / 'run'}", "+callbacks.ids._target_=test_pretrain.RecordExampleIds",
           f"+callbacks.ids.out={ids}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "preparing" not in proc.stdout + proc.stderr  # quiet=true: no progress bar, no INFO line
    ranks = [json.loads((ids / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["world_size"] == 2 and r["num_workers"] == 2 for r in ranks)
    for epoch in (0, 1):
        per_rank = [[i for batch in r["seen"] if batch[0] == epoch for i in batch[1:]] for r in ranks]
        assert len(per_rank[0]) == len(per_rank[1]) == 24  # 6 batches of 4 on each rank
        assert set(per_rank[0]).isdisjoint(per_rank[1])
        assert Counter(per_rank[0] + per_rank[1]) == Counter(range(48))  # once each, across the world


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
    assert _module(tmp_path, tokenizer).streamed()  # by default every corpus takes the lean prepared path
    assert DataConfig().stream_threshold_mb == 0
    assert not _module(tmp_path, tokenizer, stream_threshold_mb=64).streamed()  # a small file under a threshold
    assert _module(tmp_path, tokenizer, stream_threshold_mb=0.001).streamed()
    assert not _module(tmp_path, tokenizer, stream=False, stream_threshold_mb=0).streamed()
    auto = _module(tmp_path, tokenizer)
    auto.cfg.cache_dir = None  # nowhere to prepare it: auto reads into memory
    assert not auto.streamed()
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

    try:
        import litdata  # noqa: F401  (the optional second engine: docs/pretraining.md, The bench)
        has_litdata = True
    except ImportError:
        has_litdata = False
    report = pretrain_data.main(["--tiny", "--num-proc", "1", "--no-hf", "--read-workers", "0",
                                 "--read-batches", "3", "--workdir", str(tmp_path), "--json", str(tmp_path / "r.json")])
    (row,) = report["rows"]
    assert row["bertlab_prep"]["examples"] > 0 and row["bertlab_prep"]["peak_rss_mb"] > 0
    assert row["encode_mb_s"] > 0 and row["first_batch_s"] > 0 and (tmp_path / "r.json").is_file()
    assert row["bertlab_read"]["batches_per_s"] > 0 and row["bertlab_read"]["tokens_per_s"] > 0
    if has_litdata:
        # The same examples (bertlab's builder), written and read by litdata.
        assert row["litdata_prep"]["examples"] == row["bertlab_prep"]["examples"]
        assert row["litdata_prep"]["mb_s"] > 0 and row["litdata_prep"]["peak_rss_mb"] > 0
        assert row["litdata_read"]["batches_per_s"] > 0 and row["litdata_read"]["first_batch_s"] > 0
    else:
        assert "litdata_prep" not in row


def test_benchmark_memory_curve_plots_every_measured_side(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import pretrain_data

    def mem(rss):
        return {"peak_rss_mb": rss, "peak_pss_mb": rss // 2}

    report = {"rows": [{"corpus_mb": 500.0, "bertlab_train": mem(1800), "hf_train": mem(9000), "bertlab_prep": mem(900)},
                       {"corpus_mb": 100.0, "bertlab_train": mem(1700), "hf_train": mem(4000), "bertlab_prep": mem(800)}]}
    (tmp_path / "r.json").write_text(json.dumps(report))
    pretrain_data.main(["--plot-from", str(tmp_path / "r.json"), "--plot", str(tmp_path / "m.png")])
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_benchmark_training_runs_compose_with_every_override_known(tmp_path):
    """The bench's bertlab training runs are ``train.py`` command lines: every key must exist (the bench runs
    minutes before it would reach them) and say what the bench reports (MLM + NSP, bert_mini, prepared path)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import pretrain_data
    from hydra import compose, initialize_config_dir

    from bertlab.runtime.overrides import _check

    conf = Path(__file__).resolve().parents[1] / "conf"
    fmt = {"tok": str(tmp_path / "tok"), "corpus": str(tmp_path / "c.tokens"), "val": str(tmp_path / "v.tokens"),
           "seq": 128, "num_proc": 2, "workers": 2}
    overrides = pretrain_data._bertlab_train_overrides(fmt, tmp_path / "cache", tmp_path / "run", 50)
    _check(overrides, conf, "train")  # an unknown key or group option raises here
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("train", overrides=[o for o in overrides if not o.startswith("hydra.")])
    assert cfg.task.name == "mlm" and cfg.task.nsp and cfg.model.name == "bert_mini"
    assert cfg.data.stream is True and cfg.trainer.max_steps == 50 and cfg.seed == 0
    assert cfg.model.tokenizer == fmt["tok"] and cfg.data.cache_dir == str(tmp_path / "cache")


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
