"""A task's data files: where each split's file is (a data folder, the bundled samples, or the hub), and the
text of the training split a scratch tokenizer is trained on. Needs no tokenizer, so a run builds its
tokenizer from the config and these files before it builds the data module."""

from __future__ import annotations

import math
import os
from pathlib import Path

from bertlab.data.readers import DataError
from bertlab.data.validate import check_column_roles, check_readable, check_split_files, data_fingerprint
from bertlab.runtime.config import RAW_TEXT_FAMILIES, DataConfig, TaskSpec
from bertlab.runtime.paths import exists, missing_message, similar_names, typed_path

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples"


class DataFiles:
    """The files of ``task`` as ``data`` (``data.*``) names them."""

    def __init__(self, task: TaskSpec, data: DataConfig):
        self.task = task
        self.cfg = data
        if task.family == "sequence":  # one column per role, checked before any file is read
            check_column_roles({"text_column": data.text_column, "text_pair_column": data.text_pair_column,
                                "label_column": data.label_column})
        elif task.family == "multiple_choice":
            check_column_roles({"text_column": data.text_column, "choice_columns": data.choice_columns,
                                "choice_prefix_column": data.choice_prefix_column,
                                "label_column": data.label_column})

    def _root(self) -> Path:
        # The bundled samples use the same layout as a data folder (sst2/train.tsv, squad_v1.1/dev.json, ...).
        return SAMPLES_DIR if self.cfg.source == "sample" else Path(self.cfg.data_dir)

    def resolve(self, name: str | None, key: str = "the data file") -> Path | None:
        """A configured file (setting ``key``, for messages) as an absolute path, by the rule of
        :mod:`bertlab.runtime.paths`: an absolute path as it is; a relative one from the directory the command was
        typed in when something is there, else under the data folder (``paths.data_dir``; the bundled samples
        with ``source=sample``). ``source=hub``: a preset's own file name (``sst2/dev.tsv``) not found from the
        typed-in directory comes from the hub first. A preset file found nowhere is fetched from the hub when
        ``datasets`` is installed and online. A file found nowhere is an error that says it does not exist,
        where it was looked for and the similar names beside it; the hub and the samples are named only for a
        preset's own file names, the only ones they could provide.
        """
        if name is None:
            return None
        from bertlab.data.hub import is_preset_file

        given = Path(os.path.expanduser(str(name)))
        preset = not given.is_absolute() and is_preset_file(self.task.name, str(name))
        candidates = [typed_path(given)]
        if not given.is_absolute():
            candidates.append(typed_path(self._root() / given))
        hub_first = self.cfg.source == "hub" and preset
        for i, path in enumerate(candidates):
            if not exists(path) or (hub_first and i > 0 and path.is_file()):
                continue
            # Something is there: a readable regular file, or an error saying what it is instead (a folder, a
            # FIFO, a broken link, ...), never "does not exist" with advice about other sources.
            check_readable(path)
            return path
        hub_reason = None
        if preset and self.cfg.source != "sample":
            from bertlab.data.hub import HubUnavailable, fetch_preset

            try:
                return fetch_preset(self.task.name, str(name), Path(self.cfg.cache_dir or ".cache/bertlab") / "hub")
            except HubUnavailable as err:
                hub_reason = str(err)
        return self._missing(name, key, candidates, preset, hub_reason)

    def _missing(self, name: str, key: str, looked: list[Path], preset: bool, hub_reason: str | None):
        """The error for a data file found nowhere: what was looked for, where, the names beside it."""
        # A preset's own file name means the data folder, any other relative name the typed-in directory; but
        # the place whose folder exists comes first (sst2/trian.tsv is a misspelling under the data folder).
        main, *other = sorted(looked[::-1] if preset else looked, key=lambda p: not p.parent.is_dir())
        lines = [missing_message(main, f"{key}={name}: the file")]
        for path in other:
            where = "under the data folder" if path == looked[-1] else "from the directory the command was typed in"
            folder, close = similar_names(path)
            lines.append(f"  Also looked for {where}: {path}"
                         + (f" (similar names in {folder}: {', '.join(close)})" if close else ""))
        lines.append(f"  (task={self.task.name}, data.source={self.cfg.source}, paths.data_dir={self.cfg.data_dir})")
        if not preset:
            lines.append("  Check the name; a relative path is relative to the directory the command was typed in "
                         "(docs/running.md, \"Paths\").")
            raise DataError("\n".join(lines))
        if hub_reason is not None:
            lines.append(f"  The Hugging Face hub could not provide it either: {hub_reason}")
        lines += [
            "  Get the data in one of these ways:",
            "   - put the files under paths.data_dir (or set $BERTLAB_DATA_DIR) in the layout of docs/tasks.md "
            "\"Data\",",
            "   - be online with the `datasets` library installed: preset tasks are then fetched from the hub,",
            "   - data.source=sample to run on the small sample bundled with bertlab (smoke runs only)."]
        raise DataError("\n".join(lines))

    def split_file(self, split: str) -> Path | list[Path] | None:
        value = {"train": self.cfg.train_file, "val": self.cfg.val_file, "test": self.cfg.test_file,
                 "predict": self.cfg.predict_file, **(self.cfg.val_extra_files or {})}[split]
        key = f"data.{split}_file" if split in ("train", "val", "test", "predict") \
            else f"data.val_extra_files.{split}"
        if isinstance(value, list | tuple) or (value is not None and not isinstance(value, str)):
            return [self.resolve(v, key) for v in value]
        return self.resolve(value, key)

    def labelled_files(self) -> dict[str, Path | list[Path] | None]:
        """The files of the splits a run trains and scores on (train, val, the extra dev sets, test)."""
        splits = ["train", "val", *(self.cfg.val_extra_files or {}), "test"]
        return {split: self.split_file(split) for split in splits}

    def check_splits(self) -> None:
        """No evaluation split may be the training file (:func:`bertlab.data.validate.check_split_files`)."""
        settings = {"val": "data.val_file", "test": "data.test_file",
                    **{name: f"data.val_extra_files.{name}" for name in self.cfg.val_extra_files or {}}}
        check_split_files(self.labelled_files(), settings)

    def fingerprint(self) -> dict[str, str]:
        """Content digests of the training and validation files: what a checkpoint records of its data."""
        files = self.labelled_files()
        return data_fingerprint({k: v for k, v in files.items() if k != "test"})

    def training_texts(self, max_bytes: int | None = None) -> list[str]:
        """Text of the training split only: what a scratch tokenizer may be fit on (no val/test leakage).

        Raw-text corpora (mlm, clm) larger than ``max_bytes`` (``model.vocab_train_bytes``) give a
        deterministic sample instead of all their sentences: every k-th document, k = ceil(corpus bytes /
        max_bytes), read as a stream, until ``max_bytes`` bytes of text are collected. A corpus within the
        cap gives all its sentences in order, as before.
        """
        from bertlab.data.rawtext import iter_corpus
        from bertlab.data.readers import BadExamplePolicy, read_conll, read_squad, read_table

        path = self.split_file("train")
        policy = BadExamplePolicy("skip")
        if self.task.family in RAW_TEXT_FAMILIES:
            paths = path if isinstance(path, list) else [path]
            fmt = "wikitext" if self.cfg.text_format == "wikitext" else "auto"
            total = sum(p.stat().st_size for p in paths)
            stride = 1 if not max_bytes or total <= max_bytes else math.ceil(total / max_bytes)
            texts: list[str] = []
            taken = 0
            for i, doc in enumerate(iter_corpus(paths, fmt=fmt)):
                if i % stride:
                    continue
                if max_bytes and stride > 1 and taken >= max_bytes:
                    break
                texts.extend(doc)
                taken += sum(len(s.encode("utf-8")) + 1 for s in doc)
            return texts
        if self.task.family == "token":
            return [" ".join(s.words) for s in read_conll(path, self.cfg.tag_column, policy)]
        if self.task.family == "embedding":
            from bertlab.data.embedding import read_pairs

            rows = read_pairs(path, self.cfg, policy, negatives=True)
            return [r[0] for r in rows] + sorted({r[1] for r in rows}) + [r[2] for r in rows if r[2]]
        if self.task.family == "qa":
            examples = read_squad(path, train=True, policy=policy)
            return [e.question for e in examples] + sorted({e.context for e in examples})
        if self.task.family == "multiple_choice":
            from bertlab.data.choices import read_choices

            examples = read_choices(path, self.cfg, labelled=False, policy=policy)
            return [e.context for e in examples] + [c for e in examples for c in e.choices]
        rows = read_table(path, self.cfg.text_column, self.cfg.text_pair_column, None, policy)
        return [r.text for r in rows] + [r.text_pair for r in rows if r.text_pair]
