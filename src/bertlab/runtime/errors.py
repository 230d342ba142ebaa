"""The errors a user can fix, and how the command lines print them.

Each error's message is the whole story (what was wrong, where, what to do), so :func:`user_errors` prints it
as one paragraph (``bertlab: error: <message>``) and exits with status 1 instead of a traceback. The classes are
defined here, below every other part, so that any part can raise them and every entry point can catch them;
their older homes (``bertlab.runtime.config.ConfigError``, ``bertlab.data.readers.DataError``, ...) re-export
them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A configuration value is invalid; the message says which key and what to change."""


class DataError(ValueError):
    """Bad input data; the message names the file, the line or example id, and what to change."""


class CheckpointError(ValueError):
    """A checkpoint cannot be loaded; the message names the file, the key and what is wrong."""


class TokenizerError(ValueError):
    """A tokenizer folder or file cannot be read or does not fit the model."""


class RecordError(ValueError):
    """A JSON record file (a run's record, metrics.json, an export's manifest, a prepared corpus's markers) that
    cannot be read as bertlab wrote it; the message names the file, the key and what to do
    (``bertlab.runtime.records.read_record``)."""


class OutputError(OSError):
    """An output file cannot be written (full disk, quota, read-only file system, permission); the message
    names the file, the disk's free space and what to do (``bertlab.runtime.files.writing``)."""


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; the message says at which step and what to try."""


class JobStopped(Exception):
    """The run was stopped by a signal; the message says what was saved and how to resume."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


USER_ERRORS: tuple[type[BaseException], ...] = (DataError, ConfigError, CheckpointError, NonFiniteLossError,
                                                 TokenizerError, OutputError, RecordError)


def user_error_types() -> tuple[type[BaseException], ...]:
    """Errors whose message is the whole story: the user fixes the data, the config or the checkpoint."""
    return USER_ERRORS


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Print a user error as one paragraph (``bertlab: error: <message>``) and exit with status 1.

    ``HYDRA_FULL_ERROR=1`` keeps the full traceback (for debugging bertlab itself); any other exception
    is a bug and keeps its traceback too. In a multirun the error is logged and re-raised, so that Hydra
    (or a sweeper) records the failed job instead of the whole sweep exiting.
    """
    try:
        yield
    except JobStopped as err:
        # Also in a multirun: a stopped sweep must not go on to its next job.
        log.error("%s", err)
        sys.stderr.write(f"\nbertlab: stopped: {err}\n")
        sys.stderr.flush()
        sys.exit(128 + err.signum)
    except Exception as raised:
        err = (raised if isinstance(raised, user_error_types())
               else _unwritable_output(raised) or framework_setting_error(raised))
        if err is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        in_multirun = _in_multirun()
        # Into <run_dir>/train.log; on the console only in a multirun (a single run prints it below, once).
        log.error("%s: %s", type(err).__name__, err, extra={"console": in_multirun})
        if in_multirun and err is raised:
            raise
        if in_multirun:
            raise err from raised
        sys.stderr.write(f"\nbertlab: error: {err}\n")
        sys.stderr.flush()
        sys.exit(1)


def _unwritable_output(err: BaseException) -> BaseException | None:
    from bertlab.runtime.files import unwritable_output  # files imports this module

    return unwritable_output(err)


# Lightning's ValueErrors that are about a setting (its other ValueErrors may be bugs: they keep the traceback).
_LIGHTNING_SETTING_VALUE_ERRORS = ("`val_check_interval` (", "You selected an invalid strategy name",
                                   "You selected an invalid accelerator name")


def framework_setting_error(err: BaseException) -> ConfigError | None:
    """A :class:`ConfigError` for an exception Lightning raises about a setting a user can change (its
    ``MisconfigurationException``, e.g. an accelerator this machine lacks, an unknown strategy name), else None.
    Most are caught earlier by ``runtime.checks``; this is the net for the rest."""
    names = {c.__name__ for c in type(err).__mro__}
    text = " ".join(str(err).split())
    if "MisconfigurationException" in names or (
            isinstance(err, ValueError) and any(text.startswith(p) for p in _LIGHTNING_SETTING_VALUE_ERRORS)):
        return ConfigError(f"Lightning refused a setting: {text} (the trainer.* and callbacks.* keys, "
                           "`python train.py --cfg job --package trainer` lists them)")
    return None


def _in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # no Hydra context (library use): behave as a single run
        return False
