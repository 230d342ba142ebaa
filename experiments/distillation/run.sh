#!/usr/bin/env bash
# Distillation on real data (docs/distillation.md): a fine-tuned MiniLM-L6 teacher, then a 3-layer student built
# from its layers 0, 2, 4 (distill.student_layers), trained with the teacher (distill.alpha=0.5, T=2) and without
# it (distill.alpha=1.0: the same student, the teacher never run), 3 seeds each, compared with bertlab.compare;
# then the prediction speed of student and teacher as whole processes with their gated int8 ONNX exports
# (benchmarks/predict_speed.py, the dev inputs repeated to about 20,000 texts so that prediction, not the process
# start, makes the time). Budgets: SST-2 the freeze comparison's (1 epoch, its first 8,000 sentences), CoNLL-2003
# the task preset's recipe on its first 3,000 sentences (dev: full SST-2 dev, eng.testa).
#
# Usage (from anywhere):  bash experiments/distillation/run.sh [DATA_DIR] [PART...]
#   DATA_DIR (default ../shared/data, beside the checkout) holds sst2/ and conll2003/ (eng.train, eng.testa).
#   Parts: sst2 and conll2003 by default; *_matched adds the same student with hidden-state and attention
#   matching (distill.hidden_weight=1 distill.attention_weight=1), 3 seeds; sst2_unlabelled / conll2003_unlabelled
#   the distilled student with the rest of the task's training sentences (after the labelled ones) as unlabelled
#   text (data.distill_file, text only, written under $LOGS/<task>/data), the teacher's outputs kept
#   (distill.cache=true: seed 1 runs the teacher, seeds 2 and 3 read them), compared with that task part's plain
#   student (run that part first). sst2_speed / conll2003_speed: the
#   prediction timing alone, of the teacher and seed-1 distilled student that part trained.
# Environment: SEEDS (default 1,2,3), ROUNDS (prediction rounds, default 3), PREDICT_REPEAT (copies of the dev
#   inputs each prediction process reads; default 23 for SST-2 = 20,056 texts, 6 for CoNLL-2003 = 19,500
#   sentences), UNLABELLED (sentences in the unlabelled file at most; default: all after the labelled ones),
#   EXTRA (more overrides for every training run, e.g. for a smoke test on the fixtures), LOGS (default
#   logs/experiments/distillation), RECORD (where comparisons, recorded runs and prediction timings go; default
#   experiments/distillation, the recorded results: point a smoke test elsewhere), PY.
# Runs land in $LOGS/<part>/; each part's comparison and recorded runs beside this script (<part>/); then
# python experiments/distillation/table.py writes RESULTS.md (the tables docs/distillation.md shows;
# table.py --dir $RECORD --out FILE for a RECORD elsewhere).
set -euo pipefail
cd "$(dirname "$0")/../.."
data=$(realpath "${1:-../shared/data}")
shift || true
here=${RECORD:-experiments/distillation}
logs=${LOGS:-logs/experiments/distillation}
py=${PY:-.venv/bin/python}
seeds=${SEEDS:-1,2,3}
rounds=${ROUNDS:-3}
unlabelled=${UNLABELLED:-1000000}  # every training sentence after the labelled ones
read -r -a extra <<< "${EXTRA:-}"
quiet=(logger=csv trainer.enable_progress_bar=false "paths.data_dir=$data")
recipe=(model=minilm_l6)
# SST-2: the freeze comparison's budget (conf/experiment/freeze_comparison.yaml without its sweep). CoNLL-2003:
# the task preset's recipe (batch 16, random order, 3 epochs) on its first 3,000 sentences; the freeze
# comparison's single epoch of length-grouped batches of 32 leaves the teacher at entity F1 0.44, nothing to
# distil.
declare -A task_args=(
  [sst2]="task=sst2 data.max_train_samples=8000 data.batch_size=32 data.group_by_length=true trainer.max_epochs=1"
  [conll2003]="task=conll2003 data.max_train_samples=3000")
# Copies of the dev inputs in one prediction process: about 20,000 texts (SST-2 dev 872, eng.testa 3,250).
declare -A repeat=([sst2]=${PREDICT_REPEAT:-23} [conll2003]=${PREDICT_REPEAT:-6})

teacher() {  # task → $logs/<task>/teacher (seed 1, exported)
  local task=$1 dir=$logs/$1/teacher
  read -r -a args <<< "${task_args[$task]}"
  if [ ! -f "$dir/metrics.json" ]; then
    rm -rf "$dir"
    $py train.py "${recipe[@]}" "${args[@]}" seed=1 export=true "${quiet[@]}" "${extra[@]}" \
      hydra.run.dir="$dir" 2>&1 | grep -E "run dir|val/|Error|error" || true
  fi
}

students() {  # task, part name, overrides (distill.cache among them)... → a multirun of the student under $logs/<part>
  local task=$1 name=$2; shift 2
  read -r -a args <<< "${task_args[$task]}"
  local teacher_dir; teacher_dir=$(realpath "$logs/$task/teacher")
  rm -rf "${logs:?}/$name"
  $py train.py -m "${recipe[@]}" "${args[@]}" "distill.teacher=$teacher_dir" "distill.student_layers=[0,2,4]" \
    "seed=$seeds" "$@" "${quiet[@]}" "${extra[@]}" hydra.sweep.dir="$logs/$name" \
    hydra.sweep.subdir='${hydra.job.num}_alpha${distill.alpha}_hidden${distill.hidden_weight}_seed${seed}' \
    2>&1 | grep -E "run dir|val/|Error|error" || true
}

labelled() {  # task → how many labelled training examples its runs read (the last data.max_train_samples given)
  local n="" a
  for a in ${task_args[$1]} "${extra[@]}"; do
    case $a in data.max_train_samples=*) n=${a#*=} ;; esac
  done
  echo "$n"
}

