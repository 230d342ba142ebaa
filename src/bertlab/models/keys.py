"""The names of a ``TaskModel``'s tensors, and the one map from the names older bertlab runs wrote.

A ``TaskModel`` (models/heads.py) holds its encoder, of any family, under ``encoder`` and its task head under
``head``: its state dict's keys are ``encoder.<the encoder's own name>`` and ``head.<the head's own name>``, and a
Lightning checkpoint puts the module's ``model.`` before them. Code that builds, reads or splits such keys takes
the prefixes from here, never from a literal.

Runs written before the attribute was named for what it holds (when every encoder was BERT) have ``bert.`` where
``encoder.`` is now. :func:`migrate_state_dict` renames such keys (:data:`RENAMED_PREFIXES`; a future rename is one
more pair there), and every reader of a state dict bertlab wrote itself goes through :func:`migrate_checkpoint`:
Lightning's own load on resume and evaluation (``TaskModule.on_load_checkpoint``) and every read without Lightning
(``training.checkpoint_files.read_checkpoint``: ``model.init_from``, prediction, export, the resume check). Hugging
Face folders hold their family's names, not bertlab's: ``models.hf_weights`` maps those (BERT's own ``bert.``
prefix included), and never migrates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

log = logging.getLogger(__name__)

ENCODER = "encoder"  # TaskModel's attribute holding the encoder
HEAD = "head"  # TaskModel's attribute holding the task head
ENCODER_PREFIX = f"{ENCODER}."
HEAD_PREFIX = f"{HEAD}."
MODULE_PREFIX = "model."  # TaskModule.model: the TaskModel's keys in a Lightning checkpoint

# (written before, now) prefixes of a TaskModel's keys, applied in order.
RENAMED_PREFIXES: tuple[tuple[str, str], ...] = (("bert.", ENCODER_PREFIX),)

T = TypeVar("T")


def encoder_of(model: Any) -> Any:
    """The encoder of a TaskModel (its ``encoder``), or ``model`` itself when it is an encoder alone. Told apart by
    the head: a BERT encoder has an ``encoder`` of its own (its layer stack), never a ``head``."""
    return getattr(model, ENCODER) if hasattr(model, HEAD) and hasattr(model, ENCODER) else model


def encoder_key(name: str) -> str:
    """A TaskModel key of the encoder's tensor ``name``."""
    return ENCODER_PREFIX + name


def is_encoder_key(key: str) -> bool:
    return key.startswith(ENCODER_PREFIX)


def encoder_name(key: str) -> str:
    """The encoder's own name of a TaskModel key (``key`` itself when it is not an encoder key)."""
    return key.removeprefix(ENCODER_PREFIX)


def encoder_state(state: Mapping[str, T]) -> dict[str, T]:
    """The encoder's tensors of a TaskModel state dict, by the encoder's own names."""
    return {encoder_name(k): v for k, v in state.items() if is_encoder_key(k)}


def with_encoder_prefix(state: Mapping[str, T]) -> dict[str, T]:
    """An encoder's own state dict as TaskModel keys."""
    return {encoder_key(k): v for k, v in state.items()}


def migrate_key(key: str) -> str:
    """A TaskModel key as today's code names it (one written before a rename gets its new name)."""
    for old, new in RENAMED_PREFIXES:
        if key.startswith(old):
            return new + key[len(old):]
    return key


def legacy_key(key: str) -> str:
    """The name the first bertlab runs gave a TaskModel key (the inverse of :func:`migrate_key`): what fingerprints
    they recorded over key names hashed."""
    for old, new in reversed(RENAMED_PREFIXES):
        if key.startswith(new):
            return old + key[len(new):]
    return key


def migrate_state_dict(state: Mapping[str, T], prefix: str = "") -> dict[str, T]:
    """``state`` with every TaskModel key after ``prefix`` (``model.`` for a Lightning checkpoint) renamed by
    :func:`migrate_key`; keys without ``prefix`` and today's keys are kept as they are, in order."""
    out: dict[str, T] = type(state)() if isinstance(state, dict) else {}
    for key, value in state.items():
        if key.startswith(prefix):
            key = prefix + migrate_key(key[len(prefix):])
        out[key] = value
    return out


def migrate_checkpoint(ckpt: dict[str, Any]) -> dict[str, Any]:
    """A bertlab Lightning checkpoint (the dict ``torch.load`` returns) with its tensors under today's names, in
    place; returned too. Logged once per checkpoint that needed it."""
    state = ckpt.get("state_dict")
    if not isinstance(state, Mapping):
        return ckpt
    migrated = migrate_state_dict(state, MODULE_PREFIX)
    if list(migrated) != list(state):
        renamed = sum(a != b for a, b in zip(state, migrated))
        log.debug("checkpoint written before the tensor names changed: %d keys renamed (%s)", renamed,
                  ", ".join(f"{old}* → {new}*" for old, new in RENAMED_PREFIXES))
        ckpt["state_dict"] = migrated
    return ckpt


def module_state(ckpt: Mapping[str, Any]) -> dict[str, Any]:
    """The TaskModel's tensors of a Lightning checkpoint, by TaskModel keys (``model.`` dropped), migrated."""
    return {migrate_key(k[len(MODULE_PREFIX):]): v for k, v in ckpt["state_dict"].items()
            if k.startswith(MODULE_PREFIX)}


def is_task_model_key(key: str) -> bool:
    """Whether ``key`` names a tensor of a TaskModel (today's or an older run's root)."""
    return key.startswith((ENCODER_PREFIX, HEAD_PREFIX, *(old for old, _ in RENAMED_PREFIXES)))
