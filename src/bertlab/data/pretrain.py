"""Pre-training data at corpus scale: prepared once into memory-mapped Arrow shards (Hugging Face ``datasets``).

The in-memory path (``data/features.py`` ``mlm_split``) reads the whole corpus into Python lists. This one
never holds more than a preparation block of documents per process:

1. **Read** the corpus files line by line (:func:`bertlab.data.rawtext.iter_corpus` with
   ``sentences=False``): one row per document, its lines not yet split into sentences, written by
   ``Dataset.from_generator`` to Arrow files on disk.
2. **Tokenize** in parallel (``Dataset.map(num_proc=...)``): split every line into sentences
   (``split_sentences``), encode them with the run's tokenizer (one ``encode_batch`` call per batch of
   documents), one row of token-id segments per document.
3. **Build examples** in parallel, as BERT's ``create_pretraining_data.py`` does (``data/mlm.py``): segments
   packed up to ``max_seq_length``, NSP pairs when ``task.nsp=true``. Documents are taken in blocks of
   ``data.nsp_block_documents`` consecutive documents; a NotNext B comes from another document **of the
   same block** (the approximation streaming forces: the original draws from the whole corpus in memory).
   The random numbers of a block are seeded by (seed, split, first document index), so the examples do
   not depend on ``num_proc``.
4. **Save** the examples (``input_ids``, ``token_type_ids``, ``next_sentence_label``, ``length``) with
   ``save_to_disk`` into ``<cache_dir>/pretrain/<split>-<key>``; ``key`` hashes the corpus fingerprint
   (:func:`corpus_fingerprint`), the tokenizer fingerprint and the settings. Everything is written under a
   temporary folder that is renamed into place only when complete (an atomic rename), so an interrupted
   preparation never leaves a cache that could be used; the next run deletes the leftover and starts over.

Training reads the saved examples memory-mapped (``load_from_disk``): the operating system pages them in
and out, so resident memory does not grow with the corpus, and every DataLoader worker and every rank of
a node shares the same pages. Batches come from bertlab's own :class:`~bertlab.data.batching.TrainBatchSampler`
(random access into the Arrow table), which splits batches across ranks and, through the DataLoader,
across workers, and whose state (seed, epoch, batches done) makes a mid-epoch resume exact. Masks are
drawn per batch by the collator, as on the in-memory path.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bertlab.data.mlm import (
    IGNORE_INDEX,
    _pairs_from_document,
    _segments_from_document,
    max_num_tokens_for,
    pack_pair,
)
from bertlab.data.readers import DataError
from bertlab.distributed import cache_lock
from bertlab.tokenization import BertTokenizer, content_hash

log = logging.getLogger(__name__)

PREP_VERSION = "1"
# Bytes read at the head, the tail and at evenly spaced places of a corpus file for its fingerprint.
_SAMPLE_BYTES = 1 << 20
_SAMPLE_POINTS = 16


def corpus_fingerprint(paths: Sequence[str | os.PathLike[str]]) -> str:
    """A cheap content key of corpus files: name, size and sha256 of sampled blocks of each file.

    Reading 16 GB to hash it would cost minutes at every start, so this hashes the first and last MiB and
    64 KiB at 16 evenly spaced places, plus the size. The modification time is left out on purpose: a copy
    of the corpus on another machine (``aws s3 sync``, ``rsync`` without ``-t``) keeps the key and reuses
    a preparation made elsewhere. An edit that keeps the size and misses every sampled block goes
    unnoticed: delete ``<cache_dir>/pretrain`` after such surgery.
    """
    parts: list[str | bytes] = []
    for path in paths:
        p = Path(path)
        try:
            stat = p.stat()
        except FileNotFoundError:
            raise DataError(f"corpus file not found: {p}") from None
        parts.append(f"{p.name}:{stat.st_size}")
        with open(p, "rb") as f:
            step = max(1, stat.st_size // _SAMPLE_POINTS)
            for offset in {0, max(0, stat.st_size - _SAMPLE_BYTES), *range(0, stat.st_size, step)}:
                f.seek(offset)
                parts.append(f.read(_SAMPLE_BYTES if offset in (0, max(0, stat.st_size - _SAMPLE_BYTES))
                                    else 1 << 16))
    return content_hash(*parts)


# ----------------------------------------------------------------------------------------------------
# Preparation steps (module-level functions: datasets hands them to worker processes)


def _read_blocks(paths: list[str], fmt: str, block: int):
    """Rows of ``block`` consecutive documents (their lines); a last block of one document joins the one
    before (alone it would have no other document to draw a NotNext B from)."""
    from bertlab.data.rawtext import iter_corpus

    held: list[list[str]] | None = None
    current: list[list[str]] = []
    for lines in iter_corpus(paths, fmt=fmt, sentences=False):
        current.append(lines)
        if len(current) == block:
            if held is not None:
                yield {"documents": held}
            held, current = current, []
    if held is not None and len(current) == 1:
        held, current = held + current, []
    for rows in (held, current):
        if rows:
            yield {"documents": rows}


def _block_examples(batch: dict[str, list], indices: list[int], *, tokenizer: BertTokenizer,
                    settings: dict[str, Any]) -> dict[str, list]:
    """Examples of one block: split sentences, encode them in one call, pack segments / NSP pairs."""
    from bertlab.data.rawtext import split_sentences

    out: dict[str, list] = {"input_ids": [], "token_type_ids": [], "next_sentence_label": [], "length": []}
    nsp = settings["nsp"]
    max_num_tokens = max_num_tokens_for(settings["max_seq_length"], nsp)
    for block, block_index in zip(batch["documents"], indices, strict=True):
        sentences = [[s for line in lines for s in split_sentences(line)] for lines in block]
        flat = [s for doc in sentences for s in doc]
        it = iter(tokenizer.encode_batch(flat, add_special_tokens=False) if flat else [])
        docs = [[ids for ids in (next(it).ids for _ in doc) if ids] for doc in sentences]
        docs = [doc for doc in docs if doc]
        # Seeded by the block, not by the process that builds it: the same examples for any num_proc.
        rng = random.Random(f"{settings['seed']}-{settings['split']}-{block_index}")
        for d in range(len(docs)):
            if nsp:
                if len(docs) < 2:
                    break  # only a corpus of one document (refused in prepare) gives a block of one
                examples = _pairs_from_document(docs, d, max_num_tokens, settings["short_seq_prob"], rng)
            else:
                examples = _segments_from_document(docs[d], max_num_tokens, settings["short_seq_prob"], rng)
            for ex in examples:
                ids, types = pack_pair(ex.tokens_a, ex.tokens_b, tokenizer.cls_id, tokenizer.sep_id)
                out["input_ids"].append(ids)
                out["token_type_ids"].append(types)
                out["next_sentence_label"].append(ex.next_sentence_label if nsp else IGNORE_INDEX)
                out["length"].append(len(ids))
    return out


# ----------------------------------------------------------------------------------------------------


def prepared_dir(cache_dir: str | os.PathLike[str], split: str, key: str) -> Path:
    return Path(cache_dir) / "pretrain" / f"{split}-{key}"


def preparation_key(paths: Sequence[Path], tokenizer: BertTokenizer, settings: dict[str, Any]) -> str:
    return content_hash(json.dumps({**settings, "v": PREP_VERSION}, sort_keys=True),
                        tokenizer.fingerprint(), corpus_fingerprint(paths))


def prepare(paths: Sequence[Path], tokenizer: BertTokenizer, cache_dir: str | os.PathLike[str], *, split: str,
            fmt: str = "auto", max_seq_length: int = 128, nsp: bool = False, short_seq_prob: float = 0.1,
            seed: int = 0, block_documents: int = 1000, num_proc: int | None = None) -> Path:
    """Prepare (once) and return the folder of the saved examples; see the module docstring.

    ``num_proc``: tokenizing processes (None: every core this process may use). Processes started together
    (ranks of a node, torchrun) prepare once: the first takes a file lock, the others wait and reuse it.
    """
    if block_documents < 2:
        raise DataError(f"data.nsp_block_documents must be at least 2, got {block_documents}")
    paths = [Path(p) for p in paths]
    settings = {"split": split, "fmt": fmt, "max_seq_length": int(max_seq_length), "nsp": bool(nsp),
                "short_seq_prob": float(short_seq_prob), "seed": int(seed), "block_documents": int(block_documents)}
    key = preparation_key(paths, tokenizer, settings)
    final = prepared_dir(cache_dir, split, key)
    with cache_lock(final):
        if (final / "examples").is_dir():
            return final
        for stale in final.parent.glob(f"{final.name}.tmp*"):
            # Under the lock nobody else is preparing this key: a leftover is an interrupted preparation.
            log.info("removing the unfinished preparation %s", stale)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = final.with_name(f"{final.name}.tmp{os.getpid()}")
        tmp.mkdir(parents=True)
        try:
            log.info("%s: preparing %s into %s (once; later runs reuse it)", split, ", ".join(map(str, paths)),
                     final)
            meta = _prepare_into(tmp, paths, tokenizer, settings, num_proc)
            log.info("%s: %d documents → %d examples, %.1f MB of text at %.1f MB/s (%d processes)", split,
                     meta["documents"], meta["examples"], meta["corpus_bytes"] / 1e6, meta["mb_per_s"],
                     meta["num_proc"])
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
            os.replace(tmp, final)  # atomic: the folder exists complete or not at all
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _prepare_into(tmp: Path, paths: list[Path], tokenizer: BertTokenizer, settings: dict[str, Any],
                  num_proc: int | None) -> dict[str, Any]:
    import datasets

    if num_proc is None:
        num_proc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    num_proc = max(1, int(num_proc))
    start = time.perf_counter()
    total_bytes = sum(p.stat().st_size for p in paths)
    hf_cache = str(tmp / "work")
    try:
        blocks = datasets.Dataset.from_generator(
            _read_blocks,
            gen_kwargs={"paths": [str(p) for p in paths], "fmt": settings["fmt"],
                        "block": settings["block_documents"]},
            features=datasets.Features({"documents": datasets.Sequence(datasets.Sequence(datasets.Value("string")))}),
            cache_dir=hf_cache, keep_in_memory=False, writer_batch_size=4)
    except datasets.exceptions.DatasetGenerationError as err:
        cause = err.__cause__ or err
        raise DataError(f"reading the pre-training corpus {', '.join(map(str, paths))} failed: {cause}") from None
    import pyarrow.compute as pc

    # Documents per block from the list offsets only (the text stays on disk).
    n_docs = int(pc.sum(pc.list_value_length(blocks.data.column("documents"))).as_py() or 0)
    if settings["nsp"] and n_docs < 2:
        raise DataError(
            f"NSP needs at least two documents (NotNext pairs take B from another document) and "
            f"{', '.join(map(str, paths))} holds {n_docs}: separate documents with blank lines or set "
            "task.nsp=false")
    proc = min(num_proc, len(blocks))
    features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int32")),
                                  "token_type_ids": datasets.Sequence(datasets.Value("int8")),
                                  "next_sentence_label": datasets.Value("int16"),
                                  "length": datasets.Value("int32")})
    examples = blocks.map(_block_examples, batched=True, batch_size=1, with_indices=True,
                          num_proc=proc if proc > 1 else None,
                          fn_kwargs={"tokenizer": tokenizer, "settings": settings},
                          remove_columns=["documents"], features=features,
                          new_fingerprint=f"examples-{tmp.name}", desc="tokenizing and building examples")
    if len(examples) == 0:
        raise DataError(f"no pre-training examples could be built from {', '.join(map(str, paths))}")
    examples.save_to_disk(str(tmp / "examples"))
    labels = examples.data.column("next_sentence_label").to_numpy() if settings["nsp"] else np.zeros(0)
    n_examples = len(examples)
    del examples, blocks
    shutil.rmtree(hf_cache, ignore_errors=True)  # the intermediate Arrow files; the saved copy stays
    seconds = time.perf_counter() - start
    return {"engine": f"datasets {datasets.__version__}", "settings": settings, "documents": n_docs,
            "examples": n_examples, "corpus_bytes": total_bytes, "seconds": round(seconds, 3),
            "mb_per_s": round(total_bytes / 1e6 / max(seconds, 1e-9), 3), "num_proc": proc,
            "is_next_fraction": float((labels == 0).mean()) if labels.size else None}


class ArrowExamples:
    """The saved examples, memory-mapped, as the feature list a :class:`FeatureDataset` indexes.

    ``examples[i]`` is a dict like the in-memory path's features (``input_ids``, ``token_type_ids``,
    ``index`` and, with NSP, ``next_sentence_label``). Picklable by file path (DataLoader workers reopen
    the same memory map).
    """

    def __init__(self, folder: str | os.PathLike[str], nsp: bool, limit: int | None = None):
        import datasets

        self.folder = Path(folder)
        self.nsp = nsp
        ds = datasets.load_from_disk(str(self.folder / "examples"))
        if limit is not None and limit < len(ds):
            ds = ds.select(range(limit))
        self.dataset = ds
        self.meta = json.loads((self.folder / "meta.json").read_text())

    def __len__(self) -> int:
        return len(self.dataset)

    def lengths(self) -> np.ndarray:
        return np.asarray(self.dataset.with_format("numpy")["length"], dtype=np.int64)

    def _feature(self, i: int, row: dict[str, Any]) -> dict[str, Any]:
        f = {"input_ids": row["input_ids"], "token_type_ids": row["token_type_ids"], "index": i}
        if self.nsp:
            f["next_sentence_label"] = int(row["next_sentence_label"])
        return f

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = int(i)
        return self._feature(i, self.dataset[i])

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]
