"""Every figure the docs quote: the job that makes it (its commands, as the docs show them) and how its text is
made from the job's record. tools/doc_figures.py reads ``REGISTRY``; ``--list`` prints it."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable

from doc_figures_costs import Command, CostRow, Probe, render_table, skip_of, steps_of
from doc_figures_lib import (
    Fact,
    Figure,
    FigureError,
    Job,
    Listed,
    Record,
    Registry,
    Step,
    conditions_line,
    rounded,
)

# ---------------------------------------------------------------- text helpers


def block(*lines: str) -> str:
    """A fenced code block."""
    return "```\n" + "\n".join(lines) + "\n```\n"


def wrap(command: str, width: int = 108, indent: str = "  ") -> str:
    """A long command as shell lines continued with ``\\`` (words never split)."""
    words, lines, line = shlex.split(command), [], ""
    quoted = [shlex.quote(w) for w in words]
    for word in quoted:
        if line and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = indent + word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def from_line(record: Record, pattern: str, i: int = 0, until: str | None = None) -> list[str]:
    """The output lines of step ``i`` from the first matching ``pattern`` to the first matching ``until``
    (included; the end of the output without ``until``)."""
    lines = record.lines(i)
    start = next((n for n, ln in enumerate(lines) if re.search(pattern, ln)), None)
    if start is None:
        raise FigureError(f"{record.job}: no line matching {pattern!r} in the output of {record.steps[i]['command']}")
    if until is None:
        return lines[start:]
    end = next((n for n in range(start, len(lines)) if re.search(until, lines[n])), len(lines) - 1)
    return lines[start:end + 1]


def md_table(text: str, columns: list[str] | None = None) -> str:
    """The first Markdown table of ``text``, with only ``columns`` (by header, in that order)."""
    start = next((n for n, ln in enumerate(text.splitlines()) if ln.startswith("|")), None)
    if start is None:
        raise FigureError("no Markdown table in the recorded file")
    table = []
    for line in text.splitlines()[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    # Cells keep their own padding, so a table re-emitted whole is the file's table byte for byte.
    rows = [ln.strip()[1:-1].split("|") for ln in table]
    header = [c.strip() for c in rows[0]]
    missing = [c for c in (columns or []) if c not in header]
    if missing:
        raise FigureError(f"the recorded table has no column {', '.join(missing)}")
    keep = range(len(header)) if columns is None else [header.index(c) for c in columns]
    return "\n".join("|" + "|".join(r[i] for i in keep) + "|" for r in rows) + "\n"


def compact_json(data: dict, keys: list[list[str]], width: int = 110) -> str:
    """``metrics.json`` as the docs print it: the scalars of each group of ``keys`` on one line, each block on
    its own line(s), wrapped at ``width``."""
    out = ["{"]
    groups = [[k for k in group if k in data] for group in keys]
    groups = [g for g in groups if g]
    for n, group in enumerate(groups):
        parts = [f"{json.dumps(k)}: {json.dumps(data[k], ensure_ascii=False)}" for k in group]
        tail = "," if n < len(groups) - 1 else ""
        if len(group) == 1 and isinstance(data[group[0]], dict):
            prefix = f"  {json.dumps(group[0])}: {{"
            items = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in data[group[0]].items()]
            line, pad = prefix, " " * len(prefix)
            for m, item in enumerate(items):
                item += ", " if m < len(items) - 1 else "}" + tail
                if line not in (prefix, pad) and len(line) + len(item.rstrip()) > width:
                    out.append(line.rstrip())
                    line = pad
                line += item
            out.append(line)
        else:
            out.append("  " + ", ".join(parts) + tail)
    return "\n".join([*out, "}"])


def shown_with_stdin(step: Step) -> str:
    """``printf '...' | python ...``: a command fed its standard input."""
    return f"printf {shlex.quote(step.stdin.replace(chr(10), chr(92) + 'n'))} | {step.shown()}"


def summary(record: Record, i: int = 0) -> list[str]:
    """A run's closing summary: from ``run dir:`` to the end of its output."""
    return from_line(record, r"^run dir:", i)


# ---------------------------------------------------------------- README.md
DEMO = Step(["train.py", "experiment=demo", "hydra.run.dir=/tmp/demo"])


