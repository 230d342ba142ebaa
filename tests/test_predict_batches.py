"""Prediction's batches (bertlab.inference.batches): features padded as the training collate pads them, cut into
batches of similar length, and read back in the order they were given; and the export file names prediction
knows without importing torch."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from bertlab.data.batching import Collator
from bertlab.inference.batches import feature_length, forward_features, pad_batch


def _single(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        length = rng.choice([1, 2, 3, 7, 30, 64])  # lengths far apart: file order would pad a lot
        out.append({"input_ids": [rng.randrange(5, 100) for _ in range(length)],
                    "token_type_ids": [rng.randrange(2) for _ in range(length)], "index": i})
    return out


def _choices(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        rows = [[rng.randrange(5, 100) for _ in range(rng.randrange(1, 12))] for _ in range(rng.randrange(2, 5))]
        out.append({"input_ids": rows, "token_type_ids": [[1] * len(r) for r in rows], "index": i})
    return out


@pytest.mark.parametrize("make", [_single, _choices], ids=["single", "choices"])
@pytest.mark.parametrize("pad_id", [0, 1])
def test_pad_batch_pads_as_the_training_collate(make, pad_id):
    features = make(random.Random(pad_id), 9)
    want = Collator(pad_id)(features)
    got = pad_batch(features, pad_id)
    keys = ["input_ids", "token_type_ids", "attention_mask"] + (["choice_mask"] if "choice_mask" in want else [])
    assert sorted(got) == sorted(keys)
    for key in keys:
        assert got[key].dtype == (np.bool_ if key == "choice_mask" else np.int64)
        np.testing.assert_array_equal(got[key], want[key].numpy(), err_msg=key)


def _fake_model(seen: list[tuple[int, ...]]):
    """Logits that depend on each row alone (its ids and position), as a model's do: (B, T, 2)."""
    def logits(batch):
        seen.append(batch["input_ids"].shape)
        ids = batch["input_ids"].astype(np.float32)
        return np.stack([ids, ids * batch["attention_mask"] + np.arange(ids.shape[1])], -1)
    return logits


@pytest.mark.parametrize("batch_size", [1, 3, 8, 100])
def test_rows_come_back_in_the_given_order_cropped_to_each_feature(batch_size):
    features = _single(random.Random(batch_size), 41)
    seen: list[tuple[int, ...]] = []
    rows = forward_features(_fake_model(seen), features, batch_size, pad_id=0)
    assert len(rows) == len(features)
    for f, row in zip(features, rows):
        t = len(f["input_ids"])
        assert row.shape == (t, 2)
        np.testing.assert_array_equal(row[:, 0], f["input_ids"])
        np.testing.assert_array_equal(row[:, 1], np.array(f["input_ids"]) + np.arange(t))
    assert sum(shape[0] for shape in seen) == len(features)
    assert all(shape[0] <= batch_size for shape in seen)


def test_batches_hold_features_of_similar_length():
    """Sorted by length, the batches pad as little as any cut of the features into batches of 8 can."""
    features = _single(random.Random(3), 64)
    seen: list[tuple[int, ...]] = []
    forward_features(_fake_model(seen), features, 8, pad_id=0)
    padded = sum(b * t for b, t in seen)
    lengths = sorted(feature_length(f) for f in features)
    assert padded == sum(max(lengths[i:i + 8]) * len(lengths[i:i + 8]) for i in range(0, len(lengths), 8))
    file_order = sum(max(feature_length(f) for f in features[i:i + 8]) * 8 for i in range(0, 64, 8))
    assert padded < file_order / 2


def test_sequence_and_choice_rows():
    """(B, C) logits give each feature its row; multiple choice its own choices only."""
    rng = random.Random(0)
    single = _single(rng, 10)
    rows = forward_features(lambda b: np.tile(b["input_ids"][:, :1].astype(np.float32), (1, 3)), single, 4, 0)
    assert [r.shape for r in rows] == [(3,)] * 10
    assert [float(r[0]) for r in rows] == [float(f["input_ids"][0]) for f in single]
    choices = _choices(rng, 10)
    rows = forward_features(lambda b: b["input_ids"][:, :, 0].astype(np.float32), choices, 4, 0)
    assert [len(r) for r in rows] == [len(f["input_ids"]) for f in choices]
    assert [r.tolist() for r in rows] == [[float(c[0]) for c in f["input_ids"]] for f in choices]


def test_export_file_names_known_without_torch_match_the_model_code():
    from bertlab.inference.layout import HF_EXPORT_FILES
    from bertlab.models.hf_weights import CONFIG_NAME, SAFETENSORS_NAME, TORCH_NAME

    assert set(HF_EXPORT_FILES) == {CONFIG_NAME, SAFETENSORS_NAME, TORCH_NAME}


def test_torch_logits_run_in_inference_mode_on_the_models_device():
    from bertlab.inference.batches import TorchLogits

    seen = []

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, batch, num_choices=None):
            seen.append((torch.is_inference_mode_enabled(), batch["input_ids"].dtype, num_choices))
            return (batch["input_ids"] * self.w).to(torch.bfloat16)

    batch = pad_batch(_single(random.Random(1), 3), 0)
    out = TorchLogits(Model())(batch)
    assert out.dtype == np.float32 and out.shape == batch["input_ids"].shape
    assert seen == [(True, torch.int64, None)]
