"""One LightningDataModule for every task family: find files, tokenize once (cached by content hash),
batch with dynamic padding, evaluate every example exactly once under DDP.

Data comes from files under ``paths.data_dir`` (``data.source=files``), from the bundled samples
(``data.source=sample``: small data written for bertlab, shipped in the package) or from the Hugging Face
hub through ``datasets`` (``data.source=hub``, when installed and online).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from bertlab.data.batching import Collator, EvalBatchSampler, FeatureDataset, TrainBatchSampler, epoch_batches
from bertlab.data.documents import window_counts
from bertlab.data.features import (
    LabelMap,
    Split,
    derive_labels,
    lengths,
    mlm_split,
    qa_split,
    sequence_split,
    token_split,
    token_unlabelled_split,
    with_unlabelled,
)
from bertlab.data.files import DataFiles
from bertlab.data.readers import DataError
from bertlab.data.safe_cache import cached
from bertlab.data.tokenizer import EncoderTokenizer, content_hash
from bertlab.data.validate import changed_splits
from bertlab.runtime.checks import check_seq_length
from bertlab.runtime.config import DEFAULT_MLM_PROBABILITY, MASKED_FAMILIES, ConfigError, DataConfig, TaskSpec
from bertlab.runtime.errors import TokenizerError
from bertlab.runtime.files import cache_lock

log = logging.getLogger(__name__)

# 2: safetensors files (data.safe_cache); 3: typed Split.eval_data instead of a meta dict; 4: long token-task
# sentences read in windows (Split.windowed, TokenEvalData.sentence); 5: long classification / regression
# documents read in windows (bertlab.data.documents), not cut
_CACHE_VERSION = "5"


def _lengths(split: Split):
    # Prepared pre-training examples keep their lengths in a column: no need to read every row.
    features = split.features
    return features.lengths() if hasattr(features, "lengths") else lengths(features)


def _shape(tokenizer: EncoderTokenizer, pair: bool) -> str:
    """The tokenizer's template as text, for messages: ``<s> a </s> </s> b </s>``."""
    name = tokenizer.tokenizer.id_to_token
    t = tokenizer.template
    parts = ([*map(name, t.pair_prefix), "a", *map(name, t.pair_middle), "b", *map(name, t.pair_suffix)] if pair
             else [*map(name, t.prefix), "text", *map(name, t.suffix)])
    return " ".join(parts)


