"""``python -m bertlab.retrieve RUN_OR_EXPORT --corpus FILE --queries FILE [--qrels FILE] [--rerank RUN]``: search a
corpus with an embedding model, rerank the candidates with a cross-encoder, write a TREC run file, score it against
relevance judgements, mine hard negatives (the rules: :mod:`bertlab.inference.retrieve`)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from bertlab.runtime.exits import user_errors
from bertlab.runtime.files import refuse_writing_over, writing
from bertlab.runtime.outputs import refuse_folder_in_bertlab_folders, refuse_replacing_bertlab_files

log = logging.getLogger("bertlab.retrieve")  # also when run as __main__ (python -m)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bertlab.retrieve",
                                description="Dense retrieval with a task=embedding run or its export.")
    p.add_argument("model", metavar="RUN_OR_EXPORT", help="a run dir, a .ckpt file or an embedding export folder")
    p.add_argument("--corpus", required=True, help="TSV/CSV/JSONL passages with id and text columns")
    p.add_argument("--queries", required=True, help="TSV/CSV/JSONL queries with id and text columns")
    p.add_argument("--qrels", help="relevance judgements: TREC qrels or a (qid, docid, relevance) TSV")
    p.add_argument("--top-k", type=int, default=100, help="passages retrieved per query (default 100)")
    p.add_argument("--out", default="retrieval", help="folder for run.trec, metrics.json and the saved corpus "
                                                      "embeddings (default ./retrieval)")
    p.add_argument("--batch-size", type=int, default=None, help="texts per forward pass (default: the run's "
                                                                "data.eval_batch_size)")
    p.add_argument("--id-column", default="id", help="the id column of --corpus and --queries (default id)")
    p.add_argument("--text-column", default="text", help="the text column of --corpus and --queries (default text)")
    p.add_argument("--mine-negatives", nargs=2, metavar=("N", "OUT_TSV"), default=None,
                   help="write N hard negatives per query with a relevant passage as (text, text_pair, negative) "
                        "rows for task=embedding (needs --qrels)")
    p.add_argument("--skip-ranks", type=int, default=0,
                   help="with --mine-negatives: ignore the first K ranks (likely unjudged positives; default 0)")
    p.add_argument("--rerank", metavar="RERANK_RUN", default=None,
                   help="rerank each query's first candidates with a cross-encoder (a task=rerank run or its export): "
                        "run.trec holds the reranked order, run.first_stage.trec the retrieval's")
    p.add_argument("--rerank-top-k", type=int, default=None, metavar="K",
                   help="with --rerank: candidates reranked per query (default: --top-k)")
    p.add_argument("--index", default="exact", choices=("exact", "hnsw"),
                   help="exact: every query against every passage (default); hnsw: faiss's approximate HNSW graph "
                        "for large corpora, built once and saved beside the corpus embeddings (needs faiss-cpu)")
    p.add_argument("--ef-search", type=int, default=None, metavar="N",
                   help="with --index hnsw: candidates a query visits (default 128, at least --top-k): higher is "
                        "closer to exact and slower")
    p.add_argument("--tag", default="bertlab", help="the run tag, the last column of the run file")
    p.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda when available)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    return p


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if not logging.getLogger().handlers:
        # Other libraries' INFO lines stay out (faiss's loader reports each CPU build it tries); bertlab's are shown.
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    logging.getLogger("bertlab").setLevel(logging.INFO)
    from bertlab.inference.inputs import model_files
    from bertlab.runtime.errors import ConfigError
    from bertlab.runtime.logs import configure_console

    configure_console("normal")
    with user_errors():
        if args.top_k < 1 or (args.batch_size is not None and args.batch_size < 1):
            raise ConfigError(f"--top-k ({args.top_k}) and --batch-size ({args.batch_size}) must be at least 1")
        if args.ef_search is not None and (args.index != "hnsw" or args.ef_search < 1):
            raise ConfigError(f"--ef-search {args.ef_search}: give a count of at least 1, with --index hnsw")
        if args.rerank_top_k is not None and (args.rerank is None or args.rerank_top_k < 1):
            raise ConfigError(f"--rerank-top-k {args.rerank_top_k}: give a count of at least 1, with --rerank RUN")
        if args.index == "hnsw":  # refused before anything is embedded
            from bertlab.inference.retrieve import require_faiss

            require_faiss()
        mine = None
        if args.mine_negatives:
            count, path = args.mine_negatives
            if not count.isdigit() or int(count) < 1 or not args.qrels:
                raise ConfigError(f"--mine-negatives {count} {path}: give a count of at least 1 and --qrels "
                                  "(a negative is a passage the qrels do not judge relevant)")
            mine = (int(count), Path(path))
        out = Path(args.out)
        reads = [(Path(f), f"the {what} file") for f, what in ((args.corpus, "corpus"), (args.queries, "queries"),
                                                               (args.qrels, "qrels")) if f]
        refuse_folder_in_bertlab_folders(out, f"--out {out}", "Give --out a folder of its own (e.g. --out "
                                         "retrieval)")
        models = model_files(args.model) + (model_files(args.rerank) if args.rerank else [])
        for name in ("run.trec", "run.first_stage.trec", "metrics.json"):
            refuse_writing_over(out / name, reads + models, f"--out {out} ({name})",
                                "Give --out a folder of its own")
        if mine:
            refuse_writing_over(mine[1], reads + models, f"--mine-negatives ... {mine[1]}",
                                "Give the triples a file of their own")
            refuse_replacing_bertlab_files(mine[1], f"--mine-negatives ... {mine[1]}",
                                           "Give the triples a file outside run and export folders")
        _retrieve(args, out, mine)


def _retrieve(args, out: Path, mine) -> None:
    from bertlab.inference import retrieve as r

    corpus_ids, corpus_texts = r.read_texts(Path(args.corpus), args.id_column, args.text_column, "passage")
    query_ids, query_texts = r.read_texts(Path(args.queries), args.id_column, args.text_column, "query")
    qrels = r.read_qrels(Path(args.qrels), query_ids, corpus_ids) if args.qrels else None
    predictor = r.load_embedding_model(args.model, args.device, args.batch_size)
    reranker = None
    if args.rerank:  # loaded (and refused if it is no reranker) before any embedding
        from bertlab.inference.rerank import load_reranker

        reranker = load_reranker(args.rerank, args.device, args.batch_size)
    size = int(args.batch_size or predictor.settings.batch_size)
    progress = not args.no_progress
    with writing(out, "the retrieval outputs", "give --out a folder on a disk with room"):
        out.mkdir(parents=True, exist_ok=True)
        corpus, saved = r.corpus_embeddings(predictor, corpus_ids, corpus_texts, Path(args.corpus), out,
                                            (args.id_column, args.text_column), size, progress)
        queries = r.embed_in_batches(predictor, query_texts, size, progress, "query")
        scores, indices = r.search_corpus(queries, corpus, args.top_k, args.index, saved,
                                          args.ef_search or r.HNSW_EF_SEARCH)
        first_stage = (scores, indices)
        if reranker is not None:
            from bertlab.inference.rerank import rerank

            k = args.rerank_top_k or args.top_k
            r.write_trec_run(out / "run.first_stage.trec", query_ids, corpus_ids, scores, indices, args.tag)
            scores, indices = rerank(reranker, query_texts, corpus_texts, indices, k,
                                     int(args.batch_size or reranker.settings.batch_size), progress)
            first_stage = (first_stage[0][:, :k], first_stage[1][:, :k])  # scored on the candidates reranked
            log.info("reranked: the top %d candidates of each query with %s", indices.shape[1], args.rerank)
        r.write_trec_run(out / "run.trec", query_ids, corpus_ids, scores, indices, args.tag)
        log.info("run file: %s (%d queries, top %d of %d passages)", out / "run.trec", len(query_ids),
                 indices.shape[1], len(corpus_ids))
        if qrels is not None:
            metrics = r.score(qrels, r.run_dict(query_ids, corpus_ids, scores, indices), args.top_k)
            if reranker is not None:  # before and after reranking, over the same candidates
                metrics = {"first_stage": r.score(qrels, r.run_dict(query_ids, corpus_ids, *first_stage), args.top_k,
                                                   warn=False),
                           "reranked": metrics}
            (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
            print(json.dumps(metrics))
        if mine:
            rows = r.mine_negatives(qrels, query_ids, query_texts, corpus_ids, corpus_texts, indices, mine[0],
                                    args.skip_ranks)
            mine[1].parent.mkdir(parents=True, exist_ok=True)
            r.write_triples(mine[1], rows)
            log.info("hard negatives: %d (query, positive, negative) rows → %s", len(rows), mine[1])


if __name__ == "__main__":
    main()
