"""Older paths kept so that existing config files, run folders and modules keep working: ``_target_:
bertlab.distributed.fsdp_strategy`` (a saved ``trainer=fsdp`` config) and ``bertlab.distributed.cache_lock``.

The code lives in :mod:`bertlab.training.distributed` and :mod:`bertlab.runtime.files`.
"""

from bertlab.runtime.files import cache_lock

__all__ = ["cache_lock"]  # and fsdp_strategy, imported on use (__getattr__)


def __getattr__(name: str):
    # Imported on use: cache_lock's users (data preparation) need not load Lightning.
    if name == "fsdp_strategy":
        from bertlab.training.distributed import fsdp_strategy

        return fsdp_strategy
    raise AttributeError(f"module 'bertlab.distributed' has no attribute {name!r}")
