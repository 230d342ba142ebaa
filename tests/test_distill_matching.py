"""Layer matching for distillation (distill.hidden_weight, distill.attention_weight, distill.layer_map;
docs/distillation.md): the terms against direct implementations (masking, projection, layer map), the attention
probabilities against transformers' own, the gradients (projection and student, never the teacher), whole runs
for every head, and the settings refused before the first step."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from test_distill import TINY, _state

from bertlab.runtime.config import DistillConfig, EncoderConfig, HeadConfig, TaskSpec
from bertlab.tasks.distill_match import (
    LayerMatching,
    attention_log_probs,
    attention_loss,
    hidden_loss,
    recording,
    uniform_layer_map,
)

MATCH = ("distill.hidden_weight=1.0", "distill.attention_weight=0.5")


def test_the_uniform_map_spaces_layers_evenly_and_ends_at_the_top():
    assert uniform_layer_map(3, 6) == [1, 3, 5]
    assert uniform_layer_map(2, 4) == [1, 3]
    assert uniform_layer_map(4, 6) == [0, 2, 3, 5]
    assert uniform_layer_map(3, 3) == [0, 1, 2]
    assert uniform_layer_map(6, 3) == [0, 0, 0, 1, 1, 2]  # more student layers than the teacher's


# ----------------------------------------------------------------------------------------------------------
# The terms, written out with plain loops in float64 (no shared code with tasks/distill_match.py)


def _direct_mse(student, teacher, mask, weight=None):
    total, n = 0.0, 0
    for b in range(mask.shape[0]):
        for t in range(mask.shape[1]):
            if not mask[b, t]:
                continue
            s = student[b, t].double()
            if weight is not None:
                s = weight.double() @ s
            total += float(((s - teacher[b, t].double()) ** 2).mean())
            n += 1
    return total / n


def _direct_kl(student_p, teacher_p, mask):
    """student_p, teacher_p: (B, nh, T, T) probabilities; KL over keys per (head, real query)."""
    total, n = 0.0, 0
    for b in range(mask.shape[0]):
        for h in range(student_p.shape[1]):
            for q in range(mask.shape[1]):
                if not mask[b, q]:
                    continue
                kl = 0.0
                for k in range(mask.shape[1]):
                    p, r = float(teacher_p[b, h, q, k]), float(student_p[b, h, q, k])
                    if p > 0:
                        kl += p * (math.log(p) - math.log(r))
                total += kl
                n += 1
    return total / n


def _log_probs(b, nh, t, mask):
    scores = torch.randn(b, nh, t, t).masked_fill(~mask[:, None, None, :], -1e9)
    return scores.log_softmax(-1)


MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]], dtype=torch.bool)


def test_the_hidden_term_is_the_mse_over_real_tokens_through_the_projection():
    torch.manual_seed(0)
    student = [torch.randn(3, 5, 4) for _ in range(2)]
    teacher = [torch.randn(3, 5, 6) for _ in range(2)]
    projection = torch.nn.Linear(4, 6, bias=False)
    got = hidden_loss(student, teacher, MASK, projection).item()
    want = sum(_direct_mse(s, t, MASK, projection.weight.detach()) for s, t in zip(student, teacher)) / 2
    assert got == pytest.approx(want, rel=1e-5)
    # Padded positions never count, whatever they hold.
    noisy = [s.masked_fill(~MASK[..., None], 1e3) for s in student]
    assert hidden_loss(noisy, teacher, MASK, projection).item() == pytest.approx(got, rel=1e-6)
    # Same widths: no projection.
    same = [torch.randn(3, 5, 4) for _ in range(2)]
    want = sum(_direct_mse(s, t, MASK) for s, t in zip(student, same)) / 2
    assert float(hidden_loss(student, same, MASK, None)) == pytest.approx(want, rel=1e-5)


def test_the_attention_term_is_the_kl_per_head_and_real_query():
    torch.manual_seed(1)
    student = [_log_probs(3, 2, 5, MASK) for _ in range(2)]
    teacher = [_log_probs(3, 2, 5, MASK) for _ in range(2)]
    got = float(attention_loss(student, teacher, MASK))
    want = sum(_direct_kl(s.exp(), t.exp(), MASK) for s, t in zip(student, teacher)) / 2
    assert got == pytest.approx(want, rel=1e-5)
    assert float(attention_loss(teacher, teacher, MASK)) == pytest.approx(0.0, abs=1e-6)


def test_other_head_counts_compare_the_heads_mean():
    torch.manual_seed(2)
    student, teacher = _log_probs(3, 2, 5, MASK), _log_probs(3, 4, 5, MASK)
    got = float(attention_loss([student], [teacher], MASK))
    want = _direct_kl(student.exp().mean(1, keepdim=True), teacher.exp().mean(1, keepdim=True), MASK)
    assert got == pytest.approx(want, rel=1e-5)


# ----------------------------------------------------------------------------------------------------------
# Two tiny TaskModels: the recorded states, the attention probabilities, the whole matching loss


def _task_model(layers: int, width: int, heads: int, seed: int):
    from bertlab.models.assemble import assemble
    from bertlab.tasks.families import build_family

    torch.manual_seed(seed)
    config = EncoderConfig(vocab_size=50, hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=2 * width, max_position_embeddings=16)
    family = build_family(TaskSpec(name="t", family="sequence"), 3, None, None)
    return assemble(config, HeadConfig(), family.build_head, family.head_kind, True), family


def _batch():
    ids = torch.randint(5, 50, (3, 5))
    return {"input_ids": ids.masked_fill(~MASK, 0), "attention_mask": MASK.long(),
            "token_type_ids": torch.zeros(3, 5, dtype=torch.long), "labels": torch.tensor([0, 2, 1]),
            "index": torch.arange(3)}


def _hf_outputs(model, batch):
    """transformers' BertModel on the same weights (eager attention): its attentions and hidden states."""
    from transformers import BertConfig
    from transformers import BertModel as HFBert

    c = model.encoder.config
    config = BertConfig(vocab_size=50, hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
                        num_attention_heads=c.num_attention_heads, intermediate_size=c.intermediate_size,
                        max_position_embeddings=16)
    config._attn_implementation = "eager"  # the attention probabilities are formed (and returned)
    hf = HFBert(config).eval()
    hf.load_state_dict(model.encoder.state_dict())
    with torch.no_grad():
        out = hf(batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"],
                 output_attentions=True, output_hidden_states=True)
    return out.attentions, out.hidden_states


