"""Layer matching for distillation (``distill.hidden_weight``, ``distill.attention_weight``, ``distill.layer_map``;
docs/distillation.md): the student's layers learn from the teacher's, as in TinyBERT and MiniLM.

Student layer s matches teacher layer ``layer_map[s]`` (layers counted from 0, the embeddings not being one;
default :func:`uniform_layer_map`: the top layer matches the top layer). Two terms join the loss of
:class:`bertlab.tasks.distill.DistilledFamily`:

- **hidden states**: ``hidden_weight`` · MSE(W·h_s, h_t) over the real tokens (padding masked), averaged over
  the mapped layers. W is one learned linear projection from the student's width to the teacher's (TinyBERT's
  W_h, shared by every layer), only when the widths differ; it trains with the student (its own optimizer group,
  in the training checkpoints so a resume continues it) and is never exported.
- **attention**: ``attention_weight`` · KL(A_t ‖ A_s) between the attention distributions of the mapped layers,
  one per (head, real query token) over the keys (padded keys have probability 0 on both sides), averaged. With
  the same number of heads head h matches head h; with other counts each side's distribution is averaged over its
  heads first (one distribution per query token).

Both sides read the same batch, so teacher and student must share the tokenizer (``inference.teacher`` checks it
for every distillation run). The encoders are asked for every layer's hidden states (``output_hidden_states``)
through a forward hook on ``TaskModel.encoder`` for the step; attention probabilities are computed again from a
layer's input (``hidden_states[i]``) with its own query and key projections — bertlab's attention kernels (SDPA,
varlen) never form them — which :func:`attention_log_probs` does for the BERT-shaped encoder (BERT, RoBERTa, XLM-R,
DistilBERT, ELECTRA). DeBERTa-v3 (relative-position terms), ModernBERT (rotary, local windows) and the generic
AutoModel path are refused for attention matching; hidden-state matching works for every transformer family.
The teacher then runs live on every batch: its cached outputs (``distill.cache``) hold logits only.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.models.bert import BertModel
from bertlab.models.recurrent import RecurrentEncoder
from bertlab.runtime.config import DistillConfig
from bertlab.runtime.errors import ConfigError

# A masked key's score: its probability is exactly 0 in float32, and a row without any real key stays finite.
MASKED = -1e9


def uniform_layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """Student layer i (of S) → teacher layer (i + 1)·T/S − 1 (TinyBERT's uniform map, counted from 0): evenly
    spaced, the top layer to the top layer."""
    return [max(0, (i + 1) * teacher_layers // student_layers - 1) for i in range(student_layers)]


def token_mask(batch: dict[str, torch.Tensor], rows: int, length: int, device: torch.device) -> torch.Tensor:
    """(rows, length) bool: the real tokens of the rows the encoder read (multiple choice: B·C rows)."""
    mask = batch.get("attention_mask")
    if mask is None:
        return torch.ones(rows, length, dtype=torch.bool, device=device)
    return mask.reshape(-1, mask.shape[-1]).bool().to(device)


def hidden_loss(student: list[torch.Tensor], teacher: list[torch.Tensor], mask: torch.Tensor,
                projection: nn.Module | None) -> torch.Tensor:
    """Mean over the layer pairs of the MSE between the (projected) student's and the teacher's hidden states
    (B, T, ·) over the real tokens ``mask`` (B, T), averaged over tokens and features."""
    losses = []
    for s, t in zip(student, teacher):
        s = s.float() if projection is None else projection(s.to(projection.weight.dtype)).float()
        losses.append(F.mse_loss(s[mask], t.float()[mask]))
    return torch.stack(losses).mean()


def attention_log_probs(attention: nn.Module, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log softmax(q·kᵀ/√d) (B, nh, T, T) of a BERT-shaped layer (``attention``: its ``BertSelfAttention``) whose
    input is ``hidden`` (B, T, H), padded keys masked; the probabilities its attention kernel used (before
    attention dropout)."""
    b, t, _ = hidden.shape
    q = attention.query(hidden).view(b, t, attention.num_heads, attention.head_dim).transpose(1, 2).float()
    k = attention.key(hidden).view(b, t, attention.num_heads, attention.head_dim).transpose(1, 2).float()
    scores = q @ k.transpose(-1, -2) / math.sqrt(attention.head_dim)
    return scores.masked_fill(~mask[:, None, None, :], MASKED).log_softmax(-1)


def attention_loss(student: list[torch.Tensor], teacher: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """Mean over the layer pairs of KL(teacher ‖ student) between attention log-probabilities (B, nh, T, T), one
    KL per head and real query token; other head counts: each side averaged over its heads first."""
    losses = []
    for s, t in zip(student, teacher):
        if s.shape[1] != t.shape[1]:  # one distribution per query token: the heads' mean
            s = torch.logsumexp(s, 1, keepdim=True) - math.log(s.shape[1])
            t = torch.logsumexp(t, 1, keepdim=True) - math.log(t.shape[1])
        kl = (t.exp() * (t - s)).sum(-1)  # (B, nh, T): 0·(MASKED − MASKED) = 0 at padded keys
        keep = mask[:, None, :].expand_as(kl)
        losses.append(kl[keep].mean())
    return torch.stack(losses).mean()


@dataclass
class Recorded:
    """What an encoder gave during one forward: its hidden states (L + 1 tensors (B, T, H); chunks of a long
    document's windows are concatenated)."""

    parts: list[tuple[torch.Tensor, ...]] = field(default_factory=list)

    @property
    def states(self) -> tuple[torch.Tensor, ...]:
        if not self.parts:
            raise RuntimeError("distill: the encoder returned no hidden states for layer matching")
        if len(self.parts) == 1:
            return self.parts[0]
        return tuple(torch.cat(layer) for layer in zip(*self.parts))


@contextmanager
def recording(model: nn.Module) -> Iterator[Recorded]:
    """Within: ``model`` (a ``TaskModel``) computes every layer's hidden states, recorded as its encoder returns
    them; after: as it was."""
    got = Recorded()

    def hook(_module: nn.Module, _args: Any, out: Any) -> None:
        if getattr(out, "hidden_states", None) is not None:
            got.parts.append(out.hidden_states)

    before = model.output_hidden_states
    model.output_hidden_states = True
    handle = model.encoder.register_forward_hook(hook)
    try:
        yield got
    finally:
        handle.remove()
        model.output_hidden_states = before


class LayerMatching:
    """The layer-matching terms of one run: checked against the student and the teacher before the first step
    (:meth:`build`), then :meth:`loss` on each training batch."""

    def __init__(self, settings: DistillConfig, layer_map: list[int | None], student: nn.Module,
                 teacher: nn.Module, projection: nn.Linear | None):
        self.settings, self.layer_map, self.projection = settings, layer_map, projection
        self.pairs = [(s, t) for s, t in enumerate(layer_map) if t is not None]
        self._student_attention = _attention_modules(student.encoder) if settings.attention_weight > 0 else None
        self._teacher_attention = _attention_modules(teacher.encoder) if settings.attention_weight > 0 else None

    @classmethod
    def build(cls, student: nn.Module, teacher: nn.Module, settings: DistillConfig) -> LayerMatching | None:
        """The matching ``settings`` ask for between two ``TaskModel``s, or None (off); a ``ConfigError`` when
        they cannot be matched (a layer map out of range, attention of a family whose kernels hide it)."""
        if not settings.matches:
            return None
        for role, model in (("student", student), ("teacher", teacher)):
            if isinstance(model.encoder, RecurrentEncoder):
                raise ConfigError(f"distill.hidden_weight / distill.attention_weight match transformer layers, but "
                                  f"the {role} is a recurrent encoder (model=bilstm, gru or lstm): "
                                  "use a transformer student and teacher, or set both weights to 0")
        s_layers, t_layers = student.encoder.num_layers, teacher.encoder.num_layers
        layer_map = settings.layer_map or uniform_layer_map(s_layers, t_layers)
        if len(layer_map) != s_layers or any(t is not None and t >= t_layers for t in layer_map):
            raise ConfigError(
                f"distill.layer_map={layer_map}: the student has {s_layers} layers and the teacher {t_layers} "
                f"(0..{t_layers - 1}): give one teacher layer per student layer (null: not matched), e.g. "
                f"distill.layer_map={uniform_layer_map(s_layers, t_layers)}")
        if settings.attention_weight > 0:
            for role, model in (("student", student), ("teacher", teacher)):
                if not isinstance(model.encoder, BertModel):
                    kind = getattr(model.encoder.config, "model_type", type(model.encoder).__name__)
                    raise ConfigError(
                        f"distill.attention_weight={settings.attention_weight}: the {role}'s encoder ({kind}) does "
                        "not expose its attention probabilities (its kernels never form them; attention matching "
                        "covers the BERT-shaped families: BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA). Set "
                        "distill.attention_weight=0 (hidden-state matching, distill.hidden_weight, works for "
                        "every transformer family)")
        s_width, t_width = student.encoder.hidden_size, teacher.encoder.hidden_size
        projection = None
        if settings.hidden_weight > 0 and s_width != t_width:
            projection = nn.Linear(s_width, t_width, bias=False)
            nn.init.normal_(projection.weight, std=getattr(student.encoder.config, "initializer_range", 0.02))
        return cls(settings, layer_map, student, teacher, projection)

    def describe(self) -> str:
        terms = []
        if self.settings.hidden_weight > 0:
            how = " through a learned projection" if self.projection is not None else ""
            terms.append(f"hidden states × {self.settings.hidden_weight}{how}")
        if self.settings.attention_weight > 0:
            terms.append(f"attention × {self.settings.attention_weight}")
        pairs = ", ".join(f"{s}→{t}" for s, t in self.pairs)
        return f"layer matching ({' + '.join(terms)}; student→teacher layers {pairs})"

    def trainable_modules(self) -> dict[str, nn.Module]:
        return {"distill_projection": self.projection} if self.projection is not None else {}

    def loss(self, student: tuple[torch.Tensor, ...], teacher: tuple[torch.Tensor, ...],
             batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """hidden_weight · hidden-state term + attention_weight · attention term, from both encoders' hidden
        states (embeddings first, then each layer: layer i's output is ``states[i + 1]``, its input ``states[i]``)."""
        rows, length = student[0].shape[:2]
        mask = token_mask(batch, rows, length, student[0].device)
        total = student[0].new_zeros((), dtype=torch.float32)
        if self.settings.hidden_weight > 0:
            total = total + self.settings.hidden_weight * hidden_loss(
                [student[s + 1] for s, _ in self.pairs], [teacher[t + 1] for _, t in self.pairs], mask,
                self.projection)
        if self.settings.attention_weight > 0:
            assert self._student_attention is not None and self._teacher_attention is not None
            s_probs = [attention_log_probs(self._student_attention[s], student[s], mask) for s, _ in self.pairs]
            with torch.no_grad():
                t_probs = [attention_log_probs(self._teacher_attention[t], teacher[t], mask) for _, t in self.pairs]
            total = total + self.settings.attention_weight * attention_loss(s_probs, t_probs, mask)
        return total


def _attention_modules(encoder: BertModel) -> list[nn.Module]:
    return [layer.attention.self for layer in encoder.encoder.layer]
