"""Typed configuration: the only configuration that reaches modules.

Hydra composes YAML at the edge (``bertlab.train``); these dataclasses are built from it and validate
themselves, so a bad value fails with a message that says what to change.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from bertlab.runtime.errors import ConfigError
from bertlab.runtime.schema import SETTINGS, WINDOW_POOLINGS, check_fields, check_value

log = logging.getLogger(__name__)

POSITION_STYLES = ("absolute", "after_padding")

# model.encoder: the kind of encoder a run builds. "transformer" (the default) is any native family or the generic
# AutoModel path; "recurrent" the LSTM/GRU baselines (model=bilstm|gru|lstm).
TRANSFORMER, RECURRENT = "transformer", "recurrent"
ENCODER_KINDS = (TRANSFORMER, RECURRENT)
# Values older runs saved, and older command lines pass, read as today's (logged once per process).
OLD_ENCODER_KINDS = {"bert": TRANSFORMER}
_told: set[str] = set()


def encoder_kind(model_cfg: Mapping[str, Any]) -> str:
    """``model.encoder`` of a run's ``model`` settings (a saved run's too) as one of :data:`ENCODER_KINDS`:
    unset is a transformer; ``bert``, the name before bertlab had seven families, reads as ``transformer``. The
    value itself is left as given, so a resumed run's settings still equal the ones it saved."""
    kind = model_cfg.get("encoder") or TRANSFORMER
    if kind in OLD_ENCODER_KINDS:
        if kind not in _told:
            _told.add(kind)
            log.info("model.encoder=%s is read as model.encoder=%s (its name before bertlab had seven families)",
                     kind, OLD_ENCODER_KINDS[kind])
        kind = OLD_ENCODER_KINDS[kind]
    if kind not in ENCODER_KINDS:
        raise ConfigError(f"model.encoder must be one of {', '.join(ENCODER_KINDS)}, got {kind!r}: "
                          f"{TRANSFORMER} for any transformer family (the default), {RECURRENT} for model=bilstm|gru|lstm")
    return kind


@dataclass
class EncoderConfig:
    """A BERT-shaped encoder's architecture (the fields of a Hugging Face ``BertConfig`` that change the
    computation, and the few ways the BERT-shaped families differ from BERT: ``bertlab.models.families``)."""

    model_type: str = "bert"  # the family, as config.json's model_type names it
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    initializer_range: float = 0.02
    # ELECTRA: embeddings narrower than the layers, projected up by ``embeddings_project``; None = hidden_size.
    embedding_size: int | None = None
    # "absolute": position i is row i (BERT). "after_padding": RoBERTa / XLM-R, whose real tokens count from
    # pad_token_id + 1 and whose padding sits at row pad_token_id (so 512 tokens need 514 rows).
    position_style: str = "absolute"
    attention_output_dropout: bool = True  # DistilBERT has no dropout after the attention's output projection
    classifier_dropout: float | None = None  # the family's classification-head dropout (None = hidden dropout)

    def __post_init__(self) -> None:
        check_fields(self, "model")  # every field by its kind (bertlab.runtime.schema)
        if self.position_style not in POSITION_STYLES:
            raise ConfigError(f"model.position_style must be one of {', '.join(POSITION_STYLES)}, got "
                              f"{self.position_style!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}: change one of them (e.g. model.num_attention_heads="
                f"{largest_divisor(self.hidden_size, self.num_attention_heads)})"
            )
        if self.hidden_act != "gelu":
            raise ConfigError(
                f"hidden_act {self.hidden_act!r} is not supported: BERT uses exact 'gelu' (erf form)"
            )
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"pad_token_id {self.pad_token_id} is outside the vocabulary of {self.vocab_size}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_width(self) -> int:
        """The width of the token embeddings (ELECTRA's may be narrower than the layers)."""
        return self.embedding_size or self.hidden_size

    @property
    def position_offset(self) -> int:
        """The position-embedding row of a sequence's first token."""
        return self.pad_token_id + 1 if self.position_style == "after_padding" else 0

    @property
    def max_sequence_length(self) -> int:
        """The longest input the position embeddings cover."""
        return self.max_position_embeddings - self.position_offset

    def to_hf_dict(self) -> dict[str, Any]:
        """BERT's config.json (other families write theirs through ``bertlab.models.families``)."""
        data = {k: v for k, v in dataclasses.asdict(self).items()
                if k not in ("embedding_size", "position_style", "attention_output_dropout")}
        data.update(model_type="bert", position_embedding_type="absolute")
        return data


