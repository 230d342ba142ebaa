"""Which log records reach the console: the modes of :mod:`bertlab.runtime.console` (quiet, normal, verbose)
as filters on the root logger's console handlers. Lightning-free (the Lightning loggers are handled by name),
so that the command lines that load no Lightning (``python -m bertlab.predict``) set up their console with it."""

from __future__ import annotations

import logging
import os

from bertlab.runtime.errors import ConfigError

# Lightning's own rule for a process's rank (lightning.fabric.utilities.rank_zero._get_rank): the first of these
# variables that is set (torchrun, srun, jsrun); read here without importing Lightning.
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def _rank() -> int:
    for name in _RANK_VARIABLES:
        value = os.environ.get(name)
        if value is not None:
            return int(value)
    return 0


MODES = ("quiet", "normal", "verbose")

# Lightning's loggers that have console handlers of their own.
_LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric")


def console_mode(quiet: bool | None, verbose: bool | None) -> str:
    """The mode chosen by the ``quiet`` and ``verbose`` keys."""
    if quiet and verbose:
        raise ConfigError("quiet=true and verbose=true contradict each other: choose one (or neither)")
    return "quiet" if quiet else "verbose" if verbose else "normal"


class _DropAdvertisements(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("💡 Tip") or "litlogger" in message)


class _ConsoleFilter(logging.Filter):
    """On a console handler: in normal mode, Lightning's INFO lines stay in the log file only."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "console", True) is False:  # written to the log file, printed by other means
            return False
        if self.mode == "verbose":
            return True
        return not (record.name.startswith("lightning") and record.levelno <= logging.INFO)


def configure_console(mode: str) -> None:
    """Route Lightning's records through the root logger once, and filter the console by ``mode``.

    Applies to the root logger's plain ``logging.StreamHandler`` handlers (Hydra's console handler); file
    handlers keep every record. Idempotent: a multirun configures each job again.
    """
    if mode not in MODES:
        raise ConfigError(f"console mode must be one of {', '.join(MODES)}, got {mode!r}")
    for name in _LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
        if not any(isinstance(f, _DropAdvertisements) for f in logger.filters):
            logger.addFilter(_DropAdvertisements())
    # Records are filtered by the logger they are logged on, not by its parents: the tip comes from here.
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _DropAdvertisements) for f in rank_zero.filters):
        rank_zero.addFilter(_DropAdvertisements())
    for handler in logging.getLogger().handlers:
        if type(handler) is not logging.StreamHandler:  # files, and test harnesses' capture handlers
            continue
        for old in [f for f in handler.filters if isinstance(f, _ConsoleFilter)]:
            handler.removeFilter(old)
        handler.addFilter(_ConsoleFilter(mode))
        # Ranks other than 0 (torchrun, srun, Lightning's DDP launcher) print warnings and errors only: their
        # INFO lines would repeat rank 0's. Their log files keep everything.
        quiet = mode == "quiet" or _rank() != 0
        handler.setLevel(logging.WARNING if quiet else logging.NOTSET)