def test_recomputed_attention_is_the_attention_transformers_computes():
    model, _ = _task_model(2, 16, 4, seed=3)
    model.eval()
    batch = _batch()
    with recording(model) as got, torch.no_grad():
        model(batch)
    attentions, _ = _hf_outputs(model, batch)
    assert model.encoder.config.num_hidden_layers == len(attentions)
    for i, layer in enumerate(model.encoder.encoder.layer):
        ours = attention_log_probs(layer.attention.self, got.states[i], MASK).exp()
        real = MASK[:, None, :, None]  # HF's rows at padded queries are not compared (nothing reads them)
        torch.testing.assert_close(ours * real, attentions[i] * real, atol=1e-5, rtol=1e-4)
    assert model.output_hidden_states is False  # put back after the step


@pytest.mark.parametrize("layer_map", [None, [None, 2], [3, 0]])
def test_the_matching_loss_is_its_terms_on_the_mapped_layers(layer_map):
    student, _ = _task_model(2, 16, 2, seed=4)
    teacher, _ = _task_model(4, 24, 4, seed=5)
    student.eval(), teacher.eval()
    settings = DistillConfig(teacher="x", hidden_weight=0.7, attention_weight=0.3, layer_map=layer_map)
    matching = LayerMatching.build(student, teacher, settings)
    assert matching.projection is not None and matching.projection.weight.shape == (24, 16)
    pairs = [(s, t) for s, t in enumerate(layer_map or [1, 3]) if t is not None]
    batch = _batch()
    with recording(student) as s_got, recording(teacher) as t_got, torch.no_grad():
        student(batch), teacher(batch)
        got = float(matching.loss(s_got.states, t_got.states, batch))

    s_att, s_hid = _hf_outputs(student, batch)
    t_att, t_hid = _hf_outputs(teacher, batch)
    weight = matching.projection.weight.detach()
    hidden = sum(_direct_mse(s_hid[s + 1], t_hid[t + 1], MASK, weight) for s, t in pairs) / len(pairs)
    attention = sum(_direct_kl(s_att[s].mean(1, keepdim=True), t_att[t].mean(1, keepdim=True), MASK)
                    for s, t in pairs) / len(pairs)
    assert got == pytest.approx(0.7 * hidden + 0.3 * attention, rel=1e-4)


