"""Task heads on the shared encoder, and the model that pairs them.

A head does two things, kept apart so frozen features can be cached: ``features(enc)`` picks what it reads
from the encoder output (pooler, raw [CLS], per-token states, one or several layers), and ``forward(x)``
turns those features into logits. Parameter names of the stock layouts are Hugging Face's
(``classifier``, ``qa_outputs``, ``predictions.*``, ``seq_relationship``) so exports load in
``transformers.AutoModelFor<Task>``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from bertlab.models.encoder import Encoder, EncoderOutput
from bertlab.models.families import family_spec, is_native
from bertlab.runtime.config import EncoderConfig, HeadConfig


def select_layers(enc: EncoderOutput, layers: str | int) -> torch.Tensor:
    """The per-token features a head reads: (B, T, H), or (B, T, 4H) for concat_last4.

    ``concat_last4`` / ``sum_last4`` follow the BERT paper's feature-based comparison (§5.3, Table 7); an
    integer picks one layer (0 = embeddings output, L = last layer, negative counts from the end).
    """
    if layers == "last":
        return enc.last_hidden_state
    if enc.hidden_states is None:
        raise ValueError("head.layers needs all hidden states: call the encoder with output_hidden_states=True")
    if layers == "concat_last4":
        return torch.cat(enc.hidden_states[-4:], dim=-1)  # (B, T, 4H)
    if layers == "sum_last4":
        return torch.stack(enc.hidden_states[-4:], dim=0).sum(0)  # (B, T, H)
    return enc.hidden_states[int(layers)]


def _mlp(in_dim: int, hidden_dim: int, depth: int, dropout: float) -> nn.Sequential:
    """``depth`` hidden layers (Linear → GELU → Dropout): the MLP probe of the feature-based comparison."""
    blocks: list[nn.Module] = []
    for i in range(depth):
        blocks += [nn.Linear(in_dim if i == 0 else hidden_dim, hidden_dim), nn.GELU(), nn.Dropout(dropout)]
    return nn.Sequential(*blocks)


def _add_classifier(module: nn.Module, config: EncoderConfig, head: HeadConfig, num_labels: int,
                    classifier_dropout: bool = False, in_dim: int | None = None) -> None:
    """dropout → [MLP probe] → ``classifier`` on ``module``, named as HF's heads (so exports load there).

    The dropout: ``head.dropout``, else (``classifier_dropout``: sequence and choice heads, and every head of a
    family whose heads start with a transform of their own) the family's classifier dropout from config.json,
    else the encoder's hidden dropout, as the families' HF heads choose it. ``in_dim``: the width of what the
    classifier reads (default: the features').
    """
    family_default = getattr(config, "classifier_dropout", None) if classifier_dropout else None
    dropout = head.dropout if head.dropout is not None else (
        family_default if family_default is not None else config.hidden_dropout_prob)
    in_dim = config.hidden_size * head.feature_multiplier if in_dim is None else in_dim
    module.dropout = nn.Dropout(dropout)
    module.mlp = _mlp(in_dim, config.hidden_size, head.hidden_layers, dropout) if head.hidden_layers else None
    module.classifier = nn.Linear(config.hidden_size if module.mlp is not None else in_dim, num_labels)
    _init_linear(module, config.initializer_range)


def _classify(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    x = module.dropout(x)
    if module.mlp is not None:
        x = module.mlp(x)
    return module.classifier(x)


def masked_mean(x: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of (B, T, D) over the real positions of each row (padding excluded) → (B, D)."""
    if attention_mask is None:
        return x.mean(1)
    weights = attention_mask.to(x.dtype).unsqueeze(-1)  # (B, T, 1)
    return (x * weights).sum(1) / weights.sum(1).clamp_min(1.0)


def pooler_style(config: object, head_kind: str) -> str:
    """How ``head.pooling=pooler`` turns the first token into a sentence vector for this encoder: ``encoder`` (the
    encoder's own pooler: BERT's dense + tanh, a recurrent encoder's sequence vector) or a dense layer of the head
    (``dense_tanh`` RoBERTa, ``dense_gelu`` ELECTRA, ``dense_relu`` DistilBERT, ``context_pooler`` DeBERTa), as the
    family's HF heads do."""
    model_type = getattr(config, "model_type", None)
    return family_spec(model_type).pooler_style(head_kind) if model_type and is_native(model_type) else "encoder"


def token_transform(config: object) -> str | None:
    """The transform a family's token-level heads (token classification, span) apply at every position before
    their classifier: None, or ``dense_gelu_norm`` (ModernBERT)."""
    model_type = getattr(config, "model_type", None)
    return family_spec(model_type).token_transform if model_type and is_native(model_type) else None


_POOLER_ACTIVATIONS = {"dense_tanh": torch.tanh, "dense_gelu": nn.functional.gelu, "dense_relu": torch.relu,
                       "context_pooler": nn.functional.gelu}


def _add_prediction_head(module: nn.Module, config: EncoderConfig, in_dim: int) -> None:
    """ModernBERT's prediction head on ``module``: ``dense`` (in_dim → H) → GELU → ``norm``, with biases as the
    config says (``classifier_bias``, ``norm_bias``: none in ModernBERT's checkpoints)."""
    module.dense = nn.Linear(in_dim, config.hidden_size, bias=getattr(config, "classifier_bias", True))
    module.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=getattr(config, "norm_bias", True))
    _init_linear(module.dense, config.initializer_range)