def render_demo(r: Record) -> str:
    return block(f"$ {DEMO.shown()}      # what `make train` runs, with a fixed run dir", "...",
                 r.line(r"\] task="), "...", *summary(r)) + "\n" + conditions_line(r)


CONLL = Step(["train.py", "model=minilm_l6", "task=conll2003", "trainer.max_epochs=1", "data.batch_size=32",
              "data.group_by_length=false", "logger=csv"])
DEMO_EXPORT = Step(["train.py", "experiment=demo", "export=true", "hydra.run.dir=/tmp/pdocs/demo"])
PREDICT = Step(["-m", "bertlab.predict", "/tmp/pdocs/demo"],
               stdin="a gorgeous, witty and moving film.\nthe plot is a mess and the acting is worse.\n")
SCRATCH_SWEEP = Step(["train.py", "-m", "model=bert_tiny", "task=sst2", "freeze=none,encoder", "seed=1,2",
                      "data.max_train_samples=4000", "trainer.max_epochs=1", "optim.lr=1e-3",
                      "hydra.sweep.dir=logs/sst2/multiruns/tiny_4000"])
SCRATCH_COMPARE = Step(["-m", "bertlab.compare", "logs/sst2/multiruns/tiny_4000"])


def records(lines: list[str]) -> list[str]:
    """The JSON records of a predict run's merged output: the progress bar (stderr) can share a line with the
    first record (stdout), so each record is taken from its opening brace."""
    return [ln[ln.index("{"):] for ln in lines if "{" in ln]


def render_real_data(r: Record) -> str:
    return block(f"$ {CONLL.shown()}", r.line(r"^val:", 0),
                 f"$ {SCRATCH_SWEEP.shown()}",
                 f"$ {SCRATCH_COMPARE.shown()}     # → comparison.md, .csv, .png",
                 f"$ {shown_with_stdin(PREDICT)}", *records(r.lines(2))) \
        + "\n" + conditions_line(r)


def render_predict_demo(r: Record) -> str:
    """docs/predict.md's demo: the same run and prediction as README's, so the two pages show one output."""
    return block(f"$ {DEMO_EXPORT.shown()}", "...", r.line(r"^val:", 1), f"$ {shown_with_stdin(PREDICT)}",
                 *records(r.lines(2))) + "\n" + conditions_line(r)


GLUE_MD = "experiments/glue/results/GLUE.md"


def render_glue(r: Record) -> str:
    table = md_table(r.file(GLUE_MD), ["task", "metric(s)", "value", "task score"])
    # The README keeps GLUE's own average; the study's extra row (without WNLI) stays in docs/glue.md.
    return "".join(ln + "\n" for ln in table.splitlines() if "without WNLI" not in ln)


# The cost table: one probe per distinct run (a sweep's seeds cost the same, so each freeze is measured once).
SWEEP_FAST = ["data.max_train_samples=8000", "trainer.max_epochs=1"]
CONLL_ARGS = CONLL.argv[1:]


def _sweep_probes(extra: list[str]) -> list[Probe]:
    return [Probe(["task=sst2", f"freeze={f}", "seed=1", *extra], times=3, label=f"freeze={f}")
            for f in ("none", "encoder", "lora")]


COST_ROWS = [
    CostRow(Command("python train.py task=squad freeze=none", [Probe(["task=squad", "freeze=none"])]),
            Command("python train.py task=squad freeze=none data.max_train_samples=8000 trainer.max_epochs=1",
                    [Probe(["task=squad", "freeze=none", "data.max_train_samples=8000", "trainer.max_epochs=1"])])),
    CostRow(Command("python train.py -m task=sst2 freeze=none,encoder,lora seed=1,2,3", _sweep_probes([])),
            Command("python train.py -m task=sst2 freeze=none,encoder,lora seed=1,2,3 "
                    + " ".join(SWEEP_FAST), _sweep_probes(SWEEP_FAST))),
    CostRow(Command("make train", [Probe(["experiment=demo"])]),
            Command('make train ARGS="experiment=demo trainer.max_epochs=1"',
                    [Probe(["experiment=demo", "trainer.max_epochs=1"])])),
    CostRow(Command(CONLL.shown(), [Probe(CONLL_ARGS)]),
            Command(CONLL.shown() + " data.max_train_samples=3000",
                    [Probe([*CONLL_ARGS, "data.max_train_samples=3000"])])),
    # GLUE has no row: its time is the measured run's (docs/glue.md, fact glue-minutes), one number on every page
    # (an estimate under load gave another, for fewer tasks).
]

