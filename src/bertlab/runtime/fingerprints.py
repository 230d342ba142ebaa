"""What a run or an export was written with, checked wherever it is read.

A model answers for the tokenizer it was trained with: the same text through another model's tokenizer gives
other ids, so other scores (rc 0), or ids past the embedding table (an IndexError, onnxruntime's
INVALID_ARGUMENT). So everything bertlab writes carries the fingerprints of its tokenizer and weights, written
when it is written:

- every checkpoint records its vocabulary's fingerprint (``bertlab_tokenizer_fingerprint``,
  :func:`vocabulary_fingerprint`: the token → id map and lower-casing) and the id of the run that wrote it
  (``bertlab_run_id``, the ``run_id`` of the run's ``.bertlab-run.json``, kept across resumes), so another run's
  checkpoint put into a run's ``checkpoints/`` is refused even when both share a tokenizer;
- a run's ``tokenizer/`` folder and every export folder (Hugging Face or ONNX) hold
  ``bertlab_fingerprint.json``: the vocabulary's fingerprint and the SHA-256 of each file of the tokenizer, the
  weights (safetensors, ONNX graphs) and the records that describe them (config.json, bertlab's head and ONNX
  files), as written (:func:`write_record`).

:func:`check_trusted` is the one check every reader calls — prediction (PyTorch and ONNX), export,
``model.init_from`` and a resumed or evaluated checkpoint: a file changed since it was written, or a tokenizer
other than the one the weights were trained with, is refused with one paragraph that names the file and what
to do. Runs and exports written before fingerprints load as before, with a logged note that nothing was checked.
No torch here: an ONNX prediction never imports it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bertlab.runtime.errors import CheckpointError, RecordError
from bertlab.runtime.records import read_record as read_json_record

log = logging.getLogger(__name__)

FINGERPRINT_KEY = "bertlab_tokenizer_fingerprint"  # in every checkpoint
RUN_ID_KEY = "bertlab_run_id"  # in every checkpoint: the run that wrote it
RUN_RECORD = ".bertlab-run.json"  # a run dir's record (bertlab.runtime.run_dir), holding its run_id
RECORD_NAME = "bertlab_fingerprint.json"  # in a run's tokenizer/ and in every export folder
RECORD_FORMAT = "bertlab-fingerprint"
# The files of a saved tokenizer (what EncoderTokenizer.save writes and an export copies).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


def vocabulary_fingerprint(tokenizer: Any) -> str:
    """A hash of what maps text to embedding rows: the vocabulary (token → id) and lower-casing."""
    tok = getattr(tokenizer, "tokenizer", tokenizer)
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    h = hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode())
    h.update(str(getattr(tokenizer, "do_lower_case", "")).encode())
    return h.hexdigest()[:16]


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks (a 400 MB graph takes about a second)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def write_record(folder: str | Path, tokenizer: Any, files: Iterable[str] = ()) -> None:
    """``<folder>/bertlab_fingerprint.json``: the vocabulary's fingerprint and the digests of the tokenizer's
    files and of ``files`` (the weights and their records) as they are now, once the folder is written."""
    from bertlab.runtime.files import write_text_atomic

    folder = Path(folder)
    names = [n for n in dict.fromkeys([*TOKENIZER_FILES, *files]) if (folder / n).is_file()]
    record = {"format": RECORD_FORMAT, "tokenizer": vocabulary_fingerprint(tokenizer),
              "files": {name: file_digest(folder / name) for name in names}}
    write_text_atomic(folder / RECORD_NAME, json.dumps(record, indent=1) + "\n")


def read_record(folder: str | Path) -> dict[str, Any] | None:
    """A folder's fingerprint record (None: the folder has none, written before fingerprints or not by
    bertlab); a record that cannot be read is refused, as a changed file would be (``runtime.records``: the file
    and the key at fault in one paragraph)."""
    path = Path(folder) / RECORD_NAME
    if not path.is_file():
        return None
    return read_json_record(
        path, "the record of fingerprints", f"It holds the fingerprints bertlab checks the folder's tokenizer and "
        f"weights against, so {Path(folder)} is not used (its record cannot be read). Write the folder again from its "
        "run (python -m bertlab.export RUN OUT --overwrite for an export; a run's tokenizer/ is written when the run "
        "starts)", shape={"files": dict, "tokenizer": str}, required=("files",), error=CheckpointError)


def recorded_run_id(run_dir: str | Path | None) -> str | None:
    """The ``run_id`` a run dir's record holds (None: no record, or one written before run ids)."""
    if run_dir is None:
        return None
    try:
        record = read_json_record(Path(run_dir) / RUN_RECORD, "the run's record", "")
    except RecordError:  # damaged: the claim of the run dir says so, in its own words
        return None
    return record.get("run_id")


