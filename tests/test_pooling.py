"""head.pooling=mean: the mean over real tokens, with padding excluded."""

from __future__ import annotations

import torch

from bertlab.models.bert import BertModel
from bertlab.models.heads import SequenceClassificationHead, TaskModel, masked_mean
from bertlab.runtime.config import EncoderConfig, HeadConfig


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
    model = TaskModel(BertModel(config), SequenceClassificationHead(config, HeadConfig(pooling="mean"), 2),
                      "sequence").eval()
    alone = {"input_ids": torch.tensor([[2, 7, 9, 3]]), "attention_mask": torch.ones(1, 4, dtype=torch.long)}
    padded = {"input_ids": torch.tensor([[2, 7, 9, 3, 0, 0], [2, 5, 6, 8, 11, 3]]),
              "attention_mask": torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])}
    with torch.no_grad():
        torch.testing.assert_close(model.encode(padded)[0], model.encode(alone)[0], atol=1e-5, rtol=1e-5)
        # Against the definition: the mean of the last layer over the four real tokens.
        last = model.encoder(alone["input_ids"], attention_mask=alone["attention_mask"]).last_hidden_state
        torch.testing.assert_close(model.encode(alone)[0], last[0].mean(0))


def _st_folder(root, pooling: dict | None, modules: object = None):
    """A checkpoint folder with (optionally) a sentence-transformers Pooling module."""
    import json

    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text("{}")
    if pooling is not None:
        (root / "modules.json").write_text(json.dumps(modules if modules is not None else [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
        (root / "1_Pooling").mkdir()
        modes = {f"pooling_mode_{m}": False for m in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")}
        (root / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 16, **modes, **pooling}))
    return root


def test_sentence_transformers_pooling_reads_the_declared_mode(tmp_path):
    from bertlab.models.hf_weights import sentence_transformers_pooling

    assert sentence_transformers_pooling(_st_folder(tmp_path / "mean", {"pooling_mode_mean_tokens": True})) == "mean"
    assert sentence_transformers_pooling(_st_folder(tmp_path / "cls", {"pooling_mode_cls_token": True})) == "cls"
    # Poolings bertlab has no head for, several at once, a plain BERT folder, unreadable files: no answer.
    assert sentence_transformers_pooling(_st_folder(tmp_path / "max", {"pooling_mode_max_tokens": True})) is None
    both = {"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}
    assert sentence_transformers_pooling(_st_folder(tmp_path / "both", both)) is None
    assert sentence_transformers_pooling(_st_folder(tmp_path / "plain", None)) is None
    assert sentence_transformers_pooling(_st_folder(tmp_path / "odd", {"pooling_mode_mean_tokens": True},
                                                    modules={"not": "a list"})) is None
    broken = _st_folder(tmp_path / "broken", {"pooling_mode_mean_tokens": True})
    (broken / "1_Pooling" / "config.json").write_text("{not json")
    assert sentence_transformers_pooling(broken) is None


def test_auto_pooling_follows_the_checkpoint_and_falls_back_to_the_pooler(tmp_path):
    from bertlab.training.build import resolve_head_config

    auto = HeadConfig(pooling="auto")
    mean_dir = _st_folder(tmp_path / "mean", {"pooling_mode_mean_tokens": True})
    assert resolve_head_config(auto, {"pretrained": str(mean_dir)}).pooling == "mean"
    assert resolve_head_config(auto, {"init_from": str(mean_dir)}).pooling == "mean"  # an HF folder to start from
    assert resolve_head_config(auto, {"pretrained": str(_st_folder(tmp_path / "bert", None))}).pooling == "pooler"
    assert resolve_head_config(auto, {"pretrained": None}).pooling == "pooler"  # a scratch model
    assert resolve_head_config(auto, {"encoder": "recurrent", "pretrained": None}).pooling == "pooler"
    # An explicit choice is kept whatever the checkpoint declares.
    assert resolve_head_config(HeadConfig(pooling="cls"), {"pretrained": str(mean_dir)}).pooling == "cls"


def test_auto_pooling_from_a_bertlab_run_follows_that_run(tmp_path):
    """A run started from a bertlab checkpoint (model.init_from) resolves head.pooling=auto to the pooling that run's
    sentence-level head read, or, for a run without one (pre-training), to what its base checkpoint declares —
    not to BERT's pooler because the start is a .ckpt rather than a folder."""
    import torch

    from bertlab.training.build import resolve_head_config

    auto = HeadConfig(pooling="auto")
    mean_dir = _st_folder(tmp_path / "mean", {"pooling_mode_mean_tokens": True})

    def run(name: str, family: str, pooling: str, base: str | None) -> str:
        path = tmp_path / f"{name}.ckpt"
        torch.save({"state_dict": {}, "hyper_parameters": {"task": {"family": family}, "head": {"pooling": pooling},
                                                            "base_weights": base}}, path)
        return str(path)

    assert resolve_head_config(auto, {"init_from": run("cls_run", "sequence", "cls", str(mean_dir))}).pooling == "cls"
    assert resolve_head_config(auto, {"init_from": run("choice", "multiple_choice", "mean", None)}).pooling == "mean"
    # A pre-training run's head pools nothing: its base checkpoint decides.
    assert resolve_head_config(auto, {"init_from": run("mlm", "mlm", "pooler", str(mean_dir))}).pooling == "mean"
    assert resolve_head_config(auto, {"init_from": run("tags", "token", "pooler", None)}).pooling == "pooler"
    # A base that cannot be found here (a hub id offline, a folder since removed) declares nothing.
    gone = str(tmp_path / "removed")
    assert resolve_head_config(auto, {"init_from": run("gone", "mlm", "pooler", gone)}).pooling == "pooler"
    # The start replaces the preset's checkpoint for this choice too.
    plain = str(_st_folder(tmp_path / "bert", None))
    assert resolve_head_config(auto, {"pretrained": str(mean_dir),
                                      "init_from": run("pooler_run", "sequence", "pooler", plain)}).pooling == "pooler"
