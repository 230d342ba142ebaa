"""Checks before training: configuration mistakes that would otherwise surface late (mid-epoch, as a
traceback from Lightning, the tokenizer or the DataLoader) or never (a monitor that leaks test data, a run
that trains nothing and reports it as a result).

Single values are judged by their declared kind (``bertlab.runtime.schema``); this module adds the settings
that are wrong together: a run that would do nothing (zero epochs, no training batch), never end, validate
past its end, monitor a metric its task never logs, stop early never, or ask for a device this machine does
not have.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

from bertlab.runtime.config import MASKED_FAMILIES, DataConfig, TaskSpec
from bertlab.runtime.errors import ConfigError
from bertlab.runtime.schema import check_config

# ``(task, data) → {metric name: "min" | "max" | None}``: what a task logs as val/<name> (None: logged, but
# not a score to select on, e.g. num_examples). bertlab.tasks.families.logged_metrics is the real one.
MetricsOf = Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, str | None]]


def preflight(task: TaskSpec, data: DataConfig, max_position_embeddings: int | None) -> None:
    """Configuration mistakes that need the model: a ``max_seq_length`` beyond its position table.

    ``max_position_embeddings``: the model's position table, None for an encoder without one (recurrent)."""
    if not task.monitor.startswith("val/"):
        raise ConfigError(_not_validation("task.monitor", task.monitor))
    if max_position_embeddings is not None and data.max_seq_length > max_position_embeddings:
        raise ConfigError(
            f"data.max_seq_length={data.max_seq_length} is larger than the model's position table "
            f"(max_position_embeddings={max_position_embeddings}): set data.max_seq_length to "
            f"{max_position_embeddings} or less"
        )


def _not_validation(key: str, monitor: Any) -> str:
    return (f"{key}={monitor}: checkpoint selection and early stopping must read a validation metric "
            "(val/<name>); selecting on test or training metrics leaks them into the result")


def min_seq_length(family: str, pair: bool, nsp: bool, specials: tuple[int, int] = (2, 3)) -> int:
    """The shortest ``max_seq_length`` that leaves one position of text per segment: [CLS] text [SEP], or
    [CLS] a [SEP] b [SEP] for pairs and next-sentence pairs. ``specials``: the special tokens a single sequence
    and a pair cost with the run's tokenizer (BERT's 2 and 3 by default; RoBERTa's pair costs 4)."""
    single, double = specials
    if family in ("sequence", "token", *MASKED_FAMILIES):
        return double + 2 if (pair or nsp) else single + 1
    if family == "qa":
        return double + 1  # [CLS] question [SEP] context [SEP], the window check then asks for more
    return 2


def check_seq_length(length: Any, family: str | None, pair: bool, nsp: bool, specials: tuple[int, int] = (2, 3),
                     shape: str | None = None) -> None:
    """``data.max_seq_length`` must leave room for text besides the special tokens (:func:`min_seq_length`);
    ``shape`` shows the template (default BERT's)."""
    if not isinstance(length, int) or not family:
        return
    minimum = min_seq_length(family, pair, nsp, specials)
    if 0 < length < minimum:
        shape = shape or f"[CLS]{' a [SEP] b' if pair or nsp else ' text'} [SEP]"
        raise ConfigError(
            f"data.max_seq_length={length} leaves no room for text: the special tokens of a "
            f"{'pair' if pair or nsp else family} input ({shape}) "
            f"already take {minimum - (2 if pair or nsp else 1)} positions. Use at least {minimum} "
            "(BERT's fine-tuning default is 128)"
        )


def check_settings(cfg: Any, logged_metrics: MetricsOf | None = None,
                   gpu_count: Callable[[], int] | None = None,
                   names: Mapping[str, Collection[str]] | None = None) -> None:
    """Every setting by its kind, then the combinations that make a run fail late, do nothing or nothing
    useful. ``cfg``: the composed configuration (DictConfig or plain dict); ``logged_metrics``: what each task
    logs (monitors are checked against it when given); ``gpu_count``: the visible CUDA devices (default:
    torch's count); ``names``: the registries' names of the settings that name one (``schema.REGISTERED``)."""
    tree = _plain(cfg)
    check_config(tree, names)
    data, task, trainer = tree.get("data") or {}, tree.get("task") or {}, tree.get("trainer") or {}
    _check_lengths(data, task)
    trains = bool(tree.get("train", True))
    if not trains and not tree.get("ckpt_path"):
        raise ConfigError("train=false needs ckpt_path=<checkpoint to evaluate> (train=false evaluates a trained "
                          "checkpoint; without one there is nothing to evaluate)")
    if trains:
        _check_run_length(trainer)
        _check_validation_interval(trainer)
    _check_monitors(tree, logged_metrics)
    if trains:
        _check_early_stopping(tree)
    _check_model_fit(tree)
    _check_replaced_token_detection(tree)
    _check_devices(trainer, gpu_count)


