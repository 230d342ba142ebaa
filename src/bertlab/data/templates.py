"""Special-token templates, read from a tokenizer's own post-processor.

Every family wraps its text in its own special tokens: BERT ``[CLS] A [SEP] B [SEP]`` with segment ids
``0 … 0 1 … 1``, RoBERTa and XLM-R ``<s> A </s></s> B </s>`` with ids all 0. bertlab builds some sequences
from token-id lists itself (QA windows, pre-training pairs, CLM segments), so it needs the template as data,
not as ``[cls] + a + [sep]`` written by hand at each caller.

:func:`template_of` asks the tokenizer's post-processor (``TemplateProcessing``, ``RobertaProcessing``,
``BertProcessing``, a ``Sequence`` of them, or none) to wrap a probe sequence and a probe pair, and reads off
which special ids (and type ids) come before, between and after the sequences. Whatever the post-processor is,
the result is what ``Tokenizer.encode`` produces: :meth:`Template.pair` of two id lists equals the encoding of
the pair with special tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenizers import Encoding, Tokenizer

from bertlab.runtime.errors import TokenizerError

_PROBES = ("a", "x", "0", "hello", ".")


@dataclass(frozen=True)
class Template:
    """Where a tokenizer puts its special tokens around one sequence (``single``) and a pair, with the type id
    of every position. ``prefix`` + A + ``suffix`` is a single sequence; ``pair_prefix`` + A + ``pair_middle``
    + B + ``pair_suffix`` a pair. ``*_types`` are the type ids of those special tokens; ``a_type``,
    ``pair_a_type`` and ``pair_b_type`` the type id of every token of A (single), A (pair) and B (pair)."""

    prefix: tuple[int, ...] = ()
    suffix: tuple[int, ...] = ()
    prefix_types: tuple[int, ...] = ()
    suffix_types: tuple[int, ...] = ()
    a_type: int = 0
    pair_prefix: tuple[int, ...] = ()
    pair_middle: tuple[int, ...] = ()
    pair_suffix: tuple[int, ...] = ()
    pair_prefix_types: tuple[int, ...] = ()
    pair_middle_types: tuple[int, ...] = ()
    pair_suffix_types: tuple[int, ...] = ()
    pair_a_type: int = 0
    pair_b_type: int = 0

    @property
    def num_single(self) -> int:
        """Special tokens one sequence costs (BERT and RoBERTa: 2)."""
        return len(self.prefix) + len(self.suffix)

    @property
    def num_pair(self) -> int:
        """Special tokens a pair costs (BERT: 3, RoBERTa and XLM-R: 4)."""
        return len(self.pair_prefix) + len(self.pair_middle) + len(self.pair_suffix)

    @property
    def has_types(self) -> bool:
        """Whether any position of a pair gets a type id other than 0 (BERT yes; RoBERTa, XLM-R no)."""
        return any((*self.pair_prefix_types, *self.pair_middle_types, *self.pair_suffix_types,
                    self.pair_a_type, self.pair_b_type, *self.prefix_types, *self.suffix_types, self.a_type))

    def single(self, a: Sequence[int]) -> tuple[list[int], list[int]]:
        """``(input_ids, token_type_ids)`` of one sequence of ids (without special tokens) as the tokenizer
        wraps it."""
        ids = [*self.prefix, *a, *self.suffix]
        types = [*self.prefix_types, *([self.a_type] * len(a)), *self.suffix_types]
        return ids, types

    def pair(self, a: Sequence[int], b: Sequence[int] | None) -> tuple[list[int], list[int]]:
        """``(input_ids, token_type_ids)`` of a pair of id lists; a ``b`` that is None or empty gives
        :meth:`single` of ``a`` (a pre-training segment without a second half)."""
        if not b:
            return self.single(a)
        ids = [*self.pair_prefix, *a, *self.pair_middle, *b, *self.pair_suffix]
        types = [*self.pair_prefix_types, *([self.pair_a_type] * len(a)), *self.pair_middle_types,
                 *([self.pair_b_type] * len(b)), *self.pair_suffix_types]
        return ids, types

    def layout(self, a: Sequence[int], b: Sequence[int] | None = None, fill: int = 0) -> list[int]:
        """Per-position values of A (and B) laid out as :meth:`pair` lays out their ids, ``fill`` at every special
        token (e.g. word-start flags of a pre-training pair)."""
        if not b:
            return [*[fill] * len(self.prefix), *a, *[fill] * len(self.suffix)]
        return [*[fill] * len(self.pair_prefix), *a, *[fill] * len(self.pair_middle), *b,
                *[fill] * len(self.pair_suffix)]

    def second_start(self, len_a: int) -> int:
        """The position of B's first token in a pair whose A has ``len_a`` tokens (QA: the context's start)."""
        return len(self.pair_prefix) + len_a + len(self.pair_middle)


def _probe(tokenizer: Tokenizer) -> str:
    for text in _PROBES:
        if len(tokenizer.encode(text, add_special_tokens=False).ids):
            return text
    raise TokenizerError(f"the tokenizer turns each of {list(_PROBES)} into no token at all; it cannot encode text")


def _split(enc: Encoding, parts: int) -> list[tuple[list[int], list[int]]]:
    """The special tokens around the ``parts`` sequences of a post-processed encoding, with their type ids:
    ``parts + 1`` runs (before the first sequence, between, after the last)."""
    runs: list[tuple[list[int], list[int]]] = [([], []) for _ in range(parts + 1)]
    last = -1  # the sequence seen last: special tokens now go into run last + 1
    for token, types, s in zip(enc.ids, enc.type_ids, enc.sequence_ids):
        if s is None:
            runs[last + 1][0].append(token)
            runs[last + 1][1].append(types)
        elif not (s == last + 1 or (s == last and not runs[last + 1][0])):
            raise TokenizerError("the tokenizer's post-processor reorders the sequences of a pair or puts special "
                                 "tokens inside one; bertlab cannot build its template")
        else:
            last = s
    return runs


def _content_type(enc: Encoding, which: int) -> int:
    kinds = {t for t, s in zip(enc.type_ids, enc.sequence_ids) if s == which}
    if len(kinds) > 1:
        raise TokenizerError(f"the tokenizer's post-processor gives the tokens of sequence {which} several type ids "
                             f"{sorted(kinds)}; bertlab expects one per sequence")
    return kinds.pop() if kinds else 0


def template_of(tokenizer: Tokenizer) -> Template:
    """The template of ``tokenizer``'s post-processor (its padding and truncation must be off)."""
    text = _probe(tokenizer)
    single = tokenizer.encode(text, add_special_tokens=True)
    pair = tokenizer.encode(text, text, add_special_tokens=True)
    (pre, pre_t), (suf, suf_t) = _split(single, 1)
    (ppre, ppre_t), (mid, mid_t), (psuf, psuf_t) = _split(pair, 2)
    return Template(tuple(pre), tuple(suf), tuple(pre_t), tuple(suf_t), _content_type(single, 0),
                    tuple(ppre), tuple(mid), tuple(psuf), tuple(ppre_t), tuple(mid_t), tuple(psuf_t),
                    _content_type(pair, 0), _content_type(pair, 1))