unlabelled_file() {  # task → $logs/<task>/data/train_<first>-<last>.<tsv|conll>: the training sentences after the
  # labelled ones (n+1 .. n+UNLABELLED, file order), their text only, so that the unlabelled runs never see these
  # sentences' labels: SST-2's sentence column (its header kept: data.text_column=sentence), CoNLL-2003's words
  # (one a line, a blank line between sentences; -DOCSTART- lines are no sentences, as bertlab reads the file).
  local task=$1 n; n=$(labelled "$task")
  local tmp="$logs/$task/data/unlabelled.tmp" source ext
  mkdir -p "$(dirname "$tmp")"
  if [ "$task" = sst2 ]; then
    source=$data/sst2/train.tsv ext=tsv
    awk -F'\t' -v from="$n" -v count="$unlabelled" '
      NR == 1 { for (i = 1; i <= NF; i++) if ($i == "sentence") c = i; if (!c) exit 3; print $c; next }
      NR - 1 > from && NR - 1 <= from + count { print $c }' "$source" > "$tmp" ||
      { echo "$source: no sentence column in its header" >&2; exit 2; }
    local got=$(($(wc -l < "$tmp") - 1))
  else
    source=$data/conll2003/eng.train ext=conll
    awk -v from="$n" -v count="$unlabelled" 'BEGIN { RS = "" }
      $1 == "-DOCSTART-" { next }
      { k++ } k > from && k <= from + count {
        m = split($0, lines, "\n"); for (i = 1; i <= m; i++) { split(lines[i], cells, /[ \t]+/); print cells[1] }
        print "" }' "$source" > "$tmp"
    local got; got=$(grep -c '^$' "$tmp" || true)
  fi
  if [ "$got" -lt 1 ]; then
    echo "$source has no sentences after its first $n: no unlabelled text for ${task}_unlabelled" >&2
    exit 2
  fi
  local out="$logs/$task/data/train_$((n + 1))-$((n + got)).$ext"  # the sentences it holds
  mv "$tmp" "$out"
  realpath "$out"
}

speed() {  # task, student run → $here/<task>/predict_speed.json: teacher and student, torch and gated int8 ONNX
  local task=$1 student=$2 speed_args
  speed_args=(--sst2-run "$logs/$task/teacher" --student-run "$student")
  [ "$task" = conll2003 ] && speed_args=(--conll-run "$logs/$task/teacher" --conll-student-run "$student")
  $py benchmarks/predict_speed.py "${speed_args[@]}" --data-dir "$data" --threads 2 --rounds "$rounds" \
    --input-repeat "${repeat[$task]}" --sides bertlab_torch,bertlab_onnx_int8,student_torch,student_onnx_int8 \
    --json "$here/$task/predict_speed.json"
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
      students "$p" "$p/students" distill.alpha=1.0,0.5 distill.cache=false
      $py -m bertlab.compare "$logs/$p/students" --group-by distill.alpha --baseline distill.alpha=1.0 \
        --out "$here/$p"
      record "$p" "$logs/$p/teacher" "$logs/$p/students"/*/
      # Prediction: teacher and the distilled seed-1 student, whole processes, torch and gated int8 ONNX.
      speed "$p" "$(ls -d "$logs/$p/students"/*_alpha0.5_hidden0.0_seed1 2>/dev/null | head -1)"
      ;;
    sst2_speed|conll2003_speed)  # the prediction timing alone, of the runs the task's part trained
      task=${p%_speed}
      student=$(ls -d "$logs/$task/students"/*_alpha0.5_hidden0.0_seed1 2>/dev/null | head -1 || true)
      if [ -z "$student" ] || [ ! -f "$logs/$task/teacher/metrics.json" ]; then
        echo "$p times the teacher and distilled student the $task part trained ($logs/$task): run it first" >&2
        exit 2
      fi
      speed "$task" "$student"
      ;;
    sst2_unlabelled|conll2003_unlabelled)
      task=${p%_unlabelled}
      plain=("$logs/$task/students"/*_alpha1.0_hidden0.0_seed*/)
      if [ ! -f "${plain[0]}metrics.json" ]; then
        echo "$p is compared with the $task part's plain student ($logs/$task/students/*_alpha1.0_*):" \
          "run the $task part first (bash $0 <data dir> $task $p)" >&2
        exit 2
      fi
      teacher "$task"
      file=$(unlabelled_file "$task")
      # distill.cache=true: the seeds share the teacher's outputs (the cache key holds no seed), so seed 1 runs the
      # teacher and seeds 2 and 3 read them; metrics.json's distill.teacher_outputs says which did which.
      students "$task" "$task/unlabelled" distill.alpha=0.5 distill.cache=true "data.distill_file=$file"
      $py -m bertlab.compare "${plain[@]}" "$logs/$task/unlabelled" --group-by distill.alpha \
        --baseline distill.alpha=1.0 --out "$here/$p"
      record "$p" "$logs/$task/unlabelled"/*/
      ;;
    sst2_matched|conll2003_matched)
      task=${p%_matched}
      teacher "$task"
      students "$task" "$task/matched" distill.alpha=0.5 distill.hidden_weight=1.0 distill.attention_weight=1.0 \
        distill.cache=false
      $py -m bertlab.compare "$logs/$task/matched" --group-by distill.alpha,distill.hidden_weight --out "$here/$p"
      record "$p" "$logs/$task/matched"/*/
      ;;
    *) echo "unknown part $p (sst2, conll2003, sst2_matched, conll2003_matched, sst2_unlabelled, sst2_speed," \
         "conll2003_speed)" >&2; exit 2 ;;
  esac
done