# ---------------------------------------------------------------- docs/sweeps.md


def render_scratch_sweep(r: Record) -> str:
    table = md_table(r.file("logs/sst2/multiruns/tiny_4000/comparison.md"))
    return block(SCRATCH_SWEEP.shown(), SCRATCH_COMPARE.shown()) + "\n" + table + "\n" + conditions_line(r)


SAMPLE_SWEEP = Step(["train.py", "-m", "model=bert_tiny", "task=sst2", "data.source=sample", "freeze=none,encoder",
                     "seed=1,2", "trainer.max_epochs=1", "optim.lr=1e-3", "logger=csv",
                     "hydra.sweep.dir=/tmp/sample_sweep"])
SAMPLE_COMPARE = Step(["-m", "bertlab.compare", "/tmp/sample_sweep"], columns=80)


def render_sample_summary(r: Record) -> str:
    return block(f"$ {SAMPLE_SWEEP.shown()}", "...",
                 *from_line(r, r"^multirun finished:", 0, until=r"^comparison:")) + "\n" + conditions_line(r)


def render_sample_compare(r: Record) -> str:
    return block(f"$ {SAMPLE_COMPARE.shown()}", *r.lines(1)) + "\n" + conditions_line(r, "sweeps-sample")


OPTUNA = Step(["train.py", "hparams_search=optuna", "model=bert_tiny", "task=sst2", "data.max_train_samples=4000",
               "trainer.max_epochs=1", "logger=csv", "optim.lr=tag(log,interval(1e-4,3e-3))",
               "hydra.sweeper.n_trials=4"])


def render_optuna(r: Record) -> str:
    best = r.line(r"Best trial \d+: value")
    best = re.sub(r" \([^()]*optimization_results\.yaml\)$", "", best[best.index("Best trial"):])
    return block(OPTUNA.shown(), f"  → {best}") + "\n" + conditions_line(r)


POOLING_DIR = "logs/sst2/multiruns/pooling"
POOLING = Step(["train.py", "-m", "model=bert_tiny", "task=sst2", "freeze=none,encoder", "head.pooling=pooler,cls",
                "seed=1,2,3,4,5,6", "data.max_train_samples=3000", "data.max_eval_samples=400", "trainer.max_epochs=1",
                "optim.lr=1e-3", "logger=csv", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                f"hydra.sweep.dir={POOLING_DIR}"])
POOLING_COMPARE = Step(["-m", "bertlab.compare", POOLING_DIR, "--baseline", "head.pooling=pooler"])
EXPECTED = """\
# expected.yaml: the runs whose config has the `where` values; their mean must lie in [min, max]
- where: {freeze: none, head.pooling: cls}
  metric: val/accuracy        # default: the ranked metric
  min: 0.62
- where: {freeze: none, head.pooling: pooler}
  min: 0.62
  max: 0.70
"""
POOLING_EXPECT = Step([*POOLING_COMPARE.argv, "--expect", "expected.yaml"], ok_codes=(0, 1))
POOLING_COLUMNS = ["freeze", "head.pooling", "n", "val/loss", "val/accuracy", "val/accuracy 95% CI"]


def render_pooling_table(r: Record) -> str:
    text = r.file(f"{POOLING_DIR}/comparison.md")
    header = next(ln for ln in text.splitlines() if ln.startswith("|"))
    extra = [c.strip() for c in header.strip("|").split("|") if c.strip().startswith(("diff vs", "p (", "verdict"))]
    return (block(wrap(POOLING.shown()), POOLING_COMPARE.shown()) + "\n`comparison.md` (a few metric columns left "
            "out here):\n\n" + md_table(text, POOLING_COLUMNS + extra) + "\n" + conditions_line(r))


def render_pooling_expect(r: Record) -> str:
    code = r.steps[2]["returncode"]
    checks = [ln for ln in r.lines(2) if re.match(r"^(ok|FAIL) +check |^error: ", ln)]
    return ("```yaml\n" + EXPECTED + "```\n\n"
            + block(f"{POOLING_EXPECT.shown()}; echo \"exit $?\"", "...", *checks, f"exit {code}")
            + "\n" + conditions_line(r, "sweeps-pooling"))


