"""Replaced-token detection (ELECTRA, Clark et al. 2020): a small generator fills the masked positions with
sampled tokens, and the run's encoder — the discriminator, the model that is fine-tuned afterwards — tells
for every token whether it is the original or a replacement.

The discriminator is the ``TaskModel``'s own encoder (``encoder.*``, the same tensors and names as any other
run's encoder, so ``model.init_from`` takes it as it takes a masked-LM run's). Everything else lives in the head
(``head.*``, which ``init_from`` drops):

* ``head.generator``: an encoder of the same family, ``generator_size`` times as wide (hidden size,
  attention heads and feed-forward scaled alike) and as deep as the discriminator unless ``generator_layers``
  says otherwise. Its embeddings ARE the discriminator's (one module, ELECTRA's tied embeddings), projected to
  the generator's width: by a BERT-shaped generator's own ``embeddings_project``, or, for a family whose
  encoder has no such layer (ModernBERT), by :class:`SharedEmbeddings`'s ``project`` around the shared module.
* ``head.generator_head``: its masked-LM head, whose decoder is tied to the shared word embeddings.
* ``head.discriminator_predictions``: ``dense`` → GELU → ``dense_prediction`` (one logit per token), HF's
  ``ElectraDiscriminatorPredictions``.

Replacements are drawn from the generator's distribution (softmax of its logits / ``temperature``) without a
gradient through the draw; the padding token is never drawn (RoBERTa-style positions count non-padding ids).
While training the draw uses torch's global RNG (saved in checkpoints: a resumed run draws the same tokens);
in evaluation each example draws from its own generator seeded by its index, so a validation pass neither
depends on the batch it lands in nor moves the training RNG.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from bertlab.models.families import families, family_spec, is_native
from bertlab.models.heads import PreTrainingHead, _init_linear
from bertlab.runtime.config import EncoderConfig, largest_divisor
from bertlab.runtime.errors import ConfigError


class RTDOutput(NamedTuple):
    """What the RTD model computes on a batch: the generator's logits at the masked positions (N, V) float32,
    the discriminator's logit per token (B, T) float32, and the input the discriminator read (B, T)."""

    generator_logits: torch.Tensor
    logits: torch.Tensor
    corrupted: torch.Tensor


def generator_config(config: EncoderConfig, size: float, layers: int | None = None) -> EncoderConfig:
    """The generator's architecture: ``config`` with hidden size, attention heads and feed-forward size scaled by
    ``size`` (at least 1 each; heads lowered until they divide the hidden size), ``layers`` layers (None: as
    many as the discriminator), and embeddings as wide as the discriminator's, whose module it shares."""
    if not 0 < size <= 1:
        raise ConfigError(f"task.generator_size={size}: the generator's width as a share of the discriminator's must "
                          "be a number in (0, 1]; ELECTRA's is 0.25")
    hidden = max(1, round(config.hidden_size * size))
    heads = largest_divisor(hidden, round(config.num_attention_heads * size))
    return dataclasses.replace(
        config, hidden_size=hidden, num_attention_heads=heads,
        intermediate_size=max(1, round(config.intermediate_size * size)),
        num_hidden_layers=config.num_hidden_layers if layers is None else int(layers),
        embedding_size=config.embedding_width)


def _shares_embeddings(model_type: str) -> bool:
    """Whether a family's encoder can be a discriminator: its spec says how a narrower generator shares its
    embeddings (``FamilySpec.rtd_generator``)."""
    return family_spec(model_type).rtd_generator is not None


def check_discriminator(config: object) -> None:
    """task=rtd needs an encoder whose embeddings a smaller generator of the same family can share."""
    model_type = getattr(config, "model_type", None)
    shaped = isinstance(config, EncoderConfig) and model_type and is_native(model_type) \
        and _shares_embeddings(model_type)
    if not shaped:
        what = f"a {model_type} encoder" if model_type else f"a {type(config).__name__} encoder"
        able = ", ".join(name for name, spec in families().items() if spec.rtd_generator is not None)
        raise ConfigError(
            f"task=rtd pre-trains an encoder of a family whose embeddings a smaller generator can share ({able}): "
            f"its generator is a smaller copy of the discriminator sharing its embeddings, and this run builds "
            f"{what}. Use one of those (e.g. model=bert_mini or model=modernbert_tiny), or task=mlm for this one")


class SharedEmbeddings(nn.Module):
    """The discriminator's embeddings module (shared, not copied) followed by a linear projection to the
    generator's width, for an encoder family without its own ``embeddings_project``. Called as the family's
    embeddings are (``forward(input_ids, packing)``), and exposes the shared ``word_embeddings`` table."""

    def __init__(self, shared: nn.Module, width: int, initializer_range: float):
        super().__init__()
        self.shared = shared
        self.project = nn.Linear(shared.word_embeddings.embedding_dim, width)
        _init_linear(self.project, initializer_range)

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.shared.word_embeddings

    def forward(self, input_ids: torch.Tensor, packing=None) -> torch.Tensor:
        return self.project(self.shared(input_ids, packing))


