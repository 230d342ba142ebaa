"""Cache files that cannot run code and that detect damage: the tokenized-feature cache and the
frozen-feature cache are written with :func:`save_tree` and read with :func:`load_tree`.

A cache folder may be shared between users and machines (a multi-node job reads one cache): whoever can
write there must not be able to run code in every job that reads it, so nothing here is a code-carrying format. A cached
object is a tree of plain values (``None``, bools, numbers, strings, lists, tuples, dicts), numpy arrays and
a fixed list of bertlab dataclasses; it is stored as a ``safetensors`` file:

- the arrays are its tensors (lists of integer lists and lists of same-shaped arrays are packed into one
  flat tensor plus lengths, so a split of 100,000 examples is a handful of tensors, not 100,000);
- the tree's structure is JSON in the file's metadata (``bertlab_tree``);
- ``bertlab_sha256`` is a digest of the JSON and every tensor's bytes, so a truncated or bit-flipped file is
  detected (:class:`CacheCorrupt`) instead of being used.

Reading a file never imports or calls anything named in it: dataclasses are looked up in
:data:`_DATACLASSES` by name, and a name not there makes the file corrupt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bertlab.runtime.files import CACHE_FIX, atomic_path, write_failure, write_failure_message

log = logging.getLogger(__name__)

FORMAT = "bertlab-cache/1"


class CacheCorrupt(Exception):
    """A cache file that is not a whole, unmodified bertlab cache file (the message says what is wrong)."""


def _dataclasses() -> dict[str, type]:
    # The only classes a cache file may rebuild; imported here (not at module load) to avoid import cycles.
    from bertlab.data.embedding import EmbeddingEvalData
    from bertlab.data.features import Split, TokenEvalData
    from bertlab.data.qa import QAEvalData, QAExample, QAFeatures
    from bertlab.data.rerank import RerankEvalData

    return {c.__name__: c for c in (Split, TokenEvalData, QAEvalData, QAExample, QAFeatures, EmbeddingEvalData,
                                    RerankEvalData)}


class _Encoder:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def _add(self, array: np.ndarray) -> str:
        name = f"a{len(self.arrays)}"
        self.arrays[name] = np.ascontiguousarray(array)
        return name

    def encode(self, obj: Any) -> Any:
        if obj is None or isinstance(obj, bool | str):
            return obj
        if isinstance(obj, int):
            return obj
        if isinstance(obj, float):
            return obj if np.isfinite(obj) else {"__float__": repr(obj)}
        if isinstance(obj, np.generic):
            return self.encode(obj.item())
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind not in "biuf":
                raise TypeError(f"cannot cache an array of dtype {obj.dtype}")
            return {"__nd__": self._add(obj)}
        if isinstance(obj, tuple):
            return {"__tuple__": [self.encode(x) for x in obj]}
        if isinstance(obj, list):
            return self._encode_list(obj)
        if isinstance(obj, dict):
            if all(isinstance(k, str) for k in obj):
                return {"__dict__": {k: self.encode(v) for k, v in obj.items()}}
            return {"__pairs__": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        if dataclasses.is_dataclass(obj) and type(obj).__name__ in _dataclasses() \
                and _dataclasses()[type(obj).__name__] is type(obj):
            return {"__dc__": type(obj).__name__,
                    "fields": {f.name: self.encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
        raise TypeError(f"cannot cache a {type(obj).__name__}")

    def _encode_list(self, items: list) -> Any:
        if not items:
            return []
        # Columns of records (one dict per feature, the same keys): one encoded list per key.
        if all(type(x) is dict for x in items):
            keys = list(items[0])
            if all(isinstance(k, str) for k in keys) and all(list(x) == keys for x in items):
                return {"__records__": keys, "columns": [self._encode_list([x[k] for x in items]) for k in keys]}
        if all(type(x) is int for x in items):
            with contextlib.suppress(OverflowError):
                return {"__ints__": self._add(np.asarray(items, dtype=np.int64))}
        if all(type(x) is float for x in items):
            return {"__floats__": self._add(np.asarray(items, dtype=np.float64))}
        # Lists of integer lists (token ids of each feature): one flat tensor plus lengths.
        if all(type(x) is list and all(type(v) is int for v in x) for x in items):
            with contextlib.suppress(OverflowError):
                flat = np.asarray([v for x in items for v in x], dtype=np.int64)
                return {"__ragged__": self._add(flat), "lengths": self._add(np.asarray([len(x) for x in items]))}
        # Lists of arrays of one dtype and trailing shape (QA windows, frozen features): concatenated.
        if all(isinstance(x, np.ndarray) and x.ndim >= 1 for x in items):
            first = items[0]
            if first.dtype.kind in "biuf" and all(x.dtype == first.dtype and x.shape[1:] == first.shape[1:]
                                                   for x in items):
                return {"__stack__": self._add(np.concatenate(items, axis=0)),
                        "lengths": self._add(np.asarray([len(x) for x in items], dtype=np.int64))}
        return {"__list__": [self.encode(x) for x in items]}


class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays
        self.classes = _dataclasses()

    def _array(self, name: Any) -> np.ndarray:
        if not isinstance(name, str) or name not in self.arrays:
            raise CacheCorrupt(f"refers to a tensor {name!r} that is not in the file")
        return self.arrays[name]

    def _split(self, node: dict) -> list[np.ndarray]:
        flat, lengths = self._array(node["__stack__" if "__stack__" in node else "__ragged__"]), \
            self._array(node["lengths"])
        if int(lengths.sum()) != len(flat) or (lengths < 0).any():
            raise CacheCorrupt("packed lengths do not add up to the packed tensor")
        return np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []

    def decode(self, node: Any) -> Any:
        if node is None or isinstance(node, bool | int | float | str):
            return node
        if isinstance(node, list):
            return [self.decode(x) for x in node]
        if not isinstance(node, dict) or len(node) == 0:
            raise CacheCorrupt(f"unexpected node {str(node)[:60]!r}")
        if "__float__" in node:
            return float(node["__float__"])
        if "__nd__" in node:
            return self._array(node["__nd__"])
        if "__tuple__" in node:
            return tuple(self.decode(x) for x in node["__tuple__"])
        if "__dict__" in node:
            return {k: self.decode(v) for k, v in node["__dict__"].items()}
        if "__pairs__" in node:
            return {self.decode(k): self.decode(v) for k, v in node["__pairs__"]}
        if "__list__" in node:
            return [self.decode(x) for x in node["__list__"]]
        if "__ints__" in node or "__floats__" in node:
            return self._array(node.get("__ints__", node.get("__floats__"))).tolist()
        if "__ragged__" in node:
            return [x.tolist() for x in self._split(node)]
        if "__stack__" in node:
            return self._split(node)
        if "__records__" in node:
            keys, columns = node["__records__"], [self.decode(c) for c in node["columns"]]
            if len(keys) != len(columns) or len({len(c) for c in columns}) > 1:
                raise CacheCorrupt("record columns of different lengths")
            return [dict(zip(keys, values)) for values in zip(*columns)]
        if "__dc__" in node:
            cls = self.classes.get(node["__dc__"])
            if cls is None:
                raise CacheCorrupt(f"names a class {node['__dc__']!r} that a cache may not contain")
            return cls(**{k: self.decode(v) for k, v in node["fields"].items()})
        raise CacheCorrupt(f"unexpected node {str(node)[:60]!r}")


def _digest(tree_json: str, arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(tree_json.encode())
    for name in sorted(arrays):
        a = arrays[name]
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
    return h.hexdigest()


def save_tree(path: Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` atomically (temporary file in the same folder, then a rename)."""
    from safetensors.numpy import save_file

    encoder = _Encoder()
    tree = json.dumps(encoder.encode(obj), separators=(",", ":"))
    metadata = {"format": FORMAT, "bertlab_tree": tree, "bertlab_sha256": _digest(tree, encoder.arrays)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:  # a concurrent reader never sees half a file
        save_file(encoder.arrays, str(tmp), metadata=metadata)


def load_tree(path: Path) -> Any:
    """The object stored by :func:`save_tree`; :class:`CacheCorrupt` when the file is damaged or foreign."""
    from safetensors import safe_open

    try:
        arrays = {}
        with safe_open(str(path), framework="numpy") as f:
            metadata = f.metadata() or {}
            for name in f.keys():
                arrays[name] = f.get_tensor(name)
    except Exception as err:  # not a safetensors file, truncated header or data, ...
        raise CacheCorrupt(f"not a readable cache file ({type(err).__name__}: {str(err)[:120]})") from None
    if metadata.get("format") != FORMAT or "bertlab_tree" not in metadata:
        raise CacheCorrupt(f"not a {FORMAT} file")
    tree = metadata["bertlab_tree"]
    if _digest(tree, arrays) != metadata.get("bertlab_sha256"):
        raise CacheCorrupt("its checksum does not match its contents (a damaged or modified file)")
    try:
        return _Decoder(arrays).decode(json.loads(tree))
    except CacheCorrupt:
        raise
    except Exception as err:
        raise CacheCorrupt(f"unreadable structure ({type(err).__name__}: {err})") from None


def cached(path: Path | None, build: Callable[[], Any], what: str,
           check: Callable[[Any], bool] | None = None) -> Any:
    """``path``'s object when it is a whole cache file (and passes ``check``), else ``build()``, stored at
    ``path``. A damaged file is reported with its path (a warning), removed and rebuilt."""
    if path is not None and path.is_file():
        try:
            obj = load_tree(path)
            if check is not None and not check(obj):
                raise CacheCorrupt("its contents do not fit this run's data")
            log.info("%s loaded from %s", what, path)
            return obj
        except CacheCorrupt as err:
            log.warning("%s cache file %s is damaged: %s; it is removed and rebuilt", what, path, err)
            with contextlib.suppress(OSError):
                path.unlink()
    obj = build()
    if path is not None:
        try:
            save_tree(path, obj)
        except TypeError as err:  # a value this format cannot hold: run without the cache
            log.warning("%s not cached at %s: %s", what, path, err)
        except Exception as err:  # a full or read-only cache disk slows later runs down, it does not fail this one
            failure = write_failure(err)
            if failure is None and not isinstance(err, OSError):
                raise
            why = write_failure_message(path, "the cache file", failure[0], CACHE_FIX) if failure else str(err)
            log.warning("%s not cached: %s. The run goes on without the cache", what, why)
    return obj
