"""The errors a user can fix.

Each error's message is the whole story (what was wrong, where, what to do), so the command lines print it as
one paragraph (:func:`bertlab.runtime.exits.user_errors`) instead of a traceback. The classes are defined here,
below every other module (this one imports nothing of bertlab), so that any part can raise them and every entry
point can catch them.
"""

from __future__ import annotations


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
