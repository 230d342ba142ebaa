"""Replaced-token detection (``task=rtd``, ELECTRA): the labels, the loss, the model's layout (the discriminator is
the run's encoder, the generator shares its embeddings), sampling, ``model.init_from`` from an rtd run, the
settings' checks, and an exact resume."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import compose, run_train
from omegaconf import OmegaConf
from test_init_from import _build_sst2
from test_resume import assert_same_training, csv_rows

from bertlab.data.batching import Collator
from bertlab.data.mlm import IGNORE_INDEX
from bertlab.models.assemble import assemble
from bertlab.models.deberta import DebertaConfig
from bertlab.models.families import config_from_hf, families, tiny_config
from bertlab.models.recurrent import RecurrentConfig
from bertlab.models.rtd import RTDOutput, check_discriminator, generator_config
from bertlab.runtime.checks import check_settings
from bertlab.runtime.config import ConfigError, EncoderConfig, HeadConfig, TaskSpec
from bertlab.runtime.errors import NonFiniteLossError
from bertlab.tasks.base import EvalState
from bertlab.tasks.families import build_family, logged_metrics
from bertlab.tasks.rtd import RTDFamily, original_ids, replaced_labels, rtd_losses

PAD, CLS, SEP, MASK = 0, 2, 3, 4
VOCAB = 40
SPECIALS = torch.tensor([0, 1, 2, 3, 4])


def tiny(family: str = "bert", **task) -> tuple[RTDFamily, torch.nn.Module]:
    """An RTD model (generator and discriminator) on the family's tiny config (FamilySpec.tiny_config, no dropout)
    at this test's sizes."""
    spec = TaskSpec(name="rtd", family="rtd", mlm_probability=0.15, **task)
    rtd = build_family(spec, 0, None, None)
    config = config_from_hf(tiny_config(family, vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                        pad_token_id=PAD))
    head = HeadConfig()
    return rtd, assemble(config, head, rtd.build_head, rtd.stock_head_kind(head), add_pooling_layer=False)


def collator(train: bool, probability: float = 0.15) -> Collator:
    return Collator(PAD, None, {"vocab_size": VOCAB, "mask_id": MASK, "special_ids": SPECIALS,
                                "probability": probability, "whole_word": False, "continuation": None,
                                "generator": torch.Generator().manual_seed(0) if train else None,
                                "fixed_eval_masks": not train, "seed": 0})


