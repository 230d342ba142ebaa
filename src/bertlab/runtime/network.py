"""Whether the Hugging Face hub can be reached, answered in seconds.

``datasets`` and ``huggingface_hub`` retry an unreachable hub for half a minute or more before they fail;
bertlab asks once per process with a short connection attempt and, offline, fails (or falls back to local
caches) at once, naming ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
from urllib.parse import urlsplit

DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = ("1", "true", "yes", "on")


def _offline_env() -> str | None:
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in _TRUE:
            return f"{name}={os.environ[name]} is set"
    return None


def hub_unreachable_reason(timeout: float = 3.0) -> str | None:
    """None when the hub answers a TCP connection within ``timeout`` seconds, else why not (one phrase)."""
    reason = _offline_env()
    if reason:
        return reason
    return _probe(os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT), timeout)


@functools.lru_cache(maxsize=8)
def _probe(endpoint: str, timeout: float) -> str | None:
    parts = urlsplit(endpoint)
    host = parts.hostname or endpoint
    port = parts.port or (80 if parts.scheme == "http" else 443)
    outcome: list[BaseException | None] = []

    def connect() -> None:  # name resolution can block beyond any socket timeout: run it on the side
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(None)
        except OSError as err:
            outcome.append(err)

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        return f"{host}:{port} did not answer within {timeout:g} s"
    if outcome[0] is not None:
        return f"{host}:{port} is not reachable ({type(outcome[0]).__name__}: {outcome[0]})"
    return None


OFFLINE_ADVICE = ("Working offline? Set HF_HUB_OFFLINE=1 so that nothing asks the hub, and use local files "
                  "(paths.data_dir, a checkpoint folder) instead.")
