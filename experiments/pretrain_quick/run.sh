#!/usr/bin/env bash
# The small-budget pre-training study (conf/experiment/pretrain_quick.yaml, docs/pretraining.md "A small-budget
# recipe"; still being measured, it does not beat random init yet): self-pre-training bert_mini on a task's own
# unlabelled training text, then fine-tuning on a few labels, against the same architecture from random weights
# with the same vocabulary.
#   BERTLAB_DATA_DIR=<data folder> bash experiments/pretrain_quick/run.sh [stage...]
# Stages (default: all, in this order):
#   corpus    plain-text corpora from the data sets (make_corpus.py; labels dropped, SST-2 dev never included)
#   pretrain  experiment=pretrain_quick on SST-2's training sentences (23 min on 2 threads: attempts/pretrain)
#   sweep     SST-2, 2,000 labelled sentences, 10 epochs: each start at lr 1e-4, 3e-4, 1e-3 (seed 1)
#   seeds     each start at its best sweep lr, seeds 2 and 3; then bertlab.compare, paired by seed
#   curve     both starts at their best lr on 250 → 8,000 labelled sentences (seed 1)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/pretrain_quick
logs=logs/experiments/pretrain_quick
corpus=$PWD/$logs/corpus
py=.venv/bin/python
data=${BERTLAB_DATA_DIR:?set BERTLAB_DATA_DIR to the data folder}
quiet=(logger=csv trainer.enable_progress_bar=false)
pre=$PWD/$logs/sst2
finetune=(task=sst2 model=bert_mini data.max_train_samples=2000 trainer.max_epochs=10 "${quiet[@]}")
pretrained=(model.init_from="$pre")
random=(model.init_from=null model.tokenizer="$pre/tokenizer")
best_run() {  # the run dir with the best val/accuracy under $1
  $py - "$1" <<'PY'
import json, sys, pathlib
print(max(pathlib.Path(sys.argv[1]).glob("*/metrics.json"),
          key=lambda p: json.loads(p.read_text())["val"]["accuracy"]).parent)
PY
}
lr_of() { $py -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1] + "/.hydra/config.yaml"))["optim"]["lr"])' "$1"; }
for stage in ${@:-corpus pretrain sweep seeds curve}; do
  case $stage in
    corpus)
      $py $here/make_corpus.py "$data" "$corpus" ;;
    pretrain)
      rm -rf "$pre"
      $py train.py experiment=pretrain_quick data.train_file="$corpus/sst2_train.txt" \
        data.val_file="$corpus/sst2_val.txt" "${quiet[@]}" hydra.run.dir="$pre" 2>&1 | grep -E "run dir|val/|rror" || true
      $py experiments/record_runs.py "$here/pretrain" "$pre"
      cp "$pre/csv/metrics.csv" "$here/pretrain/curves.csv" ;;
    sweep)
      for side in pretrained random; do
        rm -rf "$logs/sweep_$side"
        declare -n start=$side
        $py train.py -m "${finetune[@]}" "${start[@]}" optim.lr=1e-4,3e-4,1e-3 seed=1 \
          hydra.sweep.dir="$logs/sweep_$side" 2>&1 | grep -E "run dir|rror" || true
        $py experiments/record_runs.py "$here/sweep_$side" "$logs/sweep_$side"/*/
      done ;;
    seeds)
      claim=()
      for side in pretrained random; do
        declare -n start=$side
        best=$(best_run "$logs/sweep_$side"); lr=$(lr_of "$best")
        rm -rf "$logs/seeds_$side"
        $py train.py -m "${finetune[@]}" "${start[@]}" optim.lr="$lr" seed=2,3 \
          hydra.sweep.dir="$logs/seeds_$side" 2>&1 | grep -E "run dir|rror" || true
        $py experiments/record_runs.py "$here/seeds_$side" "$logs/seeds_$side"/*/
        # the claim: seed 1 from the sweep at this lr, seeds 2 and 3 from here
        claim+=("$best")
        claim+=("$logs/seeds_$side"/*/)
      done
      $py -m bertlab.compare "${claim[@]}" --group-by model.init_from --baseline model.init_from=null \
        --out "$here/claim" ;;
    curve)
      for side in pretrained random; do
        declare -n start=$side
        lr=$(lr_of "$(best_run "$logs/sweep_$side")")
        rm -rf "$logs/curve_$side"
        $py train.py -m task=sst2 model=bert_mini trainer.max_epochs=10 "${quiet[@]}" "${start[@]}" \
          optim.lr="$lr" data.max_train_samples=250,500,1000,4000,8000 seed=1 \
          hydra.sweep.dir="$logs/curve_$side" 2>&1 | grep -E "run dir|rror" || true
        $py experiments/record_runs.py "$here/curve_$side" "$logs/curve_$side"/*/
      done ;;
  esac
done
