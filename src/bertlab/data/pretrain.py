"""Pre-training data at corpus scale: prepared once, shard by shard, into Arrow files (Hugging Face
``datasets``), read back by row.

The in-memory path (``data/features.py`` ``mlm_split``) reads the whole corpus into Python lists. This one
never holds more than one block of documents per process:

1. **Plan shards**: the corpus files are cut into shards of about ``shard_bytes`` bytes of text, at
   document boundaries (a line after a blank line for plain text, a `` = Title = `` line for WikiText),
   found by reading a few lines around each cut point, not the corpus. Small files are grouped whole into
   one shard. The plan depends only on the files and ``shard_bytes`` (by default a function of the corpus
   size), never on the number of processes.
2. **Prepare every shard** in ``num_proc`` processes (a process pool, shards handed out one at a time):
   read its lines, group them into documents and blocks of ``block_documents`` documents, split the
   lines into sentences (``split_sentences``), encode each block's sentences (ids only,
   ``BertTokenizer.encode_ids_batch``), and build the examples as BERT's ``create_pretraining_data.py``
   does (``data/mlm.py``):
   segments packed up to ``max_seq_length``, NSP pairs when ``nsp`` is set. A NotNext B comes from
   another document **of the same block** (the approximation streaming forces: the original draws from
   the whole corpus in memory); a block never crosses a shard. The random numbers of a block are seeded
   by (seed, split, shard, block), so the examples depend neither on ``num_proc`` nor on resuming.
   Each shard's examples (``input_ids``, ``token_type_ids``, ``next_sentence_label``, ``length``) are
   written block by block with ``datasets``' own ``ArrowWriter`` to ``examples/NNNNN.arrow``, renamed
   into place when complete, then its counts to ``examples/NNNNN.json``: the completion marker.
3. **Finish**: everything is written under ``<cache_dir>/pretrain/<split>-<key>.partial``; when every
   shard is complete, ``meta.json`` is written and the folder is renamed to ``<split>-<key>`` (an atomic
   rename), so a usable preparation is always a whole one. ``key`` hashes the corpus fingerprint
   (:func:`corpus_fingerprint`), the tokenizer fingerprint and the settings.

**Resume**: a preparation interrupted (killed, Ctrl-C, a crash) leaves its ``.partial`` folder; the next
run with the same key keeps the shards that have their marker, deletes half-written files, and prepares
only the others. The result is the same as an uninterrupted preparation's.

The prepared folder is read by :class:`bertlab.data.prepared.ArrowExamples` (re-exported here), row by row.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bertlab.data.corpus import (
    Piece,
    _blocks,
    _shard_documents,
    auto_shard_bytes,
    corpus_fingerprint,
    plan_shards,
)
from bertlab.data.mlm import (
    IGNORE_INDEX,
    IS_NEXT,
    _pairs_from_document,
    _segments_from_document,
    max_num_tokens_for,
)
from bertlab.data.prepared import ArrowExamples, read_meta  # noqa: F401  (ArrowExamples: imported from here too)
from bertlab.data.readers import DataError
from bertlab.data.tokenizer import BertTokenizer, content_hash
from bertlab.runtime.errors import RecordError
from bertlab.runtime.files import cache_lock
from bertlab.runtime.records import read_record

log = logging.getLogger(__name__)

PREP_VERSION = "2"
# A shard's marker (examples/NNNNN.json): the keys bertlab reads back on a resume, and their types.
MARKER_SHAPE = {"shard": int, "bytes": int, "documents": int, "examples": int, "is_next": int}

# ----------------------------------------------------------------------------------------------------
# One shard: documents → blocks → examples → an Arrow file (runs in the pool's worker processes)


def _features():
    import datasets

    return datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int32")),
                              "token_type_ids": datasets.Sequence(datasets.Value("int8")),
                              "next_sentence_label": datasets.Value("int16"),
                              "length": datasets.Value("int32")})


def _block_table(block: list[list[str]], rng: random.Random, tokenizer: BertTokenizer,
                 settings: dict[str, Any]):
    """The examples of one block as an Arrow table: split sentences, encode them (ids only), pack
    segments / NSP pairs in the tokenizer's template (``[CLS] A [SEP] B [SEP]``, RoBERTa's ``<s> A </s></s> B
    </s>``: ``EncoderTokenizer.build_inputs``), built as flat arrays."""
    import pyarrow as pa

    from bertlab.data.rawtext import split_sentences

    nsp = settings["nsp"]
    max_num_tokens = max_num_tokens_for(settings["max_seq_length"], nsp, tokenizer.num_special_tokens(pair=nsp))
    sentences = [[s for line in lines for s in split_sentences(line)] for lines in block]
    flat = [s for doc in sentences for s in doc]
    it = iter(tokenizer.encode_ids_batch(flat) if flat else [])
    docs = [[ids for ids in (next(it) for _ in doc) if ids] for doc in sentences]
    docs = [doc for doc in docs if doc]
    ids: list[int] = []
    types: list[int] = []
    lengths: list[int] = []
    labels: list[int] = []
    for d in range(len(docs)):
        if nsp:
            if len(docs) < 2:
                break  # a block of one document: only a shard of one document gives one
            examples = _pairs_from_document(docs, d, max_num_tokens, settings["short_seq_prob"], rng)
        else:
            examples = _segments_from_document(docs[d], max_num_tokens, settings["short_seq_prob"], rng)
        for ex in examples:
            row_ids, row_types = tokenizer.build_inputs(ex.tokens_a, ex.tokens_b)
            ids.extend(row_ids)
            types.extend(row_types)
            lengths.append(len(row_ids))
            labels.append(ex.next_sentence_label if nsp else IGNORE_INDEX)
    n_lengths = np.asarray(lengths, dtype=np.int32)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(n_lengths, out=offsets[1:])
    pa_offsets = pa.array(offsets, type=pa.int32())
    table = pa.table({
        "input_ids": pa.ListArray.from_arrays(pa_offsets, pa.array(np.asarray(ids, dtype=np.int32))),
        "token_type_ids": pa.ListArray.from_arrays(pa_offsets, pa.array(np.asarray(types, dtype=np.int8))),
        "next_sentence_label": pa.array(np.asarray(labels, dtype=np.int16)),
        "length": pa.array(n_lengths),
    })
    return table, len(docs)


# The tokenizer of the pool's worker processes (set once per process, not sent with every shard).
_WORKER: dict[str, Any] = {}


def _init_worker(tokenizer: BertTokenizer) -> None:
    import signal

    # One tokenizing thread per process: the pool already uses every core.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    # A forked worker inherits the run's stop handlers (bertlab.training.stopping): the parent alone handles
    # Ctrl-C and stops the pool; the pool's own SIGTERM then ends a worker quietly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _WORKER["tokenizer"] = tokenizer


def _prepare_shard(index: int, pieces: Sequence[Piece], paths: Sequence[Path], settings: dict[str, Any],
                   out_dir: Path, tokenizer: BertTokenizer | None = None) -> dict[str, Any]:
    """Prepare shard ``index`` into ``out_dir/NNNNN.arrow`` and write its marker ``NNNNN.json``; returns
    the marker's counts."""
    from datasets.arrow_writer import ArrowWriter

    tokenizer = tokenizer if tokenizer is not None else _WORKER["tokenizer"]
    target = out_dir / f"{index:05d}.arrow"
    tmp = out_dir / f"{index:05d}.arrow.tmp{os.getpid()}"
    documents = examples = is_next = 0
    writer = ArrowWriter(features=_features(), path=str(tmp))
    try:
        for b, block in enumerate(_blocks(_shard_documents(pieces, paths, settings["fmt"]),
                                          settings["block_documents"])):
            # Seeded by the block, not by the process that builds it: the same examples for any num_proc.
            rng = random.Random(f"{settings['seed']}-{settings['split']}-{index}-{b}")
            table, n_docs = _block_table(block, rng, tokenizer, settings)
            documents += n_docs
            if table.num_rows:
                writer.write_table(table)
                examples += table.num_rows
                if settings["nsp"]:
                    is_next += int(np.count_nonzero(table.column("next_sentence_label").to_numpy() == IS_NEXT))
        writer.finalize()
    finally:
        writer.close()
    os.replace(tmp, target)
    counts = {"shard": index, "bytes": sum(end - start for _, start, end in pieces), "documents": documents,
              "examples": examples, "is_next": is_next}
    marker = out_dir / f"{index:05d}.json"
    marker_tmp = marker.with_name(f"{marker.name}.tmp{os.getpid()}")
    marker_tmp.write_text(json.dumps(counts))
    os.replace(marker_tmp, marker)  # the shard is complete once its marker exists
    return counts


