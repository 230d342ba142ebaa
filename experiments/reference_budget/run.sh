#!/usr/bin/env bash
# bertlab with model=minilm_l6 at the Hugging Face reference's budget (../shared/docs/REFERENCE-RESULTS.md):
# batch 32, lr 5e-5, 10 % warm-up, weight decay 0.01, 1 epoch, dynamic padding, first-sub-word NER labels;
# SQuAD: the first 4,000 questions of train.json, 1 epoch, bertlab's squad defaults. MRPC, RTE, WNUT-17: seeds 1-3.
# Usage: BERTLAB_DATA_DIR=../shared/data bash experiments/reference_budget/run.sh [task ...]
# Each run's metrics.json is copied to experiments/reference_budget/results/<task>.json; then
#   python experiments/reference_budget/table.py  writes results/TABLE.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=experiments/reference_budget/results
mkdir -p "$out"
common=(model=minilm_l6 logger=csv trainer.enable_progress_bar=false)
ref=(data.batch_size=32 optim.lr=5e-5 optim.warmup_ratio=0.1 optim.weight_decay=0.01 trainer.max_epochs=1)
run() {  # name, overrides...
  local name=$1; shift
  local dir=logs/reference_budget/$name
  rm -rf "$dir"
  .venv/bin/python train.py "${common[@]}" "$@" hydra.run.dir="$dir" 2>&1 | tail -6
  .venv/bin/python experiments/record_runs.py "$out" "$dir"  # → $out/$name.json
}
tasks=("${@:-conll2003 squad sst2}")
for t in ${tasks[@]}; do
  case $t in
    # CoNLL-2003 reads batches in random order by default (as the reference); -grouped is length-grouped batches.
    conll2003) run conll2003 task=conll2003 "${ref[@]}" seed=42 data.group_by_length=false ;;
    conll2003-grouped) run conll2003-grouped task=conll2003 "${ref[@]}" seed=42 data.group_by_length=true ;;
    # SST-2 reads batches in random order by default (as the reference); -grouped is length-grouped batches.
    sst2)      run sst2 task=sst2 "${ref[@]}" seed=42 data.group_by_length=false ;;
    sst2-grouped) run sst2-grouped task=sst2 "${ref[@]}" seed=42 data.group_by_length=true ;;
    squad)     run squad task=squad data.max_train_samples=4000 trainer.max_epochs=1 seed=42 ;;
    # The longer budget: the project's own CoNLL defaults (conf/task/conll2003.yaml: 3 epochs) with no overrides.
    conll2003-defaults) run conll2003-defaults task=conll2003 seed=42 ;;
    conll2003-defaults-grouped) run conll2003-defaults-grouped task=conll2003 seed=42 data.group_by_length=true data.batch_size=32 ;;
    conll2003-defaults-bs32) run conll2003-defaults-bs32 task=conll2003 seed=42 data.batch_size=32 ;;
    # The small sets: three seeds each (their spread is the noise a comparison must allow for).
    mrpc|rte|wnut17) for s in 1 2 3; do run $t-seed$s task=$t "${ref[@]}" seed=$s; done ;;
    # Two more seeds of the equal-budget CoNLL-2003 run: the spread of the 1-epoch figure.
    conll2003-seeds)
      for s in 1 2; do run conll2003-seed$s task=conll2003 "${ref[@]}" seed=$s data.group_by_length=false; done ;;
    # The longer budget for the other tasks: their presets, no overrides (3 seeds for the small sets).
    sst2-defaults) run sst2-defaults task=sst2 seed=42 ;;
    sst2-defaults-grouped) run sst2-defaults-grouped task=sst2 seed=42 data.group_by_length=true ;;
    # The checkpoint's own sentence vector: all-MiniLM-L6-v2 was trained with mean pooling (1_Pooling/config.json).
    sst2-defaults-grouped-mean) run sst2-defaults-grouped-mean task=sst2 seed=42 data.group_by_length=true head.pooling=mean ;;
    # SST-2 within the published grid (2-4 epochs): a third epoch, with length-grouped batches.
    sst2-3epochs-grouped) run sst2-3epochs-grouped task=sst2 seed=42 trainer.max_epochs=3 data.group_by_length=true ;;
    # SQuAD's longer budget: the preset (2 epochs) on twice the reference's questions (train.json has 8,582).
    squad-defaults) run squad-defaults task=squad data.max_train_samples=8000 seed=42 ;;
    mrpc-defaults|rte-defaults|wnut17-defaults)
      for s in 1 2 3; do run ${t%-defaults}-defaults-seed$s task=${t%-defaults} seed=$s; done ;;
    *) echo "run.sh: no stage named '$t' (the stages are the names in this file's case list)" >&2; exit 2 ;;
  esac
done
