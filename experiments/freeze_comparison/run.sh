#!/usr/bin/env bash
# Freeze comparison on real data (MiniLM-L6, 1 epoch, full dev sets, 2 seeds; conf/experiment/freeze_comparison.yaml):
#   SST-2 with the first 8,000 training sentences, CoNLL-2003 with the first 3,000, every freeze policy;
#   then the frozen-feature cache: freeze=encoder for 3 epochs on SST-2, with and without head.cache_features;
#   (part bf16) full fine-tuning on the SST-2 subset in float32 and bf16-mixed, 2 seeds each; (part probe)
#   linear probes on the frozen encoder reading the pooler, the raw [CLS] vector or the token mean.
# Usage (from anywhere): BERTLAB_DATA_DIR=../shared/data bash experiments/freeze_comparison/run.sh [sst2|conll2003|cache|bf16|probe ...]
# Runs land in logs/experiments/freeze_comparison/<part>/<job>/; each part's comparison table and plot are
# written beside this script (<part>/comparison.{md,csv,png}, each run's metrics.json in <part>/runs/);
# then python experiments/freeze_comparison/table.py writes RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/freeze_comparison
logs=logs/experiments/freeze_comparison
py=.venv/bin/python
quiet=(logger=csv trainer.enable_progress_bar=false)
part() {  # name, group-by keys, overrides...
  local name=$1 group=$2; shift 2
  rm -rf "$logs/$name"
  $py train.py -m experiment=freeze_comparison "${quiet[@]}" "$@" \
    hydra.sweep.dir="$logs/$name" hydra.sweep.subdir='${hydra.job.num}_${freeze.policy}_seed${seed}' 2>&1 | grep -E "run dir|val/|Error" || true
  $py -m bertlab.compare "$logs/$name" --group-by "$group" --out "$here/$name"
  $py experiments/record_runs.py "$here/$name/runs" "$logs/$name"/*/
}
for p in ${@:-sst2 conll2003 cache}; do
  case $p in
    sst2) part sst2 freeze ;;
    conll2003) part conll2003 freeze task=conll2003 data.max_train_samples=3000 ;;
    bf16) part bf16 freeze,trainer.precision freeze=none trainer.precision=32-true,bf16-mixed seed=1,2 ;;
    # Linear probes on frozen MiniLM features (SST-2 subset): how the sentence vector is read, at lr 1e-2.
    probe) part probe head.pooling freeze=encoder head.pooling=pooler,cls,mean optim.lr=1e-2 seed=1,2 ;;
    cache) part cache freeze,head.cache_features freeze=encoder head.cache_features=true,false trainer.max_epochs=3 seed=1 ;;
  esac
done
