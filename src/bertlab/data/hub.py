"""Hugging Face hub datasets → bertlab's file layout, through the optional ``datasets`` library.

A preset task whose files are missing under ``paths.data_dir`` (or ``data.source=hub``) is fetched with
``datasets.load_dataset`` and written once, in the same formats as the local files (GLUE TSV, CoNLL columns,
SQuAD JSON), under ``<cache_dir>/hub/<task>/``; the readers then treat it like any data folder. Offline, or
without ``datasets``, this raises :class:`HubUnavailable` and the caller names the local files it looked for.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


class HubUnavailable(RuntimeError):
    pass


# task → (hub id, config, {our split file: hub split})
PRESETS = {
    "sst2": ("glue", "sst2", {"sst2/train.tsv": "train", "sst2/dev.tsv": "validation", "sst2/test.tsv": "test"}),
    "mrpc": ("glue", "mrpc", {"mrpc/train.tsv": "train", "mrpc/dev.tsv": "validation", "mrpc/test.tsv": "test"}),
    "rte": ("glue", "rte", {"rte/train.tsv": "train", "rte/dev.tsv": "validation", "rte/test.tsv": "test"}),
    "conll2003": ("conll2003", None, {"conll2003/eng.train": "train", "conll2003/eng.testa": "validation",
                                      "conll2003/eng.testb": "test"}),
    "wnut17": ("wnut_17", None, {"wnut17/wnut17train.conll": "train", "wnut17/emerging.dev.conll": "validation"}),
    "squad": ("squad", None, {"squad_v1.1/train.json": "train", "squad_v1.1/dev.json": "validation"}),
    "swag": ("swag", "regular", {"swag/train.csv": "train", "swag/val.csv": "validation", "swag/test.csv": "test"}),
    "squad_v2": ("squad_v2", None, {"squad_v2/train.json": "train", "squad_v2/dev.json": "validation"}),
    **{task: ("glue", task, {f"{task}/train.tsv": "train", f"{task}/dev.tsv": "validation",
                             f"{task}/test.tsv": "test"}) for task in ("cola", "stsb", "qqp", "qnli", "wnli")},
    "mnli": ("glue", "mnli", {"mnli/train.tsv": "train", "mnli/dev_matched.tsv": "validation_matched",
                              "mnli/dev_mismatched.tsv": "validation_mismatched",
                              "mnli/test_matched.tsv": "test_matched", "mnli/test_mismatched.tsv": "test_mismatched"}),
}

# The rest of GLUE in the release's layout: (header, the hub columns in that order, the label column's
# name in our files). CoLA's train/dev files have no header: (source, label, author's mark, sentence).
GLUE_COLUMNS = {
    "stsb": (["index", "sentence1", "sentence2", "score"], ["idx", "sentence1", "sentence2"], "score"),
    "qqp": (["id", "question1", "question2", "is_duplicate"], ["idx", "question1", "question2"], "is_duplicate"),
    "mnli": (["index", "sentence1", "sentence2", "gold_label"], ["idx", "premise", "hypothesis"], "gold_label"),
    "qnli": (["index", "question", "sentence", "label"], ["idx", "question", "sentence"], "label"),
    "wnli": (["index", "sentence1", "sentence2", "label"], ["idx", "sentence1", "sentence2"], "label"),
}


def _load(hub_id: str, config: str | None, split: str):
    from bertlab.runtime.network import OFFLINE_ADVICE, hub_unreachable_reason

    unreachable = hub_unreachable_reason()
    if unreachable:
        raise HubUnavailable(f"the hub was not asked: {unreachable}. {OFFLINE_ADVICE}")
    try:
        import datasets
    except ImportError as err:
        raise HubUnavailable("the `datasets` library is not installed (pip install datasets)") from err
    try:
        return datasets.load_dataset(hub_id, config, split=split)
    except Exception as err:  # offline, unknown id, no such split
        raise HubUnavailable(f"datasets.load_dataset({hub_id!r}, {config!r}) failed: {type(err).__name__}: {err}") \
            from err


def _label_names(ds, column: str) -> list[str] | None:
    feature = ds.features.get(column)
    names = getattr(feature, "names", None) or getattr(getattr(feature, "feature", None), "names", None)
    return list(names) if names else None


def _write_glue(ds, task: str, path: Path) -> None:
    names = _label_names(ds, "label")
    rows = []
    if task == "sst2":
        header = ["sentence", "label"]
        for r in ds:
            rows.append([r["sentence"], str(r["label"])])
    elif task == "mrpc":
        header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
        for r in ds:
            rows.append([str(r["label"]), str(r["idx"]), str(r["idx"]), r["sentence1"], r["sentence2"]])
    else:  # rte: labels are class names in the GLUE files
        header = ["index", "sentence1", "sentence2", "label"]
        for r in ds:
            label = names[r["label"]] if names and r["label"] >= 0 else str(r["label"])
            rows.append([str(r["idx"]), r["sentence1"], r["sentence2"], label])
    if all(r[-1 if task != "mrpc" else 0] in ("-1", "") for r in rows):  # GLUE test splits carry no labels
        header = [h for h in header if h not in ("label", "Quality")]
        rows = [r[:-1] if task != "mrpc" else r[1:] for r in rows]
        if task == "sst2":
            header, rows = ["index", "sentence"], [[str(i), r[0]] for i, r in enumerate(rows)]
    clean = [[c.replace("\t", " ").replace("\n", " ") for c in r] for r in rows]
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(r) + "\n" for r in clean), encoding="utf-8")


def _write_glue_table(ds, task: str, path: Path) -> None:
    """CoLA, STS-B, QQP, MNLI, QNLI, WNLI as the GLUE release writes them (labels: MNLI and QNLI by name,
    the others by number, STS-B as a 0-5 score); a test split (labels -1) has no label column."""
    names = _label_names(ds, "label")
    test = all(r["label"] in (-1, -1.0) for r in ds)

    def label(value) -> str:
        if task == "stsb":
            return f"{float(value):g}"
        return names[value] if task in ("mnli", "qnli") and names else str(value)

    if task == "cola":
        header = ["index", "sentence"] if test else None
        rows = [[str(r["idx"]), r["sentence"]] if test else
                ["hub", str(r["label"]), "" if r["label"] == 1 else "*", r["sentence"]] for r in ds]
    else:
        header, columns, _ = GLUE_COLUMNS[task]
        header = header[:-1] if test else header
        rows = [[str(r[c]) for c in columns] + ([] if test else [label(r["label"])]) for r in ds]
    clean = [[c.replace("\t", " ").replace("\n", " ") for c in r] for r in rows]
    text = ("\t".join(header) + "\n" if header else "") + "".join("\t".join(r) + "\n" for r in clean)
    path.write_text(text, encoding="utf-8")


def _write_swag(ds, path: Path) -> None:
    """SWAG's CSV layout (test rows have label -1: no label column then)."""
    import csv

    test = all(int(r["label"]) < 0 for r in ds)
    columns = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0", "ending1",
               "ending2", "ending3"] + ([] if test else ["label"])
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["", *columns])
        for i, r in enumerate(ds):
            writer.writerow([i, *(str(r[c]) for c in columns)])


