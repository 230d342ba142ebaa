#!/usr/bin/env bash
# The RNN-vs-Transformer study at the budget docs/results.md reports ("RNN vs Transformer"): SST-2 with the first 8,000
# training sentences and CoNLL-2003 with the first 3,000, 3 epochs, full dev sets, the given seeds (default 1).
# Usage: BERTLAB_DATA_DIR=../shared/data bash experiments/rnn_vs_transformer/run.sh [seeds, e.g. 1,2]
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/rnn_vs_transformer
logs=logs/rnn_vs_transformer
seeds=${1:-1}
py=.venv/bin/python
budget=(logger=csv trainer.enable_progress_bar=false)
for spec in "bilstm 1e-3" "bert_mini 2e-4" "minilm_l6 5e-5"; do
  set -- $spec
  for task in "sst2 data.max_train_samples=8000" "conll2003 data.max_train_samples=3000"; do
    $py train.py -m -cd $here experiment=rnn_vs_transformer model=$1 optim.lr=$2 task=${task%% *} \
      ${task#* } seed=$seeds "${budget[@]}" 2>&1 | grep -E "run dir|val/|Error" || true
  done
done
$py $here/table.py $logs --out $here/results.md
for task in sst2 conll2003; do
  $py -m bertlab.compare $logs/$task --group-by model --out $here/$task
done
