#!/usr/bin/env bash
# Distillation on real data (docs/distillation.md): a fine-tuned MiniLM-L6 teacher, then a 3-layer student built
# from its layers 0, 2, 4 (distill.student_layers), trained with the teacher (distill.alpha=0.5, T=2) and without
# it (distill.alpha=1.0: the same student, the teacher never run), 3 seeds each, compared with bertlab.compare;
# then the prediction speed of student and teacher as whole processes with their gated int8 ONNX exports
# (benchmarks/predict_speed.py). Budget of the freeze comparison: 1 epoch, the first 8,000 SST-2 sentences, the
# first 3,000 CoNLL-2003 sentences (dev: full SST-2 dev, eng.testa).
#
# Usage (from anywhere):  bash experiments/distillation/run.sh [DATA_DIR] [sst2 conll2003 sst2_matched conll2003_matched]
#   DATA_DIR (default ../shared/data, beside the checkout) holds sst2/ and conll2003/ (eng.train, eng.testa).
#   Parts: sst2 and conll2003 by default (~20 minutes on 2 cores); *_matched adds the same student with
#   hidden-state and attention matching (distill.hidden_weight=1 distill.attention_weight=1), 3 seeds (~5 min each).
# Environment: SEEDS (default 1,2,3), ROUNDS (prediction rounds, default 3), EXTRA (more overrides for every
#   training run, e.g. for a smoke test on the fixtures), LOGS (default logs/experiments/distillation), PY.
# Runs land in $LOGS/<part>/; each part's comparison and recorded runs beside this script (<part>/); then
# python experiments/distillation/table.py writes RESULTS.md (the tables docs/distillation.md shows).
set -euo pipefail
cd "$(dirname "$0")/../.."
data=$(realpath "${1:-../shared/data}")
shift || true
here=experiments/distillation
logs=${LOGS:-logs/experiments/distillation}
py=${PY:-.venv/bin/python}
seeds=${SEEDS:-1,2,3}
rounds=${ROUNDS:-3}
read -r -a extra <<< "${EXTRA:-}"
quiet=(logger=csv trainer.enable_progress_bar=false "paths.data_dir=$data")
# The freeze comparison's recipe (conf/experiment/freeze_comparison.yaml) without its sweep.
recipe=(model=minilm_l6 data.batch_size=32 data.group_by_length=true trainer.max_epochs=1)
declare -A task_args=([sst2]="task=sst2 data.max_train_samples=8000"
                      [conll2003]="task=conll2003 data.max_train_samples=3000")

teacher() {  # task → $logs/<task>/teacher (seed 1, exported)
  local task=$1 dir=$logs/$1/teacher
  read -r -a args <<< "${task_args[$task]}"
  if [ ! -f "$dir/metrics.json" ]; then
    rm -rf "$dir"
    $py train.py "${recipe[@]}" "${args[@]}" seed=1 export=true "${quiet[@]}" "${extra[@]}" \
      hydra.run.dir="$dir" 2>&1 | grep -E "run dir|val/|Error|error" || true
  fi
}

students() {  # task, part name, overrides... → a multirun of the student under $logs/<part>
  local task=$1 name=$2; shift 2
  read -r -a args <<< "${task_args[$task]}"
  local teacher_dir; teacher_dir=$(realpath "$logs/$task/teacher")
  rm -rf "${logs:?}/$name"
  $py train.py -m "${recipe[@]}" "${args[@]}" "distill.teacher=$teacher_dir" "distill.student_layers=[0,2,4]" \
    distill.cache=false "seed=$seeds" "$@" "${quiet[@]}" "${extra[@]}" hydra.sweep.dir="$logs/$name" \
    hydra.sweep.subdir='${hydra.job.num}_alpha${distill.alpha}_hidden${distill.hidden_weight}_seed${seed}' \
    2>&1 | grep -E "run dir|val/|Error|error" || true
}

record() {  # part, run dirs...
  local name=$1; shift
  rm -rf "${here:?}/$name/runs"
  $py experiments/record_runs.py "$here/$name/runs" "$@"
}

for p in ${@:-sst2 conll2003}; do
  case $p in
    sst2|conll2003)
      teacher "$p"
      # distill.alpha=1.0: the student alone (the teacher is loaded to build it, never run); 0.5: distilled.
      # distill.cache=false: every step runs the teacher, so the cost per step is distillation's own.
      students "$p" "$p/students" distill.alpha=1.0,0.5
      $py -m bertlab.compare "$logs/$p/students" --group-by distill.alpha --baseline distill.alpha=1.0 \
        --out "$here/$p"
      record "$p" "$logs/$p/teacher" "$logs/$p/students"/*/
      # Prediction: teacher and the distilled seed-1 student, whole processes, torch and gated int8 ONNX.
      student=$(ls -d "$logs/$p/students"/*_alpha0.5_hidden0.0_seed1 2>/dev/null | head -1)
      speed_args=(--sst2-run "$logs/$p/teacher" --student-run "$student")
      [ "$p" = conll2003 ] && speed_args=(--conll-run "$logs/$p/teacher" --conll-student-run "$student")
      $py benchmarks/predict_speed.py "${speed_args[@]}" --data-dir "$data" --threads 2 --rounds "$rounds" \
        --sides bertlab_torch,bertlab_onnx_int8,student_torch,student_onnx_int8 --json "$here/$p/predict_speed.json"
      ;;
    sst2_matched|conll2003_matched)
      task=${p%_matched}
      teacher "$task"
      students "$task" "$task/matched" distill.alpha=0.5 distill.hidden_weight=1.0 distill.attention_weight=1.0
      $py -m bertlab.compare "$logs/$task/matched" --group-by distill.alpha,distill.hidden_weight --out "$here/$p"
      record "$p" "$logs/$task/matched"/*/
      ;;
    *) echo "unknown part $p (sst2, conll2003, sst2_matched, conll2003_matched)" >&2; exit 2 ;;
  esac
done
