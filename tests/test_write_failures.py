"""A write that fails for a reason the user can fix ends with one paragraph, not a traceback (issue #33,
item 10).

Kind: an OSError of a full disk (ENOSPC), a used-up quota (EDQUOT), a read-only file system (EROFS) or a
folder the user may not write (EACCES/EPERM) while bertlab writes an output file — also when a library
wrapped it (torch's zip writer: ``RuntimeError ... unexpected pos`` with the OSError in ``__context__``;
safetensors: ``SafetensorError ... No space left on device``; tokenizers: ``... (os error 28)``). Every such
failure names the file, the disk's free space and what to do (``bertlab.runtime.files.writing``); a cache
that cannot be written is skipped with that paragraph as a warning. The failures are simulated by
monkeypatching the writer.
"""

from __future__ import annotations

import errno
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES, run_train
from safetensors import SafetensorError

from bertlab.runtime.errors import CheckpointError, OutputError
from bertlab.runtime.exits import user_errors
from bertlab.runtime.files import write_failure, writing

SAFETENSORS_FULL = ('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left '
                    'on device" })')


def _oserror(code: int, filename: str | None = None) -> OSError:
    import os

    return OSError(code, os.strerror(code), *([filename] if filename else []))


def _zip_writer_failure(code: int = errno.ENOSPC) -> RuntimeError:
    """What torch.save raises on a full disk: its own RuntimeError, raised while handling the OSError."""
    try:
        try:
            raise _oserror(code)
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 3584 vs 3472") from None
    except RuntimeError as err:
        err.__context__ = _oserror(code)  # `from None` hides it from the traceback, not from the chain
        return err


@pytest.mark.parametrize("error, kind", [
    (_oserror(errno.ENOSPC), "full"),
    (_zip_writer_failure(), "full"),                                  # chained, the checkpoint case
    (RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"), "full"),
    (SafetensorError(SAFETENSORS_FULL), "full"),                     # the feature-cache case
    (Exception("No space left on device (os error 28)"), "full"),     # tokenizers' save
    (_oserror(errno.EDQUOT), "quota"),
    (_zip_writer_failure(errno.EDQUOT), "quota"),
    (_oserror(errno.EROFS), "read-only"),
    (PermissionError(errno.EACCES, "Permission denied"), "permission"),
    (_oserror(errno.EPERM), "permission"),
])
def test_the_kind_is_found_in_the_error_or_its_chain(error, kind):
    assert write_failure(error)[0] == kind


@pytest.mark.parametrize("error", [ValueError("bad value"), _oserror(errno.EIO), _oserror(errno.ENOENT),
                                   RuntimeError("CUDA out of memory")])
def test_other_errors_are_not_this_kind(error):
    assert write_failure(error) is None
    with pytest.raises(type(error)), writing("/tmp/x", "the file", "do something"):
        raise error


@pytest.mark.parametrize("error, start", [
    (_zip_writer_failure(), "the disk is full: could not write the checkpoint"),
    (_oserror(errno.EDQUOT), "your disk quota is used up: could not write the checkpoint"),
    (_oserror(errno.EROFS), "the file system is read-only: could not write the checkpoint"),
    (PermissionError(errno.EACCES, "Permission denied"), "permission denied: could not write the checkpoint"),
])
def test_a_checkpoint_that_cannot_be_written_is_one_paragraph(tmp_path, monkeypatch, error, start):
    from bertlab.training.checkpoints import AtomicCheckpointIO

    path = tmp_path / "checkpoints" / "last.ckpt"
    path.parent.mkdir()
    path.write_bytes(b"the previous checkpoint")

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(torch, "save", fail)
    with pytest.raises(CheckpointError) as info:
        AtomicCheckpointIO().save_checkpoint({"global_step": 2}, path)
    message = str(info.value)
    assert message.startswith(f"{start} {path} (disk mounted at ") and "MiB free)" in message
    assert "hydra.run.dir=" in message and "\n" not in message
    assert path.read_bytes() == b"the previous checkpoint"
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]  # no partial file left


@pytest.mark.parametrize("error", [SafetensorError(SAFETENSORS_FULL), _oserror(errno.EROFS),
                                   _zip_writer_failure(errno.EDQUOT)])
def test_a_cache_file_that_cannot_be_written_is_skipped_with_the_paragraph(tmp_path, monkeypatch, caplog, error):
    import safetensors.numpy

    from bertlab.data.safe_cache import cached

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(safetensors.numpy, "save_file", fail)
    path = tmp_path / "cache" / "features" / "x.safetensors"
    with caplog.at_level(logging.WARNING):
        assert cached(path, lambda: {"ids": [1, 2, 3]}, "train features") == {"ids": [1, 2, 3]}
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "train features not cached: " in warning and f"could not write the cache file {path}" in warning
    assert "paths.cache_dir" in warning and "The run goes on without the cache" in warning
    assert not path.exists() and not list(path.parent.glob("*.tmp-*"))