def _pool_job(job: tuple) -> dict[str, Any]:
    return _prepare_shard(*job)


# ----------------------------------------------------------------------------------------------------
# Progress bar


def console_shows_progress() -> bool:
    """Whether the console shows INFO lines: normal and verbose runs on rank 0 do; ``quiet=true`` and the
    other ranks do not (``bertlab.runtime.console.configure_console`` raises their console handler to WARNING)."""
    if not log.isEnabledFor(logging.INFO):
        return False
    handlers = [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]
    return any(h.level <= logging.INFO for h in handlers)


class PreparationProgress:
    """A one-line progress bar on stderr while a corpus is prepared: the split, a bar, MB of text done of
    the corpus's MB, MB/s (of this run's work) and the elapsed time, within 80 columns."""

    def __init__(self, description: str, total_bytes: int, done_bytes: int = 0, console: Any = None):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.total = total_bytes
        self.done = done_bytes
        self.start_done = done_bytes
        self.started = time.perf_counter()
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=14), TextColumn("{task.fields[mb]}"),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
            console=console if console is not None else Console(stderr=True), transient=False)
        self.task = self.progress.add_task(description, total=max(total_bytes, 1), completed=done_bytes,
                                           **self._fields())
        self.progress.start()

    def _fields(self) -> dict[str, str]:
        seconds = max(time.perf_counter() - self.started, 1e-9)
        rate = (self.done - self.start_done) / 1e6 / seconds
        return {"mb": f"{self.done / 1e6:.2f}/{self.total / 1e6:.2f} MB", "rate": f"{rate:.1f} MB/s"}

    def advance(self, n_bytes: int) -> None:
        self.done += n_bytes
        self.progress.update(self.task, completed=self.done, **self._fields())

    def close(self) -> None:
        self.progress.update(self.task, completed=self.done, **self._fields())
        self.progress.stop()