class TaskDataModule(L.LightningDataModule):
    """Reads, tokenizes and batches the data of one task (any family)."""

    def __init__(self, task: TaskSpec, data: DataConfig, tokenizer: EncoderTokenizer, seed: int = 0,
                 labels: list[str] | None = None):
        super().__init__()
        self.task = task
        self.cfg = data
        self.tokenizer = tokenizer
        self.seed = seed
        self._labels = labels
        self.splits: dict[str, Split] = {}
        self._train_sampler: TrainBatchSampler | None = None
        self._sampler_state: dict[str, int] | None = None  # from a checkpoint, for the next training sampler
        self.files = DataFiles(task, data)
        self._splits_checked = False
        self._fingerprint: dict[str, str] | None = None  # content digests of the training data (fit only)
        # The tokenizer's own special tokens must leave room for text (RoBERTa's pair costs 4, BERT's 3).
        pair = bool(data.text_pair_column) and task.family == "sequence"
        check_seq_length(data.max_seq_length, task.family, pair, task.nsp,
                         (tokenizer.num_special_tokens(False), tokenizer.num_special_tokens(True)),
                         shape=_shape(tokenizer, pair or task.nsp))

    def resolve(self, name: str | None) -> Path | None:
        """A configured file as an absolute path (:meth:`DataFiles.resolve`)."""
        return self.files.resolve(name)

    def split_file(self, split: str) -> Path | list[Path] | None:
        return self.files.split_file(split)

    def training_texts(self, max_bytes: int | None = None) -> list[str]:
        return self.files.training_texts(max_bytes)

    # ------------------------------------------------------------------------------------------------
    # Labels

    @property
    def labels(self) -> list[str] | None:
        if self.task.family not in ("sequence", "token") or self.task.regression:
            return None
        if self._labels is None and self.task.labels is None and self.cfg.train_file is None:
            raise ConfigError(
                f"task={self.task.name} takes its label set from the training split, and data.train_file is not "
                "set: set it. To predict with a trained checkpoint, which holds its labels, run "
                "`python -m bertlab.predict RUN_DIR_OR_CKPT FILE`, or train=false predict=true ckpt_path=<ckpt> "
                "data.predict_file=<file> with data.val_file=null"
            )
        if self._labels is None:
            self._labels = self.task.labels or derive_labels(self.split_file("train"), self.cfg, self.task.family)
            if self.task.family == "sequence" and len(self._labels) < 2:
                raise DataError(
                    f"{self.split_file('train')}: the training split has only one class "
                    f"({', '.join(map(repr, self._labels)) or 'none'} in column {self.cfg.label_column!r}): a "
                    "classifier needs examples of at least two classes. Check data.train_file and "
                    "data.label_column; for real-valued targets use task=text_regression"
                )
        return self._labels

    def _label_map(self) -> LabelMap | None:
        if self.labels is None:
            return None
        if self.task.labels is not None:
            return LabelMap(self.labels, f"declared by task={self.task.name}",
                            "fix the file; for another label set use a generic task (task=text_classification or "
                            "task=token_classification), which takes its labels from its training split")
        return LabelMap(self.labels, f"the labels of the training split {self.split_file('train')}",
                        "fix the file, add examples of these labels to the training split, or declare the full "
                        "label set with task.labels=[...]")

    @property
    def num_labels(self) -> int:
        if self.task.regression:
            return 1
        return len(self.labels) if self.labels is not None else 0

    # ------------------------------------------------------------------------------------------------
    # Featurizing (cached)

    def split_key(self, split: str) -> str:
        """Content hash of a split's files, the data/task settings and the tokenizer."""
        path = self.split_file(split)
        files = path if isinstance(path, list) else [path]
        if self.task.family == "embedding" and self.cfg.corpus_file and split != "train":
            files = [*files, self.resolve(self.cfg.corpus_file)]  # retrieval's corpus: part of the split
        if self.task.rerank and split != "train":  # the reranked candidates: part of the split
            files = [*files, *(p for p in (self.resolve(self.cfg.corpus_file), self._first_stage()) if p)]
        if split == "train" and self.cfg.distill_file:  # its unlabelled texts join the training features
            files = [*files, self.resolve(self.cfg.distill_file)]
        # The seed is part of the key only where featurizing reads it (the pre-training tasks' masking and
        # sentence pairs): the features of every other task, and the distillation teacher's outputs kept under
        # this key, are the same for every seed, so the runs of a seed sweep share them.
        seed = self.seed if self.task.family in MASKED_FAMILIES else None
        settings = json.dumps({"data": asdict(self.cfg), "task": asdict(self.task), "labels": self.labels,
                               "seed": seed, "split": split, "v": _CACHE_VERSION},
                              sort_keys=True, default=str)
        return content_hash(settings, self.tokenizer.fingerprint(), *files)

    def _cache_path(self, split: str) -> Path | None:
        if self.cfg.cache_dir is None:
            return None
        return Path(self.cfg.cache_dir) / "features" / f"{self.task.name}-{split}-{self.split_key(split)}.safetensors"

    def streamed(self) -> bool:
        """Whether pre-training data goes through the prepared Arrow shards (bertlab.data.pretrain).

        ``data.stream=auto``: when the training files (the evaluation file when there is none) exceed
        ``data.stream_threshold_mb`` and ``data.cache_dir`` is set. Every split of a run takes the same path.
        """
        if self.task.family not in MASKED_FAMILIES or self.cfg.stream is False:
            return False
        try:
            import datasets  # noqa: F401  (the engine of the prepared shards)
        except ImportError:
            if self.cfg.stream is True:
                raise ConfigError("data.stream=true prepares the corpus with the Hugging Face `datasets` library, "
                                  "which is not installed: pip install datasets (or data.stream=false to read "
                                  "the corpus into memory)") from None
            return False
        if self.cfg.stream is True:
            if self.cfg.cache_dir is None:
                raise ConfigError("data.stream=true writes the prepared corpus under data.cache_dir (paths.cache_dir), "
                                  "which is null: set paths.cache_dir to a folder (a shared file system for many "
                                  "machines), or data.stream=false to read the corpus into memory")
            return True
        if self.cfg.cache_dir is None:
            return False
        path = self.split_file("train" if self.cfg.train_file is not None else "val")
        files = path if isinstance(path, list) else [path]
        size = sum(p.stat().st_size for p in files if p is not None)
        return size > self.cfg.stream_threshold_mb * 1e6

    def _streamed_split(self, split: str, path) -> Split:
        from bertlab.data.prepared import ArrowExamples
        from bertlab.data.pretrain import prepare

        paths = path if isinstance(path, list) else [path]
        folder = prepare(paths, self.tokenizer, self.cfg.cache_dir, split=split,
                         fmt="wikitext" if self.cfg.text_format == "wikitext" else "auto",
                         max_seq_length=self.cfg.max_seq_length, nsp=self.task.nsp,
                         short_seq_prob=self.cfg.short_seq_prob, seed=self.seed,
                         block_documents=self.cfg.nsp_block_documents, num_proc=self.cfg.prep_num_proc)
        limit = self.cfg.max_train_samples if split == "train" else self.cfg.max_eval_samples
        examples = ArrowExamples(folder, nsp=self.task.nsp, limit=limit)
        log.debug("%s: prepared corpus %s (%s)", split, folder, examples.meta["engine"])
        return Split(split, examples, len(examples))  # type: ignore[arg-type]

    def _build(self, split: str) -> Split:
        path = self.split_file(split)
        if self.streamed():
            return self._streamed_split(split, path)
        cache = self._cache_path(split)
        # Processes started together (torchrun, SLURM) tokenize once: the first takes the lock, the others
        # wait and load its file. (Lightning's own DDP launcher starts the other ranks after this ran.)
        with cache_lock(cache):
            # A file that is not a whole bertlab cache file (truncated, bit-flipped, or planted by someone
            # who can write to a shared cache) is reported, removed and rebuilt; nothing in it can run code.
            split_obj = cached(cache, lambda: self._featurize(split, path), f"{split} features",
                               check=lambda s: isinstance(s, Split) and s.name == split)
        return split_obj

    def _featurize(self, split: str, path) -> Split:
        train = split == "train"
        limit = self.cfg.max_train_samples if train else self.cfg.max_eval_samples
        labelled = split != "predict"  # val, test and the data.val_extra_files sets carry labels
        family = self.task.family
        label_map = self._label_map()
        if family == "sequence" and self.task.rerank:
            return self._rerank_split(split, path, train, limit)
        if family == "sequence":
            built = sequence_split(split, path, self.cfg, self.tokenizer, label_map, self.task.regression,
                                   labelled=labelled, max_examples=limit)
            if train and self.cfg.distill_file:  # unlabelled texts: the teacher's soft labels only
                extra = sequence_split("distill", self.resolve(self.cfg.distill_file), self.cfg, self.tokenizer,
                                       None, self.task.regression, labelled=False)
                log.info("data.distill_file: %d unlabelled texts join the %d training examples (the teacher's soft "
                         "labels only)", extra.num_examples, built.num_examples)
                built = with_unlabelled(built, extra, self.task.regression)
            return built
        if family == "token":
            built = token_split(split, path, self.cfg, self.tokenizer, label_map, self.task, max_examples=limit)
            if train and self.cfg.distill_file:  # unlabelled sentences: the teacher's per-token soft labels only
                extra = token_unlabelled_split("distill", self.resolve(self.cfg.distill_file), self.cfg,
                                               self.tokenizer, label_map, self.task)
                log.info("data.distill_file: %d unlabelled sentences join the %d training sentences (the teacher's "
                         "soft labels only)", extra.num_examples, built.num_examples)
                built = with_unlabelled(built, extra, False)
            return built
        if train and self.cfg.distill_file:
            raise ConfigError(f"data.distill_file={self.cfg.distill_file}: unlabelled texts are read for "
                              f"classification, regression and tagging tasks only, not for task={self.task.name} "
                              f"({family}); remove data.distill_file")
        if family == "qa":
            return qa_split(split, path, self.cfg, self.tokenizer, train=train, max_examples=limit)
        if family == "embedding":
            from bertlab.data.embedding import embedding_eval_split, embedding_train_split

            if train:
                return embedding_train_split(split, path, self.cfg, self.tokenizer, max_examples=limit)
            return embedding_eval_split(split, path, self.cfg, self.tokenizer, self.resolve(self.cfg.corpus_file),
                                        max_examples=limit)
        if family == "multiple_choice":
            from bertlab.data.choices import choice_split

            return choice_split(split, path, self.cfg, self.tokenizer, labelled=labelled, max_examples=limit)
        paths = path if isinstance(path, list) else [path]
        return mlm_split(split, paths, self.cfg, self.tokenizer, self.task, self.seed, max_examples=limit)

    def _first_stage(self) -> Path | None:
        """task.first_stage as a TREC run file (bertlab.train has written an embedding run's retrieval to one)."""
        if self.task.first_stage is None:
            return None
        path = self.files.resolve(self.task.first_stage, "task.first_stage")
        if path.is_dir() or path.suffix == ".ckpt":
            raise ConfigError(f"task.first_stage={self.task.first_stage}: an embedding run or export retrieves the "
                              "candidates when the run starts (python train.py); here a TREC run file is needed")
        return path

    def _rerank_split(self, split: str, path, train: bool, limit: int | None) -> Split:
        """task=rerank: (query, passage) pairs with their relevance (bertlab.data.rerank)."""
        from bertlab.data.rerank import rerank_eval_split, rerank_train_split

        if self.cfg.long_text == "windows":
            raise ConfigError("task=rerank with data.long_text=windows: a reranker scores one (query, passage) pair "
                              "per input, cut to the window as sentence-transformers' CrossEncoder cuts it; set "
                              "data.long_text=truncate (conf/task/rerank.yaml does)")
        if train and self.cfg.distill_file:
            raise ConfigError("data.distill_file: task=rerank reads no unlabelled texts; remove data.distill_file")
        if train:
            return rerank_train_split(split, path, self.cfg, self.tokenizer, max_examples=limit,
                                      listwise=self.task.rerank_loss == "listwise")
        return rerank_eval_split(split, path, self.cfg, self.task, self.tokenizer, self.resolve(self.cfg.corpus_file),
                                 self._first_stage(), max_examples=limit)

    def _splits_for(self, stage: str | None) -> list[str]:
        names = []
        if stage in (None, "fit"):
            names += ["train", "val"]
        if stage == "validate":
            names.append("val")
        if stage in (None, "fit", "validate"):
            names += list(self.cfg.val_extra_files or {})
        if stage in (None, "test") and self.cfg.test_file:
            names.append("test")
        return names

    def prepare_data(self) -> None:
        # Runs once per node before setup: tokenize every split into the cache, so DDP ranks only load it.
        if self.cfg.cache_dir is None:
            return
        for split in self._splits_for(None):
            if self.split_file(split) is not None:
                cache = self._cache_path(split)
                if not cache.is_file():
                    self._build(split)

    def setup(self, stage: str | None = None) -> None:
        if not self._splits_checked:
            self.files.check_splits()  # an evaluation split that is the training file: refused before reading
            self._splits_checked = True
        if stage in (None, "fit") and self._fingerprint is None and self.cfg.train_file is not None:
            self._fingerprint = self.files.fingerprint()  # what this run trains on, recorded in checkpoints
        for split in self._splits_for(stage):
            if split not in self.splits and self.split_file(split) is not None:
                self.splits[split] = self._build(split)
                s = self.splits[split]
                windows = (f", {s.windowed} longer than data.max_seq_length={self.cfg.max_seq_length} read in "
                           f"{s.windowed + s.extra_windows} windows" if s.windowed else
                           f", {s.extra_windows} extra windows" if s.extra_windows else "")
                capped = (f", {s.capped} over data.max_windows_per_example={self.cfg.max_windows_per_example} read in "
                          "their first windows" if s.capped else "")
                log.info("%s: %d examples → %d features%s%s%s%s", split, s.num_examples, len(s.features),
                         f", {s.skipped} skipped" if s.skipped else "",
                         f", {s.truncated} truncated" if s.truncated else "", windows, capped)
                if s.skipped:
                    log.warning("%s: skipped %d bad examples (data.on_bad_example=skip; the first are named "
                                "above); metrics.json counts them in data.skipped_examples", split, s.skipped)

    # ------------------------------------------------------------------------------------------------
    # Loaders

    def collator(self, train: bool) -> Collator:
        mlm = None
        if self.task.family in MASKED_FAMILIES:
            if self.tokenizer.mask_id is None:
                raise TokenizerError(f"task={self.task.name} replaces tokens by the tokenizer's mask token, and this tokenizer has "
                                     "none: name it in its tokenizer_config.json (\"mask_token\": ...) or use a "
                                     "tokenizer with [MASK] / <mask>")
            # In-memory features carry word starts from word ids; prepared corpora hold ids only, grouped by the
            # tokenizer's own marking of word-continuing pieces.
            continuation = torch.from_numpy(self.tokenizer.continuation_table()) if self.task.whole_word_masking \
                else None
            generator = torch.Generator().manual_seed(self.seed) if train else None
            mlm = {"vocab_size": self.tokenizer.vocab_size, "mask_id": self.tokenizer.mask_id,
                   "special_ids": torch.tensor(sorted(self.tokenizer.special_ids)),
                   "probability": DEFAULT_MLM_PROBABILITY if self.task.mlm_probability is None
                   else self.task.mlm_probability, "whole_word": self.task.whole_word_masking,
                   "continuation": continuation, "generator": generator, "fixed_eval_masks": not train,
                   "seed": self.seed}
        collator = Collator(self.tokenizer.pad_id, self.cfg.pad_to_multiple_of, mlm,
                            max_windows=self.max_windows(train) if self.reads_windows else None)
        if self.task.family == "embedding" and train:  # (query, passage[, negative]) rows: bertlab.data.embedding
            from bertlab.data.embedding import PairCollator

            return PairCollator(collator)
        return collator

    @property
    def reads_windows(self) -> bool:
        """Whether long texts become windows pooled per document (sequence tasks, data.long_text=windows)."""
        return self.task.family == "sequence" and self.cfg.long_text == "windows"

    def max_windows(self, train: bool) -> int:
        """The most windows a batch encodes at once: data.max_windows_per_batch, else the batch size."""
        return self.cfg.max_windows_per_batch or (self.cfg.batch_size if train else self.cfg.eval_batch_size)

    def _windows(self, split: Split):
        """Windows per feature of a split holding long documents (the samplers count them), else None."""
        return window_counts(split.features) if self.reads_windows and split.windowed else None

    def train_batches(self) -> int:
        """Training batches in one epoch, all ranks together (long documents packed by their windows)."""
        split = self.splits["train"]
        return epoch_batches(len(split.features), self.cfg.batch_size, self._windows(split), self.max_windows(True))

    def train_dataloader(self) -> DataLoader:
        split = self.splits["train"]
        sampler = TrainBatchSampler(_lengths(split), self.cfg.batch_size, self.seed,
                                    group_by_length=self.cfg.group_by_length, windows=self._windows(split),
                                    max_windows=self.max_windows(True))
        if sampler.windows is not None and self._train_sampler is None:
            log.info("train: long documents: a batch holds at most %d documents and %d windows "
                     "(data.max_windows_per_batch): %d batches per epoch for %d documents", self.cfg.batch_size,
                     sampler.max_windows, sampler.epoch_batches, len(split.features))
        trainer = getattr(self, "trainer", None)
        sampler.same_every_epoch = bool(trainer is not None and trainer.overfit_batches)
        if self._sampler_state is not None:  # resuming: continue the checkpointed epoch where it stopped
            sampler.load_state_dict(self._sampler_state)
            self._sampler_state = None
        self._train_sampler = sampler
        return self._loader(split, sampler, train=True)

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        # Each training batch a step takes: the sampler counts them for an exact mid-epoch resume
        # (TrainBatchSampler.state_dict); Lightning continues batch_idx from the same count.
        trainer = self.trainer
        if trainer is not None and trainer.training and self._train_sampler is not None:
            self._train_sampler.batch_used()
        return batch

    def eval_dataloader(self, name: str) -> DataLoader:
        """The loader of any evaluation split by name (``val``, ``test`` or a ``data.val_extra_files`` name)."""
        return self._eval_loader(name)

    def _eval_loader(self, name: str) -> DataLoader | list:
        split = self.splits.get(name)
        if split is None:  # no file for it (data.val_file=null): an empty list is Lightning's "no evaluation"
            return []
        sampler = EvalBatchSampler(_lengths(split), self.cfg.eval_batch_size, windows=self._windows(split),
                                   max_windows=self.max_windows(False))
        return self._loader(split, sampler, train=False)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def _loader(self, split: Split, batch_sampler, train: bool) -> DataLoader:
        workers = self.cfg.num_workers
        # An own generator: starting a loader iterator must not draw from the global RNG (dropout's), or a
        # resumed run would draw other dropout masks than the uninterrupted one.
        return DataLoader(FeatureDataset(split.features), batch_sampler=batch_sampler,
                          collate_fn=self.collator(train), num_workers=workers,
                          persistent_workers=workers > 0, pin_memory=False,
                          generator=torch.Generator().manual_seed(self.seed))

    # ------------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"labels": self.labels}
        if self._fingerprint:
            state["data_fingerprint"] = self._fingerprint
        if self._train_sampler is not None:
            # Data order for a mid-epoch resume. Kept here, not as a stateful DataLoader: Lightning restores
            # loader states only into loaders built after the restore, and configure_optimizers
            # (estimated_stepping_batches) builds the training loader before it.
            state["train_sampler"] = self._train_sampler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._check_resumed_data(state.get("data_fingerprint"))
        if state.get("labels") is not None:
            self._labels = state["labels"]
        if state.get("train_sampler") is not None:
            if self._train_sampler is not None:  # strategies that restore after building the loaders
                self._train_sampler.load_state_dict(state["train_sampler"])
            else:
                self._sampler_state = state["train_sampler"]

    def _check_resumed_data(self, recorded: dict[str, str] | None) -> None:
        """Training resumed from a checkpoint continues on the data it started with: a training or validation
        file whose content changed since the checkpoint was written is refused (the run would mix two data
        sets in one model and one learning curve). Evaluating a checkpoint on other data is allowed."""
        trainer = self.trainer
        fitting = trainer is not None and getattr(trainer.state.fn, "value", trainer.state.fn) == "fit"
        if not recorded or not fitting or self._fingerprint is None:
            return
        changed = changed_splits(recorded, self._fingerprint)
        if changed:
            files = ", ".join(f"{split} ({self.split_file(split)}: {recorded[split]} then, {self._fingerprint[split]} "
                              "now)" for split in changed)
            raise DataError(
                f"the data changed since the checkpoint being resumed was written: {files} (content digests). "
                "Resuming would continue training on other data than the run started with. Restore the files as "
                "they were to resume, or train afresh on the new data: the same command without ckpt_path, "
                "best in a new folder (leave hydra.run.dir unset)"
            )