def test_gradients_reach_the_student_and_the_projection_never_the_teacher():
    from bertlab.tasks.distill import DistilledFamily

    student, family = _task_model(2, 16, 2, seed=6)
    teacher, _ = _task_model(4, 24, 4, seed=7)
    settings = DistillConfig(teacher="x", alpha=0.5, hidden_weight=1.0, attention_weight=1.0)
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    distilled = DistilledFamily(family, teacher, settings, matching=LayerMatching.build(student, teacher, settings))
    assert set(distilled.trainable_modules()) == {"distill_projection"}
    student.train()
    loss = distilled.training_loss(student, _batch())  # the student as the forward (the module's .model path)
    loss.backward()
    projection = distilled.matching.projection
    assert projection.weight.grad is not None and projection.weight.grad.abs().sum() > 0
    assert student.encoder.encoder.layer[0].attention.self.key.weight.grad.abs().sum() > 0  # attention term's path
    assert all(p.grad is None and not p.requires_grad for p in teacher.parameters())
    assert not teacher.training and teacher.output_hidden_states is False
    after = teacher.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_the_matching_terms_add_to_the_logit_loss():
    from bertlab.tasks.distill import DistilledFamily

    student, family = _task_model(2, 16, 2, seed=8)
    teacher, _ = _task_model(2, 16, 2, seed=9)
    student.eval()
    batch = _batch()
    plain = DistilledFamily(family, teacher, DistillConfig(teacher="x"))
    settings = DistillConfig(teacher="x", hidden_weight=2.0)
    matched = DistilledFamily(family, teacher, settings, matching=LayerMatching.build(student, teacher, settings))
    assert matched.matching.projection is None  # the same width: no projection
    with torch.no_grad():
        with recording(student) as s, recording(teacher) as t:
            student(batch), teacher(batch)
        extra = float(matched.matching.loss(s.states, t.states, batch))
        assert float(matched.training_loss(student, batch)) == pytest.approx(
            float(plain.training_loss(student, batch)) + extra, rel=1e-5)
    assert extra > 0


# ----------------------------------------------------------------------------------------------------------
# Whole runs on the fixtures




def test_a_matched_student_of_another_width_trains_its_projection_and_exports_without_it(
        train_run, tmp_path, sst2_teacher, caplog):
    from bertlab.training.checkpoint_files import run_dir_checkpoint

    before = {k: v.clone() for k, v in _state(run_dir_checkpoint(sst2_teacher)).items()}
    with caplog.at_level("INFO"):
        m = train_run(*TINY, "task=sst2", "model.hidden_size=64", f"distill.teacher={sst2_teacher}", *MATCH,
                      "export=true", "trainer.max_steps=3")
    text = caplog.text
    assert "layer matching (hidden states × 1.0 through a learned projection + attention × 0.5" in text
    assert "student→teacher layers 0→1, 1→3" in text
    assert "teacher: " in text and "MiB activations a batch of 4 × 128 tokens" in text  # the plan's line
    after = _state(run_dir_checkpoint(sst2_teacher))
    assert all(torch.equal(before[k], after[k]) for k in before)
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    assert scope["teacher"]["updated"] is False and scope["teacher"]["in_optimizer"] == 0
    state = _state(Path(m["best_checkpoint"]))
    assert state["family_modules.distill_projection.weight"].shape == (128, 64)
    assert m["distill"]["hidden_weight"] == 1.0 and m["distill"]["attention_weight"] == 0.5
    export = tmp_path / "run" / "export"
    from safetensors.torch import load_file

    exported = load_file(str(next(export.glob("*.safetensors"))))
    assert not any("distill" in k or "projection" in k for k in exported)
    assert json.loads((export / "config.json").read_text())["hidden_size"] == 64
    # No teacher-output file: matching runs the teacher live (it needs its layers).
    assert not list((tmp_path / "run").rglob("teacher_outputs"))
    # Evaluating the run (the teacher is not loaded, so no projection): the checkpoint's projection is left out.
    again = train_run(*TINY, "task=sst2", "model.hidden_size=64", f"distill.teacher={sst2_teacher}", *MATCH,
                      "train=false", f"ckpt_path={m['best_checkpoint']}", name="eval")
    assert again["val"]["accuracy"] == m["val"]["accuracy"]


