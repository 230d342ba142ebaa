"""A task head started from a masked-LM checkpoint takes what transformers takes: for every family, bertlab's
classifier (and tagger) built from a tiny MLM checkpoint holds the same tensors as transformers'
AutoModelFor<Task>.from_pretrained of the same folder, except those both start new. ModernBERT's task classes
reuse the prediction head (head.dense / head.norm) by name; BERT-shaped families share nothing with theirs.
A bertlab masked-LM run given as model.init_from carries the same tensors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_DATA, run_train

from bertlab.data.tokenizer import load_tokenizer, train_wordpiece
from bertlab.models.families import families, family_spec, tiny_config
from bertlab.models.hf_weights import bertlab_key_to_hf, export_state_dict
from bertlab.runtime.config import HeadConfig, TaskSpec
from bertlab.tasks.families import build_family
from bertlab.training.build import build_model

transformers = pytest.importorskip("transformers")

TASKS = {"sequence": (TaskSpec(name="cls", family="sequence", labels=["a", "b", "c"]),
                      "AutoModelForSequenceClassification"),
         "token": (TaskSpec(name="ner", family="token", labels=["O", "B-X", "I-X"]), "AutoModelForTokenClassification")}
def _texts() -> list[str]:
    return [line.split("\t")[0] for line in (FIXTURE_DATA / "sst2" / "train.tsv").read_text().splitlines()[1:]]


def mlm_folder(root: Path, model_type: str) -> Path:
    """A random tiny masked-LM checkpoint of the family (every tensor moved off its initial value) + tokenizer."""
    folder = root / model_type
    tok = train_wordpiece(_texts(), vocab_size=300)
    cfg = transformers.AutoConfig.for_model(**tiny_config(model_type, tok))  # the family's tiny model
    torch.manual_seed(0)
    model = transformers.AutoModelForMaskedLM.from_config(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(folder)
    tok.save(folder)
    return folder


@pytest.mark.parametrize("case", list(TASKS))
@pytest.mark.parametrize("model_type", list(families()))
def test_a_head_from_an_mlm_checkpoint_takes_what_transformers_takes(tmp_path, model_type, case):
    folder = mlm_folder(tmp_path, model_type)
    task, auto_class = TASKS[case]
    family = build_family(task, len(task.labels), task.labels, None)
    ours, report = build_model({"pretrained": str(folder)}, HeadConfig(), family, load_tokenizer(folder))
    hf, info = getattr(transformers, auto_class).from_pretrained(folder, num_labels=len(task.labels),
                                                                 output_loading_info=True)
    spec = family_spec(model_type)
    ours_hf = export_state_dict(ours.state_dict(), ours.head_kind, spec)
    missing = set(info["missing_keys"])
    new_ours = {bertlab_key_to_hf(k, ours.head_kind, spec) for k in report.newly_initialised}
    hf_state = hf.state_dict()
    carried = []
    for key, tensor in hf_state.items():
        if key in missing:  # new in transformers: new in bertlab too
            assert key in new_ours, f"{key}: transformers starts it new, bertlab loaded it"
        else:
            assert key in ours_hf, key
            assert key not in new_ours, f"{key}: transformers loads it from the MLM checkpoint, bertlab starts it new"
            torch.testing.assert_close(ours_hf[key], tensor, atol=0, rtol=0)
            carried.append(key)
    # What the family's task class names as its masked-LM head does (ModernBERT's prediction head, the issue's
    # case) comes along.
    shared = {theirs for theirs, _ in spec.heads["mlm"].keys} & {theirs for theirs, _ in spec.heads[case].keys}
    for prefix in shared:
        assert any(key.startswith(prefix) for key in carried), (prefix, carried)


def test_a_bertlab_mlm_run_gives_a_modernbert_classifier_its_prediction_head(tmp_path):
    """model.init_from=<a ModernBERT masked-LM run>: the classifier starts with the run's trained head.dense /
    head.norm, as transformers does with the run's export, and a new classifier."""
    from bertlab.training.checkpoint_files import read_checkpoint

    folder = mlm_folder(tmp_path, "modernbert")
    mlm_run = tmp_path / "mlm"
    metrics = run_train(["model=auto", f"model.pretrained={folder}", "task=mlm", "trainer.max_epochs=1",
                         "trainer.limit_train_batches=2", "trainer.limit_val_batches=1"], mlm_run)
    state = read_checkpoint(Path(metrics["best_checkpoint"]))["state_dict"]
    task = TaskSpec(name="cls", family="sequence", labels=["0", "1"])
    model, report = build_model({"init_from": str(mlm_run)}, HeadConfig(), build_family(task, 2, task.labels, None),
                                load_tokenizer(mlm_run / "tokenizer"))
    cls_state = model.state_dict()
    for ours, theirs in (("head.dense.weight", "head.predictions.transform.dense.weight"),
                         ("head.norm.weight", "head.predictions.transform.LayerNorm.weight")):
        torch.testing.assert_close(cls_state[ours], state["model." + theirs], atol=0, rtol=0)
    assert not any(k.startswith(("head.dense", "head.norm")) for k in report.newly_initialised)
    assert any(k.startswith("head.classifier") for k in report.newly_initialised)
