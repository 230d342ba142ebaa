"""Paths a user types mean what a shell user means, and a path that is not there says so.

One rule (``bertlab.runtime.paths``; docs/running.md, "Paths"): a relative path is relative to the directory the
command was typed in; a relative ``data.*_file`` that is not there is looked for under the data folder. Every
setting or argument that names a path answers a missing one with "... does not exist: <path>" and the similar
names beside it, never with what the path should have held (a run dir, the hub, the samples).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURE_DATA, main_in_process, run_train

from bertlab.data.files import DataFiles
from bertlab.data.readers import DataError
from bertlab.runtime.config import ConfigError, DataConfig, TaskSpec
from bertlab.runtime.errors import CheckpointError, TokenizerError
from bertlab.runtime.paths import missing_message, similar_names, typed_path

SST2 = TaskSpec(name="sst2", family="sequence", labels=["0", "1"])
MLM = TaskSpec(name="mlm", family="mlm")
TINY = ["model=bert_tiny", "trainer.max_epochs=1"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture
def typed_in(tmp_path, monkeypatch):
    """The directory a user typed the command in (the test's working directory)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def files(task: TaskSpec = SST2, **data) -> DataFiles:
    return DataFiles(task, DataConfig(**data))


# ---------------------------------------------------------------------------------------------------------
# The rule itself


def test_typed_path_is_relative_to_the_typed_in_directory(typed_in):
    assert typed_path("corpus/a.txt") == typed_in / "corpus" / "a.txt"
    assert typed_path("~/x") == Path.home() / "x"
    assert typed_path("/abs/x") == Path("/abs/x")


def test_similar_names_look_in_the_deepest_folder_that_exists(tmp_path):
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "train.tsv").write_text("")
    assert similar_names(tmp_path / "sst2" / "trian.tsv") == (tmp_path / "sst2", ["train.tsv"])
    assert similar_names(tmp_path / "sst3" / "train.tsv") == (tmp_path, ["sst2"])  # a misspelled folder
    assert "nothing with a similar name" in missing_message(tmp_path / "zzz", "x")


# ---------------------------------------------------------------------------------------------------------
# Data files: the typed-in directory first, then the data folder


def test_the_pretraining_recipe_corpus_is_read_from_where_the_command_was_typed(typed_in, tmp_path):
    # docs/pretraining.md: make_corpus.py writes ./corpus, then data.train_file=corpus/sst2_train.txt.
    (typed_in / "corpus").mkdir()
    (typed_in / "corpus" / "sst2_train.txt").write_text("a sentence .\n")
    data = tmp_path / "data"
    data.mkdir()
    for source in ("files", "sample"):
        found = files(MLM, source=source, data_dir=str(data), train_file="corpus/sst2_train.txt").split_file("train")
        assert found == typed_in / "corpus" / "sst2_train.txt"


def test_a_path_under_the_typed_in_directory_wins_over_the_data_folder(typed_in, tmp_path):
    for root in (typed_in, tmp_path / "data"):
        (root / "own").mkdir(parents=True)
        (root / "own" / "train.tsv").write_text("sentence\tlabel\nhi\t1\n")
    assert files(data_dir=str(tmp_path / "data"), train_file="own/train.tsv").split_file("train") == \
        typed_in / "own" / "train.tsv"


def test_a_task_file_name_still_means_the_data_folder(typed_in):
    assert files(data_dir=str(FIXTURE_DATA), train_file="sst2/train.tsv").split_file("train") == \
        FIXTURE_DATA / "sst2" / "train.tsv"
    sample = files(source="sample", train_file="sst2/train.tsv").split_file("train")
    assert sample.is_file() and sample.parent.name == "sst2" and "samples" in sample.parts


def test_a_relative_data_dir_is_relative_to_the_typed_in_directory(typed_in):
    (typed_in / "mydata" / "sst2").mkdir(parents=True)
    (typed_in / "mydata" / "sst2" / "dev.tsv").write_text("sentence\tlabel\nhi\t1\n")
    assert files(data_dir="mydata", val_file="sst2/dev.tsv").split_file("val") == \
        typed_in / "mydata" / "sst2" / "dev.tsv"


@pytest.mark.parametrize("setting", ["train_file", "val_file", "test_file"])
def test_a_misspelled_own_file_says_it_does_not_exist_and_names_the_file_beside_it(tmp_path, setting):
    own = tmp_path / "own"
    own.mkdir()
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        (own / name).write_text("sentence\tlabel\nhi\t1\n")
    wrong = {"train_file": "trian.tsv", "val_file": "dve.tsv", "test_file": "tset.tsv"}[setting]
    meant = {"train_file": "train.tsv", "val_file": "dev.tsv", "test_file": "test.tsv"}[setting]
    with pytest.raises(DataError) as err:
        files(data_dir=str(tmp_path / "nodata"), **{setting: str(own / wrong)}).split_file(setting.split("_")[0])
    message = str(err.value)
    assert f"data.{setting}={own / wrong}: the file does not exist: {own / wrong}" in message
    assert f"similar names in {own}: {meant}" in message
    assert "hub" not in message and "data.source=sample" not in message  # neither could provide an own file


def test_a_misspelled_relative_file_names_both_places_and_the_close_name(typed_in, tmp_path):
    (typed_in / "corpus").mkdir()
    (typed_in / "corpus" / "sst2_train.txt").write_text("x\n")
    with pytest.raises(DataError) as err:
        files(MLM, data_dir=str(tmp_path), train_file="corpus/sst2_trian.txt").split_file("train")
    message = str(err.value)
    assert f"does not exist: {typed_in / 'corpus' / 'sst2_trian.txt'}" in message
    assert "sst2_train.txt" in message and "Also looked for under the data folder" in message
    assert "hub" not in message


