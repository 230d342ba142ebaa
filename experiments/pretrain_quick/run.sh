#!/usr/bin/env bash
# The small-budget pre-training study (conf/experiment/pretrain_quick.yaml, docs/pretraining.md "A small-budget
# recipe"; on SST-2 at 2,000 labels its start is 3.1-3.6 points ahead of random init; on CoNLL-2003, +24.9 entity F1):
# self-pre-training on a task's own unlabelled training text, then fine-tuning on a few labels, against the same
# architecture from random weights with the same vocabulary.
#   BERTLAB_DATA_DIR=<data folder> bash experiments/pretrain_quick/run.sh [stage...]
# Stages (default: all, in this order):
#   corpus    plain-text corpora from the data sets (make_corpus.py; labels dropped, SST-2 dev never included)
#   pretrain  experiment=pretrain_quick on the corpus's training text (modernbert_mini, 5,000 steps at 30 % masking:
#             ~41 min on 2 threads; earlier attempts ran bert_tiny for 16,000 steps at 15 % or modernbert_tiny for 13,000)
#   sweep     the task's labelled sentences (CORPUS below), 10 epochs: each start at lr 1e-4, 3e-4, 1e-3 (seed 1;
#             SWEEP_LRS, a comma-separated list in the environment, replaces those); runs ranked on the task's own
#             monitored metric (metrics.json "monitor")
#   seeds     each start at its best sweep lr, seeds 2 and 3; then bertlab.compare, paired by seed
#   curve     both starts at their best lr on 250 → 8,000 labelled sentences (seed 1; the sweep's size is the
#             point it already has); plot_curve.py draws it
# OBJECTIVE=rtd (environment) pre-trains with replaced-token detection instead of masked LM (task=rtd at ELECTRA's
# 15 % masking, no dropout, lr 1e-3, RTD_STEPS steps, default 1,700) and fine-tunes from its last step; its runs
# go to logs/experiments/pretrain_quick/rtd_* and the records to experiments/pretrain_quick/rtd/.
# MODEL (environment; default modernbert_mini, the preset's) is the preset of both starts; PRETRAIN_OVERRIDES (space-separated train.py
# overrides) change the pre-training run only; ATTEMPT=<name> puts the runs under .../attempt_<name>/ and the
# records under experiments/pretrain_quick/attempts/<name>/, beside the default recipe's. FINETUNE_OVERRIDES
# (space-separated) change every fine-tuning run of both starts (e.g. head.pooling=mean); FINETUNE_EPOCHS (default
# 10) is their number of epochs.
# CORPUS (environment; default sst2) picks the task whose training text is pre-trained on and which is fine-tuned:
#   sst2   SST-2's training sentences; fine-tuned on 2,000 labelled sentences (val accuracy)
#   conll  CoNLL-2003's eng.train text; fine-tuned (task=conll2003) on 1,000 labelled sentences (entity F1)
#   sst2_wiki  SST-2's training sentences and general-domain text (make_corpus.py's wiki: WikiText-2's valid and
#          test articles, SQuAD v1.1's training contexts), validated on SST-2's held-out part; fine-tuned as sst2
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/pretrain_quick
logs=logs/experiments/pretrain_quick
corpus=$PWD/$logs/corpus
py=.venv/bin/python
data=${BERTLAB_DATA_DIR:?set BERTLAB_DATA_DIR to the data folder}
quiet=(logger=csv trainer.enable_progress_bar=false)
objective=${OBJECTIVE:-mlm}
model=${MODEL:-modernbert_mini}
if [[ -n "${ATTEMPT:-}" ]]; then logs=$logs/attempt_$ATTEMPT; fi
corpus_name=${CORPUS:-sst2}
case $corpus_name in  # texts: the corpora pre-trained on (the first one's held-out part validates)
  sst2) task=sst2; labels=2000; texts=(sst2) ;;
  sst2_wiki) task=sst2; labels=2000; texts=(sst2 wiki) ;;
  conll) task=conll2003; labels=1000; texts=(conll) ;;
  *) echo "CORPUS must be sst2, sst2_wiki or conll, got $corpus_name" >&2; exit 2 ;;
