#!/usr/bin/env bash
# Long-documents study, tagging half (issue 35): CoNLL-2003 tagged sentence by sentence vs document by document.
# The document run reads each document of eng.train / eng.testa as ONE sequence (conll_docs.py: 946 training
# documents of 15 to 1,335 words, median 177), far past max_seq_length=128, so bertlab cuts it into overlapping
# windows (data.long_text=windows, stride null = a quarter of a window) and scores each word in the window where it
# has the most context. Both runs see every word of both files (203,621 training words, 51,362 scored), the same
# gold entities (23,499 / 5,942), and the reference budget of experiments/reference_budget: MiniLM-L6, 1 epoch,
# lr 5e-5, 10 % warm-up, weight decay 0.01, seed 42, random batch order, max_seq_length=128.
# Batch: 32 sentences (439 steps, ~640 real tokens a step) vs 6 windows (2,812 windows → 469 steps, ~670 tokens a
# step): about the same number of updates of about the same size. Each run: about 6 minutes on 2 CPU cores.
# Usage: BERTLAB_DATA_DIR=../shared/data bash experiments/long_documents/run_conll.sh
#   → experiments/long_documents/conll_runs/<run>.json (metrics.json + overrides) and conll_results.md
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/long_documents
logs=logs/experiments/long_documents
data=${BERTLAB_DATA_DIR:-data}/conll2003
py=.venv/bin/python
docs=$(realpath -m "$logs/conll_docs")
mkdir -p "$docs"
for f in eng.train eng.testa; do
  $py $here/conll_docs.py "$data/$f" "$docs/$f"
done
common=(task=conll2003 model=minilm_l6 data.max_seq_length=128 trainer.max_epochs=1 optim.lr=5e-5
        optim.warmup_ratio=0.1 optim.weight_decay=0.01 seed=42 data.group_by_length=false logger=csv
        trainer.enable_progress_bar=false)
run() {  # name, overrides...
  local name=$1; shift
  rm -rf "$logs/$name"
  $py train.py "${common[@]}" "$@" hydra.run.dir="$logs/$name" 2>&1 | grep -E "examples →|^val|^train:|rror" || true
  $py experiments/record_runs.py "$here/conll_runs" "$logs/$name"
}
run conll_sentences data.batch_size=32
run conll_documents data.batch_size=6 data.tag_scheme=iob2 data.train_file="$docs/eng.train" \
  data.val_file="$docs/eng.testa"
$py - "$logs" "$here" <<'PY'
import json
import sys
from pathlib import Path
logs, here = Path(sys.argv[1]), Path(sys.argv[2])
rows = ["| run | read as | data report (val) | steps | entity F1 | precision | recall | words scored | train s |",
        "|---|---|---|---|---|---|---|---|---|"]
for name, unit in (("conll_sentences", "sentences"), ("conll_documents", "documents, windows of 128")):
    m = json.loads((here / "conll_runs" / f"{name}.json").read_text())
    log = (logs / name / "train.log").read_text() if (logs / name / "train.log").is_file() else ""
    report = next((line[line.index("val: "):] for line in log.splitlines() if "val: " in line and "examples →" in line),
                  "")
    v, t = m["val"], m["train"]
    rows.append(f"| {name} | {unit} | {report} | {t['steps']} | {v['f1']:.4f} | {v['precision']:.4f} | "
                f"{v['recall']:.4f} | {v.get('num_words')} | {t['wall_s']:.0f} |")
table = "\n".join(rows) + "\n"
(here / "conll_results.md").write_text("# CoNLL-2003: sentences vs whole documents in windows (run_conll.sh)\n\n" + table)
print(table)
PY
