"""head.pooling=mean: the mean over real tokens, with padding excluded."""

from __future__ import annotations

import torch

from bertlab.config import EncoderConfig, HeadConfig
from bertlab.encoder import BertEncoder
from bertlab.heads import SequenceClassificationHead, TaskModel, masked_mean


def test_masked_mean_ignores_padded_positions():
    x = torch.arange(24, dtype=torch.float32).view(2, 3, 4)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    out = masked_mean(x, mask)
    torch.testing.assert_close(out[0], x[0, :2].mean(0))
    torch.testing.assert_close(out[1], x[1].mean(0))
    torch.testing.assert_close(masked_mean(x, None), x.mean(1))


def test_mean_pooled_features_do_not_depend_on_padding():
    torch.manual_seed(0)
    config = EncoderConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=32)
    model = TaskModel(BertEncoder(config), SequenceClassificationHead(config, HeadConfig(pooling="mean"), 2),
                      "sequence").eval()
    alone = {"input_ids": torch.tensor([[2, 7, 9, 3]]), "attention_mask": torch.ones(1, 4, dtype=torch.long)}
    padded = {"input_ids": torch.tensor([[2, 7, 9, 3, 0, 0], [2, 5, 6, 8, 11, 3]]),
              "attention_mask": torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])}
    with torch.no_grad():
        torch.testing.assert_close(model.encode(padded)[0], model.encode(alone)[0], atol=1e-5, rtol=1e-5)
        # Against the definition: the mean of the last layer over the four real tokens.
        last = model.bert(alone["input_ids"], attention_mask=alone["attention_mask"]).last_hidden_state
        torch.testing.assert_close(model.encode(alone)[0], last[0].mean(0))
