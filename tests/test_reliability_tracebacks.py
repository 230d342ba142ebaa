"""Round four, item 5: every file bertlab reads from elsewhere or from an earlier run ends, when it is wrong, in one
paragraph naming the file (and the key or line) and the fix — never a traceback, never a wrong line.

Kinds, each read in one place: a model folder's config.json (``models.families.config_file``, every family), a
bertlab JSON record (``runtime.records.read_record``: a run's record, metrics.json, an export's head file and
long-text record, an ONNX manifest, a prepared corpus's markers, a sharded checkpoint's index), a vocabulary
(``data.tokenizer.load_tokenizer``, ``data.vocab.wordpiece_from_vocab``), and line numbers of streamed input
(``inference.inputs``, ``data.rawtext``, ``data.corpus``, ``data.readers``). The sweeps below try values nobody
listed; a few cases run the command lines as a user does (exit status 1, the file in the message, no traceback).
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_DATA, ROOT, main_in_process

from bertlab.data.readers import BadExamplePolicy, read_table
from bertlab.data.tokenizer import load_tokenizer, train_wordpiece
from bertlab.models.families import families, tiny_config
from bertlab.models.families.config_file import CONFIG_KEYS
from bertlab.models.hf_weights import read_encoder_config, read_state_dict
from bertlab.runtime.config import EncoderConfig
from bertlab.runtime.errors import CheckpointError, ConfigError, DataError, RecordError, TokenizerError
from bertlab.runtime.records import read_record

transformers = pytest.importorskip("transformers")

TINY_BERT = EncoderConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=37, max_position_embeddings=64)
NATIVE = list(families())  # the registry: a family added there is checked here too


def hub_config(model_type: str) -> dict:
    """A tiny config.json of the family (FamilySpec.tiny_config), as transformers writes it (every key a hub
    folder has)."""
    return transformers.AutoConfig.for_model(**tiny_config(model_type)).to_dict()


def folder_with(tmp_path: Path, name: str, config: dict) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def no_traceback(err: BaseException, *names: str) -> str:
    """The error's message, checked to name each of ``names``."""
    text = str(err)
    for name in names:
        assert name in text, (name, text)
    return text


