"""Prediction inputs and outputs: read a file in any format ``python -m bertlab.predict`` accepts, write one
JSON record per input, and ``predict=true`` of train.py (records for ``data.predict_file`` in the run dir)."""

from __future__ import annotations

import io
import itertools
import json
import logging
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from bertlab.data.readers import BadExamplePolicy, DataError, json_object, read_conll, read_squad, read_table
from bertlab.data.validate import missing_column
from bertlab.inference.predictor import PREDICTIONS_FILE, Predictor, PredictSettings
from bertlab.inference.tasks import PREDICT_FAMILIES, prediction_task
from bertlab.inference.text import FORMATS
from bertlab.runtime.config import ConfigError, DataConfig, TaskSpec
from bertlab.runtime.files import RUN_DIR_FIX, atomic_path, refuse_writing_over, writing
from bertlab.runtime.paths import existing_path

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------------------------
# Reading inputs


def _lines(stream: TextIO | BinaryIO, name: str, first: int = 1) -> Iterator[tuple[int, str]]:
    """(line number, line without its line end) of a stream, lines broken where Python's text mode breaks them
    (LF, CR LF, CR). Bytes are decoded line by line, so bytes that are not UTF-8 name their own line: a text
    stream decodes ahead in blocks and would blame the line it stood on, up to thousands of lines earlier."""
    binary = stream if not isinstance(stream, io.TextIOBase) else getattr(stream, "buffer", None)
    number = first - 1
    if binary is None:  # a text stream without bytes under it (io.StringIO): already decoded
        for number, line in enumerate(stream, first):
            yield number, line.rstrip("\r\n")
        return
    for chunk in binary:  # binary iteration breaks at LF only: a CR LF pair stays in one chunk
        if number == first - 1 and chunk.startswith(b"\xef\xbb\xbf"):
            chunk = chunk[3:]  # a UTF-8 byte-order mark is not text
        for part in chunk.splitlines() or [b""]:
            number += 1
            try:
                yield number, part.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(f"{name}:{number}: bytes that are not UTF-8 ({part[err.start:err.start + 4]!r} at "
                                f"byte {err.start} of the line); re-encode the file as UTF-8 (e.g. iconv -f latin1 "
                                "-t utf-8)") from None


def _head(path: Path, limit: int = 200) -> list[str]:
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        return [line.rstrip("\r\n") for line in itertools.islice(f, limit)]


def _looks_like_conll(path: Path, lines: list[str]) -> bool:
    """CoNLL: ``-DOCSTART-``, a CoNLL suffix, or blank-line-separated blocks whose lines all have as many
    columns (one sentence a line of plain text has lines of different lengths)."""
    filled = [line for line in lines if line.strip()]
    if not filled:
        return False
    if filled[0].startswith("-DOCSTART-") or path.suffix.lower() in (".conll", ".iob", ".bio"):
        return True
    blank_inside = any(not line.strip() for line in lines[lines.index(filled[0]):])
    return blank_inside and len({len(line.split()) for line in filled}) == 1


def detect_format(path: Path, family: str, settings: PredictSettings) -> str:
    """``text``, ``jsonl``, ``table``, ``conll`` or ``squad`` from the file's name and first lines (the last three
    for the families whose own format they are: ``file_format`` of :mod:`bertlab.inference.tasks`)."""
    task = prediction_task(family)
    own = task.file_format if task else None
    lines = _head(path)
    filled = [line for line in lines if line.strip()]
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return "jsonl"
    if filled and filled[0].lstrip().startswith("{"):
        try:
            first = json.loads(filled[0])
        except json.JSONDecodeError:
            first = None  # a JSON document over several lines: SQuAD
        if isinstance(first, dict) and "data" not in first:
            return "jsonl"
        if own == "squad":
            return "squad"
        raise DataError(f"{path}: a JSON document; for task family {family} give JSONL (one object a line)")
    if own == "conll" and _looks_like_conll(path, lines):
        return "conll"
    if own == "table" and suffix in (".tsv", ".csv") and filled:
        header = [h.strip() for h in filled[0].split("," if suffix == ".csv" else "\t")]
        if settings.text_column in header:
            return "table"
        # A table without the run's text column read as plain text would predict its header line and every
        # row with all of its cells, gold labels included.
        raise missing_column(path, "text_column", settings.text_column, header, fix=(
            f"This model reads its input from the column {settings.text_column!r}, and a {suffix} file is read "
            f"as a table: name the text column {settings.text_column!r}, or give plain text (one input a line, "
            "e.g. a .txt file, or --format text to read these lines whole, header included)"))
    return "text"