@pytest.mark.parametrize("task", ["conll2003", "squad", "swag", "stsb"])
def test_every_head_matches_layers(train_run, tmp_path, task):
    teacher_run = tmp_path / "teacher"
    train_run(*TINY, f"task={task}", "model.num_hidden_layers=3", name="teacher")
    m = train_run(*TINY, f"task={task}", f"distill.teacher={teacher_run}", "distill.student_layers=[0,2]",
                  *MATCH, "distill.layer_map=[null,2]", name="student")
    assert m["val"]["num_examples"] > 0
    scope = json.loads((tmp_path / "student" / "update_scope.json").read_text())
    assert scope["teacher"]["updated"] is False and scope["totals"]["encoder"]["changed"] > 0


def _refused(train_run, *overrides, match):
    from bertlab.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match=match) as err:
        train_run(*TINY, *overrides, name="bad")
    assert "\n" not in str(err.value) and "distill" in str(err.value)


@pytest.mark.parametrize("overrides,match", [
    (("distill.layer_map=[1,2,3]",), "the student has 2 layers and the teacher 4"),
    (("distill.layer_map=[1,4]",), r"the teacher 4 \(0..3\)"),
    (("model=modernbert_tiny",), "does not expose its attention probabilities"),
    (("model=lstm",), "recurrent encoder"),
])
def test_matching_that_cannot_be_done_is_refused(train_run, sst2_teacher, overrides, match):
    _refused(train_run, "task=sst2", f"distill.teacher={sst2_teacher}", *MATCH, *overrides, match=match)


@pytest.mark.parametrize("case", ["vocabulary", "labels", "task", "folder"])
def test_bad_teachers_are_refused_with_matching_on(train_run, tmp_path, sst2_teacher, case):
    from bertlab.data.tokenizer import tokenizer_for

    teacher = tmp_path / "nowhere" if case == "folder" else sst2_teacher
    extra = {"labels": ('task.labels=["1","0"]',), "task": ("task=cola",), "folder": (), "vocabulary": ()}[case]
    if case == "vocabulary":
        folder = tmp_path / "other_tokenizer"
        tokenizer_for(None, lambda: ["a small other vocabulary", "with other words"] * 50, vocab_size=120).save(folder)
        extra = (f"model.tokenizer={folder}",)
    match = {"vocabulary": "tokenizer", "labels": "another order", "task": "task=cola",
             "folder": "no such file"}[case]
    task = () if case == "task" else ("task=sst2",)
    _refused(train_run, *task, f"distill.teacher={teacher}", *MATCH, *extra, match=match)


@pytest.mark.parametrize("bad,match", [
    ({"teacher": "x", "layer_map": [1, 3]}, "layer matching, which is off"),
    ({"teacher": "x", "hidden_weight": 1.0, "layer_map": [None, None]}, "at least one not null"),
    ({"teacher": "x", "hidden_weight": 1.0, "layer_map": [-1, 2]}, "one teacher layer"),
    ({"hidden_weight": 1.0}, "set distill.teacher"),
    ({"attention_weight": 0.5}, "set distill.teacher"),
])
def test_matching_settings_are_checked(bad, match):
    from bertlab.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        DistillConfig(**bad)


@pytest.mark.parametrize("policy", ["lora", "embeddings"])
def test_matching_works_with_freeze_policies(train_run, tmp_path, sst2_teacher, policy):
    m = train_run(*TINY, "task=sst2", "model.hidden_size=64", f"distill.teacher={sst2_teacher}", *MATCH,
                  f"freeze={policy}")
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    assert scope["teacher"]["updated"] is False and m["freeze"] == policy
    assert "family_modules.distill_projection.weight" in _state(Path(m["best_checkpoint"]))