def cli(*args: str, module: str | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``python train.py <args>`` / ``python -m <module> <args>``, run in this process (what it prints and its exit
    status; tests/test_bad_input.py checks the same presenter through a real process)."""
    env = {"TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline",
           "BERTLAB_DATA_DIR": str(FIXTURE_DATA), "HYDRA_FULL_ERROR": None}
    return main_in_process(list(args), module=module, env=env, cwd=cwd)


def user_error(proc: subprocess.CompletedProcess, *names: str) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "bertlab: error:" in out
    for name in names:
        assert name in out, (name, out[-2000:])
    return out


# ----------------------------------------------------------------------------------------------------------
# A model folder's config.json


@pytest.mark.parametrize("model_type", NATIVE)
def test_every_family_reads_its_hub_config(model_type, tmp_path):
    """The checks refuse nothing a real config.json of the family holds."""
    config = read_encoder_config(folder_with(tmp_path, model_type, hub_config(model_type)))
    assert config.hidden_size == 32 and config.num_hidden_layers == hub_config(model_type).get(
        "num_hidden_layers", hub_config(model_type).get("n_layers"))


@pytest.mark.parametrize("model_type", NATIVE)
def test_absurd_values_of_every_key_name_the_file_and_key(model_type, tmp_path):
    """Fresh cases: every numeric key the family's config.json holds, set to a negative number, a number written
    as text, NaN, a boolean and a huge number, is read or refused with a CheckpointError naming the file and the
    key (or the sizes), never another exception."""
    base = hub_config(model_type)
    keys = [k for k, v in base.items() if k in CONFIG_KEYS and isinstance(v, int | float) and not isinstance(v, bool)]
    assert len(keys) >= 8
    refused = 0
    for key in keys:
        for bad in (-7, "12", math.nan, True, 10**40, 0.5):
            folder = folder_with(tmp_path, f"{key}-{bad!s}", {**base, key: bad})
            try:
                read_encoder_config(folder)
            except CheckpointError as err:
                refused += 1
                text = no_traceback(err, str(folder / "config.json"))
                assert key in text or "its sizes" in text, text
                assert "model." + key not in text  # not a setting the user set
    assert refused >= len(keys) * 3


@pytest.mark.parametrize("change, expect", [
    ({"hidden_size": -32}, r"hidden_size=-32: the hidden size must be a positive integer"),
    ({"num_attention_heads": 5}, r"hidden_size=32 is not divisible by num_attention_heads=5"),
    ({"vocab_size": 0}, r"vocab_size=0: the vocabulary size must be a positive integer"),
    ({"hidden_size": "32"}, r'hidden_size="32": .* \(a JSON string, not a number\)'),
    ({"layer_norm_eps": math.nan}, r"layer_norm_eps=nan: .*not a finite number"),
    ({"num_hidden_layers": None}, r"num_hidden_layers=null: the number of layers must be a positive integer"),
    ({"max_position_embeddings": 2}, r"max_position_embeddings=2 leaves room for 2 token\(s\)"),
    ({"vocab_size": 10**12}, r"more than this machine's memory"),
    ({"architectures": "BertModel"}, r"architectures='BertModel': a list of names is expected"),
    ({"model_type": 5}, r"model_type=5 is a JSON int where the name of the model's family is expected"),
    ({"pad_token_id": 10**6}, r"pad_token_id 1000000 is outside the vocabulary of 99"),
])
def test_listed_config_values(tmp_path, change, expect):
    folder = folder_with(tmp_path, "m", {**hub_config("bert"), **change})
    with pytest.raises(CheckpointError, match=expect) as err:
        read_encoder_config(folder)
    no_traceback(err.value, str(folder / "config.json"))


def test_a_generic_path_config_is_checked_before_transformers_builds_it(tmp_path):
    """A model_type that is no native family (MPNet): the same kinds and sizes when its config.json is read
    (``read_config_json``: training's generic path and predict's export loading), before AutoModel builds it."""
    from bertlab.models.hf_weights import read_config_json

    base = transformers.AutoConfig.for_model("mpnet", vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                             num_attention_heads=4, intermediate_size=37).to_dict()
    assert read_config_json(folder_with(tmp_path, "fine", base))["model_type"] == "mpnet"
    for change, expect in (({"hidden_size": -1}, "hidden_size=-1"), ({"vocab_size": 10**13}, "memory"),
                           ({"hidden_dropout_prob": "0.1"}, 'hidden_dropout_prob="0.1"')):
        folder = folder_with(tmp_path, str(len(str(change))), {**base, **change})
        with pytest.raises(CheckpointError, match=expect) as err:
            read_config_json(folder)
        no_traceback(err.value, str(folder / "config.json"))


def test_sizes_beyond_the_weights_are_refused_before_anything_is_built(tmp_path, monkeypatch):
    """A size that fits this machine but not the folder's weights (a million layers of width 32) is refused
    from the weights file's size, before torch allocates a layer."""
    from bertlab.models.bert import BertModel
    from bertlab.models.hf_weights import load_encoder, save_encoder

    folder = tmp_path / "m"
    save_encoder(BertModel(TINY_BERT), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 10**6}))
    monkeypatch.setattr("torch.nn.Linear.__init__", lambda *a, **k: pytest.fail("a layer was built"))
    with pytest.raises(CheckpointError, match=r"num_hidden_layers=1000000.*but the folder's weights .* hold at most"):
        load_encoder(folder)


def test_train_with_an_absurd_model_folder_prints_one_paragraph(tmp_path):
    folder = tmp_path / "model"
    tok = train_wordpiece([line.split("\t")[0] for line in
                           (FIXTURE_DATA / "sst2" / "train.tsv").read_text().splitlines()[1:]], vocab_size=200)
    tok.save(folder)
    (folder / "config.json").write_text(json.dumps({**hub_config("bert"), "vocab_size": tok.vocab_size,
                                                    "intermediate_size": -37}))
    out = user_error(cli("model=auto", f"model.pretrained={folder}", "task=sst2", "logger=csv",
                         f"hydra.run.dir={tmp_path / 'run'}", f"paths.cache_dir={tmp_path / 'cache'}"),
                     str(folder / "config.json"), "intermediate_size=-37")
    assert "model.intermediate_size" not in out


