"""Every setting's kind, declared once: the checks of single values are generated from this table.

A *kind* is a type with its range (``positive_int``, ``prob`` in [0, 1), ``finite_positive_float``, ``limit``
with the -1/null = all rule, an enumeration, ...). A *setting* is a configuration key with its kind, what it
means, and what null means where null is allowed. :func:`check_config` checks every declared key of a
composed configuration (before anything is read or written); the typed configuration classes
(``bertlab.runtime.config``) check their own fields with :func:`check_fields`, so a value is judged by the
same rule whether it comes from a YAML file, the command line or library code. Settings that make sense
alone but not together (zero epochs, a monitor the task never logs, ...) are checked in
``bertlab.runtime.checks``.

The -1 / 0 rule: a *limit* on how many examples to read (``data.max_train_samples``,
``data.max_eval_samples``) takes -1 or null for "all of them"; 0 is refused (it would leave nothing to train
or evaluate on). A training length (``trainer.max_epochs``, ``trainer.max_steps``) takes -1 for "no limit from
this bound" (Lightning's meaning), never both at once; 0 is refused (a run that trains nothing: evaluate with
``train=false ckpt_path=...``). ``trainer.devices=-1`` means every visible device; ``data.tag_column=-1`` is a
column index (the last column).

``tests/test_schema.py`` composes every preset of every config group and fails on a numeric setting this
table does not declare.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from bertlab.runtime.errors import ConfigError


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Kind:
    """A type and its range: ``accepts(value)`` says whether a (non-null) value is one; ``rule`` says it in
    words, to end "<key>=<value>: <meaning> must be <rule>"."""

    name: str
    rule: str
    accepts: Callable[[Any], bool]


POSITIVE_INT = Kind("positive_int", "a positive integer", lambda v: _int(v) and v >= 1)
NONNEG_INT = Kind("nonneg_int", "0 or a positive integer", lambda v: _int(v) and v >= 0)
INDEX = Kind("index", "an integer (a negative one counts from the end)", _int)
SEED = Kind("seed", "an integer from 0 to 4294967295 (the range numpy's generator takes)",
            lambda v: _int(v) and 0 <= v < 2**32)
LIMIT = Kind("limit", "a positive integer (at most that many) or -1 for all of them (0 would leave nothing)",
             lambda v: _int(v) and (v >= 1 or v == -1))
RUN_LENGTH = Kind("run_length", "a positive integer, or -1 for no limit from this bound (the other one decides); "
                  "0 only with train=false", lambda v: _int(v) and v >= -1)
PROB = Kind("prob", "a number in [0, 1)", lambda v: _num(v) and 0 <= v < 1)
OPEN_PROB = Kind("open_prob", "a number in (0, 1)", lambda v: _num(v) and 0 < v < 1)
FRACTION = Kind("fraction", "a number in [0, 1]", lambda v: _num(v) and 0 <= v <= 1)
DECAY = Kind("decay", "a number in (0, 1]", lambda v: _num(v) and 0 < v <= 1)
POSITIVE_FLOAT = Kind("finite_positive_float", "a finite number above 0", lambda v: _num(v) and v > 0)
NONNEG_FLOAT = Kind("finite_nonneg_float", "a finite number, 0 or more", lambda v: _num(v) and v >= 0)
FLOAT = Kind("finite_float", "a finite number", _num)
BOOL = Kind("bool", "true or false", lambda v: isinstance(v, bool))
TEXT = Kind("text", "a text", lambda v: isinstance(v, str) and v != "")
TEXT_LIST = Kind("text_list", "a non-empty list of names", lambda v: isinstance(v, (list, tuple)) and len(v) > 0
                 and all(isinstance(x, str) and x for x in v))
LAYER_LIST = Kind("layer_list", "a non-empty list of layer indices (0 or more), e.g. [0,2,4]",
                  lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(_int(x) and x >= 0 for x in v))
BETAS = Kind("betas", "a pair of numbers in [0, 1), e.g. [0.9, 0.999]",
             lambda v: isinstance(v, (list, tuple)) and len(v) == 2 and all(PROB.accepts(x) for x in v))
BATCHES = Kind("batches", "0 or a positive integer (that many batches) or a fraction in [0.0, 1.0] (of the "
               "batches)", lambda v: NONNEG_INT.accepts(v) or (isinstance(v, float) and 0 <= v <= 1))
VAL_INTERVAL = Kind("val_interval", "a positive integer (every that many training batches) or a fraction of an "
                    "epoch in (0.0, 1.0]", lambda v: POSITIVE_INT.accepts(v) or (isinstance(v, float) and 0 < v <= 1))
DEVICES = Kind("devices", "a positive integer, -1 (every visible device), auto, or a list of device indices",
               lambda v: (_int(v) and (v >= 1 or v == -1)) or v == "auto"
               or (isinstance(v, str) and all(p.strip().isdigit() for p in v.split(",")))
               or (isinstance(v, (list, tuple)) and len(v) > 0 and all(_int(x) and x >= 0 for x in v)))
FAST_DEV_RUN = Kind("fast_dev_run", "true, false or a number of batches (0 = off)",
                    lambda v: isinstance(v, bool) or NONNEG_INT.accepts(v))
WRITABLE_DIR = Kind("writable_dir", "a folder this user can write to, or a path where one can be created",
                    lambda v: isinstance(v, (str, Path)) and writable_dir_problem(v) is None)


# model.window_pooling: max, mean (of the windows' vectors) and max_logits (of their logits) have no parameters (a
# model trained with them exports to a stock head); attention scores each window with a learned vector
# (bertlab.models.heads.WindowPooling).
WINDOW_POOLINGS = ("max", "mean", "max_logits", "attention")
# A setting whose values are the names of a registry that runtime may not import (model.model_type: the encoder
# families of bertlab.models.families). Alone it takes any name; check_config's ``names``, passed by the caller that
# reads the registry (training.stopping.start_of_run), narrows it to that registry's names.
REGISTERED = Kind("registered", "a name", lambda v: isinstance(v, str) and v != "")
INIT_HEADS = ("auto", "new")  # model.init_head: keep the start's head when it is this run's, or always a new one


def choice(*values: Any) -> Kind:
    """One of ``values`` (booleans and numbers compared with their type: true is not 1)."""
    def accepts(v: Any) -> bool:
        return any(type(v) is type(c) and v == c for c in values)
    shown = dict.fromkeys(str(c).lower() if isinstance(c, bool) else str(c) for c in values)  # 32 and "32" once
    return Kind("choice", "one of " + ", ".join(shown), accepts)


COLUMN = Kind("column", "a column name, or a 0-based column position for a file without a header line",
              lambda v: (isinstance(v, str) and v != "") or NONNEG_INT.accepts(v))
LAYERS = Kind("layers", "last, concat_last4, sum_last4 or a layer index (negative counts from the top)",
              lambda v: INDEX.accepts(v) or v in ("last", "concat_last4", "sum_last4")
              or (isinstance(v, str) and v.lstrip("-").isdigit()))
PRECISION = choice("32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", "transformer-engine",
                   "transformer-engine-float16", "32", "16", "bf16", "64", 32, 16, 64)
ACCELERATOR = choice("auto", "cpu", "gpu", "cuda", "mps", "tpu")


@dataclass(frozen=True)
class Setting:
    kind: Kind
    meaning: str  # what the value is, e.g. "the learning rate"
    null: str | None = None  # what null means where null is allowed (None: null is refused)
    hint: str = ""  # appended to the message: a usual value, what 0 means, ...


def S(kind: Kind, meaning: str, null: str | None = None, hint: str = "") -> Setting:  # noqa: N802
    return Setting(kind, meaning, null, hint)


# Keys of the composed configuration (conf/train.yaml and its groups). A key a preset does not have is
# skipped; a key this table does not have is left to the code that reads it (tests/test_schema.py makes sure
# that no numeric setting of a preset is missing here).
SETTINGS: dict[str, Setting] = {
    # the run
    "seed": S(SEED, "the random seed", hint="e.g. seed=42"),
    "save_every_n_steps": S(POSITIVE_INT, "the interval of last.ckpt saves, in optimizer steps",
                            null="last.ckpt at the end of each epoch and on a stop signal only"),
    "train": S(BOOL, "whether to train"), "test": S(BOOL, "whether to evaluate data.test_file"),
    "predict": S(BOOL, "whether to write predictions"),
    "export": S(choice(False, True, "hf", "onnx"), "what the run exports (true = hf)"),
    "export_quantize": S(choice("int8"), "the ONNX export's quantization", null="no int8 graph"),
    "export_max_drop": S(NONNEG_FLOAT, "the task-metric points the int8 ONNX graph may lose"),
    "checkpoint.keep_last": S(NONNEG_INT, "the training states kept (1: last.ckpt; 0: none once finished)"),
    "checkpoint.best_weights_only": S(BOOL, "best checkpoints without the optimizer state"),
    "quiet": S(BOOL, "quiet console output"), "verbose": S(BOOL, "verbose console output"),
    "skip_finished": S(BOOL, "skipping finished multirun jobs"),
    "overwrite_run_dir": S(BOOL, "overwriting a used run dir"),
    "on_nonfinite_loss": S(choice("error", "skip"), "what a NaN/inf training loss does"),
    # data
    "data.batch_size": S(POSITIVE_INT, "the training batch size per device", hint="e.g. 32"),
    "data.eval_batch_size": S(POSITIVE_INT, "the evaluation batch size per device", hint="e.g. 64"),
    "data.max_seq_length": S(POSITIVE_INT, "the longest input in tokens", hint="BERT's fine-tuning default is 128"),
    "data.num_workers": S(NONNEG_INT, "the number of DataLoader worker processes",
                          hint=f"0 loads in the training process; e.g. data.num_workers={min(os.cpu_count() or 1, 4)}"),
    "data.max_train_samples": S(LIMIT, "the number of training examples to read", null="all of them"),
    "data.max_eval_samples": S(LIMIT, "the number of examples to read from each evaluation split",
                               null="all of them"),
    "data.group_by_length": S(BOOL, "whether training batches are grouped by length"),
    "data.pad_to_multiple_of": S(POSITIVE_INT, "the multiple batches are padded to",
                                 null="8 under mixed precision on a GPU, none otherwise", hint="1 = no padding"),
    "data.distill_file": S(TEXT, "the unlabelled texts the distillation teacher labels", null="none"),
    "data.cache_dir": S(WRITABLE_DIR, "the cache folder (paths.cache_dir)", null="no cache"),
    "data.text_column": S(COLUMN, "the text column"),
    "data.text_pair_column": S(COLUMN, "the second text's column", null="single texts"),
    "data.label_column": S(COLUMN, "the label column", null="no labels"),
    "data.negative_column": S(COLUMN, "the hard-negative column (task=embedding)", null="no hard negatives"),
    "data.corpus_file": S(TEXT, "more passages for retrieval evaluation", null="the validation file's own"),
    "data.tag_column": S(INDEX, "the CoNLL column holding the tags", hint="-1 = the last column"),
    "data.tag_scheme": S(choice("iob1", "iob2"), "the tag scheme of the CoNLL files"),
    "data.doc_stride": S(POSITIVE_INT, "the number of context tokens two QA windows share"),
    "data.long_text": S(choice("windows", "truncate"), "how text longer than data.max_seq_length is read"),
    "data.window_stride": S(POSITIVE_INT, "the number of tokens two long-text windows share",
                            null="a quarter of the window"),
    "data.max_windows_per_batch": S(POSITIVE_INT, "the most long-text windows one batch encodes at once",
                                    null="the batch size (data.batch_size, data.eval_batch_size)"),
    "data.max_windows_per_example": S(POSITIVE_INT, "the most windows one example is read in",
                                      null="no cap (one huge example may take any time and memory)"),
    "data.max_query_length": S(POSITIVE_INT, "the longest QA question in tokens"),
    "data.n_best_size": S(POSITIVE_INT, "the number of start/end candidates a QA answer is chosen from"),
    "data.max_answer_length": S(POSITIVE_INT, "the longest QA answer in tokens"),
    "data.version_2_with_negative": S(BOOL, "SQuAD 2.0 decoding"),
    "data.null_score_diff_threshold": S(FLOAT, "the SQuAD 2.0 no-answer threshold"),
    "data.text_format": S(choice("plain", "wikitext"), "the raw-text format"),
    "data.short_seq_prob": S(FRACTION, "the probability of a shorter pre-training segment"),
    "data.stream_threshold_mb": S(NONNEG_FLOAT, "the training-file size (MB) above which data.stream=auto streams"),
    "data.nsp_block_documents": S(POSITIVE_INT, "the number of documents a streamed NSP block holds"),
    "data.prep_num_proc": S(POSITIVE_INT, "the number of corpus-preparing processes", null="every core"),
    # head
    "head.layers": S(LAYERS, "the encoder layers the head reads"),
    "head.hidden_layers": S(NONNEG_INT, "the number of hidden layers of the head", hint="0 = a linear head"),
    "head.dropout": S(PROB, "the head's dropout probability", null="the encoder's hidden_dropout_prob"),
    "head.cache_features": S(BOOL, "the frozen-encoder feature cache"),
    # optim
    "optim.lr": S(POSITIVE_FLOAT, "the learning rate", hint="e.g. optim.lr=5e-5"),
    "optim.weight_decay": S(NONNEG_FLOAT, "the weight decay", hint="e.g. 0.01; 0 = none"),
    "optim.warmup_ratio": S(PROB, "the fraction of the training steps spent warming the learning rate up",
                            hint="e.g. 0.1; 0 = no warm-up"),
    "optim.layer_lr_decay": S(DECAY, "the layer-wise learning-rate decay", hint="1.0 = off"),
    "optim.betas": S(BETAS, "AdamW's betas"),
    "optim.eps": S(POSITIVE_FLOAT, "AdamW's epsilon", hint="e.g. 1e-8"),
    "optim.head_lr": S(POSITIVE_FLOAT, "the head's learning rate", null="optim.lr"),
    # freeze
    "freeze.k": S(NONNEG_INT, "the number of bottom encoder layers freeze=bottom_k freezes"),
    "freeze.lora.r": S(POSITIVE_INT, "the LoRA rank", hint="e.g. 8"),
    "freeze.lora.alpha": S(POSITIVE_FLOAT, "the LoRA scaling alpha", hint="e.g. 16"),
    "freeze.lora.dropout": S(PROB, "the LoRA dropout probability"),
    "freeze.lora.target_modules": S(TEXT_LIST, "the Linear layers LoRA adapts", hint="e.g. [query, value]"),
    # task
    "task.mode": S(choice("min", "max"), "the direction of the monitored metric"),
    "task.regression": S(BOOL, "regression"), "task.nsp": S(BOOL, "next-sentence prediction"),
    "task.whole_word_masking": S(BOOL, "whole-word masking"),
    "task.label_all_tokens": S(BOOL, "labelling every word piece"),
    "task.mlm_probability": S(OPEN_PROB, "the masking probability", null="the encoder family's rate",
                              hint="BERT's is 0.15"),
    "task.max_new_tokens": S(NONNEG_INT, "the number of tokens generated per prompt"),
    "task.generator_size": S(DECAY, "the generator's width as a share of the discriminator's (task=rtd)",
                             hint="ELECTRA's is 0.25"),
    "task.generator_layers": S(POSITIVE_INT, "the generator's number of layers (task=rtd)",
                               null="the discriminator's"),
    "task.disc_weight": S(POSITIVE_FLOAT, "the weight of the discriminator's loss (task=rtd)",
                          hint="ELECTRA's is 50"),
    "task.pooling": S(choice("auto", "mean", "cls", "last"), "the sentence vector of task=embedding"),
    "task.normalize": S(BOOL, "L2 normalisation of the embeddings"),
    "task.scale": S(POSITIVE_FLOAT, "the scale of the cosine similarities in the ranking loss",
                    hint="sentence-transformers' is 20"),
    "task.symmetric": S(BOOL, "the ranking loss's passage-to-query term"),
    "task.cache_chunk_size": S(POSITIVE_INT, "how many average rows' worth of tokens gradient caching embeds "
                               "with a graph at once",
                               null="no gradient caching"),
    "task.rerank": S(BOOL, "a cross-encoder reranker (task=rerank: one score per (query, passage) pair)"),
    "task.rerank_loss": S(choice("pointwise", "listwise"), "a reranker's training loss",
                          hint="pointwise: BCE per pair; listwise: softmax over a query's positive and negatives"),
    "task.first_stage": S(TEXT, "the first stage a reranker's validation reranks (a TREC run file, or an "
                          "embedding run or export)", null="the validation file's own labelled candidates"),
    "task.rerank_top_k": S(POSITIVE_INT, "the first-stage candidates reranked per query"),
    "task.negatives_from": S(TEXT, "the embedding run (run dir, .ckpt or export) whose retrieval mines a reranker's "
                             "training negatives", null="the training file's own labels or negatives"),
    "task.num_negatives": S(POSITIVE_INT, "the negatives mined per training query (task.negatives_from)"),
    "task.skip_top": S(NONNEG_INT, "the first ranks of each query passed over when mining negatives"),
    "task.temperature": S(POSITIVE_FLOAT, "the temperature the generator's replacements are sampled at (task=rtd)",
                          hint="1.0 = its own distribution"),
    # distillation (conf/distill/none.yaml, docs/distillation.md)
    "distill.teacher": S(TEXT, "the teacher (a run dir, a .ckpt file or an exported folder)",
                         null="no distillation"),
    "distill.alpha": S(FRACTION, "the weight of the task loss (1 - alpha weighs the teacher's term)",
                       hint="DistilBERT-style runs use 0.5; 0 = the teacher only"),
    "distill.temperature": S(POSITIVE_FLOAT, "the distillation temperature", hint="e.g. 2.0; 1.0 = plain softmax"),
    "distill.cache": S(BOOL, "keeping the teacher's outputs on the training split"),
    "distill.student_layers": S(LAYER_LIST, "the teacher layers the student is built from",
                                null="the student is what model= says"),
    "distill.hidden_weight": S(NONNEG_FLOAT, "the weight of the hidden-state MSE between mapped layers",
                               hint="0 = off; TinyBERT-style runs use 1.0"),
    "distill.attention_weight": S(NONNEG_FLOAT, "the weight of the attention KL between mapped layers",
                                  hint="0 = off; MiniLM-style runs use 1.0"),
    # model: BERT (conf/model/bert_*.yaml, minilm_l6.yaml) and recurrent encoders (bilstm, gru, lstm)
    "model.vocab_size": S(POSITIVE_INT, "the vocabulary size"),
    "model.vocab_train_bytes": S(POSITIVE_INT, "the raw-text sample the vocabulary is trained on, in bytes",
                                 null="all of the training text"),
    "model.lowercase": S(BOOL, "lowercasing"),
    "model.hidden_size": S(POSITIVE_INT, "the hidden size"),
    "model.num_hidden_layers": S(POSITIVE_INT, "the number of encoder layers"),
    "model.num_attention_heads": S(POSITIVE_INT, "the number of attention heads"),
    "model.intermediate_size": S(POSITIVE_INT, "the feed-forward size"),
    "model.max_position_embeddings": S(POSITIVE_INT, "the size of the position table"),
    "model.type_vocab_size": S(NONNEG_INT, "the number of token types", hint="0 = no segment embeddings"),
    "model.embedding_size": S(POSITIVE_INT, "the embedding width", null="hidden_size"),
    "model.classifier_dropout": S(PROB, "the classification head's dropout probability",
                                  null="the hidden dropout"),
    "model.attention_output_dropout": S(BOOL, "dropout after the attention's output projection"),
    "model.layer_norm_eps": S(POSITIVE_FLOAT, "LayerNorm's epsilon"),
    "model.initializer_range": S(POSITIVE_FLOAT, "the standard deviation of the initial weights"),
    "model.pad_token_id": S(NONNEG_INT, "the padding token id"),
    "model.model_type": S(REGISTERED, "the family a scratch encoder is built as"),
    "model.global_attn_every_n_layers": S(POSITIVE_INT, "ModernBERT: every how many layers one attends globally"),
    "model.local_attention": S(POSITIVE_INT, "ModernBERT: the width of a local layer's attention window"),
    "model.hidden_dropout_prob": S(PROB, "the encoder's hidden dropout probability", null="the checkpoint's"),
    "model.attention_probs_dropout_prob": S(PROB, "the encoder's attention dropout probability",
                                            null="the checkpoint's"),
    "model.compile": S(BOOL, "torch.compile"), "model.cpu_fast_dropout": S(BOOL, "fast CPU dropout masks"),
    "model.cpu_attention_slice_mb": S(NONNEG_INT, "the MiB budget of one slice of CPU attention",
                                      hint="0 = one slice"),
    "model.embedding_dim": S(POSITIVE_INT, "the embedding size"),
    "model.num_layers": S(POSITIVE_INT, "the number of recurrent layers"),
    "model.bidirectional": S(BOOL, "a bidirectional encoder"),
    "model.dropout": S(PROB, "the recurrent encoder's dropout probability"),
    "model.cell": S(choice("lstm", "gru"), "the recurrent cell"),
    "model.pooling": S(choice("final", "mean", "max"), "the recurrent encoder's sequence vector"),
    "model.tie_word_embeddings": S(BOOL, "tied input and output embeddings"),
    "model.init_head": S(choice(*INIT_HEADS), "whether the start's head is kept",
                         hint="auto keeps it when it is the same head for the same labels"),
    "model.window_pooling": S(choice(*WINDOW_POOLINGS), "how a long document's windows become one answer"),
    # trainer (Lightning's Trainer arguments)
    "trainer.accelerator": S(ACCELERATOR, "the accelerator"),
    "trainer.devices": S(DEVICES, "the devices to train on"),
    "trainer.num_nodes": S(POSITIVE_INT, "the number of machines"),
    "trainer.precision": S(PRECISION, "the precision"),
    "trainer.max_epochs": S(RUN_LENGTH, "the number of training epochs"),
    "trainer.max_steps": S(RUN_LENGTH, "the number of optimizer steps"),
    "trainer.min_epochs": S(NONNEG_INT, "the least number of epochs", null="none"),
    "trainer.min_steps": S(NONNEG_INT, "the least number of steps", null="none"),
    "trainer.limit_train_batches": S(BATCHES, "the number of training batches per epoch", null="all of them"),
    "trainer.limit_val_batches": S(BATCHES, "the number of validation batches", null="all of them"),
    "trainer.limit_test_batches": S(BATCHES, "the number of test batches", null="all of them"),
    "trainer.val_check_interval": S(VAL_INTERVAL, "the validation interval", null="once per epoch"),
    "trainer.check_val_every_n_epoch": S(POSITIVE_INT, "validate every this many epochs",
                                         null="val_check_interval counts batches across epochs"),
    "trainer.accumulate_grad_batches": S(POSITIVE_INT, "the number of batches whose gradients are summed before "
                                         "each optimizer step", hint="1 = no accumulation"),
    "trainer.gradient_clip_val": S(NONNEG_FLOAT, "the gradient-norm clipping threshold", null="no clipping",
                                   hint="BERT's is 1.0; 0 = no clipping"),
    "trainer.deterministic": S(BOOL, "deterministic algorithms"),
    "trainer.log_every_n_steps": S(NONNEG_INT, "the logging interval in steps", null="automatic",
                                   hint="0 = no step logging"),
    "trainer.fast_dev_run": S(FAST_DEV_RUN, "a fast dev run"),
    "trainer.overfit_batches": S(BATCHES, "the number (or fraction) of batches to overfit", hint="0 = off"),
    "trainer.enable_progress_bar": S(BOOL, "the progress bar"),
    "trainer.enable_model_summary": S(BOOL, "the model summary"),
    "trainer.detect_anomaly": S(BOOL, "autograd anomaly detection"),
    "trainer.num_sanity_val_steps": S(INDEX, "the sanity-check validation batches", hint="-1 = all"),
}

# Settings of the classes a config node instantiates (callbacks.*, logger.*), by ``_target_``: the node's
# name is the user's choice, the class decides what its arguments mean.
TARGET_SETTINGS: dict[str, dict[str, Setting]] = {
    "bertlab.training.callbacks.OverfitCheck": {
        "ratio": S(FRACTION, "the share of its first loss the training loss must fall under (debug=overfit)"),
    },
    "lightning.pytorch.callbacks.EarlyStopping": {
        "patience": S(NONNEG_INT, "the number of validations without improvement before stopping"),
        "min_delta": S(NONNEG_FLOAT, "the smallest change that counts as an improvement"),
        "mode": S(choice("min", "max"), "the direction of the monitored metric"),
        "monitor": S(TEXT, "the monitored metric"),
        "check_finite": S(BOOL, "stopping on a non-finite metric"),
        "stopping_threshold": S(FLOAT, "the value that stops training at once", null="none"),
        "divergence_threshold": S(FLOAT, "the value that stops a diverging run", null="none"),
    },
    "lightning.pytorch.callbacks.LearningRateMonitor": {
        "logging_interval": S(choice("step", "epoch"), "the learning-rate logging interval", null="per scheduler"),
        "log_momentum": S(BOOL, "logging the momentum"),
    },
    "lightning.pytorch.callbacks.ModelCheckpoint": {
        "monitor": S(TEXT, "the monitored metric", null="the last epoch"),
        "mode": S(choice("min", "max"), "the direction of the monitored metric"),
        "save_top_k": S(INDEX, "the number of best checkpoints to keep", hint="-1 = all"),
        "every_n_train_steps": S(NONNEG_INT, "the checkpoint interval in steps", null="per epoch"),
    },
    "bertlab.training.callbacks.SamplesPerSecond": {
        "every_n_steps": S(POSITIVE_INT, "the number of batches the samples/s figure is measured over"),
        "tokens": S(BOOL, "also measuring tokens/s"),
    },
    "bertlab.sweeps.trial.OptunaTrialCallback": {"monitor": S(TEXT, "the metric reported to the trial")},
    "lightning.pytorch.loggers.CSVLogger": {
        "flush_logs_every_n_steps": S(POSITIVE_INT, "the CSV log's flush interval in steps"),
    },
    "lightning.pytorch.loggers.TensorBoardLogger": {"default_hp_metric": S(BOOL, "TensorBoard's hp_metric")},
    "lightning.pytorch.loggers.WandbLogger": {"log_model": S(choice(True, False, "all"), "uploading checkpoints")},
}


def writable_dir_problem(path: str | Path) -> str | None:
    """Why bertlab could not create or write into folder ``path`` (None: it can): a file on the way, or a
    folder this user may not write into."""
    p = Path(os.path.expanduser(str(path)))
    p = p if p.is_absolute() else Path.cwd() / p
    for parent in [p, *p.parents]:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                return f"{parent} is a file, not a folder" if parent.exists() else f"{parent} is a broken link"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"this user may not write into {parent}"
            return None
    return None


def message(key: str, value: Any, setting: Setting, where: str = "") -> str:
    """One paragraph: the key and value, what it means, the rule it breaks, and what null and hints say."""
    rule = setting.kind.rule
    if setting.null is not None:
        rule += f", or null ({setting.null})"
    text = f"{key}={_show(value)}{where}: {setting.meaning} must be {rule}"
    if setting.kind is WRITABLE_DIR and isinstance(value, (str, Path)):
        text += f" ({writable_dir_problem(value)}); choose another folder"
    elif isinstance(value, float) and not math.isfinite(value):
        text += " (it is not a finite number)"
    return text + (f"; {setting.hint}" if setting.hint else "")


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return str(value)


def check_value(key: str, value: Any, setting: Setting, where: str = "") -> None:
    if value is None and setting.null is not None:
        return
    if value is None or not setting.kind.accepts(value):
        raise ConfigError(message(key, value, setting, where))


def setting_for(key: str, tree: Mapping[str, Any] | None = None) -> Setting | None:
    """The declaration of dotted ``key``: from :data:`SETTINGS`, or from the ``_target_`` of the node that
    holds it (``tree`` is the whole configuration)."""
    if key in SETTINGS:
        return SETTINGS[key]
    node_path, _, name = key.rpartition(".")
    if tree is not None and node_path:
        node: Any = tree
        for part in node_path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and isinstance(node.get("_target_"), str):
            return TARGET_SETTINGS.get(node["_target_"], {}).get(name)
    return None


RECOMMENDED = "freeze.recommended."


def declaration(key: str, tree: Mapping[str, Any] | None = None) -> tuple[str, Setting | None]:
    """``(the key a value sets, its declaration)``: a freeze policy's ``freeze.recommended.<key>`` sets
    ``<key>``; every other key sets itself."""
    target = key[len(RECOMMENDED):] if key.startswith(RECOMMENDED) else key
    return target, setting_for(target, tree)


def leaves(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Every ``(dotted key, value)`` of a plain config tree; lists are values."""
    out: list[tuple[str, Any]] = []
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out += leaves(v, f"{key}.")
        else:
            out.append((key, v))
    return out


