"""How the command lines end on a user error: one paragraph (``bertlab: error: <message>``), exit status 1.

The error classes are :mod:`bertlab.runtime.errors`; this module is the presenter every entry point wraps its
work in (:func:`user_errors`), with the nets for errors raised by others that are about something a user can
fix (a full disk while a library wrote, a Lightning setting).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from bertlab.runtime.errors import ConfigError, JobStopped, user_error_types
from bertlab.runtime.files import unwritable_output

log = logging.getLogger(__name__)


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
               else unwritable_output(raised) or framework_setting_error(raised))
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