def _plain(cfg: Any) -> dict[str, Any]:
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    return dict(cfg)


def _check_lengths(data: Mapping[str, Any], task: Mapping[str, Any]) -> None:
    """A ``max_seq_length`` below the special tokens turns truncation off (the tokenizer ignores a limit it
    cannot meet) and trains on full-length text; a QA window without room for context never advances. BERT's
    special-token counts here; the data module checks again with the run's tokenizer."""
    length, family = data.get("max_seq_length"), task.get("family")
    pair, nsp = bool(data.get("text_pair_column")) and family == "sequence", bool(task.get("nsp"))
    check_seq_length(length, family, pair, nsp)
    if family == "qa" and isinstance(length, int):
        stride, query = data.get("doc_stride", 128), data.get("max_query_length", 64)
        if length - query - 3 <= stride:
            raise ConfigError(
                f"data.doc_stride {stride} must be smaller than the smallest context window, max_seq_length - "
                f"max_query_length - 3 = {length - query - 3}: lower data.doc_stride or data.max_query_length, "
                "or raise data.max_seq_length"
            )


def _check_run_length(trainer: Mapping[str, Any]) -> None:
    """A training run must train something and must end."""
    if trainer.get("fast_dev_run"):
        return  # a fixed number of batches, whatever the lengths say
    epochs, steps = trainer.get("max_epochs"), trainer.get("max_steps")
    for key, value in (("max_epochs", epochs), ("max_steps", steps)):
        if value == 0:
            raise ConfigError(
                f"trainer.{key}=0 trains nothing, and the run would report the untrained model as its result. "
                f"Give trainer.{key} a positive number (-1: no limit from it), or evaluate a checkpoint without "
                "training: train=false ckpt_path=<checkpoint>")
    if epochs == -1 and steps == -1 and trainer.get("max_time") is None:
        raise ConfigError(
            "trainer.max_epochs=-1 with trainer.max_steps=-1: the training would never end (and its learning-rate "
            "schedule has no length). Set one of them, e.g. trainer.max_epochs=3 or trainer.max_steps=10000")
    batches = trainer.get("limit_train_batches")
    if batches is not None and batches == 0 and not trainer.get("overfit_batches"):
        raise ConfigError(
            f"trainer.limit_train_batches={batches} trains on no batch: the run would report the untrained model "
            "as its result. Leave it null (every batch), give a number of batches or a fraction in (0.0, 1.0], or "
            "evaluate without training: train=false ckpt_path=<checkpoint>")


def _check_validation_interval(trainer: Mapping[str, Any]) -> None:
    """A validation interval past the end of an epoch or of training never validates where it says."""
    every, epochs, steps = trainer.get("check_val_every_n_epoch"), trainer.get("max_epochs"), trainer.get("max_steps")
    if isinstance(every, int) and isinstance(epochs, int) and epochs > 0 and steps == -1 and every > epochs:
        raise ConfigError(
            f"trainer.check_val_every_n_epoch={every} is past the end of training (trainer.max_epochs={epochs}): "
            f"no validation would run during it. Use at most {epochs}")
    interval = trainer.get("val_check_interval")
    if not isinstance(interval, int) or isinstance(interval, bool):
        return
    batches = trainer.get("limit_train_batches")
    if isinstance(batches, int) and not isinstance(batches, bool) and 0 < batches < interval:
        raise ConfigError(
            f"trainer.val_check_interval={interval} is past the end of an epoch (trainer.limit_train_batches="
            f"{batches} batches): validation would never run there. Use at most {batches}, a fraction of the "
            "epoch (e.g. 0.5), or null (once per epoch)")
    accumulate = trainer.get("accumulate_grad_batches") or 1
    if isinstance(steps, int) and steps > 0 and interval > steps * accumulate:
        raise ConfigError(
            f"trainer.val_check_interval={interval} batches is past the end of training (trainer.max_steps={steps}"
            f"{f' × accumulate_grad_batches={accumulate}' if accumulate > 1 else ''} = {steps * accumulate} "
            f"batches): validation would run only once, after the last step. Use at most {steps * accumulate}, "
            "or null (once per epoch)")


