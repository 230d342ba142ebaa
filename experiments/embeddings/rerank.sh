#!/usr/bin/env bash
# The reranker measurement (docs/embeddings.md "Measurement"; the issue's goal "the reranker on top raises MRR@10
# over the bi-encoder alone"). Per seed: a MiniLM cross-encoder (task=rerank model=minilm_l6) trained on run.sh's
# training pairs, each question's negatives mined by that seed's bi-encoder run (task.negatives_from), then each
# SQuAD dev question's top TOPK paragraphs of the bi-encoder reranked by it: nDCG@10, MRR@10, R@1, R@10 before
# and after (rerank_eval.py, evaluate.py's dev set and search).
#
# Usage: bash experiments/embeddings/rerank.sh [DATA_DIR]   (after run.sh, whose pairs and bi-encoder runs it reads;
#   DATA_DIR: the folder holding squad_v1.1/, default that of evaluate.py)
# Knobs (environment): BI_LEN (256: the MAX_LEN of the run.sh measurement whose bi-encoders are reranked),
#   SEEDS ("1 2 3"), NEGATIVES (3 per question), SKIP (0 ranks passed over when mining), TOPK (10), MAX_LEN (128,
#   the reranker's), LOSS (listwise | pointwise: task.rerank_loss), BATCH (listwise: groups, 16 / (1 + NEGATIVES) of
#   them; pointwise: 16 pairs; the same pairs a step), LR (5e-5), EPOCHS (2), WARMUP (0.1), THREADS (2), WORK
#   (logs/embeddings/len<BI_LEN>, run.sh's: the reranker runs go to WORK/rerank/<LOSS>-e<EPOCHS>-seed*), BIENC (WORK/bertlab:
#   the bi-encoder runs seed*), PAIRS_FILE (WORK/pairs.jsonl), RESULTS (experiments/embeddings/results/len<BI_LEN>,
#   beside run.sh's), SMOKE (set: the first 24 pairs, 48 training rows, max length 32, 20 dev questions; a smoke
#   test only).
# Writes RESULTS/rerank-<LOSS>-e<EPOCHS>-seed*.json (refused where such a file holds another budget) and
# RESULTS/TABLE.md (table.py: run.sh's table when its results are there, and one table per reranker budget).
set -euo pipefail
cd "$(dirname "$0")/../.."
SEEDS=${SEEDS:-"1 2 3"} NEGATIVES=${NEGATIVES:-3} SKIP=${SKIP:-0} TOPK=${TOPK:-10} MAX_LEN=${MAX_LEN:-128}
LOSS=${LOSS:-listwise}
[[ $LOSS == listwise ]] && BATCH=${BATCH:-$((16 / (1 + NEGATIVES)))}
BATCH=${BATCH:-16} LR=${LR:-5e-5} EPOCHS=${EPOCHS:-2} WARMUP=${WARMUP:-0.1} THREADS=${THREADS:-2}
BI_LEN=${BI_LEN:-256}
WORK=${WORK:-logs/embeddings/len$BI_LEN} RESULTS=${RESULTS:-experiments/embeddings/results/len$BI_LEN}
BIENC=${BIENC:-$WORK/bertlab} PAIRS_FILE=${PAIRS_FILE:-$WORK/pairs.jsonl}
PY=${PYTHON:-.venv/bin/python}
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS TOKENIZERS_PARALLELISM=false WANDB_MODE=offline
here=experiments/embeddings
data=()
[[ -n "${1:-}" ]] && data=(--data-dir "$(realpath "$1")")
[[ -f "$PAIRS_FILE" ]] || { echo "no training pairs at $PAIRS_FILE: run experiments/embeddings/run.sh first" >&2; exit 1; }
mkdir -p "$WORK/rerank" "$RESULTS"
pairs=$(realpath "$PAIRS_FILE")
train_extra=() eval_extra=()
if [[ -n "${SMOKE:-}" ]]; then
  head -n 24 "$pairs" > "$WORK/rerank/pairs-smoke.jsonl"
  pairs=$(realpath "$WORK/rerank/pairs-smoke.jsonl") MAX_LEN=32
  train_extra=(data.max_train_samples=48) eval_extra=(--max-queries 20)
fi
budget="{\"pairs\": $(wc -l < "$pairs"), \"negatives_per_question\": $NEGATIVES, \"skip_top\": $SKIP, \"top_k\": $TOPK,"
budget+=" \"max_seq_length\": $MAX_LEN, \"batch_size\": $BATCH, \"lr\": \"$LR\", \"epochs\": $EPOCHS,"
budget+=" \"loss\": \"$LOSS\", \"warmup_ratio\": $WARMUP, \"weight_decay\": 0.01, \"threads\": $THREADS}"

for seed in $SEEDS; do
  bienc=$BIENC/seed$seed
  [[ -f "$bienc/metrics.json" ]] || { echo "no bi-encoder run at $bienc: run experiments/embeddings/run.sh first" >&2
                                      exit 1; }
  name=$LOSS-e$EPOCHS-seed$seed  # each recipe's runs and results kept side by side
  run=$WORK/rerank/$name
  # The same name with other knobs (lr, top k, length, ...) is another measurement: never written over
  # (table.py's budget_key: what makes two reranker records one measurement, threads aside)
  if [[ -f "$RESULTS/rerank-$name.json" ]] && ! $PY -c 'import json, sys
sys.path.insert(0, "experiments/embeddings")
from table import budget_key
sys.exit(budget_key(json.load(open(sys.argv[1]))) != budget_key({"budget": json.loads(sys.argv[2])}))' \
    "$RESULTS/rerank-$name.json" "$budget"
  then
    echo "$RESULTS/rerank-$name.json holds a reranker measured with another budget than $budget: give this one" \
         "RESULTS and WORK folders of their own (nothing was run or removed)" >&2
    exit 1
  fi
  rm -rf "$run"
  # No validation during training (data.val_file=null): rerank_eval.py scores the dev set once, at the end.
  $PY train.py task=rerank model=minilm_l6 data.train_file="$pairs" task.negatives_from="$(realpath "$bienc")" \
    task.num_negatives="$NEGATIVES" task.skip_top="$SKIP" data.val_file=null trainer.limit_val_batches=0 \
    task.rerank_loss="$LOSS" data.max_seq_length="$MAX_LEN" data.batch_size="$BATCH" optim.lr="$LR" \
    optim.warmup_ratio="$WARMUP" \
    optim.weight_decay=0.01 trainer.max_epochs="$EPOCHS" trainer.gradient_clip_val=1.0 seed="$seed" logger=csv \
    trainer.enable_progress_bar=false "${train_extra[@]}" hydra.run.dir="$run" 2>&1 | tail -4
  $PY $here/rerank_eval.py --bi-encoder "$bienc" --reranker "$run" --top-k "$TOPK" "${data[@]}" "${eval_extra[@]}" \
    --budget "$budget" --json "$RESULTS/rerank-$name.json"
done

$PY $here/table.py "$RESULTS"