# ---------------------------------------------------------------- docs/running.md
SAMPLE_RUN = Step(["train.py", "model=bert_tiny", "task=sst2", "data.source=sample", "trainer.max_steps=30",
                   "hydra.run.dir=/tmp/out4"])
QUIET_RUN = Step([*SAMPLE_RUN.argv[:-1], "hydra.run.dir=/tmp/out5", "quiet=true"])
MINILM_ESTIMATE = Step(["train.py", "model=minilm_l6", "data.source=sample", "trainer.max_steps=2", "logger=csv",
                        "hydra.run.dir=/tmp/mini_estimate"])
OVERFIT = Step(["train.py", "debug=overfit", "model=bert_tiny", "task=sst2", "optim.lr=1e-3"])
METRICS_RUN = Step(["train.py", "model=bert_tiny", "task=sst2", "data.max_train_samples=200",
                    "data.max_eval_samples=100", "trainer.max_epochs=1", "hydra.run.dir=/tmp/r1"])
METRICS_KEYS = [["task", "model", "freeze", "seed", "data_source"], ["params"], ["val"], ["train"], ["data"],
                ["best_checkpoint"], ["monitor"]]
FIXTURE_RUN = ["train.py", "model=bert_tiny", "task=sst2", "trainer.max_epochs=3", "data.batch_size=8"]
RESUME_FIRST = Step([*FIXTURE_RUN, "save_every_n_steps=2", "logger=csv", "hydra.run.dir=/tmp/res"])
RESUME_AGAIN = Step([*RESUME_FIRST.argv, "ckpt_path=last"])
DISK_SETTINGS = [[], ["checkpoint.best_weights_only=true"], ["checkpoint.keep_last=3", "save_every_n_steps=2"],
                 ["checkpoint.keep_last=0"]]
DISK_RUNS = [Step([*FIXTURE_RUN, "logger=csv", *extra, f"hydra.run.dir=/tmp/disk{n}"])
             for n, extra in enumerate(DISK_SETTINGS)]


def render_whole(step: Step, i: int = 0) -> Callable[[Record], str]:
    def render(r: Record) -> str:
        return block(f"$ {step.shown()}", *r.lines(i)) + "\n" + conditions_line(r)

    return render


def render_minilm_estimate(r: Record) -> str:
    return block(f"$ {MINILM_ESTIMATE.shown()}", r.line(r"\] planned: "), r.line(r"\] estimated: ")) \
        + "\n" + conditions_line(r)


def render_overfit_estimate(r: Record) -> str:
    return block(r.line(r"\] planned: "), r.line(r"\] estimated: "), r.line(r"^Epoch \d+/\d+")) \
        + "\n" + conditions_line(r)


def render_overfit_check(r: Record) -> str:
    return block(f"$ {OVERFIT.shown()}     # BERTLAB_DATA_DIR: SST-2's files", "...",
                 r.line(r"overfit check (passed|FAILED)"), r.line(r"^Epoch \d+/\d+")) \
        + "\n" + conditions_line(r, "running-overfit")


def render_metrics(r: Record) -> str:
    data = json.loads(r.file("/tmp/r1/metrics.json"))
    return (block(f"$ {METRICS_RUN.shown()}") + "\n```json\n" + compact_json(data, METRICS_KEYS) + "\n```\n\n"
            + conditions_line(r))


def render_disk(r: Record) -> str:
    rows = []
    for n, extra in enumerate(DISK_SETTINGS):
        setting = " ".join(extra) or "(default)"
        rows.append(f"{setting:<47}" + re.sub(r"^disk:\s+", "disk: ", r.line(r"^disk:", n)))
    return block(*rows) + "\n" + conditions_line(r)


