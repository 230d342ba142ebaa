"""tools/doc_figures.py: the docs' figures are the registry's, ``--check`` holds on the repository, a rewrite
touches only the text between the markers, and a job runs end to end (a plain run and a cost probe)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))

import doc_figures  # noqa: E402
import doc_figures_costs as costs  # noqa: E402
import doc_figures_lib as df  # noqa: E402
from doc_figures_registry import REGISTRY  # noqa: E402


def _doc(root: Path, text: str, name: str = "README.md") -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _record(job: str, output: str, command: str, **conditions) -> df.Record:
    cond = {"date": "2026-01-01", "commit": "abc", "cpu": "cpu", "cores": 2, "omp_num_threads": 2,
            "torch_threads": "2", "torch": "2", "python": "3", "load_start": 0.1, **conditions}
    return df.Record(job, [{"command": command, "returncode": 0, "wall_s": 1.0, "output": output}], {}, cond)


# ---------------------------------------------------------------- the repository's docs and registry
def test_every_marker_has_a_registry_entry_and_every_entry_its_markers():
    marked = {r.name: r.doc.relative_to(ROOT).as_posix() for d in df.doc_files(ROOT) for r in df.regions(d)}
    registered = {f.name: f.doc for f in REGISTRY.figures}
    assert marked == registered
    assert all(f.job in REGISTRY.jobs for f in REGISTRY.figures)
    assert all(REGISTRY.figures_of(job) for job in REGISTRY.jobs), "a job that makes no figure"


def test_check_passes_on_the_repository(capsys):
    assert doc_figures.main(["--check"], REGISTRY) == 0
    out = capsys.readouterr().out
    assert "match their records" in out


def test_list_names_every_figure_and_the_studies_made_elsewhere(capsys):
    assert doc_figures.main(["--list"], REGISTRY) == 0
    out = capsys.readouterr().out
    for figure in REGISTRY.figures:
        assert f"figure {figure.name}: {figure.doc}:" in out
    for item in REGISTRY.listed:
        assert item.name in out
    assert "experiments/freeze_comparison/table.py" in out and "cost:" in out


def test_every_recorded_job_renders_and_the_readme_glue_table_is_the_study_file():
    # The GLUE table of the README is made from the study's committed GLUE.md: the two agree now.
    figure = next(f for f in REGISTRY.figures if f.name == "readme-glue")
    body = df.render(figure, figure.record(df.RECORDS))
    assert "| **average over 6 of 9 tasks** |" in body and "without WNLI" not in body


def test_the_renderers_keep_the_layouts_the_docs_use():
    # metrics.json as running.md prints it: the page's own JSON, read and written again, is the same text.
    from doc_figures_registry import METRICS_KEYS, compact_json, md_table

    shown = re.search(r"```json\n(.*?)\n```", (ROOT / "docs/running.md").read_text(), re.S)[1]
    assert compact_json(json.loads(shown), METRICS_KEYS) == shown
    # A comparison table, whole or cut to some columns (cells keep their padding).
    table = "| a | b | c |\n|---|---|---|\n| 1 |  | 3 |\n"
    assert md_table("# title\n\n" + table + "\nmore\n") == table
    assert md_table(table, ["c", "a"]) == "| c | a |\n|---|---|\n| 3 | 1 |\n"
    with pytest.raises(df.FigureError, match="no column d"):
        md_table(table, ["d"])


# ---------------------------------------------------------------- markers and rewriting
def test_a_rewrite_changes_only_the_text_between_the_markers(tmp_path):
    before = "# Title\n\nintro\n\n<!-- figure:demo -->\n```\nold output\n```\n<!-- /figure:demo -->\n\nafter\n"
    doc = _doc(tmp_path, before)
    assert df.replace_body(doc, "demo", "```\nnew output\n```")
    assert doc.read_text() == before.replace("old output", "new output")
    assert not df.replace_body(doc, "demo", "```\nnew output\n```\n")   # the same text: file unchanged
    with pytest.raises(df.FigureError, match="no <!-- figure:other -->"):
        df.replace_body(doc, "other", "x")


@pytest.mark.parametrize("text, message", [
    ("<!-- figure:a -->\nx\n", "never closed"),
    ("x\n<!-- /figure:a -->\n", "not open"),
    ("<!-- figure:a -->\n<!-- figure:b -->\n<!-- /figure:b -->\n<!-- /figure:a -->\n", "opens inside"),
    ("<!-- figure:a -->\n<!-- /figure:b -->\n", "not open"),
    ("<!-- figure:a -->\n<!-- /figure:a -->\n<!-- figure:a -->\n<!-- /figure:a -->\n", "marked twice"),
    ("<!-- figure:a -->\n`<!-- /figure:a -->` in prose is not a marker\n", "never closed"),
])
def test_broken_markers_are_errors_with_their_line(tmp_path, text, message):
    doc = _doc(tmp_path, text)
    with pytest.raises(df.FigureError, match=message):
        df.regions(doc)


def _fake_registry(command: str = "train.py x=1") -> df.Registry:
    job = df.Job("fake", [df.Step(command.split())], cost="seconds")

    def render(r: df.Record) -> str:
        return "```\n" + r.line("^val:") + "\n```\n"

    return df.Registry({"fake": job}, [df.Figure("fake-figure", "README.md", "fake", render)])


def test_check_finds_each_kind_of_drift(tmp_path):
    root, records = tmp_path, tmp_path / "records"
    reg = _fake_registry()
    doc = _doc(root, "<!-- figure:fake-figure -->\n```\nval: 0.5\n```\n<!-- /figure:fake-figure -->\n")
    problems, pending = df.check(reg, root, records)
    assert problems == [] and len(pending) == 1 and "fake-figure" in pending[0]

    records.mkdir()
    (records / "fake.json").write_text(_record("fake", "start\nval: 0.5\n", "python train.py x=1").to_json())
    assert df.check(reg, root, records) == ([], [])

    # Someone edits the number by hand: the figure no longer matches its record.
    doc.write_text(doc.read_text().replace("0.5", "0.7"))
    problems, _ = df.check(reg, root, records)
    assert len(problems) == 1 and "differs from what its record gives" in problems[0] and "+val: 0.5" in problems[0]
    df.write(reg, ["fake-figure"], root, records, log=lambda _: None)
    assert df.check(reg, root, records) == ([], [])

    # The registry's command changes: the record no longer describes it.
    problems, _ = df.check(_fake_registry("train.py x=2"), root, records)
    assert len(problems) == 1 and "changed since its record" in problems[0]

    # A marker without an entry, and an entry without markers.
    _doc(root, "<!-- figure:stray -->\n<!-- /figure:stray -->\n", "docs/page.md")
    doc.write_text("no markers\n")
    problems, _ = df.check(reg, root, records)
    assert any("figure:stray has no entry" in p for p in problems)
    assert any("no <!-- figure:fake-figure --> markers" in p for p in problems)


def test_unknown_names_are_errors_with_a_suggestion():
    with pytest.raises(df.FigureError, match="did you mean readme-demo"):
        REGISTRY.jobs_for(["readme-dem"])
    assert [j.name for j in REGISTRY.jobs_for(["sweeps-sample-compare", "sweeps-sample"])] == ["sweeps-sample"]


def test_the_command_line_prints_an_error_as_one_paragraph():
    import subprocess

    done = subprocess.run([sys.executable, str(ROOT / "tools/doc_figures.py"), "--run", "readme-dem"],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == ("doc_figures: error: no figure or job named 'readme-dem'; did you mean "
                                   "readme-demo? (--list lists them)")


def test_paths_shown_in_the_docs_map_into_the_scratch_folder_and_back(tmp_path):
    paths = df.Paths(tmp_path, {"/tmp/demo": "demo", "/tmp/demo2": "d2"})
    assert paths.to_scratch("hydra.run.dir=/tmp/demo") == f"hydra.run.dir={tmp_path}/demo"
    assert paths.to_scratch("/tmp/demo2/x") == f"{tmp_path}/d2/x"
    assert paths.to_scratch("/tmp/democracy") == "/tmp/democracy"
    out = f"run dir: {tmp_path}/demo\nckpt {tmp_path}/d2/a.ckpt\nlog {tmp_path}/logs/sst2/0\nsrc {ROOT}/src/x.py\n"
    assert paths.to_shown(out) == "run dir: /tmp/demo\nckpt /tmp/demo2/a.ckpt\nlog logs/sst2/0\nsrc src/x.py\n"


def test_terminal_output_is_kept_as_a_reader_sees_it():
    assert df.clean_output("\x1b[1mbold\x1b[0m\nbar 1/3\rbar 3/3\r\n\n\n") == "bold\nbar 3/3\n"


# ---------------------------------------------------------------- costs
@pytest.mark.parametrize("text, seconds", [("<1 s", 0.5), ("42 s", 42), ("3 min 20 s", 200), ("12 min", 720),
                                           ("1 h 45 min", 6300), ("2 h", 7200)])
def test_the_estimate_durations_read_back(text, seconds):
    from bertlab.runtime.progress import format_duration

    assert costs.seconds(text) == seconds
    if seconds >= 1:
        assert costs.seconds(format_duration(seconds)) == seconds


def _probe_step(probe: costs.Probe, at: float, left: str | None, wall: float = 99.0) -> dict:
    step = {"command": probe.step().shown(), "wall_s": wall, "returncode": None if left else 0,
            "stopped": left is not None, "seen_s": {"planned:": 10.0, **({"estimated:": at} if left else {})},
            "output": "[INFO] planned: 100 optimizer steps\n"
                      + (f"[INFO] estimated: ~{left} to go at step 12 of 100 (1 s/step)\n" if left else "")}
    return step


def test_the_cost_table_adds_start_up_estimate_and_a_sweep_s_runs():
    none, enc = costs.Probe(["task=sst2", "freeze=none"], 3, "none"), costs.Probe(["task=sst2", "freeze=encoder"],
                                                                                 3, "encoder")
    glue = [costs.Probe(["task=cola"], label="cola"), costs.Probe(["task=qqp"], label="qqp")]
    single, fast = costs.Probe(["task=squad"]), costs.Probe(["task=squad", "trainer.max_epochs=1"])
    rows = [costs.CostRow(costs.Command("python train.py task=squad", [single]),
                          costs.Command("python train.py task=squad trainer.max_epochs=1", [fast])),
            costs.CostRow(costs.Command("python train.py -m task=sst2 freeze=none,encoder", [none, enc]),
                          costs.Command("glue", glue))]
    record = df.Record("costs", [_probe_step(single, 100.0, "1 h 45 min"), _probe_step(fast, 0, None, wall=50.0),
                                 _probe_step(none, 20.0, "40 s"), _probe_step(enc, 30.0, "<1 s"),
                                 _probe_step(glue[0], 5.0, "55 s")],
                       {}, _record("costs", "", "").conditions)
    table = costs.render_table(rows, "costs")(record)
    lines = table.splitlines()
    # squad: 100 s to the estimate + 1 h 45 min left; start-up = the plan line at 10 s.
    assert lines[2].startswith("| `python train.py task=squad` | ~1 h 47 min (start-up ~10 s) | the same + "
                               "`trainer.max_epochs=1` | ~50 s (start-up ~10 s) |")
    # the sweep: 3 × (20 + 40) + 3 × (30 + 0.5) = 271.5 s; GLUE: cola measured, qqp not run.
    assert "| ~4 min 32 s: 3 × (none 1 min + encoder 30 s) |" in lines[3]
    assert "~1 min: cola 1 min; qqp: not run (no data when measured)" in lines[3]
    assert "make doc-figures ARGS=\"--run costs\"" in table
    pending = costs.pending_table(rows, "costs")
    assert pending.count('TBD (run: make doc-figures ARGS="--run costs")') == 4


# ---------------------------------------------------------------- end to end, on the bundled sample
@pytest.mark.slow
def test_a_job_runs_end_to_end_and_its_figures_are_rewritten(tmp_path):
    run = df.Step(["train.py", "model=bert_tiny", "task=sst2", "data.source=sample", "trainer.max_steps=2",
                   "logger=csv", "trainer.enable_progress_bar=false", "hydra.run.dir=/tmp/fig_e2e"])
    probe = costs.Probe(["model=bert_tiny", "task=sst2", "data.source=sample", "data.batch_size=8",
                         "trainer.max_steps=40", "logger=csv", "trainer.enable_progress_bar=false"], label="p")
    rows = [costs.CostRow(costs.Command("tiny", [probe]), costs.Command("tiny fast", [probe]))]
    job = df.Job("e2e", [run, *costs.steps_of(rows)], cost="seconds", paths={"/tmp/fig_e2e": "run"},
                 files=["/tmp/fig_e2e/metrics.json"])

    def render_run(r: df.Record) -> str:
        steps = json.loads(r.file("/tmp/fig_e2e/metrics.json"))["train"]["steps"]
        return "```\n" + "\n".join(r.lines(0)[-3:]) + f"\nsteps={steps}\n```\n\n" + df.conditions_line(r)

    reg = df.Registry({"e2e": job}, [df.Figure("e2e-run", "README.md", "e2e", render_run),
                                      df.Figure("e2e-cost", "docs/x.md", "e2e", costs.render_table(rows, "e2e"))])
    readme = _doc(tmp_path, "a\n<!-- figure:e2e-run -->\nold\n<!-- /figure:e2e-run -->\nb\n")
    _doc(tmp_path, "<!-- figure:e2e-cost -->\n" + costs.pending_table(rows, "e2e") + "<!-- /figure:e2e-cost -->\n",
         "docs/x.md")
    records = tmp_path / "records"
    df.run(reg, ["e2e"], threads=1, scratch=tmp_path / "scratch", root=tmp_path, records=records,
           log=lambda _: None)

    record = df.Record.load(records / "e2e.json")
    assert record.conditions["omp_num_threads"] == 1 and record.conditions["torch_threads"] == "1"
    assert "run dir:          /tmp/fig_e2e" in record.output(0) and str(tmp_path) not in record.output(0)
    text = readme.read_text()
    assert text.startswith("a\n<!-- figure:e2e-run -->\n```\n") and text.endswith("<!-- /figure:e2e-run -->\nb\n")
    assert "steps=2" in text and "1 torch thread," in text
    probe_step = record.steps[1]
    assert probe_step["stopped"] and probe_step["seen_s"]["planned:"] <= probe_step["seen_s"]["estimated:"]
    assert "estimated: " in probe_step["output"].splitlines()[-1]
    cost_doc = (tmp_path / "docs/x.md").read_text()
    assert "TBD" not in cost_doc and "| `tiny` | ~" in cost_doc
    assert df.check(reg, tmp_path, records) == ([], [])


def test_predict_records_are_kept_when_the_progress_bar_shares_their_line():
    """stderr's progress bar and stdout's first record can land on one line of the merged output."""
    from doc_figures_registry import records

    merged = ['', '0 examples [00:00, ? examples/s]{"text": "a", "label": "1"}', '{"text": "b", "label": "0"}', '',
              '2 examples [00:00, 39.34 examples/s]', '2 examples → standard output (/tmp/x.ckpt)']
    assert records(merged) == ['{"text": "a", "label": "1"}', '{"text": "b", "label": "0"}']


# ---------------------------------------------------------------- facts: one value per quantity on every page
def _facts_root(tmp_path: Path, readme: str, page: str, sources: dict[str, str] | None = None) -> Path:
    _doc(tmp_path, readme)
    _doc(tmp_path, page, "docs/page.md")
    for name, text in (sources or {}).items():
        _doc(tmp_path, text, name)
    return tmp_path


def test_every_registered_fact_holds_on_every_page_and_in_its_source():
    assert df.fact_problems(REGISTRY.facts, ROOT) == []
    names = [f.name for f in REGISTRY.facts]
    assert len(names) == len(set(names))


# The disagreements the issue found, as the pages stated them: each is reported, with its page and line.
@pytest.mark.parametrize("text, fact, stated", [
    ("so 5,000 steps fit the budget: 41 minutes (a few of them beside tests), 3.9 passes over the corpus instead\n",
     "pretrain-mini-passes", "3.9"),
    ("| `python -m bertlab.glue run model=minilm_l6 seed=1` | ~47 min: cola 4 min 37 s + sst2 25 min |\n",
     "glue-minutes", "47"),
    ("each preset as it is, one seed, 41 minutes on an idle 2-core CPU\n", "glue-minutes", "41"),
    ("| GLUE, SQuAD 2.0, SWAG | GLUE with one command, 5 of 9 tasks, average 64.9 |\n", "glue-tasks", "5"),
    ("on the 400-sentence SST-2 sample, dev accuracy 0.91), trained with `export=true`:\n", "demo-dev-accuracy",
     "0.91"),
    ("$ python train.py experiment=demo logger=csv export=true hydra.run.dir=/tmp/pdocs/demo\n...\n"
     "val:              loss=0.4829, accuracy=0.91, f1=0.9053\n", "demo-dev-accuracy", "0.91"),
    ('{"text": "a gorgeous, witty and moving film.", "label": "1", "score": 0.6953457425193106}\n',
     "demo-gorgeous-score", "0.6953457425193106"),
    ("[{'text': 'a gorgeous, witty and moving film.', 'label': '1', 'score': 0.6953457109526838}]\n",
     "demo-gorgeous-score", "0.6953457109526838"),
    ("the recipe's start is +2.1 points ahead of random weights on the study's sweep\n",
     "pretrain-sst2-sweep-gain", "+2.1"),
    ("**`bert_mini`'s size: +3.1 points on the study's sweep, +4.0 on the seven-rate grid, the recipe.**\n",
     "pretrain-sst2-grid-gain", "+4.0"),
])
def test_a_page_stating_a_fact_otherwise_is_reported(tmp_path, text, fact, stated):
    facts = [f for f in REGISTRY.facts if f.name == fact]
    sources = {f.source: (ROOT / f.source).read_text() for f in facts if f.read is not None}
    root = _facts_root(tmp_path, "intro\n\n" + text, "nothing here\n", sources)
    problems = df.fact_problems(facts, root)
    line = 3 + text[:text.index(stated)].count("\n")  # the line the value stands on
    assert problems == [f"README.md:{line}: states {fact} as {stated}; it is {facts[0].value} ({facts[0].source})"]
    # The same statement with the registered value passes.
    good = text.replace(stated, facts[0].value)
    assert df.fact_problems(facts, _facts_root(tmp_path / "good", good, "x\n", sources)) == []


def test_two_pages_disagreeing_name_the_page_that_differs(tmp_path):
    fact = df.Fact("widgets", "12", [r"(\d+) widgets"], "src.txt", lambda text: text.strip())
    root = _facts_root(tmp_path, "we made 12 widgets\n", "a\nwe made 13 widgets\n", {"src.txt": "12\n"})
    assert df.fact_problems([fact], root) == ["docs/page.md:2: states widgets as 13; it is 12 (src.txt)"]
    (root / "src.txt").write_text("14\n")  # the record moved on: the registry and the pages must follow
    assert any("src.txt gives 14, the registry says 12" in p for p in df.fact_problems([fact], root))
    fact.claims = [r"(\d+) gadgets"]  # a phrasing no page uses any more is a problem too, not a silent pass
    (root / "src.txt").write_text("12\n")
    assert df.fact_problems([fact], root) == ["fact widgets: no page states it (a phrasing of its claims changed?)"]


def test_check_fails_on_a_fact_stated_otherwise(tmp_path, capsys):
    fact = df.Fact("widgets", "12", [r"(\d+) widgets"], "src.txt")
    root = _facts_root(tmp_path, "we made 11 widgets\n", "x\n")
    problems, _ = df.check(df.Registry({}, [], facts=[fact]), root, tmp_path / "records")
    assert problems == ["README.md:1: states widgets as 11; it is 12 (src.txt)"]


def test_the_readme_is_an_entrance_that_holds():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 15 * 1024, "README.md over 15 KB: move detail to a docs/ page"
    entrance = readme.split("## ", 1)[0]
    for family in ("BERT", "RoBERTa", "XLM-R", "DistilBERT", "ELECTRA", "DeBERTa-v3", "ModernBERT"):
        assert family in entrance
    assert "Seven encoder families" in entrance
    assert "make train" in readme and "make test" in readme
