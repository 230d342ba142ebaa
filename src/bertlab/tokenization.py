"""Public path kept for library users: ``bertlab.tokenization.load_tokenizer`` and friends.

The code lives in :mod:`bertlab.data.tokenizer`.
"""

from bertlab.data.tokenizer import (
    SPECIAL_TOKENS,
    BertTokenizer,
    TokenizerError,
    content_hash,
    load_tokenizer,
    train_wordpiece,
    wordpiece_from_vocab,
)

__all__ = ["SPECIAL_TOKENS", "BertTokenizer", "TokenizerError", "content_hash", "load_tokenizer", "train_wordpiece",
           "wordpiece_from_vocab"]