@pytest.mark.parametrize("raw, expect", [('{"model_type": "bert", "hidden', "ends in the middle of its JSON"),
                                         ('{"model_type": "bert",, }', "not valid JSON at line 1"),
                                         ("[]", "holds a list where an object is expected"),
                                         ('{"model_type": ["bert"]}', r"model_type=\['bert'\] is a JSON list")])
def test_an_export_whose_config_json_is_damaged_names_it(tmp_path, raw, expect):
    from bertlab.inference.export import load_native_export

    (tmp_path / "config.json").write_text(raw)
    with pytest.raises(CheckpointError, match=expect) as err:
        load_native_export(tmp_path)
    no_traceback(err.value, str(tmp_path / "config.json"))


def test_predict_with_an_absurd_export_prints_one_paragraph(tmp_path):
    folder = folder_with(tmp_path, "export", {**hub_config("roberta"), "num_attention_heads": 0})
    train_wordpiece(["a film that works"] * 5, vocab_size=40).save(folder)
    (tmp_path / "in.txt").write_text("a film\n")
    user_error(cli(str(folder), str(tmp_path / "in.txt"), module="bertlab.predict"),
               str(folder / "config.json"), "num_attention_heads=0")


# ----------------------------------------------------------------------------------------------------------
# bertlab's JSON records


DAMAGED = {
    "truncated": (b'{"fingerprint": "ab12", "config": {"task": {"na', "ends in the middle of its JSON"),
    "empty": (b"", "the file is empty"),
    "not utf-8": (b'{"config": "\xff"}', "not UTF-8"),
    "a list": (b"[1, 2]", "holds a list where an object is expected"),
    "a number": (b"42", "holds an integer where an object is expected"),
    "bad json": (b'{"config": {}, }', "not valid JSON at line 1"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_read_record_names_the_file_and_what_is_wrong(tmp_path, case):
    raw, expect = DAMAGED[case]
    path = tmp_path / "r.json"
    path.write_bytes(raw)
    with pytest.raises(RecordError, match=expect) as err:
        read_record(path, "the record", "Do this.", shape={"config": dict}, required=("config",))
    assert str(err.value).startswith(f"{path}: the record is damaged: ") and str(err.value).endswith("Do this.")


def test_read_record_names_the_key(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"config": "x", "pid": 3}))
    with pytest.raises(RecordError, match=r"key 'config' is a string \(\"x\"\) where an object is expected"):
        read_record(path, "the record", "", shape={"config": dict, "pid": int})
    path.write_text(json.dumps({"pid": 3}))
    with pytest.raises(RecordError, match=r"it has no key 'config' \(it has \['pid'\]\)"):
        read_record(path, "the record", "", required=("config",))
    path.write_text(json.dumps({"n": 1.5}))
    with pytest.raises(RecordError, match=r"key 'n' is a number \(1.5\) where an integer is expected"):
        read_record(path, "the record", "", shape={"n": int})
    assert read_record(path, "the record", "", shape={"n": float}) == {"n": 1.5}


RECORDS = {**{k: v[0] for k, v in DAMAGED.items()},
           "config a string": json.dumps({"fingerprint": "x", "config": "lr=1"}).encode(),
           "no config": json.dumps({"fingerprint": "x", "status": "finished"}).encode(),
           "pid a string": json.dumps({"config": {}, "pid": "12"}).encode()}


@pytest.mark.parametrize("case", sorted(RECORDS))
def test_a_damaged_run_record_in_a_used_run_dir_is_one_paragraph(tmp_path, case):
    from conftest import compose

    from bertlab.runtime.run_dir import MARKER, claim_run_dir, release_run_dir

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / MARKER).write_bytes(RECORDS[case])
    tiny = ["model=bert_tiny", "task=sst2"]
    try:
        with pytest.raises(ConfigError, match=r"holds a run whose record .* is damaged .*resume with "
                                              r"ckpt_path=last") as err:
            claim_run_dir(run, compose(tiny, run))
        no_traceback(err.value, str(run / MARKER))
        claim_run_dir(run, compose([*tiny, "overwrite_run_dir=true"], run))  # outputs removed: the record too
        assert json.loads((run / MARKER).read_text())["status"] == "running"
    finally:
        release_run_dir()