def _monitors(tree: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(key, monitored metric, mode)`` of the task and of every callback node that has a monitor."""
    task = tree.get("task") or {}
    out = [("task.monitor", task.get("monitor"), task.get("mode"))]
    for name, node in (tree.get("callbacks") or {}).items():
        if isinstance(node, Mapping) and node.get("monitor") is not None:
            out.append((f"callbacks.{name}.monitor", node["monitor"], node.get("mode")))
    return out


def _check_monitors(tree: Mapping[str, Any], logged_metrics: MetricsOf | None) -> None:
    """Every monitor reads a validation metric the task logs, in that metric's direction (a loss falls, a
    score rises): otherwise Lightning stops after the first epoch with a traceback, or the "best" checkpoint
    is the worst one."""
    task, data = tree.get("task") or {}, tree.get("data") or {}
    for key, monitor, mode in _monitors(tree):
        if not isinstance(monitor, str) or not monitor.startswith("val/"):
            raise ConfigError(_not_validation(key, monitor))
        if logged_metrics is None or not task.get("family"):
            continue
        logged = logged_metrics(task, data)
        name = monitor.split("/", 1)[1]
        scores = [f"val/{m}" for m, d in logged.items() if d is not None]
        if name not in logged or logged[name] is None:
            what = "logs it, but it is a count, not a score to select on" if name in logged else "never logs it"
            raise ConfigError(
                f"{key}={monitor}: task {task.get('name')} (family {task.get('family')}) {what}. It logs "
                f"{', '.join(scores)}: set {key} to one of them (and task.mode=max for a score, min for a loss)")
        if mode in ("min", "max") and mode != logged[name]:
            mode_key = "task.mode" if key == "task.monitor" else key.rsplit(".", 1)[0] + ".mode"
            raise ConfigError(
                f"{key}={monitor} with {mode_key}={mode}: {name} is better when it is "
                f"{'lower' if logged[name] == 'min' else 'higher'}, so mode={mode} would keep the worst "
                f"checkpoint (or stop on improvement). Set {mode_key}={logged[name]}")


def _check_early_stopping(tree: Mapping[str, Any]) -> None:
    """Early stopping that can never trigger: no validation, or fewer validations than its patience."""
    trainer = tree.get("trainer") or {}
    for name, node in (tree.get("callbacks") or {}).items():
        if not (isinstance(node, Mapping) and str(node.get("_target_", "")).endswith(".EarlyStopping")):
            continue
        patience = node.get("patience", 3)
        if trainer.get("limit_val_batches") == 0:
            raise ConfigError(
                f"callbacks.{name} (early stopping) can never trigger: trainer.limit_val_batches=0 runs no "
                "validation. Drop the callback (callbacks=default) or let validation run")
        count = _validations(trainer)
        if count is not None and isinstance(patience, int) and patience >= count:
            raise ConfigError(
                f"callbacks.{name} (early stopping) can never trigger: it stops after "
                f"callbacks.{name}.patience={patience} validations without improvement, and this run validates "
                f"{count} time{'s' if count != 1 else ''} in all (trainer.max_epochs={trainer.get('max_epochs')}). "
                f"Raise trainer.max_epochs above {patience}, lower the patience below {count}, or drop the callback "
                "(callbacks=default)")


def _validations(trainer: Mapping[str, Any]) -> int | None:
    """How many validations a run bounded by ``max_epochs`` makes (None: not known before the data is read)."""
    epochs, steps = trainer.get("max_epochs"), trainer.get("max_steps")
    if not isinstance(epochs, int) or epochs < 1 or steps not in (-1, None) or trainer.get("fast_dev_run"):
        return None
    interval = trainer.get("val_check_interval")
    if interval is None:
        per_epoch = 1
    elif isinstance(interval, float) and interval > 0:
        per_epoch = int(1 / interval)
    else:
        return None  # a number of batches: depends on the epoch's length
    every = trainer.get("check_val_every_n_epoch", 1)
    if not isinstance(every, int) or every < 1:
        return None
    return epochs // every * per_epoch


def _check_model_fit(tree: Mapping[str, Any]) -> None:
    """Settings that must fit the architecture, when the configuration declares it (a scratch model): a
    pretrained checkpoint's depth is known once it is loaded, where the same checks run again."""
    model, freeze, head = tree.get("model") or {}, tree.get("freeze") or {}, tree.get("head") or {}
    layers = model.get("num_hidden_layers")
    if not isinstance(layers, int):
        return
    k = freeze.get("k")
    if freeze.get("policy") == "bottom_k" and isinstance(k, int) and k > layers:
        raise ConfigError(f"freeze.k={k} exceeds the encoder's {layers} layers: use k <= {layers}")
    which = head.get("layers")
    states = layers + 1  # the embeddings' output, then one per layer
    if which in ("concat_last4", "sum_last4") and states < 4:
        raise ConfigError(
            f"head.layers={which} reads the last 4 hidden states, and model {model.get('name')} has {states} "
            f"(embeddings + {layers} layers): use head.layers=last or a layer index")
    if isinstance(which, int) and not isinstance(which, bool) and not -states <= which < states:
        raise ConfigError(
            f"head.layers={which} is not a hidden state of model {model.get('name')}: it has {states} (index 0 = "
            f"the embeddings, {layers} = the last layer; negative indices count from the top, -1 = the last)")


