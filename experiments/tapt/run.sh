#!/usr/bin/env bash
# Task-adaptive pre-training (TAPT, Gururangan et al. 2020) with a real checkpoint: MiniLM-L6 continued with masked
# LM on a GLUE task's own training text (labels dropped; dev text never read), then fine-tuned on the task, against
# MiniLM-L6 fine-tuned directly. Same fine-tuning settings (the task preset's), seeds paired, bertlab.compare's
# paired test per task.
#
# Usage: BERTLAB_DATA_DIR=DATA_DIR bash experiments/tapt/run.sh [task ...]      (default: cola rte)
#   TAPT_STEPS (default 200): masked-LM optimizer steps of batch 32 on the task's text (15 % masking, lr 1e-4,
#   6 % warmup, lines packed into 128-token sequences; CoLA's text is 21 such batches, RTE's 45);
#   SEEDS (default 1,2,3): the fine-tuning seeds of each side.
# Runs go to logs/experiments/tapt/<task>/{tapt,plain,tapt_ft}; records (metrics.json of each run, the MLM curve,
# the comparison) to experiments/tapt/<task>/{tapt,plain,tapt_ft,compare}.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/tapt
logs=logs/experiments/tapt  # relative: run configs, records and plots name no machine path
py=${PYTHON:-.venv/bin/python}
data=$(realpath "${BERTLAB_DATA_DIR:?set BERTLAB_DATA_DIR to the data folder}")
quiet=(logger=csv trainer.enable_progress_bar=false)
corpus=$logs/corpus
$py experiments/pretrain_quick/make_corpus.py "$data" "$corpus"
for task in ${@:-cola rte}; do
  out=$logs/$task; rm -rf "$out"; mkdir -p "$out"
  $py train.py task=mlm model=minilm_l6 data.train_file="$corpus/${task}_train.txt" \
    data.val_file="$corpus/${task}_val.txt" data.text_format=plain task.mlm_probability=0.15 optim.lr=1e-4 \
    trainer.max_epochs=-1 trainer.max_steps="${TAPT_STEPS:-200}" seed=1 "${quiet[@]}" hydra.run.dir="$out/tapt" 2>&1 \
    | grep -E "run dir|val/|rror" || true
  for side in plain tapt_ft; do
    init=(); [[ $side == tapt_ft ]] && init=(model.init_from="$out/tapt")
    $py train.py -m task=$task model=minilm_l6 paths.data_dir="$data" seed="${SEEDS:-1,2,3}" "${init[@]}" \
      "${quiet[@]}" hydra.sweep.dir="$out/$side" 2>&1 | grep -E "run dir|rror" || true
  done
  rm -rf "$here/$task"
  $py experiments/record_runs.py "$here/$task/tapt" "$out/tapt"
  cp "$out/tapt/csv/metrics.csv" "$here/$task/tapt/curves.csv"
  for side in plain tapt_ft; do $py experiments/record_runs.py "$here/$task/$side" "$out/$side"/*/; done
  $py -m bertlab.compare "$out"/plain/*/ "$out"/tapt_ft/*/ --group-by model.init_from --baseline model.init_from=null \
    --out "$here/$task/compare" | tail -20
done