# ----------------------------------------------------------------------------------------------------
# Preparation


def prepared_dir(cache_dir: str | os.PathLike[str], split: str, key: str) -> Path:
    return Path(cache_dir) / "pretrain" / f"{split}-{key}"


def preparation_key(paths: Sequence[Path], tokenizer: BertTokenizer, settings: dict[str, Any]) -> str:
    return content_hash(json.dumps({**settings, "v": PREP_VERSION}, sort_keys=True),
                        tokenizer.fingerprint(), corpus_fingerprint(paths))


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def preparation_settings(paths: Sequence[Path], *, split: str, fmt: str = "auto", max_seq_length: int = 128,
                         nsp: bool = False, short_seq_prob: float = 0.1, seed: int = 0,
                         block_documents: int = 1000, shard_bytes: int | None = None) -> dict[str, Any]:
    """The settings that decide the examples (and so the key); ``shard_bytes=None`` picks
    :func:`auto_shard_bytes` of the corpus size."""
    if shard_bytes is None:
        shard_bytes = auto_shard_bytes(sum(Path(p).stat().st_size for p in paths))
    return {"split": split, "fmt": fmt, "max_seq_length": int(max_seq_length), "nsp": bool(nsp),
            "short_seq_prob": float(short_seq_prob), "seed": int(seed), "block_documents": int(block_documents),
            "shard_bytes": int(shard_bytes)}


def prepare(paths: Sequence[Path], tokenizer: BertTokenizer, cache_dir: str | os.PathLike[str], *, split: str,
            fmt: str = "auto", max_seq_length: int = 128, nsp: bool = False, short_seq_prob: float = 0.1,
            seed: int = 0, block_documents: int = 1000, num_proc: int | None = None,
            shard_bytes: int | None = None, progress: bool | Any | None = None) -> Path:
    """Prepare (once) and return the folder of the saved examples; see the module docstring.

    ``num_proc``: preparing processes (None: every core this process may use). Processes started together
    (ranks of a node, torchrun) prepare once: the first takes a file lock, the others wait and reuse it.
    ``progress``: show a progress bar on stderr (True), not (False), on this rich ``Console``, or (None)
    when the console shows INFO lines (:func:`console_shows_progress`).
    """
    if block_documents < 2:
        raise DataError(f"data.nsp_block_documents must be at least 2, got {block_documents}")
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.is_file():
            raise DataError(f"corpus file not found: {p}" if not p.exists() else f"corpus path is not a file: {p}")
    settings = preparation_settings(paths, split=split, fmt=fmt, max_seq_length=max_seq_length, nsp=nsp,
                                    short_seq_prob=short_seq_prob, seed=seed, block_documents=block_documents,
                                    shard_bytes=shard_bytes)
    key = preparation_key(paths, tokenizer, settings)
    final = prepared_dir(cache_dir, split, key)
    with cache_lock(final):
        if (final / "meta.json").is_file():
            try:
                read_meta(final)
                return final
            except DataError as err:  # a cache: prepared anew, as a damaged features cache is rebuilt
                log.warning("%s; it is removed and prepared again", err)
                shutil.rmtree(final, ignore_errors=True)
        for stale in final.parent.glob(f"{final.name}.tmp*"):
            # Under the lock nobody else is preparing this key: an earlier version's unfinished preparation.
            shutil.rmtree(stale, ignore_errors=True)
        work = final.with_name(f"{final.name}.partial")
        try:
            meta = _prepare_into(work, paths, tokenizer, settings, num_proc, progress)
        except DataError:
            shutil.rmtree(work, ignore_errors=True)  # the corpus must change: nothing here can be reused
            raise
        log.info("%s: %d documents → %d examples, %.1f MB of text at %.1f MB/s (%d processes%s)", split,
                 meta["documents"], meta["examples"], meta["corpus_bytes"] / 1e6, meta["mb_per_s"],
                 meta["num_proc"], f", {meta['resumed_shards']} of {meta['shards']} shards from an interrupted "
                 "preparation" if meta["resumed_shards"] else "")
        (work / "meta.json").write_text(json.dumps(meta, indent=2))
        os.replace(work, final)  # atomic: the folder exists complete or not at all
    return final