def _check_replaced_token_detection(tree: Mapping[str, Any]) -> None:
    """task=rtd trains generator and discriminator together from the first step, and its run is a start for
    fine-tuning, not a model that predicts: a freeze policy (its frozen path would skip the generator),
    ``export`` and ``predict`` are refused before any work rather than after training."""
    task = tree.get("task") or {}
    if task.get("family") != "rtd":
        return
    policy = (tree.get("freeze") or {}).get("policy") or "none"
    asked = [f"freeze={policy}"] if policy != "none" else []
    asked += [f"{key}={tree.get(key)}" for key in ("export", "predict") if tree.get(key) not in (None, False)]
    if asked:
        raise ConfigError(
            f"task=rtd with {' and '.join(asked)}: replaced-token detection pre-trains a whole encoder (the "
            "discriminator) beside a generator that only serves training, so it freezes nothing, exports nothing and "
            "predicts nothing. Drop these settings; to use the pre-trained encoder, fine-tune it with "
            "model.init_from=<this run dir> (docs/pretraining.md)")


def _check_devices(trainer: Mapping[str, Any], gpu_count: Callable[[], int] | None) -> None:
    """A GPU run on a machine without (enough) GPUs: Lightning would refuse it with a traceback after the data
    was read and the model built; refused here before any work."""
    accelerator, devices = str(trainer.get("accelerator") or "auto"), trainer.get("devices")
    if accelerator not in ("gpu", "cuda"):
        if accelerator == "mps":
            import torch

            if not torch.backends.mps.is_available():
                raise ConfigError("trainer.accelerator=mps: this machine has no Apple GPU (MPS) available: use "
                                  "trainer=cpu, or trainer.accelerator=auto")
        return
    if gpu_count is None:
        import torch

        gpu_count = torch.cuda.device_count
    visible = gpu_count()
    if visible == 0:
        raise ConfigError(
            f"trainer.accelerator={accelerator} (trainer=gpu, ddp, fsdp and deepspeed) needs a CUDA GPU, and this "
            "machine has none visible (torch.cuda.is_available() is false; check the driver and "
            "CUDA_VISIBLE_DEVICES). Train on the CPU with trainer=cpu, or trainer=ddp_cpu for several processes")
    wanted = (max(devices) + 1 if isinstance(devices, list) and devices
              else devices if isinstance(devices, int) and devices > 0 else None)
    if wanted is not None and wanted > visible:
        asked = f"GPU index {wanted - 1}" if isinstance(devices, list) else f"{wanted} GPUs"
        raise ConfigError(
            f"trainer.devices={devices} asks for {asked}, and this machine has {visible} visible: use "
            f"trainer.devices={visible} or -1 (every visible GPU)")


def check_epoch_length(trainer: Mapping[str, Any], examples: int, batch_size: int, world_size: int,
                       batches: int | None = None) -> None:
    """Once the training split is read: a ``val_check_interval`` (in batches) longer than an epoch never
    validates; Lightning refuses it when ``fit`` starts, after the run dir has its tokenizer. ``batches``: the
    epoch's batches, all processes together, when the data module packs them otherwise than ``batch_size``
    examples a batch (long documents: by their windows); None: ``ceil(examples / batch_size)``."""
    interval = trainer.get("val_check_interval")
    if not isinstance(interval, int) or isinstance(interval, bool) or trainer.get("check_val_every_n_epoch", 1) is None:
        return
    if trainer.get("fast_dev_run") or trainer.get("overfit_batches"):
        return
    plain = math.ceil(examples / batch_size)
    packing = ", long documents packed by their windows" if batches not in (None, plain) else ""
    batches = math.ceil((plain if batches is None else batches) / world_size)  # per rank, as TrainBatchSampler cuts
    limit = trainer.get("limit_train_batches")
    if isinstance(limit, int) and not isinstance(limit, bool):
        batches = min(batches, limit)
    elif isinstance(limit, float):
        batches = int(batches * limit)
    if interval > batches:
        raise ConfigError(
            f"trainer.val_check_interval={interval} batches is past the end of an epoch: the training split "
            f"({examples} examples, data.batch_size={batch_size}{packing}"
            f"{f' on {world_size} processes' if world_size > 1 else ''}) "
            f"makes {batches} batches per epoch, so validation would never run there. Use at most {batches}, a "
            "fraction of the epoch (e.g. 0.5), or null (once per epoch)")