def _prediction_head(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return module.norm(nn.functional.gelu(module.dense(x)))


class WindowPooling(nn.Module):
    """A long document's windows → one row (``model.window_pooling``), over the vectors the head reads, or over
    the windows' logits for ``max_logits`` (``after_classifier``: each window is classified alone and a document
    takes, per label, its strongest window's logit, so windows with no evidence for a label do not blur the one
    that has it).

    ``x``: (W, D), one row per window; ``window_doc``: (W,) the document of each row (0..N-1, every document
    with a row). Returns (N, D): the element-wise ``max`` (also ``max_logits``), the ``mean``, or an
    ``attention``-weighted sum (a learned score per window, softmax over the document's windows). A document of
    one window gets its row back unchanged in every mode (max over one row, weight exactly 1), so a text that
    fits the window is classified as on the plain path. Computed with an (N, W) membership mask, so the same code traces to ONNX
    (no scatter-max, whose ONNX form needs opset 18) and never casts: autocast leaves where/mul/sum alone.
    """

    def __init__(self, mode: str, width: int, initializer_range: float = 0.02):
        super().__init__()
        self.mode = mode
        # No bias: a constant added to every window's score leaves the softmax as it is (its gradient is zero
        # but for rounding, which Adam would turn into full-size steps).
        self.score = nn.Linear(width, 1, bias=False) if mode == "attention" else None
        if self.score is not None:
            _init_linear(self.score, initializer_range)

    @property
    def after_classifier(self) -> bool:
        """Whether this pools the windows' logits (``max_logits``) rather than the vectors the classifier reads."""
        return self.mode == "max_logits"

    def forward(self, x: torch.Tensor, window_doc: torch.Tensor) -> torch.Tensor:
        docs = torch.arange(window_doc.max() + 1, device=x.device)  # (N,): traced as a Range over the input
        member = docs[:, None] == window_doc[None, :]  # (N, W)
        if self.mode in ("max", "max_logits"):
            return torch.where(member[..., None], x[None], torch.finfo(x.dtype).min).amax(1)
        if self.mode == "mean":
            weights = member.to(x.dtype) / member.sum(1, keepdim=True).to(x.dtype)
        else:
            scores = self.score(x).float().squeeze(-1)  # (W,)
            weights = torch.softmax(scores[None].masked_fill(~member, float("-inf")), dim=-1).to(x.dtype)
        return (weights[..., None] * x[None]).sum(1)  # (N, D)


class SequenceClassificationHead(nn.Module):
    """[CLS] → (pooler | raw), or the mean over real tokens → dropout → [MLP] → linear. ``num_labels=1`` is regression.

    ``pooling=pooler`` is the family's own head: with a linear head it is exactly ``BertForSequenceClassification``
    (the encoder's pooler), ``RobertaForSequenceClassification`` (dropout → ``dense`` → tanh → dropout →
    ``classifier``), ``ElectraForSequenceClassification`` (the same with GELU) or
    ``DistilBertForSequenceClassification`` (``dense`` → ReLU → dropout → ``classifier``) or
    ``DebertaV2ForSequenceClassification`` (the ContextPooler: its own dropout → ``dense`` → GELU, then dropout →
    ``classifier``).
    """

    head_kind = "sequence"

    def __init__(self, config: EncoderConfig, head: HeadConfig, num_labels: int, windows: bool = True):
        super().__init__()
        self.pooling, self.layers = head.pooling, head.layers
        # Long documents (data.long_text=windows): the windows' vectors pooled into one per document.
        self.windows = WindowPooling(head.window_pooling, config.hidden_size * head.feature_multiplier,
                                     config.initializer_range) if windows else None
        self.style = pooler_style(config, self.head_kind) if head.pooling == "pooler" else None
        # ModernBERT's heads pool the tokens as its config says: [CLS] or the mean of the real tokens.
        self.mean = head.pooling == "mean" or (self.style == "dense_gelu_norm"
                                               and getattr(config, "classifier_pooling", "cls") == "mean")
        _add_classifier(self, config, head, num_labels, classifier_dropout=True)
        # The family's first-token transform when it belongs to the head (not to the encoder).
        self.dense = nn.Linear(config.hidden_size, config.hidden_size) if self.style in _POOLER_ACTIVATIONS else None
        self.norm = None
        if self.dense is not None:
            _init_linear(self.dense, config.initializer_range)
        if self.style == "dense_gelu_norm":
            _add_prediction_head(self, config, config.hidden_size * head.feature_multiplier)
        # DeBERTa's ContextPooler drops out before its dense layer with a rate of its own.
        self.pooler_dropout = nn.Dropout(getattr(config, "pooler_dropout", 0.0)) \
            if self.style == "context_pooler" else None

    @property
    def reads_attention_mask(self) -> bool:
        return self.mean

    @property
    def reads_first_token_only(self) -> bool:
        """The pooler and raw [CLS] read the last layer at position 0 alone (``BertModel``'s first_token_only)."""
        return self.pooling in ("pooler", "cls") and self.layers == "last" and not self.mean

    @property
    def reads_encoder_pooler(self) -> bool:
        """Whether the encoder must be built with its pooler for this head."""
        return self.style == "encoder"

    def features(self, enc: EncoderOutput, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.style == "encoder":
            if enc.pooler_output is None:
                raise ValueError("head.pooling=pooler but the encoder was built without a pooler")
            return enc.pooler_output  # (B, H)
        if self.mean:
            return masked_mean(select_layers(enc, self.layers), attention_mask)  # (B, H·m)
        return select_layers(enc, self.layers)[:, 0]  # (B, H·m): the raw [CLS] vector

    def _pool(self, x: torch.Tensor) -> torch.Tensor:
        """The family's first-token transform owned by the head (identity for the others)."""
        if self.dense is None:
            return x
        if self.style == "dense_gelu_norm":  # ModernBERT: dense → GELU → norm, then the classifier's dropout
            return _prediction_head(self, x)
        if self.style == "dense_relu":  # DistilBERT: pre_classifier → ReLU, then the classifier's dropout
            return torch.relu(self.dense(x))
        if self.style == "context_pooler":  # DeBERTa: pooler dropout → dense → GELU, then the classifier's dropout
            return nn.functional.gelu(self.dense(self.pooler_dropout(x)))
        return _POOLER_ACTIVATIONS[self.style](self.dense(self.dropout(x)))  # RoBERTa / ELECTRA: dropout first

    def forward(self, x: torch.Tensor, window_doc: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, D), or (W, D) windows of documents with ``window_doc`` (W,) their documents → (N, num_labels)."""
        if window_doc is not None and self.windows.after_classifier:
            return self.windows(self.forward(x), window_doc)  # each window's logits, then per label the max
        if window_doc is not None:
            x = self.windows(x, window_doc)  # (N, D): one vector per document
        # Logits in float32 as the other heads' (a bf16/fp16 logit keeps ~3 significant digits: ties, coarse loss).
        return _classify(self, self._pool(x)).float()  # (B, num_labels)


class MultipleChoiceHead(SequenceClassificationHead):
    """``BertForMultipleChoice``: each (context, choice) row is read as a sentence pair (pooler by default), one
    shared linear layer scores it, and the scores of an example's choices form its logits (softmax over them).

    ``forward(x, num_choices)`` takes the features of B·C rows and returns (B, C) float32 scores.
    """

    head_kind = "multiple_choice"

    def __init__(self, config: EncoderConfig, head: HeadConfig):
        super().__init__(config, head, num_labels=1, windows=False)

    def forward(self, x: torch.Tensor, num_choices: int) -> torch.Tensor:
        return _classify(self, self._pool(x)).float().view(-1, num_choices)  # (B, C)


class TokenClassificationHead(nn.Module):
    """One linear layer shared by every position (``BertForTokenClassification``), optionally an MLP probe; for a
    family whose token heads start with a transform (ModernBERT's ``dense`` → GELU → ``norm``), that first."""

    def __init__(self, config: EncoderConfig, head: HeadConfig, num_labels: int):
        super().__init__()
        self.layers = head.layers
        in_dim = config.hidden_size * head.feature_multiplier
        self.dense = self.norm = None
        if token_transform(config) == "dense_gelu_norm":
            _add_prediction_head(self, config, in_dim)
            in_dim = config.hidden_size
        _add_classifier(self, config, head, num_labels, classifier_dropout=self.dense is not None, in_dim=in_dim)

    def features(self, enc: EncoderOutput) -> torch.Tensor:
        return select_layers(enc, self.layers)  # (B, T, H·m)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dense is not None:
            x = _prediction_head(self, x)  # (B, T, H)
        # Tag logits in float32: half-precision logits are a known source of NaN/low scores in NER.
        return _classify(self, x).float()  # (B, T, num_labels)


class SpanHead(nn.Module):
    """Start and end scores per position: two weight vectors shared across positions (``qa_outputs``); for a
    family whose token heads start with a transform (ModernBERT), that and its classifier dropout first."""

    def __init__(self, config: EncoderConfig, head: HeadConfig):
        super().__init__()
        self.layers = head.layers
        in_dim = config.hidden_size * head.feature_multiplier
        self.dense = self.norm = self.dropout = None
        if token_transform(config) == "dense_gelu_norm":
            _add_prediction_head(self, config, in_dim)
            in_dim = config.hidden_size
            p = head.dropout if head.dropout is not None else getattr(config, "classifier_dropout", None)
            self.dropout = nn.Dropout(p if p is not None else config.hidden_dropout_prob)
        self.mlp = _mlp(in_dim, config.hidden_size, head.hidden_layers, 0.0) if head.hidden_layers else None
        self.qa_outputs = nn.Linear(config.hidden_size if self.mlp is not None else in_dim, 2)
        _init_linear(self, config.initializer_range)

    def features(self, enc: EncoderOutput) -> torch.Tensor:
        return select_layers(enc, self.layers)  # (B, T, H·m)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dense is not None:
            x = self.dropout(_prediction_head(self, x))  # (B, T, H)
        if self.mlp is not None:
            x = self.mlp(x)
        # Span logits in float32 (half-precision span scores break SQuAD post-processing).
        return self.qa_outputs(x).float()  # (B, T, 2): [..., 0] start, [..., 1] end


class PredictionHeadTransform(nn.Module):
    """dense → GELU → LayerNorm, to the width of the word embeddings the decoder is tied to (ELECTRA's generator
    maps the hidden size down to its embedding size here)."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        width = getattr(config, "embedding_width", config.hidden_size)
        # Biases as the config says (ModernBERT's prediction head has none: classifier_bias, norm_bias).
        self.dense = nn.Linear(config.hidden_size, width, bias=getattr(config, "classifier_bias", True))
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps, bias=getattr(config, "norm_bias", True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(nn.functional.gelu(self.dense(x)))


class LMPrediction(nn.Module):
    """transform → decoder tied to the word embeddings + an output bias (HF ``BertLMPredictionHead``)."""

    def __init__(self, config: EncoderConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.transform = PredictionHeadTransform(config)
        self.decoder = nn.Linear(word_embeddings.weight.shape[1], config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied: one Parameter, two names in state_dict
        # An output bias unless the config says the decoder has none (ModernBERT's decoder_bias).
        self.bias = nn.Parameter(torch.zeros(config.vocab_size)) if getattr(config, "decoder_bias", True) else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.decoder(self.transform(x))
        return logits + self.bias if self.bias is not None else logits


class PreTrainingHead(nn.Module):
    """MLM (+ NSP on the pooler when ``nsp``): HF ``BertPreTrainingHeads`` / ``BertOnlyMLMHead``.

    ``forward`` scores only the positions given (the ~15 % selected for MLM), which skips the vocabulary
    projection for the other 85 % of tokens: that projection is the single largest matmul of a small BERT.
    """

    def __init__(self, config: EncoderConfig, word_embeddings: nn.Embedding, nsp: bool):
        super().__init__()
        self.predictions = LMPrediction(config, word_embeddings)
        self.seq_relationship = nn.Linear(config.hidden_size, 2) if nsp else None
        _init_linear(self.predictions.transform, config.initializer_range)
        if self.seq_relationship is not None:
            _init_linear(self.seq_relationship, config.initializer_range)

    def features(self, enc: EncoderOutput) -> tuple[torch.Tensor, torch.Tensor | None]:
        return enc.last_hidden_state, enc.pooler_output

    def forward(
        self, x: tuple[torch.Tensor, torch.Tensor | None], positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """positions: (N, 2) [batch, token] indices to score; None scores every position.

        Returns MLM logits (N, V) or (B, T, V), and NSP logits (B, 2) or None, both float32.
        """
        hidden, pooled = x
        if positions is not None:
            hidden = hidden[positions[:, 0], positions[:, 1]]  # (N, H)
        mlm = self.predictions(hidden).float()
        nsp = self.seq_relationship(pooled).float() if self.seq_relationship is not None else None
        return mlm, nsp


class CausalLMHead(nn.Module):
    """Next-token decoder for a left-to-right encoder: dropout → linear to the vocabulary (+ bias).

    ``tie=True`` shares the decoder weight with the word embeddings (Press & Wolf 2017; Inan et al. 2017), with
    a linear projection from the encoder width to the embedding width first when they differ; ``tie=False``
    gives the decoder its own weight. Like ``PreTrainingHead``, ``forward`` scores only the positions given.
    """

    def __init__(self, config: EncoderConfig, word_embeddings: nn.Embedding, tie: bool = True):
        super().__init__()
        vocab_size, embedding_dim = word_embeddings.weight.shape
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.projection = nn.Linear(config.hidden_size, embedding_dim) \
            if tie and config.hidden_size != embedding_dim else None
        self.decoder = nn.Linear(embedding_dim if tie else config.hidden_size, vocab_size)
        _init_linear(self, config.initializer_range)  # before tying: it must not re-draw the embeddings
        if tie:
            self.decoder.weight = word_embeddings.weight  # one Parameter, two names in state_dict

    def features(self, enc: EncoderOutput) -> torch.Tensor:
        return enc.last_hidden_state  # (B, T, H)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, T, H); positions: (N, 2) [batch, token] indices to score, None = every position.

        Returns float32 logits (N, V) or (B, T, V).
        """
        if positions is not None:
            x = x[positions[:, 0], positions[:, 1]]  # (N, H)
        x = self.dropout(x)
        if self.projection is not None:
            x = self.projection(x)  # (..., E)
        return self.decoder(x).float()


def _init_linear(module: nn.Module, std: float) -> None:
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            if m.bias is not None:  # LayerNorm(bias=False): ModernBERT's
                nn.init.zeros_(m.bias)


class TaskModel(nn.Module):
    """The shared encoder (``encoder``: any :class:`~bertlab.models.encoder.Encoder` — a native family, the generic
    AutoModel path or a recurrent one) and one task head (``head``). Its state dict's keys are ``encoder.*`` and
    ``head.*`` (:mod:`bertlab.models.keys`); ``models.hf_weights`` maps them to each family's transformers layout."""

    def __init__(self, encoder: Encoder, head: nn.Module, head_kind: str | None, output_hidden_states: bool = False):
        super().__init__()
        self.encoder = encoder
        self.head = head
        self.head_kind = head_kind  # "sequence" | "token" | "span" | "mlm" | "pretraining" | None (custom, rtd)
        self.output_hidden_states = output_hidden_states

    def encode(self, batch: dict[str, torch.Tensor]):
        ids, mask, types = batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")
        if ids.dim() == 3:  # multiple choice (B, C, T): the encoder reads the B·C (context, choice) rows
            ids, mask, types = (None if t is None else t.flatten(0, 1) for t in (ids, mask, types))
        chunk = batch.get("window_chunk")
        if chunk and ids.shape[0] > chunk:
            return self._encode_chunks(ids, mask, types, int(chunk))
        return self._encode(ids, mask, types)

    def _encode_chunks(self, ids, mask, types, chunk: int) -> torch.Tensor:
        """The windows of a document longer than a batch may encode at once (``window_chunk`` rows at a time).
        While training, each chunk runs under activation checkpointing: only the chunks' pooled vectors stay in
        memory, each chunk is computed again in the backward pass (same dropout: the RNG state is restored)."""
        grads = torch.is_grad_enabled() and any(p.requires_grad for p in self.encoder.parameters())
        parts = []
        for start in range(0, ids.shape[0], chunk):
            rows = [None if t is None else t[start:start + chunk] for t in (ids, mask, types)]
            parts.append(checkpoint(self._encode, *rows, use_reentrant=False) if grads else self._encode(*rows))
        return torch.cat(parts)

    def _encode(self, ids, mask, types):
        kwargs = {"output_hidden_states": self.output_hidden_states}
        if (getattr(self.head, "reads_first_token_only", False) and not self.output_hidden_states
                and getattr(self.encoder, "computes_first_token_only", False)):
            kwargs["first_token_only"] = True  # the encoder may skip the last layer's other positions
        enc = self.encoder(ids, attention_mask=mask, token_type_ids=types, **kwargs)
        if getattr(self.head, "reads_attention_mask", False):  # mean pooling: padding must not count
            return self.head.features(enc, mask)
        return self.head.features(enc)

    def forward(self, batch: dict[str, torch.Tensor], **head_kwargs):
        corrupt = getattr(self.head, "corrupt", None)
        if corrupt is not None:  # replaced-token detection: the head's generator writes what the encoder reads
            batch, head_kwargs = corrupt(batch, **head_kwargs)
        return self.head(self.encode(batch), **head_kwargs)
