#!/usr/bin/env bash
# bertlab with model=minilm_l6 at the Hugging Face reference's budget (../shared/docs/REFERENCE-RESULTS.md):
# batch 32, lr 5e-5, 10 % warm-up, weight decay 0.01, 1 epoch, dynamic padding, first-sub-word NER labels;
# SQuAD: the first 4,000 questions of train.json, 1 epoch, bertlab's squad defaults.
# Usage: BERTLAB_DATA_DIR=../shared/data bash experiments/reference_budget/run.sh [task ...]
# Each run's metrics.json is copied to experiments/reference_budget/results/<task>.json; then
#   python experiments/reference_budget/table.py  writes results/TABLE.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=experiments/reference_budget/results
mkdir -p "$out"
common=(model=minilm_l6 logger=csv trainer.enable_progress_bar=false seed=42)
ref=(data.batch_size=32 optim.lr=5e-5 optim.warmup_ratio=0.1 optim.weight_decay=0.01 trainer.max_epochs=1)
run() {  # name, overrides...
  local name=$1; shift
  local dir=logs/reference_budget/$name
  rm -rf "$dir"
  .venv/bin/python train.py "${common[@]}" "$@" hydra.run.dir="$dir" 2>&1 | tail -6
  # Keep the recorded copy free of this machine's absolute paths.
  .venv/bin/python -c "import json,os,sys; m=json.load(open(sys.argv[1])); m['best_checkpoint']=os.path.relpath(m['best_checkpoint']); json.dump(m,open(sys.argv[2],'w'),indent=2)" "$dir/metrics.json" "$out/$name.json"
}
tasks=("${@:-conll2003 squad sst2}")
for t in ${tasks[@]}; do
  case $t in
    conll2003) run conll2003 task=conll2003 "${ref[@]}" ;;
    sst2)      run sst2 task=sst2 "${ref[@]}" ;;
    squad)     run squad task=squad data.max_train_samples=4000 trainer.max_epochs=1 ;;
    mrpc|rte|wnut17) run $t task=$t "${ref[@]}" ;;
  esac
done