# ---------------------------------------------------------------- the registry
_SAMPLE = "no data folder (the bundled samples)"
JOBS = [
    Job("readme-demo", [DEMO], "about a minute idle: MiniLM-L6, 50 steps on the bundled sample (the costs table's "
        "make train row)", paths={"/tmp/demo": "demo"}),
    Job("readme-real-data", [CONLL, DEMO_EXPORT, PREDICT], "one CoNLL-2003 epoch of MiniLM-L6 (the costs table's "
        "CoNLL row), then the demo with export=true", data="real", paths={"/tmp/pdocs/demo": "pdocs/demo"}),
    Job("glue-study", [Step(["bash", "experiments/glue/run.sh", "glue"], in_repo=True)],
        "every GLUE task with data, MiniLM-L6, one seed (36 min when last run idle: fact glue-minutes); "
        "writes experiments/glue/results/GLUE.md", data="real", records=False),
    Job("costs", steps_of(COST_ROWS), "each command's start-up and first ~12 steps, cold: about half an hour",
        data="real", kind="cost", skip=skip_of(COST_ROWS)),
    Job("sweeps-scratch", [SCRATCH_SWEEP, SCRATCH_COMPARE], "4 bert_tiny runs of one epoch on 4,000 SST-2 "
        "sentences: a few minutes", data="real", files=["logs/sst2/multiruns/tiny_4000/comparison.md"]),
    Job("sweeps-sample", [SAMPLE_SWEEP, SAMPLE_COMPARE], "4 bert_tiny runs of 13 steps on the sample: about a "
        "minute", paths={"/tmp/sample_sweep": "sample_sweep"}),
    Job("sweeps-optuna", [OPTUNA], "4 bert_tiny trials of one epoch on 4,000 SST-2 sentences: a few minutes",
        data="real"),
    Job("sweeps-pooling", [POOLING, POOLING_COMPARE, POOLING_EXPECT], "24 bert_tiny runs of one epoch on 3,000 "
        "SST-2 sentences, two at a time: ~10 min", data="real", inputs={"expected.yaml": EXPECTED},
        files=[f"{POOLING_DIR}/comparison.md"]),
    Job("running-sample", [SAMPLE_RUN], "bert_tiny, 26 steps on the sample: seconds", paths={"/tmp/out4": "out4"}),
    Job("running-quiet", [QUIET_RUN], "bert_tiny, 26 steps on the sample: seconds", paths={"/tmp/out5": "out5"}),
    Job("running-estimate", [MINILM_ESTIMATE], "MiniLM-L6, 2 steps on the sample: seconds",
        paths={"/tmp/mini_estimate": "mini_estimate"}),
    Job("running-overfit", [OVERFIT], "bert_tiny, 60 steps and 20 validations on SST-2: ~2 min", data="real"),
    Job("running-metrics", [METRICS_RUN], "bert_tiny, 7 steps on 200 SST-2 sentences: seconds (plus reading SST-2)",
        data="real", paths={"/tmp/r1": "r1"}, files=["/tmp/r1/metrics.json"]),
    Job("running-resume", [RESUME_FIRST, RESUME_AGAIN], "bert_tiny, 15 steps on the test fixtures, twice: seconds",
        data="fixtures", paths={"/tmp/res": "res"}),
    Job("running-disk", DISK_RUNS, "bert_tiny, 15 steps on the test fixtures, 4 times: seconds", data="fixtures",
        paths={f"/tmp/disk{n}": f"disk{n}" for n in range(len(DISK_RUNS))}),
]

FIGURES = [
    Figure("readme-demo", "README.md", "readme-demo", render_demo),
    Figure("readme-real-data", "README.md", "readme-real-data", render_real_data),
    Figure("readme-glue", "README.md", "glue-study", render_glue, source=GLUE_MD),
    Figure("readme-costs", "README.md", "costs", render_table(COST_ROWS, "costs")),
    Figure("predict-demo", "docs/predict.md", "readme-real-data", render_predict_demo),
    Figure("sweeps-scratch", "docs/sweeps.md", "sweeps-scratch", render_scratch_sweep),
    Figure("sweeps-sample-summary", "docs/sweeps.md", "sweeps-sample", render_sample_summary),
    Figure("sweeps-sample-compare", "docs/sweeps.md", "sweeps-sample", render_sample_compare),
    Figure("sweeps-optuna", "docs/sweeps.md", "sweeps-optuna", render_optuna),
    Figure("sweeps-pooling-table", "docs/sweeps.md", "sweeps-pooling", render_pooling_table),
    Figure("sweeps-pooling-expect", "docs/sweeps.md", "sweeps-pooling", render_pooling_expect),
    Figure("running-sample", "docs/running.md", "running-sample", render_whole(SAMPLE_RUN)),
    Figure("running-quiet", "docs/running.md", "running-quiet", render_whole(QUIET_RUN)),
    Figure("running-estimate", "docs/running.md", "running-estimate", render_minilm_estimate),
    Figure("running-overfit-estimate", "docs/running.md", "running-overfit", render_overfit_estimate),
    Figure("running-overfit-check", "docs/running.md", "running-overfit", render_overfit_check),
    Figure("running-metrics", "docs/running.md", "running-metrics", render_metrics),
    Figure("running-resume", "docs/running.md", "running-resume", render_whole(RESUME_AGAIN, 1)),
    Figure("running-disk", "docs/running.md", "running-disk", render_disk),
]

