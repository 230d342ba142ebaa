"""The import rules of docs/architecture.md, checked on every module of src/bertlab.

The rules are read from the page itself (its table "What each part may import"), so the page and this test
cannot say different things. Every import statement counts, also one inside a function: an import that only
runs late still ties the two parts together.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "bertlab"
DOC = ROOT / "docs" / "architecture.md"
MAX_LINES = 600

# Entry points: command lines and the training recipe. Nothing imports them.
ENTRY_POINTS = {"bertlab.train", "bertlab.predict", "bertlab.export", "bertlab.compare", "bertlab.glue",
               "bertlab.retrieve"}
# Imports allowed against the rules, by (module, imported module): none.
EXCEPTIONS: set[tuple[str, str]] = set()


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def part_of(module: str) -> str | None:
    """The part a bertlab module belongs to: its sub-package, ``entry`` or ``package``."""
    if module in ENTRY_POINTS:
        return "entry"
    if module == "bertlab":
        return "package"
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 2 or (len(pieces) == 2 and pieces[1] in RULES) else None


def read_rules(text: str) -> dict[str, set[str]]:
    """``| `part` | `a`, `b` |`` rows of the section "What each part may import" → {part: {a, b}}."""
    section = text.split("## What each part may import", 1)[1].split("\n## ", 1)[0]
    rules: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not re.fullmatch(r"`[a-z_]+`", cells[0]):
            continue
        rules[cells[0].strip("`")] = set(re.findall(r"`([a-z_]+)`", cells[1]))
    return rules


RULES = read_rules(DOC.read_text(encoding="utf-8"))


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every bertlab import in ``source``, at any depth, relative ones resolved;
    ``from bertlab.x import y`` also counts ``bertlab.x.y`` when that is a module of its own."""
    found = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name == "bertlab" or name.startswith("bertlab.")]


def violations(sources: dict[str, str], known: set[str], packages: set[str] = frozenset()) -> list[str]:
    """Every import of ``sources`` ({module: source}) that goes against RULES; ``known`` are the modules that
    exist (``from bertlab.x import name`` only names a module when ``bertlab.x.name`` is one)."""
    out = []
    for module, source in sorted(sources.items()):
        own = part_of(module)
        if own is None or own not in RULES:
            out.append(f"{module}: belongs to no part of docs/architecture.md")
            continue
        for line, target in imported_modules(source, module, module in packages):
            if target not in known and target.rpartition(".")[0] in known:
                continue  # a name imported from a module, not a module
            other = part_of(target)
            if other is None or other == own or (module, target) in EXCEPTIONS:
                continue
            if other not in RULES[own]:
                out.append(f"{module}:{line} imports {target}: {own} may not import {other} "
                           f"(allowed: {', '.join(sorted(RULES[own])) or 'nothing'})")
    return out


def real_sources() -> tuple[dict[str, str], set[str], set[str]]:
    paths = sorted(SRC.rglob("*.py"))
    sources = {module_name(p): p.read_text(encoding="utf-8") for p in paths}
    packages = {module_name(p) for p in paths if p.name == "__init__.py"}
    return sources, set(sources), packages


def test_the_page_states_a_rule_for_every_part():
    assert set(RULES) >= {"runtime", "models", "data", "tasks", "training", "inference", "analysis", "sweeps",
                          "entry", "package"}
    assert RULES["runtime"] == set() and RULES["models"] == {"runtime"} and RULES["data"] == {"runtime"}
    assert "entry" not in set().union(*(RULES[p] for p in RULES if p != "entry"))


def test_no_module_imports_against_the_rules():
    sources, known, packages = real_sources()
    assert violations(sources, known, packages) == []


@pytest.mark.parametrize("module, source", [
    ("bertlab.data.features", "from bertlab.tasks.qa import prepare_qa_features\n"),  # data → tasks
    ("bertlab.data.features", "def f():\n    import bertlab.training.module\n"),  # late import, still counts
    ("bertlab.data.features", "from ..models.heads import TaskModel\n"),  # relative, data → models
    ("bertlab.models.heads", "from bertlab.training import freeze\n"),  # models → training, module by name
    ("bertlab.training.module", "from bertlab import train\n"),  # nothing imports an entry point
    ("bertlab.tasks.qa", "from bertlab.train import run\n"),  # tasks never import an entry point
    ("bertlab.runtime.config", "from bertlab.data.readers import DataError\n"),  # runtime imports nothing
    ("bertlab.newpart.x", "x = 1\n"),  # a module outside every part
])
def test_the_checker_catches_a_planted_violation(module, source):
    known = set(real_sources()[1])
    assert violations({module: source}, known), f"{module}: {source!r} was not reported"


