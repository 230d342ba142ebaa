"""Replays the fault and bad-input probes of docs/reliability.md as a user runs them: ``python train.py ...``
in a scratch folder, each probe's exit status and the line bertlab printed, checked against what is expected.

    .venv/bin/python tests/reliability_probes.py            # all probes (a few minutes on two cores)
    .venv/bin/python tests/reliability_probes.py -k sigterm # probes whose name contains "sigterm"
    .venv/bin/python tests/reliability_probes.py --keep /tmp/probes   # keep the scratch folder

Exit status 0 when every probe behaved as expected. Not collected by pytest (the same cases are tested in
tests/test_safe_cache.py, test_targets.py, test_resume.py, test_run_dir.py, test_bad_input_round2.py and
test_reliability_tracebacks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "data"
TINY = ["model=bert_tiny", "task=sst2", "trainer.max_epochs=1", "logger=csv", "trainer.enable_progress_bar=false"]


class Payload:
    """Unpickling this runs ``touch <marker>``: proof that a file's code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@dataclass
class Probe:
    name: str
    args: list[str]
    rc: int
    expect: str  # a piece of the printed output that must appear
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    check: Callable[[Path], str | None] | None = None  # extra check; returns a failure or None
    script: str | None = None  # a wrapper that patches something first, then runs train.py
    module: str | None = None  # run ``python -m <module> <args>`` (predict, export) instead of train.py


def _data(work: Path) -> Path:
    return work / "data"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")


WRAPPER = """import runpy, sys
{patch}
sys.argv = [{train!r}, *sys.argv[1:]]
runpy.run_path({train!r}, run_name="__main__")
"""