esac
train_text=$(printf "$corpus/%s_train.txt\n" "${texts[@]}" | paste -sd,)
sizes=$(tr , '\n' <<< 250,500,1000,2000,4000,8000 | grep -vx "$labels" | paste -sd,)  # the sweep has $labels
case $objective in
  mlm) pre=$logs/$corpus_name; init=$pre; record=$here; sweeps=$logs; objective_args=() ;;
  rtd) pre=$logs/rtd_$corpus_name; init=$pre/checkpoints/last.ckpt; record=$here/rtd; sweeps=$logs/rtd
       objective_args=(task=rtd task.mlm_probability=0.15 optim.lr=1e-3 model.hidden_dropout_prob=0
                       model.attention_probs_dropout_prob=0 trainer.max_steps="${RTD_STEPS:-1700}") ;;
  *) echo "OBJECTIVE must be mlm or rtd, got $objective" >&2; exit 2 ;;
esac
if [[ -n "${ATTEMPT:-}" ]]; then record=$here/attempts/$ATTEMPT; fi
read -r -a extra <<< "${PRETRAIN_OVERRIDES:-}"
read -r -a tune <<< "${FINETUNE_OVERRIDES:-}"
finetune=(task=$task model="$model" data.max_train_samples=$labels trainer.max_epochs=${FINETUNE_EPOCHS:-10} "${quiet[@]}" "${tune[@]}")
pretrained=(model.init_from="$init")
random=(model.init_from=null model.tokenizer="$pre/tokenizer")
best_run() {  # the run dir under $1 best on its task's monitored metric (max: accuracy, F1)
  $py - "$1" <<'PY'
import json, sys, pathlib
print(max(pathlib.Path(sys.argv[1]).glob("*/metrics.json"),
          key=lambda p: json.loads(p.read_text())["monitor"]["value"]).parent)
PY
}
lr_of() { $py -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1] + "/.hydra/config.yaml"))["optim"]["lr"])' "$1"; }
for stage in ${@:-corpus pretrain sweep seeds curve}; do
  case $stage in
    corpus)
      $py $here/make_corpus.py "$data" "$corpus" ;;
    pretrain)
      rm -rf "$pre"
      $py train.py experiment=pretrain_quick model="$model" data.train_file="[$train_text]" \
        data.val_file="$corpus/${texts[0]}_val.txt" "${objective_args[@]}" "${extra[@]}" "${quiet[@]}" hydra.run.dir="$pre" 2>&1 \
        | grep -E "run dir|val/|rror|estimate" || true
      $py experiments/record_runs.py "$record/pretrain" "$pre"
      cp "$pre/csv/metrics.csv" "$record/pretrain/curves.csv" ;;
    sweep)
      for side in pretrained random; do
        rm -rf "$sweeps/sweep_$side"
        declare -n start=$side
        $py train.py -m "${finetune[@]}" "${start[@]}" optim.lr="${SWEEP_LRS:-1e-4,3e-4,1e-3}" seed=1 \
          hydra.sweep.dir="$sweeps/sweep_$side" 2>&1 | grep -E "run dir|rror" || true
        $py experiments/record_runs.py "$record/sweep_$side" "$sweeps/sweep_$side"/*/
      done ;;
    seeds)
      claim=()
      for side in pretrained random; do
        declare -n start=$side
        best=$(best_run "$sweeps/sweep_$side"); lr=$(lr_of "$best")
        rm -rf "$sweeps/seeds_$side"
        $py train.py -m "${finetune[@]}" "${start[@]}" optim.lr="$lr" seed=2,3 \
          hydra.sweep.dir="$sweeps/seeds_$side" 2>&1 | grep -E "run dir|rror" || true
        $py experiments/record_runs.py "$record/seeds_$side" "$sweeps/seeds_$side"/*/
        # the claim: seed 1 from the sweep at this lr, seeds 2 and 3 from here
        claim+=("$best")
        claim+=("$sweeps/seeds_$side"/*/)
      done
      $py -m bertlab.compare "${claim[@]}" --group-by model.init_from --baseline model.init_from=null \
        --out "$record/claim" ;;
    curve)
      for side in pretrained random; do
        declare -n start=$side
        lr=$(lr_of "$(best_run "$sweeps/sweep_$side")")
        rm -rf "$sweeps/curve_$side"
        $py train.py -m task=$task model="$model" trainer.max_epochs=${FINETUNE_EPOCHS:-10} "${quiet[@]}" "${tune[@]}" "${start[@]}" \
          optim.lr="$lr" data.max_train_samples=$sizes seed=1 \
          hydra.sweep.dir="$sweeps/curve_$side" 2>&1 | grep -E "run dir|rror" || true
        $py experiments/record_runs.py "$record/curve_$side" "$sweeps/curve_$side"/*/
      done ;;
  esac
done