def test_a_misspelled_task_file_under_the_samples_names_the_sample_file(typed_in):
    with pytest.raises(DataError, match=r"data.train_file=sst2/trian.tsv: the file does not exist: .*samples/sst2/"
                                        r"trian.tsv \(similar names in .*: train.tsv\)"):
        files(source="sample", train_file="sst2/trian.tsv").split_file("train")


def test_a_preset_file_missing_everywhere_still_tells_the_ways_to_get_the_data(typed_in, tmp_path):
    with pytest.raises(DataError) as err:
        files(data_dir=str(tmp_path / "empty"), val_file="sst2/dev.tsv").split_file("val")
    message = str(err.value)
    assert "data.val_file=sst2/dev.tsv: the file does not exist" in message
    assert "hub" in message and "data.source=sample" in message and "$BERTLAB_DATA_DIR" in message


def test_a_list_of_corpus_files_names_the_missing_one(typed_in):
    (typed_in / "a.txt").write_text("x\n")
    with pytest.raises(DataError, match=r"data.train_file=b.txt: the file does not exist: .*work/b.txt "
                                        r"\(similar names in .*: a.txt\)"):
        files(MLM, data_dir="nodata", train_file=["a.txt", "b.txt"]).split_file("train")


# ---------------------------------------------------------------------------------------------------------
# Checkpoints, tokenizers, run dirs: the same rule and the same message


def test_model_and_checkpoint_settings_of_a_run_say_does_not_exist(tmp_path):
    (tmp_path / "runs" / "pretrain").mkdir(parents=True)
    cases = [
        (f"model.init_from={tmp_path / 'runs' / 'pretrian'}", ConfigError),
        (f"model.pretrained={tmp_path / 'runs' / 'pretrian'}", CheckpointError),
        (f"model.tokenizer={tmp_path / 'runs' / 'pretrian'}", TokenizerError),
    ]
    for override, error in cases:
        with pytest.raises(error, match=r"does not exist: .*pretrian \(similar names in .*runs: pretrain\)"):
            run_train([*TINY, "task=sst2", override], tmp_path / "run")


def test_ckpt_path_says_does_not_exist(tmp_path):
    (tmp_path / "last.ckpt").write_text("")
    with pytest.raises(CheckpointError, match=r"ckpt_path=.*lats.ckpt does not exist: .* \(similar names in .*: "
                                              r"last.ckpt\)"):
        run_train([*TINY, "task=sst2", "train=false", f"ckpt_path={tmp_path / 'lats.ckpt'}"], tmp_path / "run")


def _cli(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m <module> <args>`` typed in ``cwd``, run in this process (conftest.main_in_process)."""
    return main_in_process(list(args), module=module, env={"HF_HUB_OFFLINE": "1"}, cwd=cwd)


def test_predict_export_and_compare_say_a_misspelled_run_dir_does_not_exist(tmp_path):
    (tmp_path / "logs" / "sst2_run").mkdir(parents=True)
    for module, args in [("bertlab.predict", ["logs/sst2_rnu", "-"]), ("bertlab.export", ["logs/sst2_rnu", "out"]),
                         ("bertlab.export", ["logs/sst2_rnu", "out", "--format", "onnx"]),
                         ("bertlab.compare", ["logs/sst2_rnu"]), ("bertlab.glue", ["table", "logs/sst2_rnu"]),
                         ("bertlab.glue", ["submit", "logs/sst2_rnu", "--out", "out"])]:
        out = _cli(module, *args, cwd=tmp_path)
        assert out.returncode != 0, (module, out.stdout)
        assert f"does not exist: {tmp_path / 'logs' / 'sst2_rnu'} (similar names in {tmp_path / 'logs'}: sst2_run)" \
            in out.stderr, (module, out.stderr)
        assert "not a bertlab run dir" not in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "out").exists()
    (tmp_path / "train.py").write_text("")
    out = _cli("bertlab.glue", "run", "--train-script", "trian.py", cwd=tmp_path)
    assert f"--train-script does not exist: {tmp_path / 'trian.py'} (similar names in {tmp_path}: train.py)" in out.stderr


def test_predict_input_and_export_tokenizer_say_does_not_exist(tmp_path):
    from bertlab.inference.inputs import read_inputs
    from bertlab.inference.predictor import PredictSettings

    (tmp_path / "texts.txt").write_text("hi\n")
    with pytest.raises(DataError, match=r"the input file does not exist: .*txets.txt \(similar names in .*: "
                                        r"texts.txt\)"):
        read_inputs(tmp_path / "txets.txt", "sequence", PredictSettings())
    from bertlab.inference.export import export_checkpoint

    run = tmp_path / "run"
    run_train([*TINY, "task=sst2", "trainer.max_steps=1"], run)
    with pytest.raises(CheckpointError, match=r"--tokenizer does not exist: .*tokenizr \(similar names in .*: "
                                              r"tokenizer\)"):
        export_checkpoint(run, tmp_path / "out", tokenizer_dir=run / "tokenizr")


def test_a_job_that_would_change_directory_is_refused_with_the_fix(tmp_path):
    env = {"HF_HUB_OFFLINE": "1", "BERTLAB_DATA_DIR": str(FIXTURE_DATA), "HYDRA_FULL_ERROR": None}
    out = main_in_process([*TINY, "task=sst2", "logger=csv", "hydra.job.chdir=true",
                           f"hydra.run.dir={tmp_path / 'run'}"], env=env, cwd=tmp_path)
    assert out.returncode == 1
    assert "hydra.job.chdir=true: bertlab reads relative paths from the directory the command was typed in" in out.stderr
    assert "Drop hydra.job.chdir=true" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "run").exists()  # failed before training: the folder made for it is gone
