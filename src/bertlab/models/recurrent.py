"""A recurrent encoder baseline behind the same heads as BERT: embeddings → a multi-layer (bi)LSTM/GRU.

The pre-Transformer way to read a sentence: every piece id is looked up in an embedding table (a one-hot row
times a matrix), then an RNN reads the pieces one after the other, carrying a hidden state; it returns a
state per position (``output``) and the state after the last step (``h_n``). Both are handed to the heads
through ``EncoderOutput``, the interface ``BertModel`` uses:

- ``last_hidden_state`` (B, T, H_out), ``H_out = hidden_size × directions``: the per-token states (token
  classification, QA spans, language modelling). Padded positions are exactly zero.
- ``pooler_output`` (B, H_out): *the sequence vector*, named by ``pooling``: ``final`` (the forward
  direction's state after the last real token, concatenated with the backward direction's state after
  reading back to the first token, i.e. ``h_n``), ``mean`` or ``max`` (over real tokens only). For a
  recurrent encoder ``head.pooling=pooler`` means this vector as it is: there is no extra dense + tanh.
- ``hidden_states``: the embeddings, then each recurrent layer's states (for ``head.layers``).

Padding never reaches a state: each batch is packed (``pack_padded_sequence``), so every sequence is read
for its own length only; the same sentence alone or padded inside a batch gives the same outputs.
Batches must be right-padded (bertlab's collator pads on the right).

Segment ids are ignored: a pair arrives packed as ``[CLS] A [SEP] B [SEP]`` and the RNN reads it in order,
the [SEP] pieces marking the boundary. There are no position embeddings either: order is the recurrence.

Submodule names follow the BERT layout where the idea is the same (``embeddings.word_embeddings``,
``encoder.layer.N``: one single-layer ``nn.LSTM``/``nn.GRU`` per layer), so freeze policies (``embeddings``,
``bottom_k``), layer-wise learning-rate decay and the update-scope audit's ``layer.N`` groups work unchanged.
LoRA does not apply (there is no ``nn.Linear`` in the encoder; see ``unsupported_freeze_policies``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from bertlab.models.encoder import EncoderOutput
from bertlab.runtime.config import ConfigError

CELLS: dict[str, type[nn.RNNBase]] = {"lstm": nn.LSTM, "gru": nn.GRU}
POOLINGS = ("final", "mean", "max")


@dataclass
class RecurrentConfig:
    """A recurrent encoder's architecture (``model.*`` of ``model=bilstm|gru|lstm``)."""

    cell: str = "lstm"  # lstm | gru
    vocab_size: int = 8000
    embedding_dim: int = 256
    hidden_size: int = 256  # per direction; the encoder's output width is hidden_size × directions
    num_layers: int = 2
    bidirectional: bool = True
    dropout: float = 0.1  # on the input of every recurrent layer (embeddings included); heads reuse it
    pad_token_id: int = 0
    pooling: str = "final"  # final | mean | max: the sequence vector given as pooler_output
    init_embeddings_from: str | None = None  # a BERT checkpoint whose word embeddings (and tokenizer) to use
    tie_word_embeddings: bool = True  # language-model heads: decoder weight = the word embeddings
    initializer_range: float = 0.02  # std of the heads' Linear layers (as BERT's heads)

    def __post_init__(self) -> None:
        if self.cell not in CELLS:
            raise ConfigError(f"model.cell must be one of {', '.join(CELLS)}, got {self.cell!r}")
        for name in ("vocab_size", "embedding_dim", "hidden_size", "num_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"model.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.bidirectional, bool):
            raise ConfigError(f"model.bidirectional must be true or false, got {self.bidirectional!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model.dropout must be in [0, 1), got {self.dropout}")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"model.pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"pad_token_id {self.pad_token_id} is outside the vocabulary of {self.vocab_size}")

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def output_size(self) -> int:
        """H_out: the width of every per-token state and of the sequence vector."""
        return self.hidden_size * self.num_directions

    def layer_width(self, index: int) -> int:
        """Width of ``hidden_states[index]``: 0 = the embeddings, 1..num_layers = the recurrent layers."""
        return self.embedding_dim if index == 0 else self.output_size


@dataclass(frozen=True)
class RecurrentHeadConfig:
    """What heads read from an encoder's config (the ``EncoderConfig`` fields they use), for a recurrent
    encoder. ``hidden_size`` is the output width H_out (per-direction size × directions), the width of the
    vectors heads receive; ``RecurrentEncoder.recurrent_config`` holds the architecture itself."""

    hidden_size: int
    vocab_size: int
    hidden_dropout_prob: float
    initializer_range: float
    pad_token_id: int
    num_hidden_layers: int
    bidirectional: bool
    tie_word_embeddings: bool
    layer_norm_eps: float = 1e-12
    encoder: str = "recurrent"

    def to_hf_dict(self) -> dict:
        # Export writes a transformers BertModel folder; no transformers class holds this encoder.
        raise ConfigError(
            "a recurrent encoder (model.encoder=recurrent) has no Hugging Face format: export=true and "
            "save_pretrained are for BERT encoders. Its run's checkpoints (checkpoints/*.ckpt) hold the model"
        )


