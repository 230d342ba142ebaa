"""ELECTRA (``electra``): BERT's layers; embeddings that may be narrower than the layers (``embedding_size``,
projected up by ``embeddings_project``), no pooler, a classification head of its own (dense → GELU → out_proj on
token 0). The checkpoint one fine-tunes is the discriminator; a generator checkpoint (``ElectraForMaskedLM``)
loads with ``task=mlm``. The discriminator's replaced-token-detection head is never loaded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertlab.models.families.bert import BASE, TINY, bert_like_config, bert_like_hf_dict
from bertlab.models.families.spec import FamilySpec, HeadLayout
from bertlab.runtime.config import EncoderConfig


def _read(data: Mapping[str, Any], source: str) -> EncoderConfig:
    embedding_size = data.get("embedding_size")
    return bert_like_config(data, source, "electra",
                            embedding_size=embedding_size if embedding_size != data.get("hidden_size") else None)


def _write(config: EncoderConfig) -> dict[str, Any]:
    return bert_like_hf_dict(config, embedding_size=config.embedding_width)


_DENSE_HEAD = (("classifier.dense.", "head.dense."), ("classifier.out_proj.", "head.classifier."))

ELECTRA = FamilySpec(
    model_type="electra", display="ELECTRA", prefix="electra", base_architecture="ElectraModel",
    read_config=_read, write_config=_write, bare_roots=("embeddings.", "embeddings_project.", "encoder."),
    other_heads=("discriminator_predictions.",), sequence_pooler="dense_gelu", choice_pooler="dense_gelu",
    # Embeddings narrower than the layers (projected up), as ELECTRA-small's.
    tiny_config=dict(TINY, embedding_size=16, summary_last_dropout=0.0),
    base_config=dict(BASE, embedding_size=768),
    heads={
        "sequence": HeadLayout("ElectraForSequenceClassification", _DENSE_HEAD, pooler="dense_gelu"),
        "token": HeadLayout("ElectraForTokenClassification", (("classifier.", "head.classifier."),)),
        "span": HeadLayout("ElectraForQuestionAnswering", (("qa_outputs.", "head.qa_outputs."),)),
        "multiple_choice": HeadLayout("ElectraForMultipleChoice",
                                      (("sequence_summary.summary.", "head.dense."),
                                       ("classifier.", "head.classifier.")), pooler="dense_gelu"),
        "mlm": HeadLayout("ElectraForMaskedLM",
                          (("generator_lm_head.bias", "head.predictions.bias"),
                           ("generator_predictions.dense.", "head.predictions.transform.dense."),
                           ("generator_predictions.LayerNorm.", "head.predictions.transform.LayerNorm.")),
                          tied=("generator_lm_head.weight",)),
    },
)