def _write_conll(ds, path: Path) -> None:
    names = _label_names(ds, "ner_tags")
    lines = []
    for r in ds:
        for word, tag in zip(r["tokens"], r["ner_tags"]):
            lines.append(f"{word}\t{names[tag] if names else tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_squad(ds, path: Path) -> None:
    paragraphs = []
    for r in ds:
        answers = [{"text": t, "answer_start": int(s)} for t, s in zip(r["answers"]["text"], r["answers"]["answer_start"])]
        # SQuAD 2.0's unanswerable questions have no answers: is_impossible says so explicitly.
        paragraphs.append({"context": r["context"], "qas": [{"id": r["id"], "question": r["question"],
                                                             "answers": answers, "is_impossible": not answers}]})
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "hub", "paragraphs": paragraphs}]}),
                    encoding="utf-8")


def is_preset_file(task: str, relative: str) -> bool:
    """Whether ``relative`` names one of preset ``task``'s own files (``sst2/dev.tsv``): the hub can provide it."""
    return task in PRESETS and relative in PRESETS[task][2]


def fetch_preset(task: str, relative: str, root: Path) -> Path:
    """Write the hub split that corresponds to ``relative`` (e.g. ``sst2/dev.tsv``) under ``root``."""
    if task not in PRESETS or relative not in PRESETS[task][2]:
        raise HubUnavailable(f"no hub mapping for task={task} file {relative}")
    hub_id, config, splits = PRESETS[task]
    target = root / relative
    if target.is_file():
        return target
    ds = _load(hub_id, config, splits[relative])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    if task in ("sst2", "mrpc", "rte"):
        _write_glue(ds, task, tmp)
    elif task in ("cola", *GLUE_COLUMNS):
        _write_glue_table(ds, task, tmp)
    elif task == "swag":
        _write_swag(ds, tmp)
    elif task in ("conll2003", "wnut17"):
        _write_conll(ds, tmp)
    else:
        _write_squad(ds, tmp)
    os.replace(tmp, target)
    log.info("fetched %s (%s) split %s from the hub into %s", hub_id, config, splits[relative], target)
    return target