def check_head_layers(config: RecurrentConfig, layers: str | int) -> None:
    """``head.layers`` must pick states of one width: the heads are sized for H_out.

    ``hidden_states`` holds the embeddings (width ``embedding_dim``) then ``num_layers`` recurrent layers
    (width H_out), so the four last states, or a single index, must avoid the embeddings unless both widths
    are equal.
    """
    n = config.num_layers + 1  # embeddings + layers
    if layers == "last":
        return
    if layers in ("concat_last4", "sum_last4"):
        picked = list(range(n))[-4:]
        if len(picked) < 4:
            raise ConfigError(
                f"head.layers={layers} reads the last four hidden states, but this encoder has "
                f"{config.num_layers} recurrent layers (+ embeddings): set model.num_layers >= 4 or use "
                "head.layers=last"
            )
    else:
        index = int(layers)
        if not -n <= index < n:
            raise ConfigError(f"head.layers={layers} is outside 0..{config.num_layers} (0 = the embeddings)")
        picked = [index % n]
    widths = {config.layer_width(i) for i in picked}
    if widths != {config.output_size}:
        raise ConfigError(
            f"head.layers={layers} reads the embeddings (width model.embedding_dim={config.embedding_dim}) but "
            f"the head expects the recurrent width {config.output_size} (model.hidden_size × directions): pick "
            "recurrent layers only, or make model.embedding_dim equal to that width"
        )


class RecurrentEmbeddings(nn.Module):
    """The token embedding table (no positions, no segments: the recurrence carries order)."""

    def __init__(self, config: RecurrentConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=config.pad_token_id)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.word_embeddings(input_ids)  # (B, T, E)


class RecurrentStack(nn.Module):
    """``layer.N``: one single-layer (bi)LSTM/GRU per layer, so each layer's states are available (and
    freezable) on their own. Layer N reads layer N-1's states, both directions concatenated."""

    def __init__(self, config: RecurrentConfig):
        super().__init__()
        cell = CELLS[config.cell]
        self.layer = nn.ModuleList(
            cell(config.embedding_dim if i == 0 else config.output_size, config.hidden_size, num_layers=1,
                 batch_first=True, bidirectional=config.bidirectional)
            for i in range(config.num_layers)
        )


def sequence_lengths(attention_mask: torch.Tensor | None, batch: int, seq_len: int) -> torch.Tensor:
    """(B,) int64 on the CPU (what ``pack_padded_sequence`` wants): the real tokens of each row.

    The mask must be right-padded (ones then zeros) with at least one real token per row: a left-padded
    batch would be read from its padding, so it is an error rather than a silent change of outputs.
    """
    if attention_mask is None:
        return torch.full((batch,), seq_len, dtype=torch.long)
    mask = attention_mask.detach().to("cpu", torch.long)
    lengths = mask.sum(1)
    if bool((lengths == 0).any()):
        raise ValueError("a row of the batch has no real token (attention_mask all zero)")
    expected = (torch.arange(seq_len)[None, :] < lengths[:, None]).long()
    if not torch.equal(mask, expected):
        raise ValueError("the recurrent encoder needs right-padded batches (attention_mask = ones, then zeros)")
    return lengths