def corpus(n: int, seed: int = 0) -> list[dict]:
    """Segments of a cyclic sequence of 20 words at random offsets and lengths: learnable from context."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        start, length = int(torch.randint(20, (1,), generator=g)), int(torch.randint(8, 24, (1,), generator=g))
        ids = [CLS, *(5 + (start + k) % 20 for k in range(length)), SEP]
        out.append({"input_ids": ids, "token_type_ids": [0] * len(ids), "index": i})
    return out


# ----------------------------------------------------------------------------------------------------------
# Labels and loss


def test_labels_on_a_hand_built_batch():
    #             [CLS] 10 [MASK] 12  13   [SEP] pad      (13 at position 4: BERT's 10 % random, original 14)
    masked = torch.tensor([[CLS, 10, MASK, 12, 13, SEP, PAD], [CLS, MASK, 21, 22, SEP, PAD, PAD]])
    labels = torch.full_like(masked, IGNORE_INDEX)
    labels[0, 2], labels[0, 4], labels[1, 1] = 11, 14, 20
    attention = (torch.arange(7) < torch.tensor([[6], [5]])).long()
    batch = {"input_ids": masked, "labels": labels, "attention_mask": attention}
    original = original_ids(batch)
    assert original.tolist() == [[CLS, 10, 11, 12, 14, SEP, PAD], [CLS, 20, 21, 22, SEP, PAD, PAD]]
    # The generator drew 11 (the original: counts as original), 30 and 25; nothing else changes.
    corrupted = original.clone()
    corrupted[0, 4], corrupted[1, 1] = 30, 25
    is_replaced, real = replaced_labels(original, corrupted, attention)
    assert is_replaced.tolist() == [[0, 0, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0, 0]]
    assert real.tolist() == attention.bool().tolist()  # [CLS] and [SEP] are scored, padding is not
    # A padded position that differs (a corrupted pad) is never a label.
    corrupted[1, 6] = 9
    assert replaced_labels(original, corrupted, attention)[0][1, 6] == 0

    # Zero logits: log 2 per real token, whatever the padding's logits; the generator's loss over the 3 selected.
    logits = torch.zeros(2, 7)
    logits[:, -1] = 1e4
    gen_logits = torch.zeros(3, VOCAB)
    parts = rtd_losses(RTDOutput(gen_logits, logits, corrupted), batch)
    assert float(parts["disc"]) == pytest.approx(math.log(2), rel=1e-6)
    assert float(parts["gen"]) == pytest.approx(math.log(VOCAB), rel=1e-6)
    family = RTDFamily(TaskSpec(name="rtd", family="rtd", disc_weight=50.0), 0, None)
    assert float(family.loss(RTDOutput(gen_logits, logits, corrupted), batch)) == \
        pytest.approx(math.log(VOCAB) + 50 * math.log(2), rel=1e-6)
    # Confident right answers: a loss near 0.
    right = torch.where(is_replaced.bool(), 20.0, -20.0)
    assert float(rtd_losses(RTDOutput(gen_logits, right, corrupted), batch)["disc"]) < 1e-6


# One family of each way a generator shares the discriminator's embeddings (FamilySpec.rtd_generator).
FAMILIES = pytest.mark.parametrize("encoder", list({spec.rtd_generator: name for name, spec in reversed(families().items())
                                                    if spec.rtd_generator}.values())[::-1])


@FAMILIES
def test_loss_is_finite_and_falls_over_30_steps(encoder):
    torch.manual_seed(0)
    family, model = tiny(family=encoder)
    collate, data = collator(train=True, probability=0.3), corpus(64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for step in range(30):
        batch = collate([data[(step * 8 + i) % len(data)] for i in range(8)])
        loss = family.loss(model(batch, **family.head_kwargs(batch)), batch)
        assert torch.isfinite(loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.9 * first, losses


# ----------------------------------------------------------------------------------------------------------
# The model: layout, tied embeddings, sampling


def test_discriminator_keys_are_an_mlm_runs_encoder_keys_and_the_generator_shares_the_embeddings():
    _, model = tiny()
    mlm_spec = TaskSpec(name="mlm", family="mlm")
    mlm_family = build_family(mlm_spec, 0, None, None)
    mlm = assemble(model.encoder.config, HeadConfig(), mlm_family.build_head, "mlm", add_pooling_layer=False)
    encoder_keys = {k for k in model.state_dict() if k.startswith("encoder.")}
    assert encoder_keys == {k for k in mlm.state_dict() if k.startswith("encoder.")}
    head = model.head
    assert head.generator.embeddings is model.encoder.embeddings
    assert head.generator_head.predictions.decoder.weight is model.encoder.embeddings.word_embeddings.weight
    # 0.25 of hidden 32 / 2 heads / 64: 8 wide, 1 head, 16; as deep; projected from the shared 32-wide embeddings.
    gen = head.generator.config
    assert (gen.hidden_size, gen.num_attention_heads, gen.intermediate_size, gen.num_hidden_layers) == (8, 1, 16, 2)
    assert head.generator.embeddings_project.weight.shape == (8, 32)
    # Each tensor once in the optimizer's view (named_parameters deduplicates the shared ones).
    names = [n for n, _ in model.named_parameters()]
    assert not any(n.startswith("head.generator.embeddings.") for n in names)


def test_generator_config_scales_width_heads_and_feed_forward():
    mini = EncoderConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
    gen = generator_config(mini, 0.25)  # ELECTRA-Small's generator: 64 wide, 1 head, 256
    assert (gen.hidden_size, gen.num_attention_heads, gen.intermediate_size, gen.num_hidden_layers) == (64, 1, 256, 4)
    assert gen.embedding_width == 256
    gen = generator_config(EncoderConfig(hidden_size=768, num_attention_heads=12), 1 / 3, layers=6)
    assert (gen.hidden_size, gen.num_attention_heads, gen.num_hidden_layers) == (256, 4, 6)
    # Heads that would not divide the width are lowered until they do: 0.3 × 256 = 77 wide, 1 head.
    gen = generator_config(mini, 0.3)
    assert gen.hidden_size == 77 and gen.hidden_size % gen.num_attention_heads == 0
    assert generator_config(mini, 1.0).hidden_size == 256


def test_layer_lr_decay_counts_the_discriminators_layers_not_the_generators():
    from bertlab.training.optim import optimizer_param_groups

    _, model = tiny(generator_layers=5)  # a generator deeper than the 2-layer discriminator
    groups = {g["name"]: g for g in optimizer_param_groups(model, weight_decay=0.0, lr=1.0, layer_lr_decay=0.5)}
    assert groups["layer.1.decay"]["lr"] == 0.5 and groups["layer.0.decay"]["lr"] == 0.25
    assert groups["embeddings.decay"]["lr"] == 0.125
    assert groups["head.decay"]["lr"] == 1.0
    assert any(n.startswith("head.generator.encoder.layer.4.") for n in groups["head.decay"]["param_names"])


@pytest.mark.parametrize("size", [0, -0.5, 1.5, float("nan")])
def test_generator_size_outside_zero_one_is_refused(tmp_path, size):
    with pytest.raises(ConfigError, match=r"task\.generator_size=.*must be a number in \(0, 1\]"):
        TaskSpec(name="rtd", family="rtd", generator_size=size)
    cfg = compose(["task=rtd", f"task.generator_size={size}"], tmp_path / "run")
    with pytest.raises(ConfigError, match=r"task\.generator_size=.*must be a number in \(0, 1\]"):
        check_settings(cfg, logged_metrics)
    with pytest.raises(ConfigError, match="generator_size"):
        generator_config(EncoderConfig(), size)


def test_generator_layers_must_be_positive():
    with pytest.raises(ConfigError, match=r"task\.generator_layers=0"):
        TaskSpec(name="rtd", family="rtd", generator_layers=0)


def test_samples_replace_only_the_masked_positions_and_never_with_padding():
    _, model = tiny()
    bias = model.head.generator_head.predictions.bias
    with torch.no_grad():
        bias[PAD], bias[7] = 1e4, 1e3  # padding would win every draw if it were allowed; 7 wins instead
    batch = collator(train=True, probability=0.5)(corpus(6))
    positions = (batch["labels"] != IGNORE_INDEX).nonzero()
    for training in (True, False):
        model.train(training)
        corrupted_batch, kwargs = model.head.corrupt(batch, positions)
        corrupted = kwargs["corrupted"]
        assert corrupted_batch["input_ids"] is corrupted
        selected = batch["labels"] != IGNORE_INDEX
        assert torch.equal(corrupted[~selected], batch["input_ids"][~selected])
        assert (corrupted[selected] == 7).all()
        assert kwargs["generator_logits"].shape == (len(positions), VOCAB)


def test_evaluation_draws_depend_on_the_example_not_on_its_batch():
    torch.manual_seed(1)
    family, model = tiny()
    model.eval()
    collate, data = collator(train=False), corpus(14)

    def counts(batch_size: int) -> dict[str, float]:
        state = EvalState()
        with torch.no_grad():
            for i in range(0, len(data), batch_size):
                batch = collate(data[i:i + batch_size])
                family.eval_step(model(batch, **family.head_kwargs(batch)), batch, state)
        return {**state.extra, "gen": state.loss_sum}

    rng = torch.get_rng_state()
    a, b = counts(3), counts(7)
    assert torch.equal(rng, torch.get_rng_state())  # evaluation leaves the training RNG alone
    for key in ("replaced", "disc_count", "gen_count", "gen_correct"):
        assert a[key] == b[key], key
    assert a["disc_loss_sum"] == pytest.approx(b["disc_loss_sum"], rel=1e-5)
    assert a["gen"] == pytest.approx(b["gen"], rel=1e-5)


@FAMILIES
def test_padded_and_unpadded_paths_compute_the_same_rtd_outputs(encoder):
    torch.manual_seed(2)
    family, model = tiny(family=encoder)
    model.eval()
    batch = collator(train=False, probability=0.3)(corpus(9))  # lengths 10 to 25: padded rows
    assert (batch["attention_mask"] == 0).any()
    outputs = {}
    for mode in ("true", "false"):
        model.encoder.unpad = model.head.generator.unpad = mode
        with torch.no_grad():
            outputs[mode] = model(batch, **family.head_kwargs(batch))
    packed, padded = outputs["true"], outputs["false"]
    assert torch.equal(packed.corrupted, padded.corrupted)
    torch.testing.assert_close(packed.generator_logits, padded.generator_logits, atol=1e-5, rtol=1e-5)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(packed.logits[real], padded.logits[real], atol=1e-5, rtol=1e-5)


def test_a_modernbert_generator_projects_the_shared_embeddings_to_its_width():
    _, model = tiny(family="modernbert", generator_size=0.5)
    generator, shared = model.head.generator, model.encoder.embeddings
    assert generator.embeddings.shared is shared  # one module: token embeddings and norm trained by both losses
    assert generator.embeddings.word_embeddings is shared.word_embeddings
    assert generator.embeddings.project.weight.shape == (16, 32)
    assert model.head.generator_head.predictions.decoder.weight is shared.word_embeddings.weight
    gen = generator.config
    assert (type(gen).__name__, gen.hidden_size, gen.num_attention_heads, gen.intermediate_size) == \
        ("ModernBertConfig", 16, 1, 32)
    names = [n for n, _ in model.named_parameters()]
    assert not any(n.startswith("head.generator.embeddings.shared.") for n in names)


@pytest.mark.parametrize("config", [RecurrentConfig(), DebertaConfig(hidden_size=64, num_attention_heads=2)],
                         ids=["recurrent", "deberta-v2"])
def test_a_discriminator_whose_embeddings_cannot_be_shared_is_refused(config):
    with pytest.raises(ConfigError, match="task=rtd pre-trains an encoder of a family") as err:
        check_discriminator(config)
    # the families that can are read from the registry (FamilySpec.rtd_generator), DeBERTa-v2 not among them
    assert "bert, roberta" in str(err.value) and "modernbert" in str(err.value)
    assert "deberta-v2," not in str(err.value) and "deberta-v2)" not in str(err.value)


@pytest.mark.parametrize("setting", ["freeze=encoder", "freeze=lora", "export=true", "export=onnx", "predict=true"])
def test_settings_a_pretraining_run_cannot_use_are_refused_before_any_work(tmp_path, setting):
    cfg = compose(["task=rtd", "model=bert_tiny", setting], tmp_path / "run")
    with pytest.raises(ConfigError, match=r"task=rtd with .*model\.init_from=<this run dir>"):
        check_settings(cfg, logged_metrics)


def test_nsp_is_refused():
    with pytest.raises(ConfigError, match="task.nsp=true is for task=mlm"):
        RTDFamily(TaskSpec(name="rtd", family="rtd", nsp=True), 0, None)


# ----------------------------------------------------------------------------------------------------------
# Runs: metrics.json, init_from, export/predict refusal, exact resume

QUICK = ("model=bert_tiny", "task=rtd", "trainer.max_epochs=1", "trainer.limit_train_batches=2")


@pytest.fixture(scope="module")
def rtd_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("rtd") / "pretrain"
    metrics = run_train(list(QUICK), run_dir)
    return run_dir, metrics


def test_an_rtd_run_logs_its_metrics_and_audits_every_tensor(rtd_run):
    run_dir, m = rtd_run
    val = m["val"]
    assert set(val) == {*RTDFamily.logged_metrics({}, {}), "num_examples"}
    assert val["loss"] == pytest.approx(val["gen_loss"] + 50.0 * val["disc_loss"], rel=1e-9)
    assert 0 < val["replaced_fraction"] < 0.3 and 0 <= val["disc_accuracy"] <= 1
    assert m["monitor"]["metric"] == "val/loss"
    scope = json.loads((run_dir / "update_scope.json").read_text())
    assert scope["frozen_changed"] == [] and scope["trainable_without_grad"] == []
    for part in ("encoder", "head"):
        assert scope["totals"][part]["changed"] == scope["totals"][part]["tensors"] > 0


def test_init_from_an_rtd_run_fine_tunes_its_discriminator(rtd_run, tmp_path):
    run_dir, m = rtd_run
    tokenizer, model, report = _build_sst2(run_dir, tmp_path, model="bert_mini")
    state = torch.load(m["best_checkpoint"], map_location="cpu", weights_only=True)["state_dict"]
    discriminator = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.encoder.")}
    own = model.state_dict()
    assert discriminator and set(report.loaded) == set(discriminator)
    for key, value in discriminator.items():
        torch.testing.assert_close(own[key], value, atol=0, rtol=0)
    assert model.encoder.config.hidden_size == 128  # the run's architecture, not model=bert_mini's
    assert report.dropped and all(k.startswith("head.") for k in report.dropped)
    assert any(k.startswith("head.generator.") for k in report.dropped)
    # Only what an mlm start (without NSP) leaves new: the pooler and the classifier.
    assert set(report.newly_initialised) == {"encoder.pooler.dense.weight", "encoder.pooler.dense.bias",
                                             "head.classifier.weight", "head.classifier.bias"}


def test_a_modernbert_rtd_run_fine_tunes_its_discriminator(tmp_path):
    run_dir = tmp_path / "pretrain"
    m = run_train(["model=modernbert_tiny", "task=rtd", "task.generator_size=0.5", "trainer.max_epochs=1",
                   "trainer.limit_train_batches=2"], run_dir)
    assert math.isfinite(m["val"]["loss"]) and 0 < m["val"]["replaced_fraction"] < 0.3
    scope = json.loads((run_dir / "update_scope.json").read_text())
    assert scope["frozen_changed"] == [] and scope["trainable_without_grad"] == []
    _, model, report = _build_sst2(run_dir, tmp_path, model="bert_tiny")
    assert type(model.encoder).__name__ == "ModernBertModel"  # the run's family and shape, not model=bert_tiny's
    state = torch.load(m["best_checkpoint"], map_location="cpu", weights_only=True)["state_dict"]
    discriminator = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.encoder.")}
    assert discriminator and set(report.loaded) == set(discriminator)
    own = model.state_dict()
    for key, value in discriminator.items():
        torch.testing.assert_close(own[key], value, atol=0, rtol=0)
    assert any(k.startswith("head.generator.") for k in report.dropped)
    # Only the classification head is new (ModernBERT's: dense → norm → classifier); the encoder is all loaded.
    assert {"head.classifier.weight", "head.classifier.bias"} <= set(report.newly_initialised)
    assert all(k.startswith("head.") for k in report.newly_initialised)


def test_export_and_predict_refuse_an_rtd_run(rtd_run, tmp_path):
    from bertlab.inference.export import export_checkpoint
    from bertlab.inference.predictor import Predictor

    run_dir, _ = rtd_run
    with pytest.raises(ConfigError, match=r"task=rtd.*model\.init_from="):
        export_checkpoint(run_dir, tmp_path / "export")
    assert not (tmp_path / "export" / "model.safetensors").exists()
    with pytest.raises(ConfigError, match=r"gives no prediction records.*model\.init_from="):
        Predictor.from_run(run_dir)


RESUME = ("model=bert_tiny", "task=rtd", "trainer.max_epochs=2", "trainer.deterministic=true",
          "data.batch_size=8", "save_every_n_steps=2", "trainer.log_every_n_steps=1")  # 20 examples: 3 steps/epoch


def test_crash_mid_epoch_then_resume_matches_the_uninterrupted_run(tmp_path, monkeypatch):
    cache = f"paths.cache_dir={tmp_path / 'cache'}"  # one vocabulary and one prepared corpus for the three runs
    a, b = tmp_path / "a", tmp_path / "b"
    run_train([*RESUME, cache], a)
    original, seen = RTDFamily.loss, {"n": 0}

    def loss(self, out, batch):
        value = original(self, out, batch)
        seen["n"] += 1
        return value * float("nan") if seen["n"] == 6 else value

    with monkeypatch.context() as patch:
        patch.setattr(RTDFamily, "loss", loss)
        with pytest.raises(NonFiniteLossError, match=r"at global step 5, epoch 2, batch 2"):
            run_train([*RESUME, cache], b)
    last = torch.load(b / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["global_step"] == 4  # mid-epoch: one batch of epoch 2 done
    metrics = run_train([*RESUME, cache, "ckpt_path=last"], b)
    assert metrics["train"]["resumed_from_step"] == 4
    assert_same_training(a, b)
    assert csv_rows(a) == csv_rows(b)


def test_rtd_preset_composes_with_its_documented_defaults(tmp_path):
    cfg = compose(["task=rtd"], tmp_path / "run")
    task = OmegaConf.to_container(cfg.task, resolve=True)
    assert (task["generator_size"], task["generator_layers"], task["disc_weight"], task["temperature"],
            task["mlm_probability"]) == (0.25, None, 50.0, 1.0, 0.15)
    check_settings(cfg, logged_metrics)
