"""The GLUE presets beyond SST-2/MRPC/RTE: run_glue's metric names in metrics.json, GLUE's file layouts
(CoLA without a header, MNLI's two dev sets), and the hub files written in the same layouts."""

from __future__ import annotations

import pytest
from conftest import FIXTURE_DATA

from bertlab.data.readers import BadExamplePolicy, DataError, read_table
from bertlab.runtime.config import ConfigError, DataConfig

TINY = ("model=bert_tiny", "trainer.max_epochs=1", "data.batch_size=8", "data.eval_batch_size=5")

# task → (monitored metric, metrics that must be in the val block)
GLUE = {
    "cola": ("matthews_correlation", {"matthews_correlation", "accuracy"}),
    "stsb": ("combined_score", {"pearson", "spearmanr", "combined_score"}),
    "qqp": ("accuracy", {"accuracy", "f1"}),
    "mnli": ("accuracy", {"accuracy"}),
    "qnli": ("accuracy", {"accuracy"}),
    "wnli": ("accuracy", {"accuracy"}),
}


@pytest.mark.parametrize("task", list(GLUE))
def test_glue_preset_runs_with_run_glue_metric_names(train_run, task):
    m = train_run(*TINY, f"task={task}")
    monitor, names = GLUE[task]
    assert m["monitor"]["metric"] == f"val/{monitor}" and m["monitor"]["value"] == m["val"][monitor]
    assert names <= set(m["val"]) and m["val"]["num_examples"] == 16
    if task == "stsb":
        assert m["val"]["combined_score"] == pytest.approx((m["val"]["pearson"] + m["val"]["spearmanr"]) / 2)
        assert "accuracy" not in m["val"]
    if task == "mnli":  # matched dev in val, mismatched in its own block, both complete
        mm = m["val_mismatched"]
        assert {"accuracy", "num_examples", "loss"} <= set(mm) and mm["num_examples"] == 16
        assert 0.0 <= mm["accuracy"] <= 1.0
    else:
        assert "val_mismatched" not in m


def test_mnli_mismatched_block_is_the_mismatched_file(train_run, tmp_path):
    """Scoring the mismatched file as the main dev set gives exactly the val_mismatched block."""
    first = train_run(*TINY, "task=mnli")
    again = train_run(*TINY, "task=mnli", "train=false", f"ckpt_path={first['best_checkpoint']}",
                      "data.val_file=mnli/dev_mismatched.tsv", "data.val_extra_files={}", name="swap")
    assert again["val"]["accuracy"] == pytest.approx(first["val_mismatched"]["accuracy"])
    assert again["val"]["loss"] == pytest.approx(first["val_mismatched"]["loss"], rel=1e-5)


def test_cola_reads_positional_columns_of_a_file_without_header(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("src1\t1\t\tThe cat sat.\nsrc2\t0\t*\tCat the sat.\n", encoding="utf-8")
    rows = read_table(path, 3, None, 1, BadExamplePolicy())
    assert [(r.text, r.label) for r in rows] == [("The cat sat.", "1"), ("Cat the sat.", "0")]
    assert rows[0].where.endswith(":1")  # the first line is an example, not a header
    with pytest.raises(DataError, match=r"no column 7 \(data.text_column\).*4 columns"):
        read_table(path, 7, None, 1, BadExamplePolicy())


def test_extra_dev_set_names_are_checked():
    with pytest.raises(ConfigError, match="val_extra_files"):
        DataConfig(val_extra_files={"test": "x.tsv"})
    DataConfig(val_extra_files={"val_mismatched": "x.tsv"})


class FakeHubSplit(list):
    """Just what the hub writer reads of a datasets.Dataset: iteration and .features[...].names."""

    def __init__(self, rows, names=None):
        super().__init__(rows)
        label = type("ClassLabel", (), {"names": names})()
        self.features = {"label": label}


def test_hub_files_have_the_preset_layouts(tmp_path):
    from bertlab.data.hub import _write_glue_table

    cola = tmp_path / "cola.tsv"
    _write_glue_table(FakeHubSplit([{"idx": 0, "sentence": "A b.", "label": 1},
                                    {"idx": 1, "sentence": "B a.", "label": 0}], ["unacceptable", "acceptable"]),
                      "cola", cola)
    rows = read_table(cola, 3, None, 1, BadExamplePolicy())
    assert [(r.text, r.label) for r in rows] == [("A b.", "1"), ("B a.", "0")]

    mnli = tmp_path / "mnli.tsv"
    _write_glue_table(FakeHubSplit([{"idx": 0, "premise": "P.", "hypothesis": "H.", "label": 2}],
                                   ["entailment", "neutral", "contradiction"]), "mnli", mnli)
    rows = read_table(mnli, "sentence1", "sentence2", "gold_label", BadExamplePolicy())
    assert [(r.text, r.text_pair, r.label) for r in rows] == [("P.", "H.", "contradiction")]

    stsb = tmp_path / "stsb.tsv"
    _write_glue_table(FakeHubSplit([{"idx": 3, "sentence1": "a", "sentence2": "b", "label": 3.8}]), "stsb", stsb)
    assert [r.label for r in read_table(stsb, "sentence1", "sentence2", "score", BadExamplePolicy())] == ["3.8"]

    test = tmp_path / "test.tsv"  # test splits carry label -1: no label column
    _write_glue_table(FakeHubSplit([{"idx": 5, "question1": "a?", "question2": "b?", "label": -1}]), "qqp", test)
    assert test.read_text().splitlines() == ["id\tquestion1\tquestion2", "5\ta?\tb?"]


@pytest.mark.parametrize("task", list(GLUE))
def test_glue_layout_on_disk(task):
    """The fixtures (and so the samples, made by the same generator) use the release's file names."""
    names = ["train.tsv", "dev_matched.tsv", "dev_mismatched.tsv"] if task == "mnli" else ["train.tsv", "dev.tsv"]
    for name in names:
        assert (FIXTURE_DATA / task / name).is_file()


@pytest.mark.slow
def test_ddp_mnli_scores_both_dev_sets_exactly_once(tmp_path):
    """2 DDP ranks: val and val_mismatched equal one process's scores of the same checkpoint."""
    from test_distributed import _check_run_dir, _cli, _same_metrics, _single_process_eval

    _cli(["task=mnli", "data.eval_batch_size=3", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    m = _check_run_dir(tmp_path / "run")
    assert m["val_mismatched"]["num_examples"] == 16
    single = _single_process_eval(m, ["task=mnli"], tmp_path / "eval")
    _same_metrics(m["val"], single["val"])
    _same_metrics(m["val_mismatched"], single["val_mismatched"])
