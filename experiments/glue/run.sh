#!/usr/bin/env bash
# The GLUE study: bertlab's CoLA and STS-B presets (3 seeds) against the Hugging Face Trainer with run_glue's
# recipe (batch 32, lr 2e-5, 3 epochs, 10 % warm-up, weight decay 0.01; 3 seeds) on the same checkpoint
# (all-MiniLM-L6-v2) and data, one bertlab seed at the reference's exact budget, and the GLUE table of every
# task whose data is here. Every stage trains for minutes to hours on a CPU: run it on a quiet machine.
# Usage:
#   BERTLAB_DATA_DIR=../shared/data bash experiments/glue/run.sh [stage ...]   # default: all stages
#   SMOKE=1 bash experiments/glue/run.sh                                          # the same on the samples, 2 steps
#   SEEDS="2 3" bash experiments/glue/run.sh bertlab reference                     # some seeds only
# Stages: bertlab (cola, stsb × seeds 1-3 with the presets), reference (the same with hf_glue.py),
#   bertlab-refbudget (seed 1 at the reference's batch/lr/epochs), glue (python -m bertlab.glue run on every
#   task with data). Records: experiments/glue/results/<run>.json; then experiments/glue/table.py writes
#   results/TABLE.md (SMOKE=1 records under results-smoke/, never mixed with the real ones).
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TOKENIZERS_PARALLELISM=false WANDB_MODE=offline
read -r -a seeds <<< "${SEEDS:-1 2 3}"  # SEEDS="2 3": a subset of the seeds
common=(model=minilm_l6 logger=csv trainer.enable_progress_bar=false)
hf_limits=()
data_dir=${BERTLAB_DATA_DIR:-../shared/data}
out=experiments/glue/results
logs=logs/glue_study
if [[ -n "${SMOKE:-}" ]]; then  # the whole pipeline on the bundled samples in seconds: not a result
  seeds=(1)
  common+=(data.source=sample trainer.max_steps=2 data.max_train_samples=64)
  hf_limits=(--max-train 64 --max-steps 2)
  data_dir=src/bertlab/samples
  out=experiments/glue/results-smoke
  logs=logs/glue_study_smoke
fi
mkdir -p "$out"
run() {  # name, overrides...
  local name=$1; shift
  local dir=$logs/$name
  rm -rf "$dir"
  BERTLAB_DATA_DIR=$data_dir .venv/bin/python train.py "${common[@]}" "$@" hydra.run.dir="$dir" 2>&1 | tail -4
  .venv/bin/python experiments/record_runs.py "$out" "$dir"  # → $out/$name.json
}
stages=("${@:-bertlab reference bertlab-refbudget glue}")
for stage in ${stages[@]}; do
  case $stage in
    bertlab)
      for t in cola stsb; do for s in "${seeds[@]}"; do run bertlab-$t-seed$s task=$t seed=$s; done; done ;;
    reference)
      for t in cola stsb; do for s in "${seeds[@]}"; do
        .venv/bin/python experiments/glue/hf_glue.py $t "$data_dir" --seed $s "${hf_limits[@]}" \
          --out "$out/hf-$t-seed$s.json" | tail -1
      done; done ;;
    bertlab-refbudget)
      for t in cola stsb; do
        run bertlab-refbudget-$t-seed1 task=$t seed=1 data.batch_size=32 optim.lr=2e-5 trainer.max_epochs=3
      done ;;
    glue)
      # GLUE's release names WNLI's train file train.tsv; the data folder holds a reconstructed one: a folder of
      # links gives every task its release layout (tasks without data are listed in the table, not skipped).
      links=$logs/data; rm -rf "$links"; mkdir -p "$links"
      for d in "$data_dir"/*/; do ln -s "$(realpath "$d")" "$links/$(basename "$d")"; done
      if [[ -f "$data_dir/wnli/train.reconstructed.tsv" && ! -f "$data_dir/wnli/train.tsv" ]]; then
        rm "$links/wnli"; mkdir "$links/wnli"
        ln -s "$(realpath "$data_dir/wnli/dev.tsv")" "$links/wnli/dev.tsv"
        ln -s "$(realpath "$data_dir/wnli/train.reconstructed.tsv")" "$links/wnli/train.tsv"
      fi
      rm -rf "$logs/glue"
      source_args=(); [[ -n "${SMOKE:-}" ]] || source_args=(paths.data_dir="$links")
      .venv/bin/python -m bertlab.glue run --out "$logs/glue" "${common[@]}" "${source_args[@]}" seed=1 \
        | tail -25
      cp "$logs/glue/glue.md" "$out/GLUE.md"; cp "$logs/glue/glue.csv" "$out/GLUE.csv" ;;
    *) echo "run.sh: no stage named '$stage' (the stages are the names in this file's case list)" >&2; exit 2 ;;
  esac
done
.venv/bin/python experiments/glue/table.py "$out"