def probes(work: Path) -> list[Probe]:
    data, cache, marker = _data(work), work / "cache", work / "code-ran"

    def run(name: str) -> str:
        return f"hydra.run.dir={work / 'runs' / name}"

    def plant_in_cache(_: Path) -> None:
        for path in cache.rglob("*.safetensors"):
            path.write_bytes(pickle.dumps(Payload(marker)))
            path.with_suffix(".pkl").write_bytes(pickle.dumps(Payload(marker)))

    def truncate_cache(_: Path) -> None:
        for path in cache.rglob("*.safetensors"):
            path.write_bytes(path.read_bytes()[:100])

    def nothing_ran(_: Path) -> str | None:
        return "the planted file's code ran" if marker.exists() else None

    def evil_experiment(_: Path) -> None:
        (work / "evil.pkl").write_bytes(pickle.dumps(Payload(marker)))
        _write(work / "conf" / "experiment" / "evil.yaml",
               "# @package _global_\ncallbacks:\n  evil:\n    _target_: torch.load\n"
               f"    f: {work / 'evil.pkl'}\n    weights_only: false\n")

    def stale_tmp(_: Path) -> None:
        (work / "runs" / "term" / "checkpoints" / "last.ckpt.tmp-999999999").write_bytes(b"PK\x03\x04 half")

    def copy_run(_: Path) -> None:
        shutil.copytree(work / "runs" / "first", work / "runs" / "copy", dirs_exist_ok=True)

    def mix_tokenizer(_: Path) -> None:
        tok_file = work / "runs" / "first" / "tokenizer" / "tokenizer.json"
        tok = json.loads(tok_file.read_text())
        vocab = tok["model"]["vocab"]
        a, b = sorted(vocab, key=vocab.get)[100:102]
        vocab[a], vocab[b] = vocab[b], vocab[a]
        tok_file.write_text(json.dumps(tok))

    def corrupt_tokenizer(_: Path) -> None:
        tok_file = work / "runs" / "copy" / "tokenizer" / "tokenizer.json"
        tok_file.write_text(tok_file.read_text()[:300])

    def squad_duplicate(_: Path) -> None:
        squad = json.loads((FIXTURES / "squad_v1.1" / "dev.json").read_text())
        qas = squad["data"][0]["paragraphs"][0]["qas"]
        qas[1]["id"] = qas[0]["id"]
        _write(data / "squad_v1.1" / "dev.json", json.dumps(squad))

    def regression(value: str, sep: str = "") -> Callable[[Path], None]:
        def setup(_: Path) -> None:
            rows = ["text\ttext_pair\tlabel"] + [f"a cat {i}\ta dog {i}\t{i % 5}.0" for i in range(12)]
            dev = list(rows)
            dev[4] = f"a cat\ta dog\t{value}"
            train = list(rows)
            if sep:
                train[3] = f"a cat{sep}sat\ta dog\t2.0"
            _write(data / "sts" / "train.tsv", "\n".join(train) + "\n")
            _write(data / "sts" / "dev.tsv", "\n".join(dev if value else rows) + "\n")
        return setup

    def one_class(_: Path) -> None:
        _write(data / "one" / "train.tsv", "sentence\tlabel\n" + "".join(f"text {i}\t1\n" for i in range(10)))
        shutil.copy(FIXTURES / "sst2" / "dev.tsv", data / "one" / "dev.tsv")

    def folder_as_file(_: Path) -> None:
        (data / "sst2" / "dev.tsv").unlink(missing_ok=True)
        (data / "sst2" / "dev.tsv").mkdir(parents=True, exist_ok=True)

    def symlink_loop(_: Path) -> None:
        dev = data / "sst2" / "dev.tsv"
        if dev.is_dir() and not dev.is_symlink():
            dev.rmdir()
        dev.unlink(missing_ok=True)
        os.symlink(data / "sst2" / "loop.tsv", dev)
        os.symlink(dev, data / "sst2" / "loop.tsv")

    def restore_dev(_: Path) -> None:
        for name in ("dev.tsv", "loop.tsv"):
            path = data / "sst2" / name
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)
        shutil.copy(FIXTURES / "sst2" / "dev.tsv", data / "sst2" / "dev.tsv")

    # Input validation by kind (docs/reliability.md): one probe per kind, each a case the issue listed.
    def kind_files(folder: str, train: str, dev: str, suffix: str = "tsv") -> Callable[[Path], None]:
        def setup(_: Path) -> None:
            _write(data / folder / f"train.{suffix}", train)
            _write(data / folder / f"dev.{suffix}", dev)
        return setup

    sst2_train = (FIXTURES / "sst2" / "train.tsv").read_text()
    sst2_dev = (FIXTURES / "sst2" / "dev.tsv").read_text()
    spelled = sst2_train.replace("\t1\n", "\t1.0\n", 3).replace("\t0\n", "\t 00\n", 2)

    def squad_no_answer(_: Path) -> None:
        squad = json.loads((FIXTURES / "squad_v1.1" / "dev.json").read_text())
        squad["data"][0]["paragraphs"][0]["qas"][1]["answers"] = []
        _write(data / "kinds-squad" / "squad_v1.1" / "dev.json", json.dumps(squad))
        shutil.copy(FIXTURES / "squad_v1.1" / "train.json", data / "kinds-squad" / "squad_v1.1" / "train.json")

    def fifo_dev(_: Path) -> None:
        _write(data / "kinds-fifo" / "train.tsv", sst2_train)
        dev = data / "kinds-fifo" / "dev.tsv"
        if not dev.exists():
            os.mkfifo(dev)

    def flip_labels(_: Path) -> None:
        rows = [line.rsplit("\t", 1) for line in sst2_train.splitlines()]
        _write(data / "kinds-resume" / "train.tsv", "\n".join(["\t".join(rows[0])] + [
            f"{text}\t{1 - int(label)}" for text, label in rows[1:]]) + "\n")

    def generic(folder: str, suffix: str = "tsv", column: str = "sentence") -> list[str]:
        return ["model=bert_tiny", "task=text_classification", "trainer.max_epochs=1", "logger=csv",
                f"data.train_file={folder}/train.{suffix}", f"data.val_file={folder}/dev.{suffix}",
                f"data.text_column={column}", "trainer.enable_progress_bar=false"]

    jsonl_rows = "".join(json.dumps({"sentence": f"film {i}", "label": i % 2}) + "\n" for i in range(8))
    # Files from elsewhere and from earlier runs (docs/reliability.md): one probe per reader.
    models = work / "models"
    tiny_bert = {"model_type": "bert", "vocab_size": 8, "hidden_size": 32, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "intermediate_size": 37, "max_position_embeddings": 64}

    def model_folder(name: str, vocab: str, **config) -> Callable[[Path], None]:
        def setup(_: Path) -> None:
            _write(models / name / "config.json", json.dumps({**tiny_bert, **config}))
            _write(models / name / "vocab.txt", vocab)
        return setup

    bert_vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nfilm\ngood\n"

    def cut_run_file(name: str, file: str) -> Callable[[Path], None]:
        def setup(_: Path) -> None:
            (work / "runs" / name / "checkpoints").mkdir(parents=True, exist_ok=True)
            _write(work / "runs" / name / file, '{"fingerprint": "0f3c", "best_checkpoint": "/x/ch')
            _write(work / "in.txt", "a good film\n")
        return setup

    auto = ["model=auto", "task=sst2", "trainer.max_epochs=1", "logger=csv", "trainer.enable_progress_bar=false"]
    files = [
        Probe("files-config-json-absurd", [*auto, f"model.pretrained={models / 'absurd'}", run("file-absurd")], 1,
              "config.json: hidden_size=32 is not divisible by num_attention_heads=5",
              setup=model_folder("absurd", bert_vocab, num_attention_heads=5)),
        Probe("files-config-json-huge", [*auto, f"model.pretrained={models / 'huge'}", run("file-huge")], 1,
              "more than this machine's memory", setup=model_folder("huge", bert_vocab, vocab_size=10**13)),
        Probe("files-vocab-foreign", [*auto, f"model.pretrained={models / 'foreign'}", run("file-foreign")], 1,
              "vocab.txt: not a BERT WordPiece vocabulary", setup=model_folder("foreign", "<s>\n<pad>\n</s>\n<unk>\n")),
        Probe("files-run-record-cut", [*TINY, run("file-record")], 1,
              "holds a run whose record",
              setup=cut_run_file("file-record", ".bertlab-run.json")),
        Probe("files-metrics-cut", [str(work / "runs" / "file-metrics"), str(work / "in.txt")], 1,
              "metrics.json: the run's metrics.json (it names the run's best checkpoint) is damaged",
              setup=cut_run_file("file-metrics", "metrics.json"), module="bertlab.predict"),
    ]
    kinds = [
        Probe("kind-label-spellings-merged", [*generic("kinds-labels"), run("kind-labels")], 0, "best checkpoint:",
              setup=kind_files("kinds-labels", spelled, sst2_dev),
              check=lambda w: None if json.loads((w / "runs" / "kind-labels" / "metrics.json").read_text())[
                  "labels"] == ["0", "1"] else "labels 1.0 / 00 became classes of their own"),
        Probe("kind-label-case-clash", [*generic("kinds-case"), run("kind-case")], 1, "spells one class several ways",
              setup=kind_files("kinds-case", sst2_train.replace("\t1\n", "\tpos\n").replace("\t0\n", "\tneg\n")
                               .replace("\tpos\n", "\tPos\n", 1), sst2_dev)),
        Probe("kind-header-twice", [*generic("kinds-header"), run("kind-header")], 1, "names the column 'sentence' twice",
              setup=kind_files("kinds-header", sst2_train.replace("sentence\tlabel", "sentence\tSentence", 1), sst2_dev)),
        Probe("kind-jsonl-object-text", [*generic("kinds-json", "jsonl"), run("kind-json")], 1,
              "field 'sentence' is a JSON object",
              setup=kind_files("kinds-json", jsonl_rows + '{"sentence": {"t": 1}, "label": 0}\n', jsonl_rows, "jsonl")),
        Probe("kind-csv-unclosed-quote", [*generic("kinds-csv", "csv"), run("kind-csv")], 1, "is never closed",
              setup=kind_files("kinds-csv", "sentence,label\none,1\ntwo,\"0\nthree,1\nfour,0\nfive,1\n",
                               "sentence,label\nok,1\nno,0\n", "csv")),
        Probe("kind-tsv-quoted-newline", [*generic("kinds-tsvq"), "data.on_bad_example=skip", run("kind-tsvq")], 0,
              "one record only when read as CSV",
              setup=kind_files("kinds-tsvq", sst2_train, sst2_dev + '"half of\nan example"\t1\n'),
              check=lambda w: None if json.loads((w / "runs" / "kind-tsvq" / "metrics.json").read_text())["data"][
                  "skipped_examples"] == 1 else "the quoted record was not skipped whole"),
        Probe("kind-conll-word-with-space", ["model=bert_tiny", "task=token_classification", "trainer.max_epochs=1",
                                            "logger=csv", "data.train_file=kinds-conll/train.conll",
                                            "data.val_file=kinds-conll/dev.conll", run("kind-conll")], 1,
              "a word holding a space",
              setup=kind_files("kinds-conll", "New York B-LOC\nis O\nbig O\n\nParis B-LOC\nis O\n",
                               "Rome B-LOC\nis O\n", "conll")),
        Probe("kind-squad-v1-no-answer", ["model=bert_tiny", "task=squad", "trainer.max_epochs=1", "logger=csv",
                                         f"paths.data_dir={data / 'kinds-squad'}", run("kind-squad")], 1,
              "SQuAD v1.1 scores a question against its answers", setup=squad_no_answer),
        Probe("kind-fifo-data-path", [*generic("kinds-fifo"), run("kind-fifo")], 1, "a named pipe (FIFO)",
              setup=fifo_dev),
        Probe("kind-same-file-train-val", [*generic("kinds-labels"), "data.val_file=kinds-labels/train.tsv",
                                          run("kind-same")], 1, "is the same file as data.train_file"),
        Probe("kind-resume-base", [*generic("kinds-resume"), "trainer.max_steps=2", run("kind-resume")], 0,
              "best checkpoint:", setup=kind_files("kinds-resume", sst2_train, sst2_dev)),
        Probe("kind-resume-data-changed", [*generic("kinds-resume"), "trainer.max_steps=4", "ckpt_path=last",
                                          run("kind-resume")], 1, "the data changed since the checkpoint",
              setup=flip_labels),
    ]

    first = work / "runs" / "first"
    held: dict[str, object] = {}

    def snapshot(folder: Path) -> dict[str, bytes]:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    def keep_first(_: Path) -> None:
        held["first"] = snapshot(first)

    def first_unchanged(_: Path) -> str | None:
        now = snapshot(first)
        changed = [k for k in set(held["first"]) | set(now) if held["first"].get(k) != now.get(k)]
        return f"the refused run changed {sorted(changed)}" if changed else None

    def hold_first(_: Path) -> None:
        keep_first(_)
        held["proc"] = subprocess.Popen(
            [sys.executable, "-c", "import time; from filelock import FileLock; "
             f"lock = FileLock({str(first / '.bertlab-run.lock')!r}); lock.acquire(); print(1, flush=True); "
             "time.sleep(300)"], stdout=subprocess.PIPE, text=True)
        held["proc"].stdout.readline()

    def release_first(_: Path) -> str | None:
        held.pop("proc").kill()
        return first_unchanged(_)

    def user_files(_: Path) -> None:
        _write(work / "in.txt", "a fine film\nthe plot is a mess\n")
        _write(work / "precious.txt", "a user's file\n")
        _write(work / "hf" / "config.json", '{"mine": true}\n')

    def user_files_unchanged(_: Path) -> str | None:
        for name, text in (("in.txt", "a fine film\nthe plot is a mess\n"), ("precious.txt", "a user's file\n"),
                           ("hf/config.json", '{"mine": true}\n')):
            if (work / name).read_text() != text:
                return f"{name} was changed"
        return None if not marker.exists() else "a program ran"

    def nothing_written(name: str, record: bool = True) -> Callable[[Path], str | None]:
        """No output a later run in the same folder would take for a result (nor, for a check before any
        work, the run's record .bertlab-run.json)."""
        def check(_: Path) -> str | None:
            left = [n for n in ((".bertlab-run.json",) if record else ()) + ("metrics.json", "checkpoints",
                                                                             "tokenizer")
                    if (work / "runs" / name / n).exists()]
            return f"the refused run wrote {left}" if left else None
        return check

    def a_file(_: Path) -> None:
        _write(work / "a_file", "not a folder\n")

    def refused(name: str, args: list[str], expect: str, setup: Callable[[Path], None] | None = None,
                record: bool = True) -> Probe:
        """A setting refused by its kind or with the others (docs/reliability.md, "Settings validated by kind")."""
        name = f"setting-{name}"  # -k setting- replays these alone
        return Probe(name, [*TINY, *args, run(name)], 1, expect, setup=setup, check=nothing_written(name, record))

    nan_loss = "from bertlab.tasks.families import SequenceFamily\nL = SequenceFamily.loss\n" \
               "SequenceFamily.loss = lambda self, out, batch: L(self, out, batch) * float('nan')"
    full_disk = "import errno, torch\ndef full(*a, **k):\n    raise OSError(errno.ENOSPC, 'No space left on device')\n" \
                "torch.save = full"
    # torch's zip writer: its own RuntimeError, raised while the OSError was being handled
    full_disk_chained = "import errno, torch\ndef full(*a, **k):\n    try:\n" \
                        "        raise OSError(errno.ENOSPC, 'No space left on device')\n    except OSError:\n" \
                        "        raise RuntimeError('[enforce fail at inline_container.cc:664] . unexpected pos 3584 vs " \
                        "3472')\ntorch.save = full"
    cache_full = "import safetensors.numpy\nfrom safetensors import SafetensorError\ndef full(*a, **k):\n" \
                 "    raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, " \
                 "message: \"No space left on device\" })')\nsafetensors.numpy.save_file = full"
    term_after_summary = "import os, signal\nimport bertlab.train as t\nP = t._print_summary\n" \
                         "def p(*a, **k):\n    P(*a, **k)\n    os.kill(os.getpid(), signal.SIGTERM)\n" \
                         "t._print_summary = p"
    most_nan = "from bertlab.tasks.families import SequenceFamily\nL = SequenceFamily.loss\nN = [0]\n" \
               "def loss(self, out, batch):\n    N[0] += 1\n    return L(self, out, batch) * (1.0 if N[0] == 3 else " \
               "float('nan'))\nSequenceFamily.loss = loss"
    return [
        Probe("cache-fill", [*TINY, run("first")], 0, "best checkpoint:"),
        Probe("cache-planted-pickle", [*TINY, run("planted")], 0, "is damaged", setup=plant_in_cache,
              check=nothing_ran),
        Probe("cache-truncated", [*TINY, run("truncated")], 0, "is damaged", setup=truncate_cache),
        Probe("config-torch-load", [*TINY, run("evil"), f"hydra.searchpath=[file://{work / 'conf'}]",
                                    "experiment=evil"], 1, "_target_=torch.load: refused", setup=evil_experiment,
              check=nothing_ran),
        Probe("sigterm", [*TINY, "trainer.max_epochs=2", "data.batch_size=8", run("term")], 143,
              "bertlab: stopped: received SIGTERM", env={"BERTLAB_TEST_SIGNAL_AT_STEP": "3:TERM"}),
        Probe("sigterm-resume", [*TINY, "trainer.max_epochs=2", "data.batch_size=8", run("term"), "ckpt_path=last"],
              0, "last.ckpt.tmp-999999999", setup=stale_tmp),
        Probe("full-disk", [*TINY, run("full")], 1, "bertlab: error: the disk is full", script=full_disk),
        Probe("nan-loss-at-step-0", [*TINY, run("nan")], 1, "no checkpoint had been written before this step",
              script=nan_loss),
        Probe("run-dir-reused", [*TINY, "optim.lr=1e-3", run("first")], 1, "is used: it holds a run with another "
              "configuration"),
        Probe("init-from-copy", [*TINY, run("from-copy"), f"model.init_from={work / 'runs' / 'copy'}"], 0,
              "best checkpoint:", setup=copy_run),
        Probe("mixed-tokenizer", [*TINY, run("mixed"), f"model.init_from={work / 'runs' / 'first'}"], 1,
              "was trained with another tokenizer", setup=mix_tokenizer),
        Probe("corrupt-tokenizer-json", [*TINY, run("corrupt-tok"), f"model.init_from={work / 'runs' / 'copy'}"], 1,
              "tokenizer.json could not be read", setup=corrupt_tokenizer),
        Probe("squad-duplicate-id", ["model=bert_tiny", "task=squad", "trainer.max_epochs=1", "logger=csv",
                                     run("squad")], 1, "duplicate question id", setup=squad_duplicate),
        Probe("nan-regression-label", ["model=bert_tiny", "task=text_regression", "trainer.max_epochs=1",
                                       "logger=csv", "data.train_file=sts/train.tsv", "data.val_file=sts/dev.tsv",
                                       run("nan-label")], 1, "is not a finite number", setup=regression("nan")),
        Probe("u2028-in-a-row", ["model=bert_tiny", "task=text_regression", "trainer.max_epochs=1", "logger=csv",
                                 "data.train_file=sts/train.tsv", "data.val_file=sts/dev.tsv", run("u2028")], 0,
              "best checkpoint:", setup=regression("", sep="\u2028"),
              check=lambda w: None if json.loads((w / "runs" / "u2028" / "metrics.json").read_text())["data"][
                  "train_examples"] == 12 else "a row was split"),
        Probe("max-seq-length-1", [*TINY, "data.max_seq_length=1", run("len1")], 1, "leaves no room for text"),
        Probe("one-class", ["model=bert_tiny", "task=text_classification", "trainer.max_epochs=1", "logger=csv",
                            "data.train_file=one/train.tsv", "data.val_file=one/dev.tsv", "data.text_column=sentence",
                            run("one")], 1, "has only one class", setup=one_class),
        Probe("accumulate-0", [*TINY, "trainer.accumulate_grad_batches=0", run("acc")], 1,
              "accumulate_grad_batches=0"),
        Probe("num-workers-minus-1", [*TINY, "data.num_workers=-1", run("nw")], 1, "data.num_workers=-1"),
        Probe("data-path-is-a-folder", [*TINY, run("folder")], 1, "a folder, not a data file", setup=folder_as_file),
        Probe("data-path-symlink-loop", [*TINY, run("loop")], 1, "loops back on itself", setup=symlink_loop),
        Probe("restore", [*TINY, run("restored")], 0, "best checkpoint:", setup=restore_dev),
        # Round three (issue #33): outputs never replace inputs, targets by identity, refused runs write
        # nothing, one live run per folder, failed writes and late signals as one paragraph.
        Probe("predict-output-is-input", [str(first), str(work / "in.txt"), "--output",
                                          str(work / "runs" / ".." / "in.txt"), "--no-progress"], 1,
              "is the input file", setup=user_files, check=user_files_unchanged, module="bertlab.predict"),
        Probe("export-into-a-users-folder", [str(first), str(work / "hf")], 1, "is not empty",
              check=user_files_unchanged, module="bertlab.export"),
        Probe("target-through-an-import", [*TINY, run("evil2"), "+callbacks.evil._target_=lightning.pytorch."
                                           "callbacks.model_checkpoint.logging.FileHandler",
                                           f"+callbacks.evil.filename={work / 'precious.txt'}", "+callbacks.evil.mode=w"],
              1, "the path leads to logging.FileHandler", check=user_files_unchanged),
        Probe("popen-through-an-import", [*TINY, run("evil3"), "+callbacks.evil._target_=lightning.pytorch."
                                          "accelerators.cuda.subprocess.Popen", f"+callbacks.evil.args=[touch,{marker}]"],
              1, "the path leads to subprocess.Popen", check=user_files_unchanged),
        Probe("refused-run-leaves-the-records", [*TINY, "optim.lr=1e-3", run("first")], 1,
              "is used: it holds a run with another configuration", setup=keep_first, check=first_unchanged),
        Probe("run-dir-in-use", [*TINY, run("first")], 1, "is in use: another run is running in it now",
              setup=hold_first, check=release_first),
        Probe("full-disk-chained", [*TINY, run("full2")], 1, "bertlab: error: the disk is full: could not write the "
              "checkpoint", script=full_disk_chained),
        Probe("feature-cache-full-disk", [*TINY, "data.max_seq_length=96", run("cache-full")], 0,
              "not cached: the disk is full", script=cache_full),
        Probe("sigterm-after-the-summary", [*TINY, run("late-term")], 0, "received SIGTERM after the run wrote its "
              "results", script=term_after_summary),
        Probe("skip-most-batches", [*TINY, "on_nonfinite_loss=skip", "data.batch_size=4", run("most-nan")], 1,
              "on_nonfinite_loss=skip skipped", script=most_nan),
        refused("seed-minus-1", ["seed=-1"], "seed=-1: the random seed must be an integer from 0"),
        refused("lr-nan", ["optim.lr=nan"], "optim.lr=nan: the learning rate must be a finite number above 0"),
        refused("betas-out-of-range", ["optim.betas=[1.5,0.999]"], "optim.betas=[1.5,0.999]: AdamW's betas"),
        refused("warmup-ratio-1.5", ["optim.warmup_ratio=1.5"], "optim.warmup_ratio=1.5: the fraction"),
        refused("lora-rank-0", ["freeze=lora", "freeze.lora.r=0"], "freeze.lora.r=0: the LoRA rank must be"),
        refused("max-train-samples-0", ["data.max_train_samples=0"], "data.max_train_samples=0: the number of"),
        refused("never-ends", ["trainer.max_epochs=-1", "trainer.max_steps=-1"], "the training would never end"),
        refused("zero-epochs", ["trainer.max_epochs=0"], "trainer.max_epochs=0 trains nothing"),
        refused("no-training-batch", ["trainer.limit_train_batches=0"], "trains on no batch"),
        refused("val-check-past-the-end", ["trainer.max_steps=3", "trainer.val_check_interval=10"],
                "trainer.val_check_interval=10 batches is past the end of training"),
        refused("monitor-never-logged", ["task.monitor=val/acc"], "task.monitor=val/acc: task sst2 (family "
                "sequence) never logs it"),
        refused("early-stopping-never-triggers", ["trainer.max_epochs=2", "callbacks=early_stopping"],
                "can never trigger"),
        refused("gpu-without-a-gpu", ["trainer=gpu"], "needs a CUDA GPU, and this machine has none visible"),
        refused("cache-dir-under-a-file", [f"paths.cache_dir={work / 'a_file' / 'cache'}"],
                "is a file, not a folder", setup=a_file),
        Probe("setting-run-dir-is-a-file", [*TINY, f"hydra.run.dir={work / 'a_file'}"], 1,
              "the run folder cannot be created there", setup=a_file),
        refused("val-check-past-the-epoch", ["trainer.val_check_interval=1000"],
                "trainer.val_check_interval=1000 batches is past the end of an epoch", record=False),
        *kinds,
        *files,
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="run only probes whose name contains this")
    parser.add_argument("--keep", type=Path, help="scratch folder to use and keep (default: a temporary one)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bertlab-probes-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.copytree(FIXTURES, _data(work), dirs_exist_ok=True)
    env = {**os.environ, "BERTLAB_DATA_DIR": str(_data(work)), "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    failures = 0
    print("| probe | exit | expected | message |\n|---|---|---|---|")
    for probe in probes(work):
        if args.k not in probe.name:
            continue
        if probe.setup:
            probe.setup(work)
        train = str(ROOT / "train.py")
        cmd = [sys.executable, train]
        if probe.script:
            wrapper = work / f"{probe.name}.py"
            wrapper.write_text(WRAPPER.format(patch=probe.script, train=train))
            cmd = [sys.executable, str(wrapper)]
        argv = [f"paths.cache_dir={work / 'cache'}", *probe.args]
        if probe.module:
            cmd, argv = [sys.executable, "-m", probe.module], probe.args
        out = subprocess.run([*cmd, *argv], cwd=ROOT, env={**env, **probe.env}, capture_output=True, text=True,
                             timeout=600)
        text = out.stdout + out.stderr
        problem = None
        if out.returncode != probe.rc:
            problem = f"exit {out.returncode}, expected {probe.rc}"
        elif probe.expect not in text:
            problem = f"{probe.expect!r} not printed"
        elif "Traceback" in text:
            problem = "a traceback was printed"
        elif probe.check:
            problem = probe.check(work)
        lines = [line.strip() for line in text.splitlines() if probe.expect in line]
        lines.sort(key=lambda line: not line.startswith("bertlab:"))  # the terminal's line first
        shown = lines[0][:240] if lines else ""
        print(f"| {probe.name} | {out.returncode} | {'ok' if problem is None else 'FAILED: ' + problem} | "
              f"`{shown.replace('|', '/')}` |", flush=True)
        if problem is not None:
            failures += 1
            sys.stderr.write(text[-3000:] + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{failures} probe(s) failed" if failures else "\nall probes behaved as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
