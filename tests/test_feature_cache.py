"""The frozen-feature cache gives the same results as running the frozen encoder at every step."""

from __future__ import annotations

import pytest

from bertlab.config import ConfigError

COMMON = ("model=bert_tiny", "freeze=encoder", "trainer.max_epochs=2", "seed=3", "trainer.deterministic=true")


@pytest.mark.parametrize("task,extra", [("sst2", ()), ("conll2003", ()), ("sst2", ("head.pooling=cls",
                                                                                    "head.layers=1")),
                                        ("sst2", ("head.pooling=mean",))])
def test_cached_equals_uncached(train_run, task, extra):
    plain = train_run(*COMMON, f"task={task}", *extra, name="plain")
    cached = train_run(*COMMON, f"task={task}", *extra, "head.cache_features=true", name="cached")
    # Cached features are computed in evaluation batches (other padding lengths than the training batches), so
    # they differ from the per-step features at float32 rounding; Adam carries that into ~1e-4 differences,
    # which can flip the argmax of a token or two of the fixture's ~200 dev tokens (one token = 0.005 of token
    # accuracy; seen once in a full-suite run, not reproduced alone): two tokens' worth is allowed.
    for key, value in plain["val"].items():
        assert cached["val"][key] == pytest.approx(value, rel=2e-3, abs=0.011), key
    assert cached["params"] == plain["params"]
    # metrics.json times each epoch (validation excluded) and the cache's one encoder pass.
    for m in (plain, cached):
        assert len(m["timing"]["epoch_wall_s"]) == 2 and all(t > 0 for t in m["timing"]["epoch_wall_s"])
        assert sum(m["timing"]["epoch_wall_s"]) <= m["train"]["wall_s"] * 1.001
    assert plain["timing"]["feature_extraction_s"] is None and cached["timing"]["feature_extraction_s"] > 0


def test_cache_needs_frozen_encoder(train_run):
    with pytest.raises(ConfigError, match="needs a frozen encoder"):
        train_run("model=bert_tiny", "task=sst2", "freeze=none", "head.cache_features=true")