UNPAD_MODES = ("auto", "true", "false")


def auto_true_false(value: Any, key: str, meaning: str) -> str:
    """A switch ``key`` as one of auto | true | false (YAML's true/false arrive as booleans); ``meaning`` ends
    the error message: what each choice does."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.lower() in UNPAD_MODES:
        return value.lower()
    raise ConfigError(f"{key} must be auto, true or false, got {value!r}: {meaning}")


def unpad_mode(value: Any, key: str = "model.unpad") -> str:
    """``model.unpad`` as one of auto | true | false."""
    return auto_true_false(value, key, "auto packs the real tokens where that is faster (docs/performance.md), "
                                       "true always, false keeps the padded path")


@dataclass
class ExecutionConfig:
    """How a BERT encoder runs (``model.unpad``, ``model.compile`` and the kernel choices): never the function
    it computes. Chosen once, when the model is built."""

    unpad: str = "auto"  # auto | true | false: the unpadded path (bertlab.models.bert.BertModel.uses_unpadded_path)
    compile: bool = False  # torch.compile the encoder
    # Kernels (bertlab.models.bert.Kernels): CPU dropout masks from 16-bit uniforms, the budget of one slice of
    # CPU attention with dropout (MiB, 0 = one slice), and the unpadded path's attention kernel.
    cpu_fast_dropout: bool = True
    cpu_attention_slice_mb: int = 32
    varlen_attention: str = "auto"  # auto | repad | nested | flash_attn

    def __post_init__(self) -> None:
        self.unpad = unpad_mode(self.unpad)
        for key in ("compile", "cpu_fast_dropout"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"model.{key} must be true or false, got {getattr(self, key)!r}")
        mib = self.cpu_attention_slice_mb
        if not isinstance(mib, int) or isinstance(mib, bool) or mib < 0:
            raise ConfigError(f"model.cpu_attention_slice_mb must be a whole number of MiB, 0 or more (0 = "
                              f"CPU attention in one slice), got {mib!r}")

    @classmethod
    def from_model_cfg(cls, model_cfg: Any) -> ExecutionConfig:
        defaults = cls()
        return cls(**{f.name: model_cfg.get(f.name, getattr(defaults, f.name)) for f in fields(cls)})


@dataclass(frozen=True)
class ModelConfig:
    """The ``model`` group (conf/model/*.yaml): where the encoder starts, its tokenizer, how it runs, and the
    architecture of a scratch encoder. An architecture key left null (None) takes the family's or the
    checkpoint's value. Built by ``bertlab.training.start.model_config``, which also accepts, in ``extra``, the
    other fields of a native family's config (e.g. ``+model.position_buckets=128`` for a scratch DeBERTa) and
    refuses any other key as unknown."""

    name: str | None = None
    encoder: str = TRANSFORMER  # transformer (any transformer family) | recurrent (model=bilstm|gru|lstm)
    # The start (bertlab.training.start.RunStart): a hub id, a local folder or pkg:<package>; a bertlab run dir, a
    # .ckpt or a Hugging Face folder to continue from (it replaces pretrained); whether the start's head is kept.
    pretrained: str | None = None
    init_from: str | None = None
    init_head: str = "auto"  # auto | new
    init_embeddings_from: str | None = None  # recurrent: a BERT checkpoint whose word embeddings (and tokenizer)
    # The tokenizer: a folder to load (null: the start's own, else one trained on the training split as below).
    tokenizer: str | None = None
    tokenizer_kind: str = "wordpiece"  # wordpiece | bpe | unigram
    lowercase: bool = True
    vocab_train_bytes: int | None = None  # null: every training text
    window_pooling: str = "max"  # a long document read in windows: copied into head.window_pooling
    # How the encoder runs (ExecutionConfig): never what it computes.
    unpad: Any = "auto"
    compile: bool = False
    cpu_fast_dropout: bool = True
    cpu_attention_slice_mb: int = 32
    varlen_attention: str = "auto"
    # Architecture (null: the family's default, or the checkpoint's): a scratch transformer ...
    model_type: str | None = None  # the family of a scratch encoder (null: bert)
    vocab_size: int | None = None  # the vocabulary trained for a scratch model (null: 8000)
    hidden_size: int | None = None
    num_hidden_layers: int | None = None
    num_attention_heads: int | None = None
    intermediate_size: int | None = None
    max_position_embeddings: int | None = None
    type_vocab_size: int | None = None
    embedding_size: int | None = None
    layer_norm_eps: float | None = None
    initializer_range: float | None = None
    pad_token_id: int | None = None
    classifier_dropout: float | None = None
    attention_output_dropout: bool | None = None
    global_attn_every_n_layers: int | None = None
    local_attention: int | None = None
    # ... whose dropout a checkpoint's run may change too (a training setting, not part of the weights) ...
    hidden_dropout_prob: float | None = None
    attention_probs_dropout_prob: float | None = None
    # ... or a recurrent encoder (models.recurrent.RecurrentConfig)
    cell: str | None = None
    embedding_dim: int | None = None
    num_layers: int | None = None
    bidirectional: bool | None = None
    dropout: float | None = None
    pooling: str | None = None
    tie_word_embeddings: bool | None = None
    # Other fields of a native family's config, set with +model.<field>=... (checked by model_config).
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        encoder_kind({"encoder": self.encoder})  # a known kind (an old run's "bert" is read as transformer)
        for f in fields(self):  # the values set, by their declared kind (null: the family's or the checkpoint's)
            value = getattr(self, f.name)
            setting = SETTINGS.get(f"model.{f.name}")
            if value is not None and setting is not None:
                check_value(f"model.{f.name}", value, setting)
        self.execution  # noqa: B018 - checked now, before any work

    def values(self) -> dict[str, Any]:
        """Every key set (not null), with ``extra``'s: what a family's or a recurrent config takes its fields from."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {k: v for k, v in {**out, **self.extra}.items() if v is not None}

    @property
    def kind(self) -> str:
        """``model.encoder`` as one of :data:`ENCODER_KINDS` (:func:`encoder_kind`)."""
        return encoder_kind({"encoder": self.encoder})

    @property
    def execution(self) -> ExecutionConfig:
        return ExecutionConfig(unpad=self.unpad, compile=self.compile, cpu_fast_dropout=self.cpu_fast_dropout,
                               cpu_attention_slice_mb=self.cpu_attention_slice_mb,
                               varlen_attention=self.varlen_attention)


def largest_divisor(n: int, at_most: int) -> int:
    """The largest divisor of ``n`` not above ``at_most`` (1 when ``at_most`` is below 1): a head count that
    divides a hidden size."""
    for d in range(min(n, at_most), 0, -1):
        if n % d == 0:
            return d
    return 1


# The sentence vectors a head can read (head.pooling); "auto" resolves to one of them when a run starts.
HEAD_POOLINGS = ("pooler", "cls", "mean")

@dataclass
class HeadConfig:
    """Which encoder vectors a head reads and how deep it is."""

    # "pooler" (dense+tanh over [CLS], as BERT) | "cls" (raw [CLS] vector) | "mean" (mean over real tokens,
    # as sentence-transformers checkpoints such as all-MiniLM-L6-v2 were trained to be read) | "auto" (the
    # start's declared pooling: a checkpoint's sentence-transformers Pooling module, or the pooling the head of a
    # model.init_from run read; else "pooler"; training/build.resolve_head_config)
    pooling: str = "pooler"
    layers: str | int = "last"  # "last" | "concat_last4" | "sum_last4" | an encoder layer index
    hidden_layers: int = 0  # 0 = linear head; >0 = MLP probe
    dropout: float | None = None  # None = the encoder's hidden_dropout_prob (as HF classifier_dropout)
    cache_features: bool = False
    # How a document read in several windows (data.long_text=windows) becomes one vector: the key is
    # model.window_pooling (train.py copies it here, so checkpoints and exports carry it with the head).
    window_pooling: str = "max"  # max | mean | max_logits | attention

    def __post_init__(self) -> None:
        if self.pooling not in (*HEAD_POOLINGS, "auto"):
            raise ConfigError(f"head.pooling must be 'auto' or one of {', '.join(HEAD_POOLINGS)}, got "
                              f"{self.pooling!r}")
        if self.window_pooling not in WINDOW_POOLINGS:
            raise ConfigError(f"model.window_pooling must be one of {', '.join(WINDOW_POOLINGS)}, got "
                              f"{self.window_pooling!r}")
        if isinstance(self.layers, str) and self.layers.lstrip("-").isdigit():
            self.layers = int(self.layers)
        if not isinstance(self.layers, int) and self.layers not in ("last", "concat_last4", "sum_last4"):
            raise ConfigError(
                f"head.layers must be last, concat_last4, sum_last4 or a layer index, got {self.layers!r}"
            )
        check_fields(self, "head")

    @property
    def reads_all_layers(self) -> bool:
        return self.layers != "last"

    @property
    def feature_multiplier(self) -> int:
        return 4 if self.layers == "concat_last4" else 1


@dataclass
class LoraConfig:
    r: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: ["query", "value"])

    def __post_init__(self) -> None:
        check_fields(self, "freeze.lora")


FREEZE_POLICIES = ("none", "encoder", "embeddings", "bottom_k", "bitfit", "lora")


@dataclass
class FreezeConfig:
    policy: str = "none"
    k: int = 0
    lora: LoraConfig = field(default_factory=LoraConfig)

    def __post_init__(self) -> None:
        if isinstance(self.lora, dict):
            self.lora = LoraConfig(**self.lora)
        if self.policy not in FREEZE_POLICIES:
            raise ConfigError(f"freeze.policy must be one of {', '.join(FREEZE_POLICIES)}, got {self.policy!r}")
        check_fields(self, "freeze")


@dataclass
class OptimConfig:
    lr: float = 5e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    layer_lr_decay: float = 1.0  # 1.0 = off; <1 scales layer l's lr by decay**(L - l)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    head_lr: float | None = None  # None = lr

    def __post_init__(self) -> None:
        check_fields(self, "optim")  # lr, betas, eps, ...: finite and in range (bertlab.runtime.schema)
        self.betas = tuple(self.betas)  # type: ignore[assignment]


TASK_FAMILY_NAMES = ("sequence", "token", "qa", "mlm", "clm", "rtd", "multiple_choice", "embedding")
# Families that pre-train on raw text: their files are plain text (no labels), read, packed and prepared alike.
RAW_TEXT_FAMILIES = ("mlm", "clm", "rtd")
# Families whose batches the collator corrupts with masked-LM masking (bertlab.data.mlm.mask_tokens): masked LM,
# and replaced-token detection, whose generator fills the masked positions.
MASKED_FAMILIES = ("mlm", "rtd")
# BERT's masking rate: task.mlm_probability=null where no encoder family says otherwise (bertlab.train resolves it).
DEFAULT_MLM_PROBABILITY = 0.15


# A reranker's training loss: binary cross-entropy per (query, passage) pair, or softmax cross-entropy over a
# query's positive and its negatives read together (bertlab.tasks.rerank).
RERANK_LOSSES = ("pointwise", "listwise")


@dataclass
class TaskSpec:
    """What a task is: its family (which head, loss, metrics), label set and the metric to monitor."""

    name: str
    family: str
    labels: list[str] | None = None  # preset label set; None = derived from the training split
    regression: bool = False  # sequence family with one real-valued output (STS-B style)
    monitor: str = "val/loss"
    mode: str = "min"
    nsp: bool = False  # mlm: next-sentence prediction pairs
    whole_word_masking: bool = False  # mlm, rtd
    mlm_probability: float | None = None  # mlm, rtd; None = the encoder family's rate (15 %, ModernBERT 30 %)
    # rtd (ELECTRA): the generator's width as a share of the discriminator's (hidden size, heads, feed-forward),
    # its depth (None = the discriminator's), the weight of the discriminator's loss, the sampling temperature.
    generator_size: float = 0.25
    generator_layers: int | None = None
    disc_weight: float = 50.0
    temperature: float = 1.0
    label_all_tokens: bool = False  # token: label continuation pieces too (B-X → I-X)
    prompts: list[str] | None = None  # clm: greedy continuations of these in the run summary / metrics.json
    max_new_tokens: int = 20  # clm: at most this many pieces per continuation
    # embedding (bi-encoder, docs/embeddings.md): the sentence vector (auto | mean | cls | last; auto = the
    # checkpoint's sentence-transformers Pooling module, else mean), L2-normalised or not, the
    # multiple-negatives ranking loss's scale and its passage → query term, and gradient caching's chunk size
    # (rows embedded with a graph at once; null = the whole batch at once).
    pooling: str = "auto"
    normalize: bool = True
    scale: float = 20.0
    symmetric: bool = False
    cache_chunk_size: int | None = None
    # rerank (cross-encoder, docs/embeddings.md "Reranking"): a sequence task with one score per (query,
    # passage) pair, trained pointwise (BCE with logits on each pair's relevance) or listwise (rerank_loss:
    # softmax cross-entropy over a query's positive and its negatives, scored together); validated by reranking each query's top
    # rerank_top_k candidates of a first stage: a TREC run file, or an embedding run / export that retrieves
    # them (bertlab.train writes its run file to <run>/first_stage/ and records that path here).
    rerank: bool = False
    rerank_loss: str = "pointwise"
    first_stage: str | None = None
    rerank_top_k: int = 100
    # rerank: training negatives mined from an embedding run (a run dir, .ckpt or export) for the (query,
    # positive) pairs of data.train_file: each query's num_negatives best-ranked passages of the file that are
    # not its positives, after its first skip_top ranks (bertlab.train writes them to <run>/negatives/).
    negatives_from: str | None = None
    num_negatives: int = 3
    skip_top: int = 0

    def __post_init__(self) -> None:
        if self.rerank:  # a cross-encoder is a sequence model with one real-valued output: its relevance score
            if self.family != "sequence":
                raise ConfigError(f"task.rerank=true needs task.family=sequence (a cross-encoder scores a (query, "
                                  f"passage) pair with the sequence head), got {self.family!r}")
            self.regression = True
            if self.rerank_loss not in RERANK_LOSSES:
                raise ConfigError(f"task.rerank_loss must be one of {', '.join(RERANK_LOSSES)}, got "
                                  f"{self.rerank_loss!r}")
        elif self.negatives_from is not None:
            raise ConfigError(f"task.negatives_from={self.negatives_from}: mined negatives train a reranker "
                              f"(task=rerank), not task={self.name}; for a bi-encoder, mine them with python -m "
                              "bertlab.retrieve RUN ... --mine-negatives N OUT and train on OUT")
        if self.family not in TASK_FAMILY_NAMES:
            raise ConfigError(f"task.family must be one of {', '.join(TASK_FAMILY_NAMES)}, got {self.family!r}")
        if self.mode not in ("min", "max"):
            raise ConfigError(f"task.mode must be 'min' or 'max', got {self.mode!r}")
        if self.labels is not None:
            self.labels = [str(x) for x in self.labels]
        if self.prompts is not None:
            self.prompts = [str(p) for p in self.prompts]
        check_fields(self, "task")


DISTILL_FAMILIES = ("sequence", "token", "qa", "multiple_choice")  # the families whose outputs a teacher can give


@dataclass
class DistillConfig:
    """Knowledge distillation (``distill.*``, docs/distillation.md): a trained teacher's outputs join the task
    loss, ``alpha`` · task loss + (1 − ``alpha``) · T² · KL(teacher ‖ student) at temperature T (MSE to the
    teacher's value for regression). ``teacher`` is None: no distillation."""

    teacher: str | None = None  # a bertlab run dir, a .ckpt file or an exported folder (export=true)
    alpha: float = 0.5  # the task loss's weight; 1 - alpha weighs the teacher's term
    temperature: float = 2.0
    # Build the student from the teacher: its embeddings, these layers (in this order) and its head (DistilBERT).
    student_layers: list[int] | None = None
    # Keep the teacher's outputs on the training split: computed in the first epoch, read in the next ones and
    # by later runs of the same teacher and data (a safetensors file under data.cache_dir).
    cache: bool = True
    # Layer matching (TinyBERT, MiniLM; bertlab.tasks.distill_match): the weights of the hidden-state MSE and of
    # the attention KL between mapped layers (0: off), and the map, the teacher layer each student layer matches
    # (None: that student layer is not matched; default: the uniform map, the top layer to the top layer).
    hidden_weight: float = 0.0
    attention_weight: float = 0.0
    layer_map: list[int | None] | None = None

    def __post_init__(self) -> None:
        check_fields(self, "distill")
        if self.layer_map is not None:
            self.layer_map = [None if x is None else int(x) for x in self.layer_map]
            if not self.matches:
                raise ConfigError(f"distill.layer_map={self.layer_map} maps the student's layers to the teacher's "
                                  "for layer matching, which is off: set distill.hidden_weight and/or "
                                  "distill.attention_weight above 0, or remove distill.layer_map")
            if all(x is None for x in self.layer_map) or any(x is not None and x < 0 for x in self.layer_map):
                raise ConfigError(f"distill.layer_map={self.layer_map}: give one teacher layer (0 or more) per "
                                  "student layer, null for a student layer left unmatched, at least one not null "
                                  "(e.g. distill.layer_map=[1,3,5] for 3 student layers of a 6-layer teacher)")
        if self.matches and self.teacher is None:
            raise ConfigError("distill.hidden_weight / distill.attention_weight match the student's layers to a "
                              "teacher's: set distill.teacher=<run dir or exported folder> too")
        if self.student_layers is not None:
            self.student_layers = [int(x) for x in self.student_layers]
            if sorted(set(self.student_layers)) != self.student_layers:
                raise ConfigError(f"distill.student_layers={self.student_layers}: give the teacher's layers to "
                                  "copy in increasing order, each once (e.g. distill.student_layers=[0,2,4])")
            if self.teacher is None:
                raise ConfigError("distill.student_layers copies layers of the teacher: set distill.teacher=<run "
                                  "dir or exported folder> too")

    @property
    def enabled(self) -> bool:
        return self.teacher is not None

    @property
    def matches(self) -> bool:
        """Whether the student's layers learn from the teacher's (hidden states and/or attention)."""
        return self.hidden_weight > 0 or self.attention_weight > 0


@dataclass
class DataConfig:
    """The data module's settings (``data.*``); a relative file is looked for from the directory the command was
    typed in, then under ``data_dir`` (:meth:`bertlab.data.files.DataFiles.resolve`)."""

    source: str = "files"  # files | hub | sample
    data_dir: str = "data"
    train_file: str | list[str] | None = None
    val_file: str | None = None
    # More labelled dev sets, each scored once with the best checkpoint into its own metrics.json block
    # (MNLI: {val_mismatched: mnli/dev_mismatched.tsv})
    val_extra_files: dict[str, str] | None = None
    test_file: str | None = None
    predict_file: str | None = None
    # Distillation (docs/distillation.md): unlabelled texts in the training file's format that join the training
    # split with the teacher's soft labels only (sequence and tagging tasks; needs distill.teacher).
    distill_file: str | None = None
    batch_size: int = 32  # per device
    eval_batch_size: int = 64  # per device
    max_seq_length: int = 128
    num_workers: int = 0
    on_bad_example: str = "error"
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    group_by_length: bool = True
    pad_to_multiple_of: int | None = None
    cache_dir: str | None = None
    # tables (an integer column is a 0-based position in a file without a header line, as GLUE's CoLA)
    text_column: str = "text"
    text_pair_column: str | None = None
    label_column: str | None = "label"
    # multiple choice (bertlab.data.choices): one column per choice, or a JSONL list field
    choice_columns: list[str] | None = None
    choice_prefix_column: str | None = None  # put before every choice (SWAG: sent2, the ending's first words)
    choices_field: str = "choices"
    # CoNLL
    tag_column: int = -1
    tag_scheme: str = "iob2"  # iob1 files are converted to IOB2 at load time
    # long text (bertlab.data.windows): windows over text longer than max_seq_length, or truncation
    long_text: str = "windows"  # windows | truncate
    window_stride: int | None = None  # tokens two windows share; None = a quarter of the window
    # The most windows a batch encodes at once (documents per batch shrink to fit; a document with more is
    # encoded in chunks of this many). None = the batch size (batch_size in training, eval_batch_size else).
    max_windows_per_batch: int | None = None
    # The most windows one example is read in (a QA context, a long document, a long token-task sentence): over
    # it, an error or (on_bad_example=skip) its first windows, counted (bertlab.data.windows.WindowCap).
    # None = no cap.
    max_windows_per_example: int | None = 128
    # QA
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False  # SQuAD 2.0: questions may have no answer ("" predicted)
    null_score_diff_threshold: float = 0.0  # answer "" when null score - best span score exceeds this
    # raw text (mlm / clm)
    text_format: str = "plain"  # plain | wikitext
    short_seq_prob: float = 0.1
    # pre-training (bertlab.data.pretrain, docs/pretraining.md): prepared once into Arrow shards read by row
    # instead of Python lists. auto: when the training files exceed stream_threshold_mb (0: any corpus) and
    # cache_dir is set.
    stream: Any = "auto"  # auto | true | false
    stream_threshold_mb: float = 0.0
    nsp_block_documents: int = 1000  # NotNext B comes from another document of the same block
    prep_num_proc: int | None = None  # preparing processes; null = every core this process may use
    # embedding: the hard-negative column of training files (absent from a file: no hard negatives), and more
    # passages for retrieval evaluation beyond the validation file's own (one a line, or a table's text column)
    negative_column: str | None = "negative"
    corpus_file: str | None = None

    def __post_init__(self) -> None:
        if self.source not in ("files", "hub", "sample"):
            raise ConfigError(f"data.source must be files, hub or sample, got {self.source!r}")
        if self.on_bad_example not in ("error", "skip"):
            raise ConfigError(f"data.on_bad_example must be 'error' or 'skip', got {self.on_bad_example!r}")
        check_fields(self, "data")  # sizes, lengths, limits, rates: by kind (bertlab.runtime.schema)
        for name in ("max_train_samples", "max_eval_samples"):
            if getattr(self, name) == -1:  # the -1 / null = all rule: never a slice [:-1]
                setattr(self, name, None)
        if self.stream not in ("auto", True, False):
            raise ConfigError(f"data.stream must be auto, true or false, got {self.stream!r}")
        if self.tag_scheme not in ("iob1", "iob2"):
            raise ConfigError(f"data.tag_scheme must be iob1 or iob2, got {self.tag_scheme!r}")
        for name in self.val_extra_files or {}:
            if name in ("val", "test", "predict", "train") or not name.replace("_", "").isalnum():
                raise ConfigError(
                    f"data.val_extra_files: {name!r} cannot name an extra dev set (it becomes a metrics.json "
                    "block): use letters, digits and '_', and none of train, val, test, predict"
                )
