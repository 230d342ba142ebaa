#!/usr/bin/env bash
# Pre-train, then fine-tune (conf/experiment/pretrain_then_finetune.yaml): bert_mini (4 layers, hidden 256)
# pre-trained with masked-LM on WikiText-2 (wiki.valid as training text, wiki.test as validation; its own
# 8,000-piece WordPiece vocabulary), then fine-tuned on SST-2 (first 8,000 training sentences, 3 epochs,
# full dev set) from (a) that checkpoint and (b) random weights, 3 seeds each.
# (control: random weights with the stage-1 vocabulary, 3 seeds.)
# Usage: BERTLAB_DATA_DIR=../shared/data bash experiments/pretrain_then_finetune/run.sh [pretrain] [finetune] [control]
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/pretrain_then_finetune
logs=logs/experiments/pretrain_then_finetune
py=.venv/bin/python
quiet=(logger=csv trainer.enable_progress_bar=false)
for stage in ${@:-pretrain finetune}; do
  case $stage in
    pretrain)
      rm -rf "$logs/pretrain"
      # data.stream=false: the in-memory path its recorded results ran on (the default prepares the corpus now)
      $py train.py task=mlm model=bert_mini trainer.max_epochs=10 data.stream=false "${quiet[@]}" \
        tags=[pretrain_then_finetune,pretrain] hydra.run.dir="$logs/pretrain" 2>&1 | grep -E "run dir|val/|Error" || true
      $py experiments/record_runs.py "$here/pretrain" "$logs/pretrain"
      cp "$logs/pretrain/csv/metrics.csv" "$here/pretrain/curves.csv" ;;
    finetune)
      rm -rf "$logs/finetune"
      $py train.py -m experiment=pretrain_then_finetune data.max_train_samples=8000 "${quiet[@]}" \
        hydra.sweep.dir="$logs/finetune" 2>&1 | grep -E "run dir|val/|Error" || true
      $py -m bertlab.compare "$logs/finetune" --group-by model.init_from --out "$here/finetune"
      $py experiments/record_runs.py "$here/finetune/runs" "$logs/finetune"/*/ ;;
    control)  # random weights with stage 1's vocabulary: separates what the weights bring from what the vocabulary does
      rm -rf "$logs/control"
      $py train.py -m experiment=pretrain_then_finetune data.max_train_samples=8000 model.init_from=null \
        model.tokenizer="$logs/pretrain/tokenizer" "${quiet[@]}" hydra.sweep.dir="$logs/control" 2>&1 | grep -E "run dir|val/|Error" || true
      $py experiments/record_runs.py "$here/control/runs" "$logs/control"/*/ ;;
  esac
done