@pytest.mark.parametrize("module, source", [
    ("bertlab.tasks.qa", "from bertlab.data.qa import QAExample\nfrom bertlab.models.heads import SpanHead\n"),
    ("bertlab.train", "from bertlab.training.module import BertTaskModule\n"),
    ("bertlab.data.features", "from . import readers\nfrom .tags import align_labels\n"),
])
def test_the_checker_lets_allowed_imports_pass(module, source):
    assert violations({module: source}, set(real_sources()[1])) == []


def import_graph(sources: dict[str, str], known: set[str], packages: set[str] = frozenset()) -> dict[str, set[str]]:
    """{module: the modules of ``known`` it imports}, every import at any depth (one inside a function too)."""
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        targets = set()
        for _, target in imported_modules(source, module, module in packages):
            if target in known and target != module:
                targets.add(target)
        # ``from bertlab.x import name`` counts bertlab.x only when name is not a module of its own
        graph[module] = {t for t in targets if not any(o.startswith(t + ".") and o in targets for o in targets)
                         or t not in packages}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted: the import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def tool_sources() -> tuple[dict[str, str], set[str]]:
    """tools/ and benchmarks/ scripts import their neighbours by bare name (``from doc_figures import x``, and
    a package beside them: ``from samples.cli import main``): read as modules ``bertlab.<folder>_<name>`` (a
    package's modules as ``bertlab.<folder>_<package>.<module>``) so that the same graph code sees their
    circles."""
    sources = {}
    for folder in ("tools", "benchmarks"):
        base = ROOT / folder
        paths = sorted(p for p in base.rglob("*.py") if "__pycache__" not in p.parts)
        tops = {p.relative_to(base).parts[0].removesuffix(".py") for p in paths}
        for path in paths:
            text = path.read_text(encoding="utf-8")
            for name in tops:  # a bare import of a neighbour (or of a module of its package) becomes an absolute one
                text = re.sub(rf"^(\s*)from {name}((?:\.\w+)*) import", rf"\1from bertlab.{folder}_{name}\2 import",
                              text, flags=re.M)
                text = re.sub(rf"^(\s*)import {name}\b", rf"\1import bertlab.{folder}_{name}", text, flags=re.M)
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            sources[f"bertlab.{folder}_" + ".".join(parts)] = text
    return sources, set(sources)


def test_the_tools_packages_are_in_the_graph():
    """tools/samples/ (the sample generator's package) is read like the scripts: its modules and the imports
    between them, and make_samples.py's import of it, are edges of the graph the circle test walks."""
    tools, names = tool_sources()
    graph = import_graph(tools, names)
    assert "bertlab.tools_samples.cli" in graph["bertlab.tools_make_samples"]
    assert "bertlab.tools_samples.common" in graph["bertlab.tools_samples.sst2"]


def test_there_is_no_import_circle_in_src_or_tools():
    sources, known, packages = real_sources()
    tools, tool_names = tool_sources()
    graph = import_graph({**sources, **tools}, known | tool_names, packages)
    assert import_circles(graph) == [], "import circles (cut each so that one side no longer imports the other)"


@pytest.mark.parametrize("sources, circle", [
    ({"bertlab.a.x": "from bertlab.a.y import f\n", "bertlab.a.y": "def g():\n    from bertlab.a.x import h\n"},
     ["bertlab.a.x", "bertlab.a.y"]),  # a late import closes a circle too
    ({"bertlab.a.x": "from bertlab.a import y\n", "bertlab.a.y": "from bertlab.a.z import f\n",
      "bertlab.a.z": "import bertlab.a.x\n"}, ["bertlab.a.x", "bertlab.a.y", "bertlab.a.z"]),
])
def test_the_circle_finder_catches_a_planted_circle(sources, circle):
    known = set(sources)
    assert import_circles(import_graph(sources, known, {"bertlab.a"})) == [circle]