def _prepare_into(work: Path, paths: list[Path], tokenizer: BertTokenizer, settings: dict[str, Any],
                  num_proc: int | None, progress: bool | Any | None) -> dict[str, Any]:
    import datasets

    out = work / "examples"
    out.mkdir(parents=True, exist_ok=True)
    shards = plan_shards(paths, settings["fmt"], settings["shard_bytes"])
    done: dict[int, dict[str, Any]] = {}
    for marker in out.glob("*.json"):
        index = int(marker.stem) if marker.stem.isdigit() else -1
        if 0 <= index < len(shards) and (out / f"{index:05d}.arrow").is_file():
            try:
                counts = read_record(marker, "a prepared shard's marker", "", shape=MARKER_SHAPE,
                                     required=tuple(MARKER_SHAPE))
                if counts["shard"] != index:
                    raise RecordError(f"{marker}: key 'shard' is {counts['shard']}, not {index}")
                done[index] = counts
            except RecordError as err:  # a marker cut short or edited: its shard is prepared again
                log.warning("%s; shard %d is prepared again", str(err).rstrip(". "), index)
                marker.unlink()
    for leftover in out.glob("*.tmp*"):
        leftover.unlink()  # a shard or marker half-written when the preparation was interrupted
    pending = [i for i in range(len(shards)) if i not in done]
    total_bytes = sum(p.stat().st_size for p in paths)
    split = settings["split"]
    if done:
        log.info("%s: resuming an interrupted preparation in %s: %d of %d shards already done", split, work,
                 len(done), len(shards))
    else:
        log.info("%s: preparing %s into %s (once; later runs reuse it)", split, ", ".join(map(str, paths)),
                 work.with_name(work.name.removesuffix(".partial")))
    num_proc = max(1, int(num_proc if num_proc is not None else usable_cores()))
    proc = min(num_proc, len(pending)) or 1
    show = console_shows_progress() if progress is None else progress
    bar = None
    if show:
        bar = PreparationProgress(f"{split}: preparing", total_bytes, sum(c["bytes"] for c in done.values()),
                                  console=None if show is True else show)
    start = time.perf_counter()
    fresh: dict[int, dict[str, Any]] = {}

    def finished(counts: dict[str, Any]) -> None:
        fresh[counts["shard"]] = counts
        if bar is not None:
            bar.advance(counts["bytes"])

    try:
        if proc == 1:
            for i in pending:
                finished(_prepare_shard(i, shards[i], paths, settings, out, tokenizer))
        else:
            import multiprocessing

            ctx = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
            jobs = [(i, shards[i], paths, settings, out) for i in pending]
            # Shards go out one at a time (imap_unordered, chunksize 1): a slow shard never holds up others.
            with ctx.Pool(proc, initializer=_init_worker, initargs=(tokenizer,)) as pool:
                for counts in pool.imap_unordered(_pool_job, jobs):
                    finished(counts)
                pool.close()
                pool.join()
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start
    counts = [{**done, **fresh}[i] for i in range(len(shards))]
    n_docs = sum(c["documents"] for c in counts)
    n_examples = sum(c["examples"] for c in counts)
    if settings["nsp"] and n_docs < 2:
        raise DataError(
            f"NSP needs at least two documents (NotNext pairs take B from another document) and "
            f"{', '.join(map(str, paths))} holds {n_docs}: separate documents with blank lines or set "
            "task.nsp=false")
    if n_examples == 0:
        raise DataError(f"no pre-training examples could be built from {', '.join(map(str, paths))}")
    fresh_bytes = sum(c["bytes"] for c in fresh.values())
    return {"engine": f"datasets {datasets.__version__}", "settings": settings, "documents": n_docs,
            "examples": n_examples, "corpus_bytes": total_bytes, "shards": len(shards),
            "shard_files": [f"examples/{i:05d}.arrow" for i in range(len(shards)) if counts[i]["examples"]],
            "resumed_shards": len(done), "seconds": round(seconds, 3),
            "mb_per_s": round(fresh_bytes / 1e6 / max(seconds, 1e-9), 3), "num_proc": proc,
            "is_next_fraction": (sum(c["is_next"] for c in counts) / n_examples) if settings["nsp"] else None}
