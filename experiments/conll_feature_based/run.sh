#!/usr/bin/env bash
# CoNLL-2003 NER with frozen MiniLM-L6 features, in the spirit of the BERT paper's feature-based comparison
# (Devlin et al. 2019, §5.3, Table 7): which layers of a frozen encoder carry the entity information.
# Each row: freeze=encoder, the features computed once (head.cache_features=true), a one-hidden-layer MLP probe
# (head.hidden_layers=1; the paper used a two-layer BiLSTM) trained 3 epochs at lr 1e-3 on all of eng.train,
# scored on eng.testa. The fine-tuning row is experiments/reference_budget's conll2003-defaults run.
# Usage: BERTLAB_DATA_DIR=../shared/data bash experiments/conll_feature_based/run.sh
#   then python experiments/conll_feature_based/table.py   (→ TABLE.md; README.md reads it)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/conll_feature_based
logs=logs/experiments/conll_feature_based
py=.venv/bin/python
rm -rf "$logs"
# head.layers: 0 = the embedding layer's output, -2 = second-to-last layer, last, sum / concat of the last four.
$py train.py -m task=conll2003 model=minilm_l6 freeze=encoder head.cache_features=true head.hidden_layers=1 \
  optim.lr=1e-3 seed=1 head.layers=0,-2,last,sum_last4,concat_last4 \
  logger=csv trainer.enable_progress_bar=false \
  hydra.sweep.dir="$logs" hydra.sweep.subdir='${hydra.job.num}_layers${head.layers}' 2>&1 | grep -E "run dir|val/|Error" || true
$py -m bertlab.compare "$logs" --group-by head.layers --out "$here"
$py experiments/record_runs.py "$here/runs" "$logs"/*/