def test_no_module_of_src_is_longer_than_600_lines():
    # src/, and the tools split into a package of modules (the sample generator)
    paths = [*(ROOT / "src").rglob("*.py"), *(ROOT / "tools" / "samples").rglob("*.py"), ROOT / "tools" / "make_samples.py"]
    long = {str(p.relative_to(ROOT)): n for p in sorted(paths)
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these modules (at most {MAX_LINES} lines each): {long}"


def test_both_encoders_implement_the_encoder_protocol():
    import torch

    from bertlab.models.bert import BertModel
    from bertlab.models.encoder import Encoder, EncoderOutput
    from bertlab.models.recurrent import RecurrentConfig, RecurrentEncoder
    from bertlab.runtime.config import EncoderConfig

    bert = BertModel(EncoderConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=16, max_position_embeddings=16))
    rnn = RecurrentEncoder(RecurrentConfig(vocab_size=30, embedding_dim=8, hidden_size=4, num_layers=1))
    ids = torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]])
    for encoder in (bert, rnn):
        assert isinstance(encoder, Encoder)
        out = encoder(ids, attention_mask=(ids != 0).long(), output_hidden_states=True)
        assert isinstance(out, EncoderOutput) and out.last_hidden_state.shape == (2, 4, encoder.hidden_size)
        assert len(out.hidden_states) == encoder.num_layers + 1
        assert encoder.embeddings.word_embeddings.num_embeddings == 30
    assert not isinstance(torch.nn.Linear(2, 2), Encoder)


# ----------------------------------------------------------------------------------------------------------
# No hidden global state


def test_importing_bertlab_changes_no_environment_variable_and_no_warning_filter():
    """Importing any module of bertlab (after its dependencies) leaves os.environ and the warning filters as
    they were: what a run needs is set when it runs, inside ``bertlab.train.run``."""
    import os
    import subprocess
    import sys

    modules = sorted(m for m in real_sources()[1] if not m.endswith("__main__"))
    program = "\n".join([
        "import os, warnings",
        "import torch, lightning, hydra, omegaconf, tokenizers, numpy",
        "env, filters = dict(os.environ), list(warnings.filters)",
        *(f"import {m}" for m in modules),
        "changed = sorted(set(os.environ.items()) ^ set(env.items()))",
        "print(changed, len(warnings.filters) - len(filters))",
    ])
    env = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[]", "0"], out.stdout


def test_a_run_leaves_the_warning_filters_as_it_found_them(train_run):
    """The filters bertlab.train.run sets for known third-party warnings last for the run only (a library that
    a run imports may still add its own)."""
    import warnings

    from bertlab.train import _filter_known_warnings

    with warnings.catch_warnings():
        warnings.resetwarnings()
        _filter_known_warnings()
        ours = list(warnings.filters)
    assert ours
    before = list(warnings.filters)
    train_run("model=bert_tiny", "task=sst2", "trainer.max_steps=1", "data.max_eval_samples=8")
    assert [f for f in warnings.filters if f in ours and f not in before] == []


# ----------------------------------------------------------------------------------------------------------
# One-way flow


def test_the_tokenizer_exists_before_the_data_module_that_uses_it(train_run, monkeypatch):
    """config → tokenizer (from the config and the training files) → data module: the data module is built
    with its tokenizer, and nothing assigns one to it afterwards."""
    from bertlab.data.datamodule import TaskDataModule
    from bertlab.data.tokenizer import BertTokenizer

    built, assigned = [], []
    original_init, original_setattr = TaskDataModule.__init__, TaskDataModule.__setattr__

    def init(self, task, data, tokenizer, *args, **kwargs):
        built.append(tokenizer)
        original_init(self, task, data, tokenizer, *args, **kwargs)
        self._built = True

    def setattr_(self, name, value):
        if name == "tokenizer" and getattr(self, "_built", False):
            assigned.append(value)
        original_setattr(self, name, value)

    monkeypatch.setattr(TaskDataModule, "__init__", init)
    monkeypatch.setattr(TaskDataModule, "__setattr__", setattr_)
    train_run("model=bert_tiny", "task=sst2", "trainer.max_steps=1", "data.max_eval_samples=8")
    assert built and all(isinstance(t, BertTokenizer) for t in built)
    assert assigned == []