def _check_run(checkpoint: Path, run_id: str | None) -> None:
    """A checkpoint inside a run's ``checkpoints/`` must have been written by that run."""
    if run_id is None or checkpoint.parent.name != "checkpoints":
        return
    run = checkpoint.parent.parent
    ours = recorded_run_id(run)
    if ours is not None and ours != run_id:
        raise CheckpointError(
            f"{checkpoint} was written by another run than the one {run} holds (run id {run_id} in the checkpoint, "
            f"{ours} in {run / RUN_RECORD}): a checkpoint copied in from another run would answer for that run's "
            "model with this run's tokenizer and records. Put the run's own checkpoint back, or use the other run's "
            "own folder (or the .ckpt file where that run wrote it)")


def _file_kind(name: str) -> str:
    if name in TOKENIZER_FILES:
        return "a file of its tokenizer"
    if name.endswith((".safetensors", ".onnx", ".bin")):
        return "its weights"
    return "a record of its model"


def check_trusted(source: str | Path, tokenizer: Any = None, *, recorded: str | None = None,
                  folder: str | Path | None = None, has_record: bool = True, run_id: str | None = None) -> None:
    """Refuse to use ``source`` (a checkpoint or an export folder) when a file of ``folder`` (the export, or the
    run's tokenizer folder) is not the one written there, or when ``tokenizer`` is not the one the weights were
    trained with (``recorded``: the checkpoint's vocabulary fingerprint; else the folder record's).

    Nothing recorded (written before fingerprints): a logged note, and the folder loads as before.
    ``has_record=False``: a source that never carries one (a Hugging Face folder from elsewhere), no note.
    ``run_id``: the checkpoint's (``source``) run id, checked against the run dir it lies in."""
    _check_run(Path(source), run_id)
    record = read_record(folder) if folder is not None else None
    if record is not None:
        for name, digest in record["files"].items():
            path = Path(folder) / name  # type: ignore[arg-type]
            if not path.is_file():
                continue  # a missing file is the loader's error, with its own message
            if file_digest(path) != digest:
                raise CheckpointError(_changed_message(source, path, name))
        if recorded is None:
            recorded = record.get("tokenizer")
    if recorded is None:
        if has_record:
            log.warning("note: %s carries no fingerprint of its tokenizer and weights (written before bertlab "
                        "recorded them, or not by bertlab): they are not checked against each other; export it again to have them "
                        "checked", source)
        return
    if tokenizer is not None:
        ours = vocabulary_fingerprint(tokenizer)
        if ours != recorded:
            where = f" from {folder}" if folder is not None else ""
            raise CheckpointError(
                f"{source} was trained with another tokenizer than the one loaded{where} (vocabulary fingerprint "
                f"{recorded} recorded, {ours} here): every token would map to the wrong embedding row, giving "
                "other scores or ids past the embedding table. The tokenizer was replaced by another model's; "
                "use the tokenizer the weights were trained with (its run's tokenizer/ folder, "
                "model.tokenizer=<that folder> for a run) or weights and tokenizer from one run")


def _changed_message(source: str | Path, path: Path, name: str) -> str:
    what = _file_kind(name)
    return (f"{path} is not the file {source} was written with ({what}: its SHA-256 differs from the one "
            f"{RECORD_NAME} recorded when the folder was written). A file replaced by another model's would give "
            "other scores, or ids past the embedding table; bertlab does not use a folder whose files were "
            "swapped. Put the original file back, or write the folder again from its run (python -m bertlab.export "
            "RUN OUT --overwrite; a run's tokenizer/ is written again when the run is resumed)")