_STUDY = "docs/results.md"
LISTED = [
    Listed("results-reference", f"{_STUDY} (bertlab against the Hugging Face reference) and README's one-liners",
           "BERTLAB_DATA_DIR=<data> bash experiments/reference_budget/run.sh && "
           "python experiments/reference_budget/table.py", "hours (MiniLM-L6 at the reference's budget, every task)"),
    Listed("results-conll-features", f"{_STUDY} (CoNLL-2003: fine-tuning vs frozen features)",
           "BERTLAB_DATA_DIR=<data> bash experiments/conll_feature_based/run.sh && "
           "python experiments/conll_feature_based/table.py", "hours (5 frozen-feature probes of 3 epochs)"),
    Listed("results-freeze", f"{_STUDY} (Freeze policies), docs/freeze.md, and running.md's cache timing",
           "BERTLAB_DATA_DIR=<data> bash experiments/freeze_comparison/run.sh && "
           "python experiments/freeze_comparison/table.py", "hours (every policy, 2 seeds, SST-2 and CoNLL-2003)"),
    Listed("results-pretrain", f"{_STUDY} (Pre-train, then fine-tune)",
           "BERTLAB_DATA_DIR=<data> bash experiments/pretrain_then_finetune/run.sh && "
           "python experiments/pretrain_then_finetune/table.py", "hours (pre-training, then 3 seeds × 3 arms)"),
    Listed("results-rnn", f"{_STUDY} (RNN vs Transformer)",
           "BERTLAB_DATA_DIR=<data> bash experiments/rnn_vs_transformer/run.sh && python "
           "experiments/rnn_vs_transformer/table.py logs/rnn_vs_transformer --out experiments/rnn_vs_transformer/"
           "results.md", "hours (4 models × 2 tasks, 3 epochs)"),
    Listed("results-glue", f"{_STUDY} and docs/glue.md (the CoLA / STS-B study)",
           "BERTLAB_DATA_DIR=<data> bash experiments/glue/run.sh bertlab reference bertlab-refbudget && "
           "python experiments/glue/table.py", "hours (CoLA and STS-B, 3 seeds, bertlab and the HF Trainer)"),
    Listed("readme-unpadded", "docs/performance.md (the unpadded path's table; README.md quotes two of its rows)",
           "python benchmarks/run_all.py --update unpadded", "~1 h on a quiet machine (needs one: timings)"),
    Listed("readme-pretraining-memory", "README.md (one line on a corpus larger than memory), "
           "docs/pretraining.md", "python benchmarks/pretrain_data.py", "an hour or more (100 and 500 MB corpora)"),
    Listed("sweeps-optuna-resume", "docs/sweeps.md (12 trials, 2 workers, killed and restarted)",
           "the two worker commands shown there, killed with kill -9 after 6 trials, then started again",
           "~3 min", "not regenerated here: which trials were running when the workers were killed decides the "
           "output; tests/test_sweeps_scale.py checks the behaviour"),
    Listed("sweeps-ddp-trial", "docs/sweeps.md (DDP inside a trial)", "the trainer=ddp_cpu Optuna command shown "
           "there", "a minute", "not wired here yet (two processes, real data)"),
    Listed("sweeps-plot", "docs/images/sweep_comparison.png, docs/images/sweep_statistics.png",
           "the commands shown above each picture in docs/sweeps.md", "minutes", "pictures, not text"),
    Listed("running-history", "docs/running.md (Disk: before and after; --help timings before and after)",
           "-", "-", "a comparison with an older version of the code: history, not regenerated"),
    Listed("running-interrupted", "docs/running.md (a resumed run's plan; Ctrl-C in a multirun)",
           "the commands shown there, stopped at step 3", "seconds", "not wired here: needs a stop at a chosen step"),
]