class RecurrentEncoder(nn.Module):
    """Embeddings + a packed multi-layer (bi)LSTM/GRU: ``forward(input_ids, attention_mask, token_type_ids)``
    → ``EncoderOutput`` as ``BertModel`` gives it (see the module docstring for what each field means)."""

    # Freeze policies that do not apply, with the reason (``bertlab.training.freeze.apply_freeze`` raises it).
    unsupported_freeze_policies = {
        "lora": "LoRA adds low-rank adapters to nn.Linear layers (BERT's attention query/value); a recurrent "
                "encoder has no nn.Linear, its gates being the fused weight_ih/weight_hh matrices of nn.LSTM / "
                "nn.GRU. Use freeze=none, encoder, embeddings, bottom_k or bitfit",
    }

    def __init__(self, config: RecurrentConfig):
        super().__init__()
        self.recurrent_config = config
        # The view heads read (hidden_size = H_out), also what a run records as its encoder_config.
        self.config = RecurrentHeadConfig(
            hidden_size=config.output_size, vocab_size=config.vocab_size, hidden_dropout_prob=config.dropout,
            initializer_range=config.initializer_range, pad_token_id=config.pad_token_id,
            num_hidden_layers=config.num_layers, bidirectional=config.bidirectional,
            tie_word_embeddings=config.tie_word_embeddings,
        )
        self.embeddings = RecurrentEmbeddings(config)
        self.encoder = RecurrentStack(config)
        self.dropout = nn.Dropout(config.dropout)
        self._init_weights()

    def _init_weights(self) -> None:
        # Embeddings U(-0.1, 0.1) as in the classic LSTM language models (Zaremba et al. 2014; AWD-LSTM);
        # recurrent weights keep PyTorch's U(-1/sqrt(H), 1/sqrt(H)).
        embedding = self.embeddings.word_embeddings
        nn.init.uniform_(embedding.weight, -0.1, 0.1)
        with torch.no_grad():
            embedding.weight[embedding.padding_idx].zero_()
            if self.recurrent_config.cell == "lstm":
                # Forget-gate bias 1 (Jozefowicz et al. 2015): the cell keeps its memory early in training.
                # PyTorch's gate order is (input, forget, cell, output); the two biases add up.
                h = self.recurrent_config.hidden_size
                for layer in self.encoder.layer:
                    for name, p in layer.named_parameters():
                        if name.startswith("bias_ih"):
                            p[h:2 * h].fill_(1.0)
                        elif name.startswith("bias_hh"):
                            p[h:2 * h].zero_()

    @property
    def rnn(self) -> nn.ModuleList:
        """The recurrent layers (``encoder.layer``)."""
        return self.encoder.layer

    @property
    def hidden_size(self) -> int:
        return self.recurrent_config.output_size

    @property
    def num_layers(self) -> int:
        return self.recurrent_config.num_layers

    def load_word_embeddings(self, weight: torch.Tensor) -> None:
        """Copy a (V, E) table (e.g. a BERT checkpoint's word embeddings) into ``embeddings.word_embeddings``."""
        table = self.embeddings.word_embeddings.weight
        if tuple(weight.shape) != tuple(table.shape):
            raise ConfigError(
                f"word embeddings of shape {tuple(weight.shape)} do not fit the encoder's table "
                f"{tuple(table.shape)} (model.vocab_size × model.embedding_dim)"
            )
        with torch.no_grad():
            table.copy_(weight.to(table.dtype))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> EncoderOutput:
        """input_ids, attention_mask: (B, T), right-padded; token_type_ids are ignored (pairs are read in
        order). → last_hidden_state (B, T, H_out), zero at padding; pooler_output (B, H_out)."""
        batch, seq_len = input_ids.shape
        lengths = sequence_lengths(attention_mask, batch, seq_len)  # (B,) on the CPU
        real = (torch.arange(seq_len)[None, :] < lengths[:, None]).to(input_ids.device)  # (B, T) bool
        embedded = self.embeddings(input_ids) * real[..., None]  # (B, T, E), zero at padding
        all_hidden = [embedded] if output_hidden_states else None
        # Pack once: each layer reads every sequence for its own length only (no state ever sees padding).
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        final = None
        for layer in self.encoder.layer:
            packed = PackedSequence(self.dropout(packed.data), packed.batch_sizes, packed.sorted_indices,
                                    packed.unsorted_indices)
            packed, h_n = layer(packed)
            final = h_n[0] if isinstance(h_n, tuple) else h_n  # LSTM: (h_n, c_n); (directions, B, H)
            if all_hidden is not None:
                all_hidden.append(self._unpack(packed, seq_len))
        hidden = all_hidden[-1] if all_hidden is not None else self._unpack(packed, seq_len)
        pooled = self._pool(hidden, real, lengths, final)
        return EncoderOutput(hidden, pooled, tuple(all_hidden) if all_hidden is not None else None)

    @staticmethod
    def _unpack(packed: PackedSequence, seq_len: int) -> torch.Tensor:
        hidden, _ = pad_packed_sequence(packed, batch_first=True, total_length=seq_len)
        return hidden  # (B, T, H_out), zeros at padding

    def _pool(self, hidden: torch.Tensor, real: torch.Tensor, lengths: torch.Tensor,
              final: torch.Tensor) -> torch.Tensor:
        """The sequence vector (B, H_out) named by ``pooling``."""
        pooling = self.recurrent_config.pooling
        if pooling == "final":
            # h_n is in the batch's own order (PyTorch undoes the packing sort): forward = after the last
            # real token, backward = after reading back to the first one.
            return torch.cat(list(final), dim=-1)  # (directions, B, H) → (B, H_out)
        if pooling == "mean":
            return hidden.sum(1) / lengths.to(hidden.device, hidden.dtype)[:, None]  # padding is zero
        return hidden.masked_fill(~real[..., None], float("-inf")).amax(1)  # max over real tokens


__all__ = [
    "CELLS",
    "POOLINGS",
    "RecurrentConfig",
    "RecurrentHeadConfig",
    "RecurrentEncoder",
    "check_head_layers",
    "sequence_lengths",
]