def read_inputs(source: str | Path, family: str, settings: PredictSettings, fmt: str = "auto",
                stdin: TextIO | None = None) -> tuple[Iterator[tuple[str, Any]], int | None]:
    """``(where, input)`` pairs of a file or ``-`` (standard input), and their count when known cheaply.

    Plain text and JSONL are read line by line (large files stream); a table, CoNLL or SQuAD file is read
    whole by bertlab's own readers (labels, tags and answers in it are ignored).
    """
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if str(source) == "-":
        stream = stdin or sys.stdin
        lines = _lines(stream, "<stdin>")
        first = next(((n, line) for n, line in lines if line.strip()), None)
        if first is None:
            return iter(()), 0
        if fmt == "auto":
            fmt = "jsonl" if first[1].lstrip().startswith("{") else "text"
        if fmt not in ("text", "jsonl"):
            raise ConfigError(f"--format {fmt} reads a file: pass its path instead of '-'")
        return _from_lines(itertools.chain([first], lines), "<stdin>", fmt), None
    path = existing_path(source, "the input file", DataError)
    if not path.is_file():
        raise DataError(f"{path}: the input is not a file; pass a file of texts, or '-' for standard input")
    if fmt == "auto":
        fmt = detect_format(path, family, settings)
    log.info("reading %s as %s", path, fmt)
    policy = BadExamplePolicy("error")
    task = prediction_task(family)
    if fmt == "table" and task and task.read_table:  # a family's own table (multiple choice: choice columns)
        rows = task.read_table(path, settings, policy)
        return iter(rows), len(rows)
    if fmt == "table":
        examples = read_table(path, settings.text_column, settings.text_pair_column if settings.pair else None,
                              None, policy)
        return iter([(e.where, (e.text, e.text_pair) if e.text_pair is not None else e.text) for e in examples]), \
            len(examples)
    if fmt == "conll":
        sentences = read_conll(path, None, policy)
        return iter([(s.where, s.words) for s in sentences]), len(sentences)
    if fmt == "squad":
        examples = read_squad(path, train=False, policy=policy)
        return iter([(f"{path}: question {e.id!r}", e) for e in examples]), len(examples)
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        count = sum(1 for line in f if line.strip())

    def stream() -> Iterator[tuple[str, Any]]:
        with open(path, "rb") as f:
            yield from _from_lines(_lines(f, str(path)), str(path), fmt)

    return stream(), count


def _from_lines(lines: Iterable[tuple[int, str]], name: str, fmt: str) -> Iterator[tuple[str, Any]]:
    for number, line in lines:
        if not line.strip():
            continue
        where = f"{name}:{number}"
        if fmt == "jsonl":
            obj = json_object(line, where)
            if "id" not in obj and {"question", "context"} <= set(obj):
                obj = {**obj, "id": str(number)}
            yield where, obj
        else:
            yield where, line


# ----------------------------------------------------------------------------------------------------------
# Writing


def model_files(model: str | Path) -> list[tuple[Path, str]]:
    """What predicting with ``model`` (a run dir, a ``.ckpt`` or an export folder) reads, as
    :func:`bertlab.runtime.files.refuse_writing_over` takes it: an output must not be any of these."""
    from bertlab.inference.layout import (
        HEAD_CONFIG_NAME,
        HEAD_WEIGHTS_NAME,
        HF_EXPORT_FILES,
        LONG_TEXT_NAME,
        TOKENIZER_FILES,
    )
    from bertlab.inference.onnx_session import INFO_NAME, INT8_NAME, ONNX_NAME

    path = Path(model).expanduser()
    files: list[tuple[Path, str]] = []
    run = path if path.is_dir() else None
    if path.is_file():
        files.append((path, "the checkpoint"))
        run = path.parent.parent if path.parent.name == "checkpoints" else None
    if run is None:
        return files
    files += [(run / "checkpoints", "a checkpoint of the run"), (run / "tokenizer", "a file of the run's tokenizer"),
              (run / "metrics.json", "the run's metrics.json"), (run / ".hydra", "a record of the run's config"),
              (run / "export", "a file of the run's export"), (run / "onnx", "a file of the run's ONNX export")]
    for name in (*HF_EXPORT_FILES, HEAD_CONFIG_NAME, HEAD_WEIGHTS_NAME, LONG_TEXT_NAME, ONNX_NAME, INT8_NAME,
                 INFO_NAME, *TOKENIZER_FILES):  # an export folder's own files
        files.append((run / name, "a file of the model"))
    return files