def check_config(tree: Mapping[str, Any], names: Mapping[str, Collection[str]] | None = None) -> None:
    """Check every declared setting of a composed, resolved configuration (a plain dict), and the values a
    freeze policy will apply (``freeze.recommended``) by the rule of the key they set. ``names``: for the
    :data:`REGISTERED` settings, the registry's names (``{"model.model_type": the scratch families}``)."""
    policy = (tree.get("freeze") or {}).get("policy")
    for key, value in leaves(tree):
        target, setting = declaration(key, tree)
        if setting is not None and setting.kind is REGISTERED and target in (names or {}):
            setting = Setting(choice(*(names or {})[target]), setting.meaning, setting.null, setting.hint)
        if setting is not None:
            where = f" (freeze.recommended in conf/freeze/{policy}.yaml)" if target != key else ""
            check_value(target, value, setting, where)


def check_fields(obj: Any, section: str) -> None:
    """Check the fields of a typed configuration dataclass that :data:`SETTINGS` declares as
    ``<section>.<field>`` (``OptimConfig`` → ``optim``). Folders are checked when a run starts only: a
    configuration read back from a run (``Predictor.from_run``) may name another machine's cache."""
    assert is_dataclass(obj)
    for f in fields(obj):
        setting = SETTINGS.get(f"{section}.{f.name}")
        if setting is not None and setting.kind is not WRITABLE_DIR:
            check_value(f"{section}.{f.name}", getattr(obj, f.name), setting)