def test_a_damaged_run_record_without_outputs_is_replaced(tmp_path):
    from conftest import compose

    from bertlab.runtime.run_dir import MARKER, claim_run_dir, finish_run_dir, release_run_dir

    run = tmp_path / "run"
    run.mkdir()
    (run / MARKER).write_text('{"config": {"ta')
    try:
        claim_run_dir(run, compose(["model=bert_tiny", "task=sst2"], run))
        (run / MARKER).write_text("[]")  # replaced while the run ran: the run still finishes
        finish_run_dir(run)
    finally:
        release_run_dir()


def test_train_in_a_run_dir_with_a_cut_record_prints_one_paragraph(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / ".bertlab-run.json").write_text('{"fingerprint": "0f3c", "status": "runn')
    user_error(cli("model=bert_tiny", "task=sst2", "logger=csv", f"hydra.run.dir={run}",
                   f"paths.cache_dir={tmp_path / 'cache'}"), str(run / ".bertlab-run.json"), "is damaged")


def test_a_damaged_metrics_json_names_itself_when_a_run_dir_is_read(tmp_path):
    from bertlab.training.checkpoint_files import run_dir_checkpoint

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for raw, expect in ((b'{"best_checkpoint": "/x/ep', "ends in the middle"),
                        (b'{"best_checkpoint": 3}', "key 'best_checkpoint' is an integer"),
                        (b"null", "holds null where an object is expected")):
        (run / "metrics.json").write_bytes(raw)
        with pytest.raises(CheckpointError, match=expect) as err:
            run_dir_checkpoint(run)
        no_traceback(err.value, str(run / "metrics.json"), "pass the checkpoint itself")
    (run / "in.txt").write_text("a film\n")
    user_error(cli(str(run), str(run / "in.txt"), module="bertlab.predict"), str(run / "metrics.json"))


@pytest.mark.parametrize("manifest, expect", [
    ('{"task": {"name": "sst2", "fam', "ends in the middle"),
    ('{"files": {}}', "it has no key 'task'"),
    ('{"task": "sst2"}', "key 'task' is a string"),
    ('{"task": {"name": "x", "family": "sequence", "colour": 1}}', "key 'task' does not describe a TaskSpec"),
    ('{"task": {"name": "x", "family": "sequence"}, "files": {"fp32": 7}}', "key 'files' names a graph"),
])
def test_a_damaged_onnx_manifest_names_itself(tmp_path, manifest, expect):
    from bertlab.inference.onnx_session import INFO_NAME, load_onnx_folder

    (tmp_path / INFO_NAME).write_text(manifest)
    with pytest.raises(CheckpointError, match=expect) as err:
        load_onnx_folder(tmp_path)
    no_traceback(err.value, str(tmp_path / INFO_NAME), "Export the run again")


@pytest.mark.parametrize("head, expect", [
    ('{"task": {"name": "sst2"', "ends in the middle"),
    ('{"task": {"name": "x", "family": "sequence"}}', "it has no key 'head'"),
    ('{"task": {"name": "x", "family": "sequence"}, "head": {"pooling": "sideways"}}',
     "key 'head' does not describe a HeadConfig"),
    ('{"task": {"name": "x", "family": "sequence"}, "head": {}, "labels": "a,b"}', "key 'labels' is a string"),
])
def test_a_damaged_head_file_of_an_export_names_itself(tmp_path, head, expect):
    from bertlab.inference.export import HEAD_CONFIG_NAME, _head_record

    (tmp_path / HEAD_CONFIG_NAME).write_text(head)
    with pytest.raises(CheckpointError, match=expect) as err:
        _head_record(tmp_path / HEAD_CONFIG_NAME)
    no_traceback(err.value, str(tmp_path / HEAD_CONFIG_NAME))


# ----------------------------------------------------------------------------------------------------------
# A sharded checkpoint's index