def write_records(predictor: Predictor, items: Iterator[tuple[str, Any]], out: TextIO, total: int | None = None,
                  progress: bool = True, batch_size: int | None = None) -> int:
    """Predict ``items`` into ``out`` as JSONL, flushed after every batch, with a progress bar on stderr."""
    from tqdm import tqdm

    count = 0
    size = int(batch_size or predictor.settings.batch_size)
    with tqdm(total=total, unit=" examples", file=sys.stderr, disable=not progress, dynamic_ncols=True) as bar:
        for record in predictor.predict_items(items, size):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
            if count % size == 0:
                out.flush()
                bar.update(size)
        bar.update(count % size)
    out.flush()
    return count


def predict_file(predictor: Predictor, source: str | Path, out_path: Path, fmt: str = "auto",
                 progress: bool = False) -> int:
    """Records for ``source`` written to ``out_path`` (through a temporary file: never half a file)."""
    items, total = read_inputs(source, predictor.task.family, predictor.settings, fmt)
    with writing(out_path, "the predictions", RUN_DIR_FIX):
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out_path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            count = write_records(predictor, items, f, total, progress)
    return count


# ----------------------------------------------------------------------------------------------------------
# train.py: predict=true


def run_predict(trainer, module, datamodule, ckpt_path: str | None, run_dir: Path) -> Path | None:
    """``predict=true``: records of ``ckpt_path`` for ``data.predict_file`` → ``<run_dir>/predictions/``.

    Rank 0 predicts and writes; the other ranks wait for it.
    """
    family = datamodule.task.family
    if family not in PREDICT_FAMILIES:
        raise ConfigError(f"predict=true supports the {', '.join(PREDICT_FAMILIES)} task families, not {family!r}")
    if not datamodule.cfg.predict_file:
        raise ConfigError("predict=true needs data.predict_file (an unlabelled file, e.g. GLUE test.tsv)")
    path = None
    if trainer.is_global_zero:
        predictor = Predictor.from_run(ckpt_path, device=trainer.strategy.root_device,
                                       tokenizer=datamodule.tokenizer, data=datamodule.cfg)
        path = _predict_to_run_dir(predictor, datamodule.split_file("predict"), run_dir)
    trainer.strategy.barrier()
    return path


def predict_checkpoint(ckpt_path: str | None, task: TaskSpec, data: DataConfig, run_dir: Path) -> None:
    """``train=false predict=true`` without a validation file: only predictions, from the checkpoint alone.

    The checkpoint brings its tokenizer (its run's ``tokenizer/``) and label set, so no training or validation
    data is read.
    """
    from bertlab.data.files import DataFiles

    if not ckpt_path:
        raise ConfigError("train=false needs ckpt_path=<checkpoint to predict with>")
    if not data.predict_file:
        raise ConfigError("predict=true needs data.predict_file (the file to predict)")
    predictor = Predictor.from_run(ckpt_path, data=data)
    if predictor.task.family != task.family:
        raise ConfigError(f"ckpt_path={ckpt_path} holds a {predictor.task.family} model (task "
                          f"{predictor.task.name}), but this run is task={task.name} ({task.family}): pass the "
                          "task the checkpoint was trained for")
    source = DataFiles(task, data).resolve(data.predict_file)
    _predict_to_run_dir(predictor, source, run_dir)


def _predict_to_run_dir(predictor: Predictor, source: Path, run_dir: Path) -> Path:
    out = run_dir / "predictions" / PREDICTIONS_FILE
    refuse_writing_over(out, [(source, "data.predict_file")], f"the predictions file {out}",
                        "Point data.predict_file at a file outside <run_dir>/predictions/ (e.g. a copy of it)")
    count = predict_file(predictor, source, out)
    log.info("predictions for %s (%d examples) → %s", source, count, out)
    return out