def test_an_error_of_another_kind_while_caching_still_raises(tmp_path, monkeypatch):
    import safetensors.numpy

    from bertlab.data.safe_cache import cached

    monkeypatch.setattr(safetensors.numpy, "save_file", lambda *a, **k: (_ for _ in ()).throw(KeyError("bug")))
    with pytest.raises(KeyError):
        cached(tmp_path / "x.safetensors", lambda: {"ids": [1]}, "train features")


def test_the_entry_points_turn_an_unnamed_full_disk_anywhere_into_one_paragraph(capsys):
    """A write no ``writing()`` names (a logger's file, a lock file): the paragraph names the file the
    OSError names."""
    with pytest.raises(SystemExit) as stop, user_errors():
        try:
            raise _oserror(errno.ENOSPC, "/tmp/run/csv/metrics.csv")
        except OSError as err:
            raise RuntimeError("a logger failed") from err
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert "bertlab: error: the disk is full: could not write the file /tmp/run/csv/metrics.csv" in err


def test_a_permission_error_the_entry_points_cannot_place_keeps_its_traceback():
    """EACCES also comes from reading: without a ``writing()`` around it, it is not called a failed write."""
    with pytest.raises(PermissionError), user_errors():
        raise PermissionError(errno.EACCES, "Permission denied", "/data/train.tsv")


# ----------------------------------------------------------------------------------------------------------
# Through the command lines and a run


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "main_run", run)
    return run


def test_predict_output_on_a_full_disk(run_dir, tmp_path, monkeypatch, capsys):
    import bertlab.inference.inputs as inputs
    import bertlab.predict as predict

    infile = tmp_path / "in.txt"
    infile.write_text("a fine film\n")
    out = tmp_path / "out" / "preds.jsonl"

    def full(*args, **kwargs):
        raise _oserror(errno.ENOSPC)

    monkeypatch.setattr(inputs, "write_records", full)  # predict.main imports it when it runs
    with pytest.raises(SystemExit) as stop:
        predict.main([str(run_dir), str(infile), "--output", str(out), "--no-progress", "--device", "cpu"])
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert f"bertlab: error: the disk is full: could not write the predictions {out} (disk mounted at" in err
    assert "--output" in err and "Traceback" not in err
    assert not out.exists() and not list(out.parent.glob("*.tmp-*"))


def test_export_on_a_full_disk(run_dir, tmp_path, monkeypatch, capsys):
    import safetensors.torch

    from bertlab.export import main

    monkeypatch.setattr(safetensors.torch, "save_file",
                        lambda *a, **k: (_ for _ in ()).throw(SafetensorError(SAFETENSORS_FULL)))
    with pytest.raises(SystemExit) as stop:
        main([str(run_dir), str(tmp_path / "hf")])
    assert stop.value.code == 1
    assert "bertlab: error: the disk is full: could not write the export folder" in capsys.readouterr().err


TINY = ["model=bert_tiny", "task=sst2", "trainer.max_epochs=1", "trainer.limit_train_batches=2"]


def test_the_runs_tokenizer_on_a_full_disk(tmp_path, monkeypatch):
    from bertlab.data.tokenizer import EncoderTokenizer

    def full(self, directory):
        raise Exception("No space left on device (os error 28)")  # what the tokenizers library raises

    monkeypatch.setattr(EncoderTokenizer, "save", full)
    with pytest.raises(OutputError, match=r"the disk is full: could not write the run's tokenizer .*/tokenizer "
                                          r"\(disk mounted at .* MiB free\)"):
        run_train(TINY, tmp_path / "run")


def test_metrics_json_on_a_full_quota_is_never_half_written(tmp_path, monkeypatch):
    import bertlab.train as train

    real = train.write_text_atomic

    def quota(path, text):
        if Path(path).name == "metrics.json":
            raise _oserror(errno.EDQUOT)
        return real(path, text)

    monkeypatch.setattr(train, "write_text_atomic", quota)
    with pytest.raises(OutputError, match="your disk quota is used up: could not write the run's results"):
        run_train(TINY, tmp_path / "run")
    assert not (tmp_path / "run" / "metrics.json").exists()
    assert json.loads((tmp_path / "run" / ".bertlab-run.json").read_text())["status"] == "running"