@pytest.fixture
def sharded(tmp_path) -> Path:
    """A tiny BERT folder saved as two shards and their index."""
    from safetensors.torch import load_file, save_file

    from bertlab.models.bert import BertModel
    from bertlab.models.hf_weights import save_encoder

    folder = tmp_path / "sharded"
    save_encoder(BertModel(TINY_BERT), folder)
    state = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    keys = sorted(state)
    halves = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
    for name, part in halves.items():
        save_file({k: state[k].contiguous() for k in part}, str(folder / name))
    index = {"metadata": {}, "weight_map": {k: name for name, part in halves.items() for k in part}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def test_a_complete_sharded_folder_loads(sharded):
    state, source = read_state_dict(sharded)
    assert source.endswith("model.safetensors.index.json") and len(state) > 10


@pytest.mark.parametrize("damage, expect", [
    ("missing shard", r"names 1 of its 2 shard files that .* lacks \(model-00002-of-00002.safetensors\)"),
    ("truncated index", r"the index of the sharded weights is damaged: it ends in the middle"),
    ("no weight_map", r"it has no key 'weight_map'"),
    ("weight_map a list", r"key 'weight_map' is a list"),
    ("key not in its shard", r"lists 1 tensors its shards do not hold \('extra.weight'"),
    ("shard outside the folder", r"gives tensor .* the shard '../elsewhere.safetensors', which is not a file name"),
    ("empty weight_map", r"key 'weight_map' names no tensor"),
])
def test_an_incomplete_sharded_folder_names_the_index(sharded, damage, expect):
    index = sharded / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    if damage == "missing shard":
        (sharded / "model-00002-of-00002.safetensors").unlink()
    elif damage == "truncated index":
        index.write_text(index.read_text()[:80])
    elif damage == "no weight_map":
        index.write_text(json.dumps({"metadata": {}}))
    elif damage == "weight_map a list":
        index.write_text(json.dumps({"weight_map": list(data["weight_map"])}))
    elif damage == "key not in its shard":
        index.write_text(json.dumps({"weight_map": {**data["weight_map"],
                                                    "extra.weight": "model-00001-of-00002.safetensors"}}))
    elif damage == "shard outside the folder":
        index.write_text(json.dumps({"weight_map": {**data["weight_map"], "x": "../elsewhere.safetensors"}}))
    else:
        index.write_text(json.dumps({"weight_map": {}}))
    with pytest.raises(CheckpointError, match=expect) as err:
        read_state_dict(sharded)
    no_traceback(err.value, str(index))


# ----------------------------------------------------------------------------------------------------------
# Damaged markers of a prepared corpus


def test_damaged_markers_of_a_prepared_corpus_are_prepared_again(tmp_path, caplog):
    pytest.importorskip("datasets")
    from bertlab.data import pretrain

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n".join(f"Doc {i} alpha beta. Gamma delta {i}.\nEpsilon zeta." for i in range(40)) + "\n")
    tok = train_wordpiece(corpus.read_text().split("\n"), vocab_size=120)
    args = dict(split="train", max_seq_length=32, nsp=True, seed=0, num_proc=1, shard_bytes=600)
    final = pretrain.prepare([corpus], tok, tmp_path / "cache", **args)
    rows = len(pretrain.ArrowExamples(final, nsp=True))
    for raw in ('{"shard_files": ["examples/00000.ar', '{"shard_files": "examples"}', "[]",
                '{"shard_files": ["../../../etc/passwd"]}', '{"shard_files": ["examples/99999.arrow"]}'):
        (final / "meta.json").write_text(raw)
        with pytest.raises(DataError, match=r"meta.json.*Delete .* and run again to prepare the corpus anew") as err:
            pretrain.ArrowExamples(final, nsp=True)
        no_traceback(err.value, str(final / "meta.json"))
        assert pretrain.prepare([corpus], tok, tmp_path / "cache", **args) == final  # warned, prepared again
        assert len(pretrain.ArrowExamples(final, nsp=True)) == rows
    assert "it is removed and prepared again" in caplog.text
    # An interrupted preparation whose shard markers were cut short or edited: those shards are prepared again.
    partial = final.with_name(final.name + ".partial")
    os.replace(final, partial)
    (partial / "meta.json").unlink()
    markers = sorted((partial / "examples").glob("*.json"))
    assert len(markers) >= 3
    markers[0].write_text('{"shard": 0, "byt')
    markers[1].write_text(json.dumps({"shard": 7, "bytes": 1, "documents": 1, "examples": 1, "is_next": 0}))
    markers[2].write_text(json.dumps({"shard": 2, "bytes": "1"}))
    (partial / "examples" / "notes.json").write_text("{}")  # a file that is no marker
    assert pretrain.prepare([corpus], tok, tmp_path / "cache", **args) == final
    assert len(pretrain.ArrowExamples(final, nsp=True)) == rows
    assert "shard 0 is prepared again" in caplog.text and "key 'shard' is 7, not 1" in caplog.text


# ----------------------------------------------------------------------------------------------------------
# A foreign vocabulary


@pytest.fixture
def tokenizer_folder(tmp_path) -> Path:
    folder = tmp_path / "tok"
    train_wordpiece(["a film that works", "a film that does not"] * 5, vocab_size=60).save(folder)
    return folder


@pytest.mark.parametrize("vocab, expect", [
    ("<s>\n<pad>\n</s>\n<unk>\nthe\n", "the vocabulary of a RoBERTa- or XLM-R-style tokenizer"),
    (json.dumps({"[PAD]": 0, "[CLS]": 1}), "it holds JSON: a BPE vocab.json renamed"),
    ("[PAD]\t0\n[UNK]\t0\nthe\t-3.1\n", "token<TAB>score: a SentencePiece vocabulary"),
    ("#version: 0.2\nt h\nth e\n", "BPE merges"),
    ("", "the file is empty"),
    ("[PAD]\n[CLS]\n[SEP]\nthe\n", r"it has no \[UNK\] token"),
])
def test_a_vocab_txt_of_another_kind_names_the_file(tokenizer_folder, vocab, expect):
    (tokenizer_folder / "tokenizer.json").unlink()
    (tokenizer_folder / "vocab.txt").write_text(vocab)
    with pytest.raises(TokenizerError, match=expect) as err:
        load_tokenizer(tokenizer_folder)
    no_traceback(err.value, str(tokenizer_folder / "vocab.txt"), "not a BERT WordPiece vocabulary")


def test_vocab_txt_ids_follow_its_lines_as_transformers_reads_them(tokenizer_folder):
    """Only \\n, \\r\\n and \\r end a line of vocab.txt: a token holding U+2028 or U+0085 keeps every later id."""
    (tokenizer_folder / "tokenizer.json").unlink()
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "odd\u2028token", "x\x85y", "film"]
    (tokenizer_folder / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    assert load_tokenizer(tokenizer_folder).tokenizer.token_to_id("film") == 7


def test_a_tokenizer_json_of_an_unexpected_model_names_the_folder(tokenizer_folder):
    from tokenizers import Tokenizer, models

    spec = json.loads((tokenizer_folder / "tokenizer.json").read_text())
    spec["model"]["unk_token"] = "<nope>"
    (tokenizer_folder / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(TokenizerError, match="names '<nope>' as its unknown token") as err:
        load_tokenizer(tokenizer_folder)
    no_traceback(err.value, str(tokenizer_folder))
    Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token="b")).save(str(tokenizer_folder / "tokenizer.json"))
    with pytest.raises(TokenizerError, match="has no pad / cls / sep token") as err:
        load_tokenizer(tokenizer_folder)
    no_traceback(err.value, str(tokenizer_folder))


