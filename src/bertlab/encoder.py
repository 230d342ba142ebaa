"""Public path kept for library users: ``bertlab.encoder.BertEncoder`` is the full BERT encoder.

The code lives in :mod:`bertlab.models.bert`, under Hugging Face's class names: ``BertModel`` is the full
encoder (embeddings, layer stack, pooler) and ``BertEncoder`` there is the layer stack alone, as in
``transformers``. This module keeps the older name ``BertEncoder`` for the full encoder.
"""

from bertlab.models.bert import BertModel as BertEncoder
from bertlab.models.bert import EncoderConfig, EncoderOutput, Packing, num_parameters, pack, padding_mask

__all__ = ["BertEncoder", "EncoderConfig", "EncoderOutput", "Packing", "pack", "padding_mask", "num_parameters"]
