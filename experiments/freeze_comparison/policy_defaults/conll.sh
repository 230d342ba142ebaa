#!/usr/bin/env bash
# CoNLL-2003 (all of eng.train, 14,041 sentences) under LoRA and BitFit with their own defaults
# (conf/freeze/*.yaml `recommended`), at the budget of the recorded 1-epoch full fine-tuning (0.8330 ± 0.0027,
# experiments/reference_budget): MiniLM-L6, batch 32, 10 % warm-up, weight decay 0.01, random batch order.
# LoRA trains 1 epoch; BitFit its defaults' 3 epochs. The learning rate is the policy's (no optim.lr here).
# Usage: BERTLAB_DATA_DIR=<data> bash experiments/freeze_comparison/policy_defaults/conll.sh [policy:seed ...]
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=experiments/freeze_comparison/policy_defaults/runs
budget=(task=conll2003 model=minilm_l6 logger=csv quiet=true data.batch_size=32 data.group_by_length=false
        optim.warmup_ratio=0.1 optim.weight_decay=0.01)
runs=("$@"); (( $# )) || runs=(lora:1 bitfit:1 lora:2 bitfit:2)
for run in "${runs[@]}"; do
  policy=${run%%:*}; seed=${run##*:}
  epochs=(); [[ $policy == bitfit ]] || epochs=(trainer.max_epochs=1)
  dir=logs/policy_defaults/conll2003_${policy}_seed$seed
  rm -rf "$dir"
  .venv/bin/python train.py "${budget[@]}" freeze="$policy" seed="$seed" "${epochs[@]}" hydra.run.dir="$dir" \
    2>&1 | tail -4
  .venv/bin/python experiments/record_runs.py "$out" "$dir"
done