@pytest.mark.parametrize("key, value", [("do_lower_case", "no"), ("model_max_length", "512"),
                                        ("pad_token", ["[PAD]"]), ("add_prefix_space", 1),
                                        ("cls_token", 5)])
def test_tokenizer_config_values_of_another_type_name_file_and_key(tokenizer_folder, key, value):
    config = tokenizer_folder / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), key: value}))
    with pytest.raises(TokenizerError, match=f"{key}=") as err:
        load_tokenizer(tokenizer_folder)
    no_traceback(err.value, str(config))


def test_train_with_a_foreign_vocabulary_prints_one_paragraph(tmp_path):
    folder = folder_with(tmp_path, "model", hub_config("bert"))
    (folder / "vocab.txt").write_text("<s>\n<pad>\n</s>\n<unk>\nfilm\n")
    user_error(cli("model=auto", f"model.pretrained={folder}", "task=sst2", "logger=csv",
                   f"hydra.run.dir={tmp_path / 'run'}", f"paths.cache_dir={tmp_path / 'cache'}"),
               str(folder / "vocab.txt"), "not a BERT WordPiece vocabulary")


# ----------------------------------------------------------------------------------------------------------
# The right line, after records were streamed


def _bad_at(line: int, n: int = 400, end: bytes = b"\n") -> bytes:
    lines = [f"Line {i} holds some words.".encode() for i in range(1, n + 1)]
    lines[line - 1] = b"Caf\xe9 au lait."
    return end.join(lines) + end


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_streamed_prediction_input_names_the_line_of_the_bad_bytes(tmp_path, end):
    """Decoded line by line: a text decoder reading ahead would name the first line of its block."""
    from bertlab.inference.inputs import _lines, read_inputs
    from bertlab.inference.predictor import PredictSettings

    path = tmp_path / "in.txt"
    path.write_bytes(_bad_at(300, end=end))
    stream, _ = read_inputs(path, "sequence", PredictSettings(), fmt="text")
    with pytest.raises(DataError, match=r"in\.txt:300: bytes that are not UTF-8 \(b'\\xe9 au'"):
        list(stream)
    stdin = io.TextIOWrapper(io.BytesIO(_bad_at(250, end=end)))
    with pytest.raises(DataError, match=r"<stdin>:250: bytes that are not UTF-8"):
        list(_lines(stdin, "<stdin>"))


