"""Pre-training data: masked-LM corruption and next-sentence-prediction pairs (the loss is in tasks/mlm.py).

Everything here is pure: tensors and lists in, new tensors and lists out, all randomness from the
generator / ``random.Random`` passed in. The DataModule calls :func:`mask_tokens` per batch in its
collate function, so every epoch sees fresh masks (RoBERTa's dynamic masking) while a seeded generator
keeps runs reproducible.

Label conventions (written down once, used everywhere):

* MLM labels are the **original** token id at selected positions and ``IGNORE_INDEX`` (-100) elsewhere.
* NSP labels follow Hugging Face's ``BertForPreTraining``: ``IS_NEXT = 0`` (B really follows A in the
  corpus), ``NOT_NEXT = 1`` (B is a random segment of another document). The NSP label is one label per
  pair; it is not the segment id.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from bertlab.data.tags import IGNORE_INDEX

IS_NEXT = 0
NOT_NEXT = 1

# Within the selected positions (BERT §3.1 / appendix A.1): 80 % [MASK], 10 % random token, 10 % unchanged.
_MASK_FRACTION = 0.8
_RANDOM_FRACTION = 0.1


# ----------------------------------------------------------------------------------------------------
# Masked language modelling
# ----------------------------------------------------------------------------------------------------


def _uniform(shape: torch.Size, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    # Draw on the generator's own device (a CPU generator cannot fill a CUDA tensor), then move.
    gen_device = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, device=gen_device).to(device)


def _word_starts(word_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: True at the first piece of each word (a run of equal, non-negative word ids)."""
    in_word = word_ids >= 0
    prev = torch.full_like(word_ids, -1)
    prev[:, 1:] = word_ids[:, :-1]
    return in_word & (word_ids != prev)


