"""RoBERTa (``roberta``) and XLM-RoBERTa (``xlm-roberta``): BERT's layers; positions that count from
``pad_token_id + 1`` (514 rows for 512 tokens), one segment row, no next-sentence prediction, and a
classification head of its own (dense → tanh → out_proj on ``<s>``, no pooler in the checkpoints)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertlab.models.families.bert import BASE, TINY, bert_like_config, bert_like_hf_dict
from bertlab.models.families.spec import FamilySpec, HeadLayout
from bertlab.runtime.config import EncoderConfig

_CLASSIFIER = (("classifier.", "head.classifier."),)


def _spec(model_type: str, display: str, cls: str, vocab_size: int) -> FamilySpec:
    def read(data: Mapping[str, Any], source: str) -> EncoderConfig:
        return bert_like_config(data, source, model_type, position_style="after_padding")

    def write(config: EncoderConfig) -> dict[str, Any]:
        # bos/eos as the family's vocabularies place them (<s> 0, </s> 2); the model itself never reads them.
        return bert_like_hf_dict(config, bos_token_id=0, eos_token_id=2)

    return FamilySpec(
        model_type=model_type, display=display, prefix="roberta", base_architecture=f"{cls}Model",
        read_config=read, write_config=write, sequence_pooler="dense_tanh", choice_pooler="encoder",
        tokenizer_kind="bpe" if model_type == "roberta" else "unigram",
        # One segment row, padding id 1, positions counted after it (130 rows: 128 positions).
        tiny_config=dict(TINY, type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5),
        base_config=dict(BASE, vocab_size=vocab_size, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                         layer_norm_eps=1e-5),
        heads={
            "sequence": HeadLayout(f"{cls}ForSequenceClassification",
                                   (("classifier.dense.", "head.dense."), ("classifier.out_proj.", "head.classifier.")),
                                   pooler="dense_tanh"),
            "token": HeadLayout(f"{cls}ForTokenClassification", _CLASSIFIER),
            "span": HeadLayout(f"{cls}ForQuestionAnswering", (("qa_outputs.", "head.qa_outputs."),)),
            "multiple_choice": HeadLayout(f"{cls}ForMultipleChoice", _CLASSIFIER, pooler="encoder"),
            "mlm": HeadLayout(f"{cls}ForMaskedLM",
                              (("lm_head.bias", "head.predictions.bias"),
                               ("lm_head.decoder.bias", "head.predictions.bias"),
                               ("lm_head.dense.", "head.predictions.transform.dense."),
                               ("lm_head.layer_norm.", "head.predictions.transform.LayerNorm.")),
                              tied=("lm_head.decoder.weight",), copies=(("lm_head.decoder.bias", "lm_head.bias"),)),
        },
    )


ROBERTA = _spec("roberta", "RoBERTa", "Roberta", 50265)
XLM_ROBERTA = _spec("xlm-roberta", "XLM-RoBERTa", "XLMRoberta", 250002)
