"""An embedding run's export as a sentence-transformers folder (``export=true``, ``python -m bertlab.export``).

The encoder folder :mod:`bertlab.inference.export` writes (``config.json``, ``model.safetensors`` as
``<Family>Model``, the tokenizer files) is the ``Transformer`` module at the folder's root; this adds
``modules.json``, ``sentence_bert_config.json`` (the run's ``data.max_seq_length``), ``1_Pooling/config.json``
(the run's pooling: mean, cls or last token), ``2_Normalize`` when the run normalised, and
``config_sentence_transformers.json`` (cosine similarity), so ``SentenceTransformer(folder)`` encodes as bertlab
does. Written with plain JSON: sentence-transformers itself is not needed to export.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MODULES_NAME = "modules.json"
ST_FILES = (MODULES_NAME, "sentence_bert_config.json", "config_sentence_transformers.json")

_POOLING_KEYS = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token", "last": "pooling_mode_lasttoken"}


def _write(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def write_sentence_transformers_modules(out_dir: Path, hidden_size: int, pooling: str, normalize: bool,
                                        max_seq_length: int | None) -> tuple[str, ...]:
    """The sentence-transformers module files around the encoder folder ``out_dir`` (module docstring); returns
    their paths in ``out_dir`` (what the export's fingerprint record seals)."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        (out_dir / "2_Normalize").mkdir(parents=True, exist_ok=True)
    _write(out_dir / MODULES_NAME, modules)
    pooling_config = {"word_embedding_dimension": hidden_size,
                      **{key: name == pooling for name, key in _POOLING_KEYS.items()},
                      "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                      "pooling_mode_weightedmean_tokens": False, "include_prompt": True}
    _write(out_dir / "1_Pooling" / "config.json", pooling_config)
    _write(out_dir / "sentence_bert_config.json", {"max_seq_length": max_seq_length or 512, "do_lower_case": False})
    _write(out_dir / "config_sentence_transformers.json",
           {"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine",
            "written_by": "bertlab (python -m bertlab.export)"})
    return (*ST_FILES, "1_Pooling/config.json")