def _whole_word_selection(word_ids: torch.Tensor, draw: torch.Tensor, mlm_probability: float) -> torch.Tensor:
    """Select words with ``mlm_probability`` and spread each decision to all pieces of the word.

    The decision of a word is the draw at its first piece; every later piece looks up the position of
    the most recent word start (``cummax`` over start positions), which is its own word's start because
    a word's pieces are consecutive.
    """
    starts = _word_starts(word_ids)  # (B, T)
    positions = torch.arange(word_ids.shape[1], device=word_ids.device).expand_as(word_ids)  # (B, T)
    last_start = torch.where(starts, positions, torch.full_like(positions, -1)).cummax(dim=1).values
    start_selected = starts & (draw < mlm_probability)  # (B, T), decisions live at word starts
    selected = start_selected.gather(1, last_start.clamp(min=0))  # (B, T)
    return selected & (word_ids >= 0) & (last_start >= 0)


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    vocab_size: int,
    mask_token_id: int,
    generator: torch.Generator | None = None,
    mlm_probability: float = 0.15,
    word_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-LM corruption of a batch (BERT §3.1, Hugging Face ``DataCollatorForLanguageModeling``).

    1. **Select**: each real token is selected independently with probability ``mlm_probability``
       (a Bernoulli draw per position, so the count varies around 15 %). Positions where
       ``special_tokens_mask`` is True ([CLS], [SEP], [PAD], other specials) are never selected.
    2. **Corrupt** the selected positions: 80 % become ``mask_token_id``, 10 % a random token, 10 %
       stay unchanged. The random token is drawn uniformly from the *whole* vocabulary
       ``[0, vocab_size)``, as in the original BERT data generator: it may equal the original token
       (then the input does not change) and it may be a special token id.
    3. **Label**: every selected position keeps its original id as its label, including the unchanged
       10 %; every other position gets ``IGNORE_INDEX`` (-100).

    Whole-word masking: with ``word_ids`` (B, T) long, -1 at specials/padding and equal consecutive values
    for the pieces of one word, the selection is drawn once per *word* (probability ``mlm_probability``
    per word) and applied to all its pieces. The 80/10/10 corruption is then decided per piece (so the
    pieces of one selected word may be corrupted differently), which keeps the per-token statistics
    of step 2. Positions with word id -1 are never selected.

    All randomness comes from ``generator`` (None → torch's global RNG). Calling again with the same
    generator continues its stream, which gives fresh masks each epoch; re-seeding reproduces them.

    Shapes: ``input_ids`` (B, T) long; ``special_tokens_mask`` (B, T) bool (integer 0/1 also accepted);
    ``word_ids`` (B, T) long or None. Returns ``masked_input_ids`` (B, T) and ``labels`` (B, T), both new
    tensors with ``input_ids``' dtype and device; ``input_ids`` is not modified.
    """
    if not 0.0 <= mlm_probability <= 1.0:
        raise ValueError(f"mlm_probability must be in [0, 1], got {mlm_probability}")
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    if not 0 <= mask_token_id < vocab_size:
        raise ValueError(f"mask_token_id {mask_token_id} is outside the vocabulary [0, {vocab_size})")
    if special_tokens_mask.shape != input_ids.shape:
        raise ValueError(
            f"special_tokens_mask shape {tuple(special_tokens_mask.shape)} != input_ids shape "
            f"{tuple(input_ids.shape)}"
        )
    never_select = special_tokens_mask.to(input_ids.device)
    if never_select.dtype != torch.bool:
        never_select = never_select != 0
    device = input_ids.device

    if word_ids is None:
        selected = _uniform(input_ids.shape, generator, device) < mlm_probability
    else:
        if word_ids.shape != input_ids.shape or input_ids.dim() != 2:
            raise ValueError(
                f"word_ids must be (B, T) like input_ids {tuple(input_ids.shape)}, got {tuple(word_ids.shape)}"
            )
        draw = _uniform(input_ids.shape, generator, device)
        selected = _whole_word_selection(word_ids.to(device), draw, mlm_probability)
    selected = selected & ~never_select  # (B, T)

    # One uniform draw per position decides the category: [0, .8) mask, [.8, .9) random, [.9, 1) keep.
    category = _uniform(input_ids.shape, generator, device)
    to_mask = selected & (category < _MASK_FRACTION)
    to_random = selected & (category >= _MASK_FRACTION) & (category < _MASK_FRACTION + _RANDOM_FRACTION)
    gen_device = generator.device if generator is not None else device
    random_ids = torch.randint(
        vocab_size, input_ids.shape, generator=generator, device=gen_device, dtype=input_ids.dtype
    ).to(device)

    masked = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(to_random, random_ids, masked)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return masked, labels


# ----------------------------------------------------------------------------------------------------
# Next sentence prediction (the original BERT create_pretraining_data.py, without its masking step)
# ----------------------------------------------------------------------------------------------------


@dataclass
class NspExample:
    """One pre-training segment or pair, before special tokens.

    ``next_sentence_label`` is ``IS_NEXT`` (0) or ``NOT_NEXT`` (1) for NSP pairs, and ``IGNORE_INDEX``
    for single segments built with ``nsp=False`` (``tokens_b`` is then empty).
    """

    tokens_a: list[int]
    tokens_b: list[int] = field(default_factory=list)
    next_sentence_label: int = IGNORE_INDEX


def max_num_tokens_for(max_seq_length: int, nsp: bool = True, num_specials: int | None = None) -> int:
    """The content budget of one example: ``max_seq_length`` less the special tokens its template spends
    (``num_specials``, the tokenizer's ``num_special_tokens(pair=nsp)``; by default BERT's: [CLS] A [SEP] B [SEP]
    spends 3 positions, [CLS] A [SEP] spends 2; RoBERTa's pair spends 4)."""
    return max_seq_length - (num_specials if num_specials is not None else (3 if nsp else 2))


def keyed_tokens(encoding) -> list[int]:
    """A sentence's tokens as keys ``id * 2 + starts_word`` (``starts_word``: 1 at the first piece of each word
    of the encoding's ``word_ids``), so that the pair builder, which only moves tokens around, carries each
    token's word boundary with it; :func:`split_keys` takes them apart."""
    keys, previous = [], None
    for token, word in zip(encoding.ids, encoding.word_ids):
        keys.append(token * 2 + (word is None or word != previous))
        previous = word
    return keys


def split_keys(keys: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(ids, word_starts)`` of :func:`keyed_tokens` keys."""
    return [k >> 1 for k in keys], [k & 1 for k in keys]


def pack_pair(
    tokens_a: Sequence[int], tokens_b: Sequence[int], cls_id: int, sep_id: int
) -> tuple[list[int], list[int]]:
    """``[CLS] A [SEP] B [SEP]`` with segment ids ``0 … 0 1 … 1``; ``[CLS] A [SEP]`` (all 0) when B is empty.

    Returns ``(input_ids, token_type_ids)``, each of length ``len(A) + len(B) + 3`` (or ``len(A) + 2``).
    """
    input_ids = [cls_id, *tokens_a, sep_id]
    token_type_ids = [0] * len(input_ids)
    if tokens_b:
        input_ids += [*tokens_b, sep_id]
        token_type_ids += [1] * (len(tokens_b) + 1)
    return input_ids, token_type_ids


def truncate_seq_pair(
    tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random
) -> None:
    """Truncate in place until ``len(A) + len(B) <= max_num_tokens`` (original BERT).

    Each step removes one token from the longer side (B on ties), from its front or its back with equal
    probability, so the model does not learn that sequences always end (or start) cleanly.
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()


def _tokenize_documents(
    documents: Sequence[Sequence[str]] | Sequence[Sequence[Sequence[int]]],
    tokenize: Callable[[str], list[int]] | None,
) -> list[list[list[int]]]:
    """Token-id segments per document; empty segments and then empty documents are dropped (as the original)."""
    result: list[list[list[int]]] = []
    for doc in documents:
        segments: list[list[int]] = []
        for segment in doc:
            if isinstance(segment, str):
                if tokenize is None:
                    raise TypeError("documents hold strings: pass a tokenize function (str -> list[int])")
                ids = list(tokenize(segment))
            else:
                ids = [int(t) for t in segment]
            if ids:
                segments.append(ids)
        if segments:
            result.append(segments)
    return result


def _target_length(max_num_tokens: int, short_seq_prob: float, rng: random.Random) -> int:
    # BERT §A.2: 10 % of sequences are shorter, to reduce the pre-train / fine-tune length mismatch.
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def _pairs_from_document(
    docs: list[list[list[int]]],
    doc_index: int,
    max_num_tokens: int,
    short_seq_prob: float,
    rng: random.Random,
) -> list[NspExample]:
    """``create_instances_from_document`` of the original BERT, one document at a time."""
    document = docs[doc_index]
    target_seq_length = _target_length(max_num_tokens, short_seq_prob, rng)
    examples: list[NspExample] = []
    chunk: list[list[int]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        last = i == len(document) - 1
        # Deviation from the original, which closes a chunk as soon as it reaches the target and then
        # must make every one-segment chunk NotNext: we close only chunks of two or more segments and
        # never leave a document's last segment alone, so IsNext stays possible and the labels stay
        # near 50/50 on short documents and long sentences (only one-sentence documents force NotNext).
        full = chunk_length >= target_seq_length and len(chunk) >= 2 and i != len(document) - 2
        if last or full:
            # A = the first a_end segments of the chunk (at least one), chosen at random.
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for seg in chunk[:a_end] for t in seg]
            tokens_b: list[int] = []
            if len(chunk) == 1 or rng.random() < 0.5:
                label = NOT_NEXT
                target_b_length = target_seq_length - len(tokens_a)
                # Deviation from the original: it retries 10 times and may still pick this very
                # document; we draw among the *other* documents so NotNext is never real continuation.
                other = rng.randint(0, len(docs) - 2)
                if other >= doc_index:
                    other += 1
                random_document = docs[other]
                start = rng.randint(0, len(random_document) - 1)
                for seg in random_document[start:]:
                    tokens_b.extend(seg)
                    if len(tokens_b) >= target_b_length:
                        break
                # The segments after A were not used: put them back so they are not wasted. Unless that
                # is only the document's last segment: alone it could only make a forced NotNext, which
                # (the original does it) tilts the labels towards NotNext; it is dropped instead.
                unused = len(chunk) - a_end
                if not (unused == 1 and last):
                    i -= unused
            else:
                label = IS_NEXT
                tokens_b = [t for seg in chunk[a_end:] for t in seg]
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            examples.append(NspExample(tokens_a, tokens_b, label))
            chunk = []
            chunk_length = 0
        i += 1
    return examples


def _segments_from_document(
    document: list[list[int]], max_num_tokens: int, short_seq_prob: float, rng: random.Random
) -> list[NspExample]:
    """Contiguous single segments (no NSP): whole sentences packed up to the target length.

    A sentence that would overflow the current segment starts the next one; a single sentence longer
    than the target is cut into target-length pieces rather than truncated, so no text is lost.
    """
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    examples: list[NspExample] = []
    chunk: list[int] = []
    for seg in document:
        if chunk and len(chunk) + len(seg) > target:
            examples.append(NspExample(chunk))
            chunk = []
        chunk = chunk + seg
        while len(chunk) > target:
            examples.append(NspExample(chunk[:target]))
            chunk = chunk[target:]
    if chunk:
        examples.append(NspExample(chunk))
    return examples


def build_nsp_examples(
    documents: Sequence[Sequence[str]] | Sequence[Sequence[Sequence[int]]],
    tokenize: Callable[[str], list[int]] | None,
    max_num_tokens: int,
    rng: random.Random,
    short_seq_prob: float = 0.1,
    nsp: bool = True,
) -> list[NspExample]:
    """Pre-training examples from documents of sentences, following the original BERT data generator.

    ``documents`` is a list of documents, each a list of sentences (strings, tokenized with ``tokenize``)
    or of pre-tokenized segments (lists of ids; ``tokenize`` may then be None). Empty segments and empty
    documents are dropped.

    With ``nsp=True`` (``max_num_tokens = max_seq_length - 3``, see :func:`max_num_tokens_for`): for each
    document, sentences accumulate into a chunk until it reaches the target length (``max_num_tokens``,
    or with probability ``short_seq_prob`` a random length in ``[2, max_num_tokens]``, drawn once per
    document). The chunk is split at a random sentence boundary into A and B. With probability 0.5 (and
    always when the chunk holds one sentence) B is replaced by a run of sentences from a random *other*
    document, about as long as the rest of the target → ``NOT_NEXT`` (1), and the unused sentences of
    the chunk are put back; otherwise B is the actual continuation → ``IS_NEXT`` (0). The pair is then
    truncated with :func:`truncate_seq_pair` to at most ``max_num_tokens``. Needs at least two non-empty
    documents.

    Deviations from the original, each to keep the labels near 50/50 and NotNext truthful: a NotNext B
    always comes from another document (the original may pick the same one); a chunk closes only once it
    holds two sentences, and a document's last sentence never ends up alone in a chunk (it joins the
    chunk before it, or is dropped when it was put back after a NotNext), because the original turns
    every one-sentence chunk into a forced NotNext. Only one-sentence documents still force NotNext.

    With ``nsp=False`` (``max_num_tokens = max_seq_length - 2``): single contiguous segments of whole
    sentences from one document, up to the target length, ``tokens_b`` empty, label ``IGNORE_INDEX``.

    Examples come in document order (the DataLoader shuffles); all randomness comes from ``rng``, so the
    same seed gives the same examples, and calling again with the same ``rng`` gives new splits (the
    original's ``dupe_factor``).
    """
    if max_num_tokens < 2:
        raise ValueError(
            f"max_num_tokens must be at least 2 (one token each for A and B), got {max_num_tokens}"
        )
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}")
    docs = _tokenize_documents(documents, tokenize)
    if not docs:
        raise ValueError("no non-empty documents to build pre-training examples from")
    if not nsp:
        return [
            ex for doc in docs for ex in _segments_from_document(doc, max_num_tokens, short_seq_prob, rng)
        ]
    if len(docs) < 2:
        raise ValueError(
            "NSP needs at least two non-empty documents (NotNext pairs take B from another document); "
            "separate documents with blank lines or set nsp=False"
        )
    examples: list[NspExample] = []
    for doc_index in range(len(docs)):
        examples.extend(_pairs_from_document(docs, doc_index, max_num_tokens, short_seq_prob, rng))
    return examples