# ---------------------------------------------------------------- facts: numbers stated in running text
_REAL_DATA = "docs/figures/readme-real-data.json"
_MINI = "experiments/pretrain_quick/attempts/mbert_4x256"


def _passes(text: str) -> str:
    """Epochs a pre-training run made: its steps over the batches of one epoch (batch 32, the recipe's)."""
    run = json.loads(text)
    return f"{run['train']['steps'] / -(-run['data']['train_examples'] // 32):.1f}"


def _gain(text: str) -> str:
    """The pre-trained start's mean paired difference from random weights, in points (comparison.csv)."""
    row = next(r for r in text.splitlines()[1:] if r.split(",")[0])
    header = text.splitlines()[0].split(",")
    return f"{100 * float(row.split(',')[header.index('diff')]):+.1f}"


def _demo_output(pattern: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        output = "\n".join(s["output"] for s in json.loads(text)["steps"][1:])
        return re.search(pattern, output).group(1)

    return read


_GORGEOUS = r"a gorgeous, witty and moving film\.['\"], ['\"]label['\"]: ['\"]1['\"], ['\"]score['\"]: (0\.\d+)"
_MESS = r"the plot is a mess and the acting is worse\.['\"], ['\"]label['\"]: ['\"]0['\"], ['\"]score['\"]: (0\.\d+)"
FACTS = [
    Fact("pretrain-mini-passes", "24.6", [r"5,000 steps[^.|]*?\b(\d+(?:\.\d+)?) passes over the corpus"],
         f"{_MINI}/pretrain/sst2.json", _passes),
    Fact("pretrain-sst2-sweep-gain", "+3.1",
         [r"([+-]\d+\.\d)\s+points?\s+(?:ahead\s+of\s+random\s+weights\s+)?on\s+(?:the\s+)?study's\s+sweep",
          r"\| seed-1 sweep \|[^\n]*\*\*([+-]\d+\.\d)\*\*"], f"{_MINI}/claim/comparison.csv", _gain),
    Fact("pretrain-sst2-grid-gain", "+3.6",
         [r"([+-]\d+\.\d)\s+(?:points\s+)?(?:with\s+each\s+side\s+at\s+the\s+best\s+three-seed\s+mean|on\s+the\s+seven-rate\s+grid)",
          r"\| best three-seed mean of seven rates \|[^\n]*\*\*([+-]\d+\.\d)\*\*"],
         f"{_MINI}/claim_lr_grid/comparison.csv", _gain),
    Fact("pretrain-conll-gain", "+24.9", [r"1,000\s+labels,?\s+([+-]\d+\.\d)\s+entity\s+F1"],
         "experiments/pretrain_quick/attempts/mbert_mini_conll/claim/comparison.csv", _gain),
    Fact("glue-minutes", "36", [r"(\d+) minutes in all", r"one seed, (\d+) minutes on an idle",
                                r"bertlab\.glue run[^|\n]*` \| ~(\d+) min"],
         "docs/glue.md, \"On the real data\" (the run's own time; no record holds it)"),
    Fact("glue-tasks", "6", [r"GLUE with one command, (\d+) of 9 tasks", r"average over (\d+) of 9 tasks",
                             r"\b(\d+) tasks with WNLI"], GLUE_MD,
         lambda text: re.search(r"average over (\d+) of 9 tasks", text).group(1)),
    Fact("demo-dev-accuracy", "0.92", [r"dev accuracy (0\.\d+)\), trained with",
                                       r"experiment=demo[^\n]*\n(?:(?!\$ )[^\n]*\n){0,8}?val: +loss=[\d.]+, accuracy=(0\.\d+)"],
         _REAL_DATA, _demo_output(r"val: +loss=[\d.]+, accuracy=(0\.\d+)"), rounded(4)),
    Fact("demo-gorgeous-score", "0.6957058674495609", [_GORGEOUS], _REAL_DATA, _demo_output(_GORGEOUS), rounded(4)),
    Fact("demo-mess-score", "0.6963516494819124",
         [_MESS, r"acting is worse\.\"\], top_k=None\)\n\[\[\{'label': '0', 'score': (0\.\d+)"], _REAL_DATA,
         _demo_output(_MESS), rounded(4)),
]

REGISTRY = Registry({job.name: job for job in JOBS}, FIGURES, LISTED, FACTS)
