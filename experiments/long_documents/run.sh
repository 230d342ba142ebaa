#!/usr/bin/env bash
# The long-document study (docs/long_text.md): MiniLM-L6 at max_seq_length=128 on documents of ~600-1,500 tokens of
# WikiText with one SST-2 sentence hidden anywhere, label = that sentence's. Two runs on the same documents, the same
# budget: data.long_text=truncate (reads the first window) against data.long_text=windows (reads every window, max
# pooling), then the accuracy split by where the deciding sentence lies, and the time per document.
#
# Usage: BERTLAB_DATA_DIR=DATA_DIR bash experiments/long_documents/run.sh [more train.py overrides]
#   DATA_DIR holds wikitext2/wiki.{valid,test}.tokens and sst2/{train,dev}.tsv.
#   SENTENCES=N (environment) first fine-tunes MiniLM-L6 on the first N sentences of SST-2's training file (one
#   epoch, logs/experiments/long_documents/sst2_sentences) and starts both document runs from its encoder
#   (model.init_from; the document head is new): the deciders of the dev documents come from SST-2's dev file,
#   which that run never reads.
#   INIT=<run dir> (environment) starts both document runs from that run's encoder instead (e.g. the SENTENCES run
#   of an earlier call, without training it again).
#   CONTEXT=N (environment) adds a stage between that start and the document runs: one epoch on N short texts
#   (make_data.py with 64-100 tokens: one SST-2 training phrase at a random sentence boundary of a stretch of
#   WikiText, about one window each; logs/experiments/long_documents/context), so the encoder learns to find
#   the labelled sentence among neutral ones before it learns to pool windows; the document runs start from it.
#   Its dev texts (WikiText's test file, SST-2's dev sentences) are only reported, never selected on (one epoch).
#   CONTEXT_EPOCHS=K (environment, default 1) runs that stage K times, each epoch on a draw of its own (make_data.py
#   seeds 0..K-1; logs/.../context, context_1, ...), each starting from the last's encoder with a new head
#   (model.init_head=new, as the recorded attempts ran); the document runs keep the last stage's classifier
#   (model.init_from's default: the same labels and head settings).
#   MULTIWINDOW=N (environment) adds one more stage after those: one epoch on N texts of 150-400 tokens (make_data.py,
#   seed CONTEXT_EPOCHS; logs/.../multiwindow), 2-6 windows each with one labelled phrase, read with the document
#   runs' own overrides (the ones given to this script: window pooling, stride, batch, rates), so the window pooling
#   (an attention scorer with model.window_pooling=attention) learns on many short documents before the long ones;
#   it keeps the classifier before it, and the document runs keep its classifier and pooling. The analysis scores
#   that stage's own run on the dev documents too: read as it is, with no document epoch, it is the recipe's model.
#   The best recorded recipe (attempt 23 in attempts/): SENTENCES=67349 CONTEXT=24000 CONTEXT_EPOCHS=4
#   MULTIWINDOW=8000 EPOCHS=1 with optim.lr=5e-5 optim.head_lr=1e-3 data.batch_size=8 data.max_windows_per_batch=96
#   data.window_stride=63 model.window_pooling=attention.
#   TRAIN_DOCS, DEV_DOCS, EPOCHS (environment) size the runs. Cost: a document is ~11 windows of 128 tokens, and one
#   training step of 32 windows (MiniLM-L6, forward and backward) took 9.1 s on one CPU thread of a busy machine,
#   about 3 s per training document read in windows, against ~0.3 s truncated (one window). The defaults (300
#   training, 200 dev documents, 1 epoch) aim at ~10 minutes for the windows run on 2 CPU cores (an estimate:
#   2 threads taken as ~1.7x one); TRAIN_DOCS=2000 DEV_DOCS=500 (the issue's size) is about an hour there, minutes
#   on a GPU (add trainer=gpu).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/long_documents
logs=logs/experiments/long_documents
data=$logs/data
py=${PYTHON:-.venv/bin/python}
: "${BERTLAB_DATA_DIR:?set BERTLAB_DATA_DIR to the folder holding wikitext2/ and sst2/}"
train_docs=${TRAIN_DOCS:-300}
dev_docs=${DEV_DOCS:-200}
epochs=${EPOCHS:-1}
$py $here/make_data.py "$BERTLAB_DATA_DIR" "$data" --train "$train_docs" --dev "$dev_docs" --seed 0
common=(model=minilm_l6 trainer=cpu seed=1 logger=csv trainer.enable_progress_bar=false)
run() {  # RUN_DIR OVERRIDES...: one train.py run into RUN_DIR (replaced), its summary lines shown
  local dir=$1; shift
  rm -rf "$dir"
  $py train.py "${common[@]}" hydra.run.dir="$dir" "$@" 2>&1 | grep -E "run dir|val/|long|Error" || true
}
on_texts() {  # DATA_DIR: sets texts=(the overrides of a classification run on make_data.py's files there)
  texts=(task=text_classification data.data_dir="$PWD/$1" data.train_file=train.tsv data.val_file=dev.tsv
         data.max_seq_length=128)
}
init=()
scored=()  # runs the analysis scores besides the truncate and windows document runs
if [[ -n "${INIT:-}" ]]; then init=(model.init_from="$(realpath "$INIT")"); fi
if [[ -n "${SENTENCES:-}" ]]; then
  run "$logs/sst2_sentences" task=sst2 paths.data_dir="$(realpath "$BERTLAB_DATA_DIR")" \
    data.max_train_samples="$SENTENCES" trainer.max_epochs=1
  init=(model.init_from="$PWD/$logs/sst2_sentences")
fi
if [[ -n "${CONTEXT:-}" ]]; then
  for ((draw = 0; draw < ${CONTEXT_EPOCHS:-1}; draw++)); do  # each epoch on a draw of its own, from the last
    suffix=""; ((draw == 0)) || suffix=_$draw
    $py $here/make_data.py "$BERTLAB_DATA_DIR" "$logs/context_data$suffix" --train "$CONTEXT" --dev 300 \
      --seed "$draw" --min-tokens 64 --max-tokens 100
    on_texts "$logs/context_data$suffix"
    run "$logs/context$suffix" "${texts[@]}" data.long_text=windows data.batch_size=32 optim.lr=5e-5 \
      optim.head_lr=1e-3 trainer.max_epochs=1 model.init_head=new "${init[@]}"
    init=(model.init_from="$PWD/$logs/context$suffix")
  done
fi
if [[ -n "${MULTIWINDOW:-}" ]]; then
  $py $here/make_data.py "$BERTLAB_DATA_DIR" "$logs/multiwindow_data" --train "$MULTIWINDOW" --dev 300 \
    --seed "${CONTEXT_EPOCHS:-1}" --min-tokens 150 --max-tokens 400
  on_texts "$logs/multiwindow_data"
  run "$logs/multiwindow" "${texts[@]}" data.long_text=windows trainer.max_epochs=1 "${init[@]}" "$@"
  init=(model.init_from="$PWD/$logs/multiwindow")
  scored=("$logs/multiwindow")  # the stage alone, no document epoch: the recipe's model
fi
on_texts "$data"
for mode in truncate windows; do
  run "$logs/$mode" "${texts[@]}" data.long_text=$mode trainer.max_epochs="$epochs" "${init[@]}" "$@"
done
$py $here/analyze.py "$data" "$logs/truncate" "$logs/windows" "${scored[@]}" --out "$here/results.md"