class DiscriminatorPredictions(nn.Module):
    """dense → GELU → ``dense_prediction``: one logit per token, "replaced" when positive (HF's
    ``ElectraDiscriminatorPredictions``)."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)
        _init_linear(self, config.initializer_range)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(nn.functional.gelu(self.dense(hidden))).squeeze(-1).float()  # (B, T)


def _draw_per_example(probs: torch.Tensor, index: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """One draw per masked position (``probs`` (N, V), ``rows`` (N,) the batch row of each, in order), each
    example's from a generator seeded by its index (``index`` (B,)): the same draws in any batch."""
    probs, rows = probs.cpu(), rows.cpu()
    drawn = torch.empty(len(rows), dtype=torch.long)
    for row, example in enumerate(index.tolist()):
        mine = rows == row
        if bool(mine.any()):
            seed = int(np.random.SeedSequence([example, 0x525444]).generate_state(1)[0])
            drawn[mine] = torch.multinomial(probs[mine], 1, generator=torch.Generator().manual_seed(seed))[:, 0]
    return drawn


class ReplacedTokenDetectionHead(nn.Module):
    """The generator (its encoder and MLM head) and the discriminator's per-token classifier; see the module's
    docstring. :meth:`attach` builds the generator on the discriminator's embeddings (``assemble.with_head``
    calls it); :meth:`corrupt` writes the discriminator's input; ``forward`` classifies every token."""

    def __init__(self, config: EncoderConfig, size: float = 0.25, layers: int | None = None,
                 temperature: float = 1.0):
        super().__init__()
        check_discriminator(config)
        self.generator_config = generator_config(config, size, layers)
        self.temperature = float(temperature)
        self.pad_token_id = config.pad_token_id
        self.discriminator_predictions = DiscriminatorPredictions(config)
        self.generator: nn.Module | None = None
        self.generator_head: PreTrainingHead | None = None

    def attach(self, encoder: nn.Module) -> None:
        """Build the generator with the discriminator's kernels and unpadded-path setting, and share the
        discriminator's embeddings module with it (one set of tensors, trained by both losses)."""
        config = getattr(encoder, "config", None)
        check_discriminator(config or encoder)
        spec = family_spec(config.model_type)
        if not isinstance(encoder, spec.encoder_type):
            raise ConfigError(f"task=rtd: the discriminator is a {type(encoder).__name__}, not the "
                              f"{config.model_type} family's encoder")
        generator = spec.build_encoder(
            self.generator_config, add_pooling_layer=False, unpad=encoder.unpad, kernels=encoder.kernels)
        # tied: the generator's own (fresh) embeddings are dropped
        if spec.rtd_generator == "own_projection":  # projects to its width itself (embeddings_project)
            generator.embeddings = encoder.embeddings
        else:
            generator.embeddings = SharedEmbeddings(encoder.embeddings, self.generator_config.hidden_size,
                                                    self.generator_config.initializer_range)
        self.generator = generator
        self.generator_head = PreTrainingHead(self.generator_config, encoder.embeddings.word_embeddings, nsp=False)

    def features(self, enc) -> torch.Tensor:
        return enc.last_hidden_state  # (B, T, H)

    def corrupt(self, batch: dict[str, torch.Tensor], positions: torch.Tensor,
                ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The masked batch → (the batch with the generator's samples at the masked ``positions`` (N, 2), the
        keyword arguments of ``forward``: the generator's logits there and the corrupted ids)."""
        if self.generator is None:
            raise RuntimeError("ReplacedTokenDetectionHead.attach(encoder) was never called")
        enc = self.generator(batch["input_ids"], attention_mask=batch.get("attention_mask"),
                             token_type_ids=batch.get("token_type_ids"))
        logits = self.generator_head((enc.last_hidden_state, None), positions=positions)[0]  # (N, V) float32
        with torch.no_grad():
            scaled = logits.detach() / self.temperature
            scaled[:, self.pad_token_id] = float("-inf")  # padding is never a replacement
            probs = torch.softmax(scaled, dim=-1)  # (N, V)
            corrupted = batch["input_ids"].clone()
            if len(positions):
                sampled = torch.multinomial(probs, 1)[:, 0] if self.training else \
                    _draw_per_example(probs, batch["index"], positions[:, 0])
                corrupted[positions[:, 0], positions[:, 1]] = sampled.to(corrupted.device, corrupted.dtype)
        return {**batch, "input_ids": corrupted}, {"generator_logits": logits, "corrupted": corrupted}

    def forward(self, hidden: torch.Tensor, generator_logits: torch.Tensor, corrupted: torch.Tensor) -> RTDOutput:
        return RTDOutput(generator_logits, self.discriminator_predictions(hidden), corrupted)