def test_jsonl_to_predict_names_the_line_after_blank_lines(tmp_path):
    from bertlab.inference.inputs import read_inputs
    from bertlab.inference.predictor import PredictSettings

    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "a"}\n\n\n{"text": "b"}\r\n{"text": \n')
    stream, _ = read_inputs(path, "sequence", PredictSettings(), fmt="jsonl")
    with pytest.raises(DataError, match=r"in\.jsonl:5: not a JSON object per line"):
        list(stream)


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_a_corpus_names_the_line_of_bad_bytes_read_whole_or_prepared(tmp_path, end):
    from bertlab.data.corpus import _piece_lines
    from bertlab.data.rawtext import iter_corpus

    path = tmp_path / "corpus.txt"
    path.write_bytes(_bad_at(123, n=200, end=end))
    with pytest.raises(DataError, match=r"corpus\.txt:123: not valid UTF-8"):
        list(iter_corpus([path]))
    start = path.read_bytes().index(b"Line 100 ")  # a shard that starts inside the file
    with pytest.raises(DataError, match=r"corpus\.txt:123: not valid UTF-8"):
        list(_piece_lines(path, start, path.stat().st_size))


def test_an_empty_corpus_is_a_data_error(tmp_path):
    from bertlab.data.rawtext import read_corpus

    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(DataError, match=r"empty corpus: no sentences in .*empty\.txt"):
        read_corpus([tmp_path / "empty.txt"])


@pytest.mark.parametrize("name, content, line", [
    ("cr.csv", b"text,label\rgood,1\rcaf\xe9,1\r", 3),  # line ends CR only: the csv module splits there too
    ("crlf.tsv", b"text\tlabel\r\n\r\ngood\t1\r\ncaf\xe9\t1\r\n", 4),
    ("quoted.csv", b'text,label\n"a\nb\nc",1\ncaf\xe9,1\n', 5),
    ("blank.jsonl", b'{"text": "a", "label": "1"}\n\n\r\n{"text": "caf\xe9", "label": "1"}\n', 4),
])
def test_tables_name_the_line_of_bad_bytes(tmp_path, name, content, line):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError, match=rf"{name}:{line}: bytes that are not UTF-8"):
        read_table(path, "text", None, "label", BadExamplePolicy())


@pytest.mark.parametrize("name, content, line", [
    ("multi.csv", 'text,label\n"one\ntwo\n\nthree",1\nfour,1\nfive,1,extra\n', 7),
    ("cr.tsv", "text\tlabel\r\ra\t1\rb\t1\tq\r", 4),
    ("gaps.jsonl", '{"text": "a", "label": 1}\n\n\n{"text": "b", "label": 1}\n{"text": 5, "label": 1}\n', 5),
])
def test_tables_name_the_line_of_a_bad_record_after_multi_line_cells_and_blank_lines(tmp_path, name, content, line):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8", newline="")
    with pytest.raises(DataError, match=rf"{name}:{line}: "):
        read_table(path, "text", None, "label", BadExamplePolicy())


def test_no_torch_tensor_is_needed_to_read_a_record(tmp_path):
    """read_record is plain Python (runtime imports nothing heavier): predict on ONNX never imports torch."""
    code = ("import sys; from bertlab.runtime.records import read_record; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.stdout.strip() == "False", out.stderr
    assert torch.__version__  # the module itself needs torch for the folders above
