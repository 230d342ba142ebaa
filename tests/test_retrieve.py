"""``python -m bertlab.retrieve`` with a tiny task=embedding run: the command-line round trip, the TREC run file,
metrics equal to ir_measures' on that file, corpus embeddings reused and recomputed, mined negatives never
relevant, and each bad input one paragraph (exit 1) or a counted, logged rule."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES, main_in_process, run_train

DATA = FIXTURES / "retrieval"


def retrieve(model, tmp_path, *extra, corpus=DATA / "corpus.tsv", queries=DATA / "queries.tsv",
             qrels=DATA / "qrels.txt"):
    from bertlab.retrieve import main

    args = [str(model), "--corpus", str(corpus), "--queries", str(queries), "--out", str(tmp_path / "out"),
            "--no-progress", *extra]
    main(args + (["--qrels", str(qrels)] if qrels else []))
    return tmp_path / "out"


def fails(capsys, *args, **kwargs) -> str:
    """The one-paragraph error of a call that must fail with exit status 1."""
    with pytest.raises(SystemExit) as exit_:
        retrieve(*args, **kwargs)
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "bertlab: error:" in err and "Traceback" not in err
    return " ".join(err.split("bertlab: error:", 1)[1].split())


def test_command_line_round_trip_writes_a_trec_run_and_metrics(emb_run, tmp_path):
    # python -m bertlab.retrieve ..., in this process (conftest.main_in_process): its output and exit status
    done = main_in_process([str(emb_run), "--corpus", str(DATA / "corpus.tsv"), "--queries", str(DATA / "queries.tsv"),
                            "--qrels", str(DATA / "qrels.txt"), "--top-k", "5", "--out", str(tmp_path / "out"),
                            "--tag", "tiny"], module="bertlab.retrieve", env={"TOKENIZERS_PARALLELISM": "false"})
    assert done.returncode == 0, done.stderr[-2000:]
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed == json.loads((tmp_path / "out" / "metrics.json").read_text())
    lines = (tmp_path / "out" / "run.trec").read_text().splitlines()
    assert len(lines) == 6 * 5  # every query (q6 too, which has no judgement), top 5
    rows = [line.split(" ") for line in lines]
    assert all(len(r) == 6 and r[1] == "Q0" and r[5] == "tiny" for r in rows)
    for q in {r[0] for r in rows}:
        mine = [r for r in rows if r[0] == q]
        assert [int(r[3]) for r in mine] == [1, 2, 3, 4, 5]
        scores = [float(r[4]) for r in mine]
        assert scores == sorted(scores, reverse=True) and len({r[2] for r in mine}) == 5
    assert "1 of 6 queries have no relevant passage" in done.stderr
    assert "run file: " in done.stderr  # bertlab's own lines are shown when it runs as python -m


def test_metrics_equal_ir_measures_on_the_written_run(emb_run, tmp_path):
    import ir_measures

    from bertlab.tasks.retrieval import RETRIEVAL_MEASURES

    out = retrieve(emb_run, tmp_path)
    got = json.loads((out / "metrics.json").read_text())
    measures = [ir_measures.parse_measure(m) for m in RETRIEVAL_MEASURES.values()]
    qrels = list(ir_measures.read_trec_qrels(str(DATA / "qrels.txt")))
    run = list(ir_measures.read_trec_run(str(out / "run.trec")))
    lib = ir_measures.calc_aggregate(measures, qrels, run)
    assert {n: got[n] for n in RETRIEVAL_MEASURES} == pytest.approx(
        {n: lib[ir_measures.parse_measure(m)] for n, m in RETRIEVAL_MEASURES.items()}, abs=1e-6)
    # graded: q1 judges d1 at 2 and d3 at 1, q5 judges d2 not relevant (0): counted as such
    assert got["queries_scored"] == 5 and got["queries_without_relevant"] == 1


def test_corpus_embeddings_are_reused_and_recomputed_when_the_corpus_changes(emb_run, tmp_path, monkeypatch):
    import numpy as np

    from bertlab.inference import retrieve as r

    embedded = []
    real = r.embed_in_batches
    monkeypatch.setattr(r, "embed_in_batches", lambda p, texts, *a: embedded.append(a[-1]) or real(p, texts, *a))
    out = retrieve(emb_run, tmp_path)
    first = (out / "run.trec").read_text()
    saved = sorted(out.glob("corpus-*.npy"))
    assert embedded == ["corpus", "query"] and len(saved) == 1
    assert np.load(saved[0]).shape[0] == 8
    embedded.clear()
    retrieve(emb_run, tmp_path)
    assert embedded == ["query"]  # the corpus's embeddings came from the saved file
    assert (out / "run.trec").read_text() == first
    changed = tmp_path / "corpus.tsv"  # same name elsewhere, one text edited: another file's hash
    changed.write_text((DATA / "corpus.tsv").read_text().replace("sheep", "goats"))
    embedded.clear()
    retrieve(emb_run, tmp_path, corpus=changed)
    assert embedded == ["corpus", "query"] and len(list(out.glob("corpus-*.npy"))) == 2
    embedded.clear()
    retrieve(emb_run, tmp_path, "--text-column", "text", "--batch-size", "3")  # batch size is not in the key
    assert embedded == ["query"]


def test_mined_negatives_are_never_relevant(emb_run, tmp_path):
    from bertlab.data.readers import BadExamplePolicy, read_table

    triples = tmp_path / "neg.tsv"
    retrieve(emb_run, tmp_path, "--mine-negatives", "3", str(triples), "--skip-ranks", "1")
    corpus = dict(line.split("\t") for line in (DATA / "corpus.tsv").read_text().splitlines()[1:])
    by_text = {t: d for d, t in corpus.items()}
    queries = {t: q for q, t in (line.split("\t") for line in (DATA / "queries.tsv").read_text().splitlines()[1:])}
    qrels: dict[str, dict[str, int]] = {}
    for line in (DATA / "qrels.txt").read_text().splitlines():
        q, _, d, rel = line.split()
        qrels.setdefault(q, {})[d] = int(rel)
    header, *rows = [line.split("\t") for line in triples.read_text().splitlines()]
    assert header == ["text", "text_pair", "negative"]
    per_query: dict[str, int] = {}
    for query, positive, negative in rows:
        qid = queries[query]
        assert qrels[qid][by_text[positive]] > 0
        assert qrels[qid].get(by_text[negative], 0) <= 0  # d2 for q5 is judged 0: a fair negative
        per_query[qid] = per_query.get(qid, 0) + 1
    assert per_query == {q: 3 for q in ("q1", "q2", "q3", "q4", "q5")}  # q6 has no positive: no rows
    assert all(by_text[p] == "d1" for q, p, _ in rows if queries[q] == "q1")  # the most relevant is the positive
    # what task=embedding reads: (text, text_pair, negative) rows
    read = read_table(triples, "text", "text_pair", "negative", BadExamplePolicy())
    assert len(read) == len(rows)


def test_other_formats_and_column_names(emb_run, tmp_path):
    corpus, queries, qrels = tmp_path / "c.jsonl", tmp_path / "q.csv", tmp_path / "qrels.tsv"
    lines = (DATA / "corpus.tsv").read_text().splitlines()[1:]
    corpus.write_text("".join(json.dumps({"pid": d, "body": t}) + "\n" for d, t in (x.split("\t") for x in lines)))
    queries.write_text("pid,body\nq1,On which river does Thornby stand?\nq2,\"When does Wrenfield hold its "
                       "market?\"\n")
    qrels.write_text("qid\tdocid\trelevance\nq1\td1\t1\nq2\td2\t1\n")
    out = retrieve(emb_run, tmp_path, "--id-column", "pid", "--text-column", "body", corpus=corpus,
                   queries=queries, qrels=qrels)
    assert json.loads((out / "metrics.json").read_text())["queries_scored"] == 2


# ----------------------------------------------------------------------------------------------------------
# Bad input


def test_duplicate_ids_with_different_texts_are_refused(emb_run, tmp_path, capsys):
    corpus = tmp_path / "c.tsv"
    corpus.write_text((DATA / "corpus.tsv").read_text() + "d3\tAnother text under an id already given.\n")
    msg = fails(capsys, emb_run, tmp_path, corpus=corpus)
    assert f"{corpus}:10: passage id 'd3' is given twice with different texts (first at {corpus}:4)" in msg
    queries = tmp_path / "q.tsv"  # fresh: queries too
    queries.write_text((DATA / "queries.tsv").read_text() + "q2\tSomething else\n")
    assert "query id 'q2' is given twice" in fails(capsys, emb_run, tmp_path, queries=queries)


def test_a_repeated_row_is_read_once(emb_run, tmp_path):
    corpus = tmp_path / "c.tsv"
    corpus.write_text((DATA / "corpus.tsv").read_text() + "d3\tThe River Ashby rises in the Selden Downs and "
                      "flows east to the sea.\n")
    out = retrieve(emb_run, tmp_path, corpus=corpus)
    assert len({line.split()[2] for line in (out / "run.trec").read_text().splitlines()}) <= 8


@pytest.mark.parametrize("line,kind,bad", [("q9 0 d1 1", "query", "'q9' (line 8)"),
                                           ("q1 0 d99 1", "passage", "'d99' (line 8)"),
                                           ("q1\td42\t0", "passage", "'d42' (line 8)")])
def test_qrels_naming_unknown_ids_are_refused(emb_run, tmp_path, capsys, line, kind, bad):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text((DATA / "qrels.txt").read_text() + line + "\n")
    msg = fails(capsys, emb_run, tmp_path, qrels=qrels)
    assert f"1 judgement(s) name a {kind} id that" in msg and bad in msg


def test_no_query_with_a_relevant_passage_is_an_error(emb_run, tmp_path, capsys):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 0\nq2 0 d2 -1\n")  # judged, but nothing relevant
    assert "no query has a relevant passage" in fails(capsys, emb_run, tmp_path, qrels=qrels)


@pytest.mark.parametrize("which,content,where", [
    ("corpus", "id\ttext\nd1\tA text.\nd2\t   \n", ":3: empty text in column 'text'"),
    ("queries", "id\ttext\nq1\t\n", ":2: empty text in column 'text'"),
    ("queries", '{"id": "q1", "text": ""}\n', ":1: empty text in column 'text'"),
    ("corpus", "id\ttext\n\tA text without an id.\n", ":2: empty label in column 'id'"),
])
def test_an_empty_text_or_id_is_refused(emb_run, tmp_path, capsys, which, content, where):
    path = tmp_path / ("in.jsonl" if content.startswith("{") else "in.tsv")
    path.write_text(content)
    msg = fails(capsys, emb_run, tmp_path, qrels=None, **{which: path})
    assert f"{path}{where}" in msg and "Every row needs a non-empty id and text" in msg


def test_a_run_that_is_not_an_embedding_model_is_refused(tmp_path, capsys):
    run = tmp_path / "sst2_run"
    shutil.copytree(FIXTURES / "main_run", run)
    msg = fails(capsys, run, tmp_path)
    assert "a sequence model (task sst2), not an embedding model" in msg
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_outputs_inside_a_run_folder_are_refused(emb_run, tmp_path, capsys):
    from bertlab.retrieve import main

    with pytest.raises(SystemExit):
        main([str(emb_run), "--corpus", str(DATA / "corpus.tsv"), "--queries", str(DATA / "queries.tsv"),
              "--out", str(emb_run / "retrieval")])
    assert "is inside the run folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        retrieve(emb_run, tmp_path, "--mine-negatives", "2", str(DATA / "corpus.tsv"))
    assert "the corpus file" in capsys.readouterr().err


def test_a_pretraining_run_is_refused_as_not_an_embedding_model(tmp_path, capsys):
    run = tmp_path / "mlm_run"  # fresh case: a model that predict refuses too, refused here in retrieve's words
    run_train(["model=bert_tiny", "task=mlm", "task.nsp=false", "trainer.max_steps=1"], run)
    msg = fails(capsys, run, tmp_path)
    assert "a mlm model (task mlm), not an embedding model" in msg and "task=embedding" in msg
