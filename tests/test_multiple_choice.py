"""Multiple choice (task=swag, task=multiple_choice): BertForMultipleChoice's head, SWAG's CSV, your own JSONL
with any number of choices, parity with transformers and export to AutoModelForMultipleChoice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import FIXTURE_DATA, run_train

import bertlab
from bertlab.data.batching import Collator
from bertlab.data.choices import read_choices
from bertlab.data.readers import BadExamplePolicy, DataError
from bertlab.models.bert import BertModel
from bertlab.models.heads import MultipleChoiceHead, TaskModel
from bertlab.models.hf_weights import convert_hf_state_dict, export_state_dict, load_into
from bertlab.runtime.config import DataConfig, EncoderConfig, HeadConfig, TaskSpec
from bertlab.tasks.families import build_family

transformers = pytest.importorskip("transformers")

TINY = ("model=bert_tiny", "trainer.max_epochs=1", "data.batch_size=8", "data.eval_batch_size=5")
SMALL = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=64, type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _choice_batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 99, (2, 4, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[0, 1, 6:] = 0  # padding inside the batch
    mask[1, 3, 3:] = 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[..., 4:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _pair():
    torch.manual_seed(1)
    hf = transformers.BertForMultipleChoice(transformers.BertConfig(**SMALL))
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "bias" in name or "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    config = EncoderConfig(**SMALL)
    ours = TaskModel(BertModel(config, add_pooling_layer=True), MultipleChoiceHead(config, HeadConfig()),
                     "multiple_choice")
    state, report = convert_hf_state_dict(hf.state_dict(), "multiple_choice", has_pooler=True)
    load_into(ours, state, report)
    assert not report.newly_initialised, report.newly_initialised
    return hf.eval(), ours.eval()


def test_parity_with_bert_for_multiple_choice_and_round_trip():
    hf, ours = _pair()
    b = _choice_batch()
    with torch.no_grad():
        torch.testing.assert_close(ours(b, num_choices=4), hf(**b).logits, atol=1e-5, rtol=1e-5)
    back = export_state_dict(ours.state_dict(), "multiple_choice")
    reference = {k: v for k, v in hf.state_dict().items() if not k.endswith("position_ids")}
    assert set(back) == set(reference) and all(torch.equal(back[k], reference[k]) for k in reference)


def test_collator_pads_rows_and_choices_and_masks_padded_choices():
    features = [{"input_ids": [[2, 7, 3], [2, 8, 9, 3]], "token_type_ids": [[0, 0, 0], [0, 0, 1, 1]],
                 "labels": 1, "index": 0},
                {"input_ids": [[2, 5, 3], [2, 6, 3], [2, 4, 4, 4, 3]], "token_type_ids": [[0] * 3, [0] * 3, [0] * 5],
                 "labels": 2, "index": 1}]
    b = Collator(pad_id=0)(features)
    assert b["input_ids"].shape == (2, 3, 5) and b["labels"].tolist() == [1, 2]
    assert b["choice_mask"].tolist() == [[True, True, False], [True, True, True]]
    assert b["attention_mask"][0, 2].tolist() == [1, 0, 0, 0, 0]  # a padded choice attends its first position
    assert b["num_tokens"] == 3 + 4 + 3 + 3 + 5


def test_padded_choices_never_win_and_do_not_enter_the_loss():
    fam = build_family(TaskSpec(name="mc", family="multiple_choice"), 0, None, data_cfg=None)
    scores = torch.tensor([[0.0, 1.0, 50.0], [0.0, 1.0, 2.0]])
    batch = {"choice_mask": torch.tensor([[True, True, False], [True, True, True]]), "labels": torch.tensor([1, 2]),
             "index": torch.arange(2)}
    from bertlab.tasks.families import EvalState

    state = EvalState()
    fam.eval_step(scores, batch, state)
    assert fam.score(np.arange(2), state.outputs, None, 0.0, {})["accuracy"] == 1.0
    two = torch.nn.functional.cross_entropy(torch.tensor([[0.0, 1.0]]), torch.tensor([1]))
    three = torch.nn.functional.cross_entropy(torch.tensor([[0.0, 1.0, 2.0]]), torch.tensor([2]))
    assert fam.loss(scores, batch) == pytest.approx(float(two + three) / 2, rel=1e-6)


def test_swag_csv_pairs_sent1_with_sent2_plus_each_ending():
    data = DataConfig(text_column="sent1", choice_prefix_column="sent2",
                      choice_columns=["ending0", "ending1", "ending2", "ending3"])
    examples = read_choices(FIXTURE_DATA / "swag" / "val.csv", data, True, BadExamplePolicy())
    assert len(examples) == 16 and all(len(e.choices) == 4 for e in examples)
    first = (FIXTURE_DATA / "swag" / "val.csv").read_text().splitlines()[1].split(",")
    assert examples[0].context == first[4] and examples[0].choices[0] == f"{first[5]} {first[7]}"
    assert examples[0].label == int(first[-1])


def test_bad_labels_name_the_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"context": "c", "choices": ["a", "b"], "label": 2}) + "\n")
    with pytest.raises(DataError, match=r"d.jsonl:1: label 2 is outside the 2 choices"):
        read_choices(path, DataConfig(text_column="context"), True, BadExamplePolicy())


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_generic_jsonl_with_any_number_of_choices(train_run, tmp_path):
    rng = np.random.default_rng(0)
    words = ["red", "blue", "green", "small", "large", "round", "square", "bright"]

    def rows(n):
        out = []
        for _ in range(n):
            k = int(rng.integers(2, 6))  # 2 to 5 choices
            choices = [" ".join(rng.choice(words, 3)) for _ in range(k)]
            label = int(rng.integers(0, k))
            out.append({"context": f"pick {choices[label]}", "choices": choices, "label": label})
        return out

    _write_jsonl(tmp_path / "train.jsonl", rows(24))
    _write_jsonl(tmp_path / "dev.jsonl", rows(11))
    m = train_run(*TINY, "task=multiple_choice", f"data.train_file={tmp_path / 'train.jsonl'}",
                  f"data.val_file={tmp_path / 'dev.jsonl'}")
    assert m["val"]["num_examples"] == 11 and 0.0 <= m["val"]["accuracy"] <= 1.0
    assert m["monitor"]["metric"] == "val/accuracy"


def test_swag_end_to_end_and_export_to_auto_model_for_multiple_choice(tmp_path):
    m = run_train([*TINY, "task=swag", "export=true"], tmp_path / "run")
    assert m["val"]["num_examples"] == 16 and set(m["val"]) >= {"accuracy", "loss"}
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    assert scope["frozen_changed"] == [] and scope["totals"]["encoder"]["changed"] > 0
    export = tmp_path / "run" / "export"
    assert json.loads((export / "config.json").read_text())["architectures"] == ["BertForMultipleChoice"]
    hf, info = transformers.AutoModelForMultipleChoice.from_pretrained(export, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    tok = transformers.AutoTokenizer.from_pretrained(export)
    contexts = ["Someone opens the hood of the car.", "A girl sits down at the piano."]
    endings = [["He checks the oil.", "He jumps into the pool.", "He plays a chord.", "He digs a hole."],
               ["She plays a few chords.", "She washes the windows.", "She bows.", "She jogs away."]]
    enc = tok([c for c in contexts for _ in range(4)], [e for row in endings for e in row], padding=True,
              return_tensors="pt")
    batch = {k: v.view(2, 4, -1) for k, v in enc.items()}
    from bertlab.inference.export import load_checkpoint_model

    model = load_checkpoint_model(m["best_checkpoint"]).model
    with torch.no_grad():
        ours = model(batch, num_choices=4)
        theirs = hf.eval()(**batch).logits
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("freeze", ["encoder", "bitfit", "lora"])
def test_swag_with_freeze_policies_updates_only_what_the_policy_allows(train_run, tmp_path, freeze):
    m = train_run(*TINY, "task=swag", f"freeze={freeze}", "trainer.max_steps=2")
    scope = json.loads((tmp_path / "run" / "update_scope.json").read_text())
    assert scope["policy"] == freeze and scope["frozen_changed"] == []
    assert m["params"]["trainable"] < m["params"]["total"]


def test_swag_under_bf16(train_run):
    m = train_run(*TINY, "task=swag", "trainer.precision=bf16-mixed", "trainer.max_steps=2")
    assert m["val"]["num_examples"] == 16 and m["val"]["loss"] is not None


@pytest.mark.slow
def test_ddp_swag_is_scored_exactly_once(tmp_path):
    from test_distributed import _check_run_dir, _cli, _same_metrics, _single_process_eval

    _cli(["task=swag", "data.eval_batch_size=3", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    m = _check_run_dir(tmp_path / "run")
    assert m["val"]["num_examples"] == 16
    _same_metrics(m["val"], _single_process_eval(m, ["task=swag"], tmp_path / "eval")["val"])


def test_predictor_and_cli_predict_multiple_choice_like_the_exported_stock_head(tmp_path, capsys, caplog):
    """bertlab.Predictor on a swag run (any number of choices per input) and on its export, the CLI on SWAG's
    CSV without labels, and agreement with transformers' AutoModelForMultipleChoice on the export."""
    from bertlab import Predictor
    from bertlab.predict import main

    run_train([*TINY, "task=swag", "export=true"], tmp_path / "run")
    p = Predictor.from_run(tmp_path / "run")
    inputs = ["A girl sits down at the piano.\tShe plays a few chords.\tShe washes the windows.\tShe bows.",
              {"sent1": "Someone opens the hood of the car.", "sent2": "He",
               "choices": ["checks the oil.", "jumps into the pool."]},
              ("The chef cracks two eggs.", ["He whisks them.", "He sings.", "He naps.", "He runs.", "He waves."])]
    records = p(inputs, batch_size=3)
    assert [len(r["choices"]) for r in records] == [3, 2, 5]
    assert records[1]["choices"] == ["He checks the oil.", "He jumps into the pool."]  # SWAG's sent2 prefix
    for r in records:
        assert set(r) == {"context", "choices", "label", "choice", "score", "scores"}
        assert abs(sum(r["scores"]) - 1) < 1e-6 and r["score"] == max(r["scores"])
        assert r["choice"] == r["choices"][r["label"]] and r["scores"][r["label"]] == r["score"]
    one_by_one = [p([x])[0] for x in inputs]  # no padded choices, no padded rows: the same scores
    for a, b in zip(records, one_by_one):
        np.testing.assert_allclose(a["scores"], b["scores"], atol=1e-6)

    exported = Predictor.from_run(tmp_path / "run" / "export")
    hf = transformers.AutoModelForMultipleChoice.from_pretrained(tmp_path / "run" / "export").eval()
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "run" / "export")
    context, choices = "A girl sits down at the piano.", ["She plays a few chords.", "She bows.", "She jogs away."]
    enc = tok([context] * 3, choices, return_tensors="pt", padding=True)
    with torch.no_grad():
        theirs = torch.softmax(hf(**{k: v[None] for k, v in enc.items()}).logits[0], -1).tolist()
    for predictor in (p, exported):
        np.testing.assert_allclose(predictor([(context, choices)])[0]["scores"], theirs, atol=1e-5)

    with pytest.raises(DataError, match="at least two choices"):
        p(["a context with one choice\tonly this"])
    caplog.clear()
    with caplog.at_level("WARNING", logger="bertlab.inference.predictor"):  # rows cut to the window are reported
        p([(context, choices), ("the piano " * 400, ["She plays.", "She bows."]),
           ("the piano " * 300, ["She plays.", "She bows.", "She sings."])])  # counted per input, not per row
    assert [r.getMessage().split(" texts longer")[0] for r in caplog.records
            if r.name == "bertlab.inference.predictor"] == ["2"]
    capsys.readouterr()
    main([str(tmp_path / "run"), str(Path(bertlab.__file__).parent / "samples" / "swag" / "val.csv")])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 60 and all(len(r["choices"]) == 4 and 0 <= r["label"] < 4 for r in lines)
