"""The documentation cannot rot: every training command shown in README.md and docs/*.md composes with conf/,
and every relative link points to a file (and heading) that exists.

A command is a line of a fenced code block (an optional ``$ `` prompt, ``\\`` continuations joined) that runs
``python train.py ...`` (also ``torchrun ... train.py``, ``srun python train.py``, with ``VAR=value`` prefixes),
``make train ARGS="..."`` or ``python -m bertlab.glue run ...``. Its overrides are parsed by Hydra's override
parser and composed with Hydra's compose API against conf/, as ``train.py`` would compose them. Sweeps
(``freeze=none,encoder,lora``, ``range(...)``, ``interval(...)``) are expanded: every value of a config-group
sweep is composed (each value selects another file); for a plain key the parser has read every value and the
first one is composed (a value cannot make a key unknown).
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

import pytest
from conftest import ROOT

CONF = ROOT / "conf"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Hydra's command-line flags that take a value (what they change is not composed here, except -cd and -cn).
_FLAGS_WITH_VALUE = {"--cfg", "-c", "--package", "-p", "--config-dir", "-cd", "--config-name", "-cn",
                     "--config-path", "-cp"}
_FLAGS = {"-m", "--multirun", "--resolve", "--info", "-i"}
_SHELL_STOP = {"|", "||", "&&", ";", "&", ">", ">>", "2>&1", "<"}
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_STARTS = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:srun\s+|torchrun\s|make\s+train|(?:\S*/)?python3?\s)")


@dataclass
class DocCommand:
    where: str                       # file:line
    text: str
    overrides: list[str] = field(default_factory=list)
    multirun: bool = False
    config_dirs: list[str] = field(default_factory=list)
    config_name: str = "train"
    tasks: list[str] | None = None   # python -m bertlab.glue run: the tasks it composes (each with experiment=glue)
    skip: str | None = None          # a synopsis, not a runnable command
    shows_error: bool = False        # the docs show it failing (the next line is its error message)


def code_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line number of the block's first line, its lines) for every fenced code block."""
    blocks, current, start, fence = [], None, 0, None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if current is None:
            if stripped.startswith(("```", "~~~")):
                fence, current, start = stripped[:3], [], number + 1
        elif stripped.startswith(fence):
            blocks.append((start, current))
            current = None
        else:
            current.append(line)
    return blocks


def _logical_lines(start: int, lines: list[str]):
    """Lines with their ``$ `` prompt removed and ``\\`` continuations joined, with their first line number."""
    buffer, first = "", None
    for offset, raw in enumerate(lines):
        line = raw.strip()
        if not buffer and line.startswith("$ "):
            line = line[2:]
        if first is None:
            first = start + offset
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        yield first, buffer + line
        buffer, first = "", None
    if buffer:
        yield first, buffer


def parse_command(line: str, where: str) -> DocCommand | None:
    """The command a doc line runs, or None when the line is output or another program."""
    if not _STARTS.match(line):
        return None
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as err:
        raise AssertionError(f"{where}: cannot read this command line as a shell would ({err}): {line}") from err
    cut = next((i for i, t in enumerate(tokens) if t in _SHELL_STOP or t.startswith(("$(", "2>", ">"))), None)
    tokens = tokens[:cut]
    while tokens and _ENV.match(tokens[0]):
        tokens.pop(0)
    if tokens[:1] == ["srun"]:
        tokens.pop(0)
    if tokens[:1] == ["make"]:
        if tokens[1:2] != ["train"]:
            return None
        args = next((t.split("=", 1)[1] for t in tokens[2:] if t.startswith("ARGS=")), None)
        return DocCommand(where, line, overrides=shlex.split(args) if args else ["experiment=demo"])
    if tokens[:1] == ["torchrun"]:
        while tokens and not tokens[0].endswith("train.py"):
            tokens.pop(0)
        args = tokens[1:]
    elif tokens and re.fullmatch(r"(?:\S*/)?python3?", tokens[0]):
        if tokens[1:2] == ["train.py"]:
            args = tokens[2:]
        elif tokens[1:4] == ["-m", "bertlab.glue", "run"]:
            return _glue_command(tokens[4:], where, line)
        else:
            return None
    else:
        return None
    return _train_command(args, where, line)


def _train_command(args: list[str], where: str, line: str) -> DocCommand:
    command = DocCommand(where, line)
    args = list(args)
    while args:
        token = args.pop(0)
        flag, eq, value = token.partition("=")
        if token in ("...", "…"):   # an elided part of a command shown elsewhere
            continue
        if token in _FLAGS:
            command.multirun |= token in ("-m", "--multirun")
        elif flag in _FLAGS_WITH_VALUE:
            value = value if eq else args.pop(0)
            if flag in ("-cd", "--config-dir"):
                command.config_dirs.append(str((ROOT / value).resolve()))
            elif flag in ("-cn", "--config-name"):
                command.config_name = value
            elif flag in ("-cp", "--config-path"):
                raise AssertionError(f"{where}: --config-path replaces conf/; this check cannot follow it: {line}")
        elif token.startswith("-"):
            raise AssertionError(f"{where}: unknown option {token!r} for train.py: {line}")
        else:
            command.overrides.append(token)
    return command


def _glue_command(args: list[str], where: str, line: str) -> DocCommand:
    if any(t.startswith("[") for t in args):
        return DocCommand(where, line, skip="a synopsis (bracketed placeholders), not a command")
    command = DocCommand(where, line, multirun=True, tasks=_glue_tasks())
    while args:
        token = args.pop(0)
        flag, eq, value = token.partition("=")
        if flag in ("--tasks", "--out"):
            value = value if eq else args.pop(0)
            if flag == "--tasks":
                command.tasks = value.split(",")
        elif token.startswith("-"):
            raise AssertionError(f"{where}: unknown option {token!r} for bertlab.glue run: {line}")
        else:
            command.overrides.append(token)
    return command


@lru_cache(maxsize=1)
def _glue_tasks() -> list[str]:
    from omegaconf import OmegaConf

    node = OmegaConf.load(CONF / "experiment" / "glue.yaml")
    return str(node.hydra.sweeper.params.task).split(",")


_ERROR_OUTPUT = re.compile(r"^(?:bertlab: error:|[A-Za-z_.]*(?:Error|Exception):)")


def commands_in(text: str, name: str) -> list[DocCommand]:
    found = []
    for start, lines in code_blocks(text):
        previous = None
        for number, line in _logical_lines(start, lines):
            command = parse_command(line, f"{name}:{number}")
            if command is None and previous is not None and _ERROR_OUTPUT.match(line):
                previous.shows_error = True
            previous = command
            if command is not None:
                found.append(command)
    return found


def _is_group(key: str) -> bool:
    key = key.lstrip("+~")
    return "/" in key or (CONF / key.replace(".", "/")).is_dir()


def variants(command: DocCommand) -> list[list[str]]:
    """The override lists to compose: sweeps expanded as the module docstring says."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep

    parsed = OverridesParser.create().parse_overrides(command.overrides)
    first: dict[int, str] = {}
    every: dict[int, list[str]] = {}
    for i, o in enumerate(parsed):
        if not o.is_sweep_override():
            continue
        key = o.get_key_element()
        if isinstance(o.value(), IntervalSweep):
            values = [repr(float(o.value().start))]
        else:
            values = list(o.sweep_string_iterator())
        first[i] = f"{key}={values[0]}"
        every[i] = [f"{key}={v}" for v in values] if _is_group(key) else [first[i]]
    base = [first.get(i, o.input_line) for i, o in enumerate(parsed)]
    lists = [base]
    for i, choices in every.items():
        for choice in choices[1:]:
            lists.append([choice if j == i else item for j, item in enumerate(base)])
    if command.tasks is not None:
        lists = [["experiment=glue", f"task={t}", *items] for t in command.tasks for items in lists]
    return lists


@cache
def compose(overrides: tuple[str, ...], config_dirs: tuple[str, ...] = (), config_name: str = "train"):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    search = [f"hydra.searchpath=[{','.join('file://' + d for d in config_dirs)}]"] if config_dirs else []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return hydra_compose(config_name=config_name, overrides=[*search, *overrides], return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()


def _missing_options(overrides: set[str], config_dirs: list[str]) -> list[str]:
    """Group choices whose file does not exist. Hydra's compose skips a missing option of an `optional`
    group (experiment, debug, hparams_search) without a word, so `experiment=typo` would pass unseen."""
    missing = []
    for item in sorted(overrides):
        key, _, value = item.partition("=")
        key = key.lstrip("+")
        if key.startswith(("~", "hydra/")) or value in ("", "null") or not _is_group(key):
            continue
        roots = [CONF, *map(Path, config_dirs)]
        if not any((root / key / f"{value}.yaml").is_file() for root in roots):
            missing.append(f"{key}={value}: no {key}/{value}.yaml in conf/"
                           + (f" or {', '.join(config_dirs)}" if config_dirs else ""))
    return missing


def problems(command: DocCommand) -> list[str]:
    """What is wrong with a doc command: each line names the overrides that failed and Hydra's reason.
    A command the docs show failing (a typo'd key, on purpose) must still parse; it need not compose."""
    try:
        lists = variants(command)
    except Exception as err:  # Hydra's override grammar
        return [f"{command.where}: the overrides do not parse: {err}\n  {command.text}"]
    if command.shows_error:
        return []
    found = [f"{command.where}: {problem}\n  {command.text}"
             for problem in _missing_options({o for items in lists for o in items}, command.config_dirs)]
    for overrides in lists:
        try:
            compose(tuple(overrides), tuple(command.config_dirs), command.config_name)
        except Exception as err:
            found.append(f"{command.where}: does not compose with conf/ ({' '.join(overrides)}): "
                         f"{type(err).__name__}: {err}\n  {command.text}")
    return found


def all_commands() -> list[DocCommand]:
    return [c for path in DOCS for c in commands_in(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]


COMMANDS = all_commands()


def test_the_docs_show_training_commands():
    # The extractor must find the guide's commands: an empty list would let every check below pass.
    assert len(COMMANDS) >= 40, [c.where for c in COMMANDS]
    assert any(c.multirun for c in COMMANDS) and any(c.tasks for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_doc_command_composes(command: DocCommand):
    if command.skip:
        pytest.skip(command.skip)
    assert not problems(command), "\n".join(problems(command))


# ---- the checker itself, on synthetic blocks ----

def _one(block: str) -> DocCommand:
    found = commands_in(block, "synthetic.md")
    assert len(found) == 1, found
    return found[0]


def test_checker_rejects_a_typo_in_a_key():
    command = _one("```\n$ python train.py model=bert_tiny data.max_train_sample=10 logger=csv\n"
                   "val:              loss=0.69\n```\n")
    assert command.overrides == ["model=bert_tiny", "data.max_train_sample=10", "logger=csv"]
    found = problems(command)
    assert found and "data.max_train_sample" in found[0]


def test_checker_rejects_a_typo_in_one_value_of_a_group_sweep():
    command = _one("```\npython train.py -m model=bert_tiny freeze=none,encoder,lorra seed=1,2\n```\n")
    found = problems(command)
    assert found and all("freeze=lorra" in p for p in found)


def test_checker_accepts_the_forms_the_docs_use():
    block = ("```\n"
             "$ BERTLAB_DATA_DIR=data torchrun --standalone --nproc_per_node=2 train.py trainer=ddp_cpu \\\n"
             "    model=bert_tiny hydra.run.dir=/tmp/x  # a comment\n"
             "python train.py hparams_search=optuna 'optim.lr=tag(log,interval(1e-4,3e-3))' hydra.sweeper.n_trials=4 &\n"
             "python train.py model=bert_tiny +tags_extra=1 ~callbacks.lr_monitor | head -1\n"
             "make train ARGS=\"task=squad freeze=none\"\n"
             "python -m bertlab.glue run --tasks cola,stsb seed=1,2,3\n"
             "python -m bertlab.compare logs/x\n"
             "```\n")
    found = commands_in(block, "synthetic.md")
    assert [c.overrides[0] for c in found] == ["trainer=ddp_cpu", "hparams_search=optuna", "model=bert_tiny",
                                               "task=squad", "seed=1,2,3"]
    assert found[-1].tasks == ["cola", "stsb"]
    assert [p for c in found for p in problems(c)] == []


def test_checker_rejects_a_bad_override_in_make_train_and_glue():
    assert problems(_one('```\nmake train ARGS="task=sst2 optim.learning_rate=1e-3"\n```\n'))
    assert problems(_one("```\npython -m bertlab.glue run --tasks cola trainer.max_epoch=1\n```\n"))


# ---- links ----

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")


def _prose(text: str, keep_code_spans: bool = False) -> str:
    """The text outside fenced code blocks (and outside inline code spans unless ``keep_code_spans``)."""
    out, in_block, fence = [], False, ""
    for line in text.splitlines():
        stripped = line.strip()
        if not in_block and stripped.startswith(("```", "~~~")):
            in_block, fence = True, stripped[:3]
        elif in_block and stripped.startswith(fence):
            in_block = False
        elif not in_block:
            out.append(line if keep_code_spans else _INLINE_CODE.sub("", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower()
    text = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
    counts: dict[str, int] = {}
    found = set()
    text = path.read_text(encoding="utf-8")
    for line in _prose(text, keep_code_spans=True).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            n = counts.get(base, 0)
            found.add(f"{base}-{n}" if n else base)
            counts[base] = n + 1
    return found


def broken_links(path: Path, text: str | None = None) -> list[str]:
    text = path.read_text(encoding="utf-8") if text is None else text
    bad = []
    for target in _LINK.findall(_prose(text)):
        if re.match(r"^[a-z]+:", target):   # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            bad.append(f"{path.name}: link to {target}: {resolved} does not exist")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            bad.append(f"{path.name}: link to {target}: no heading #{fragment} in {resolved.name}")
    return bad


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_relative_links_resolve(path: Path):
    assert not broken_links(path), "\n".join(broken_links(path))


def test_link_checker_reports_a_missing_file_and_a_missing_heading(tmp_path: Path):
    (tmp_path / "other.md").write_text("# Other\n\n## A section, with `code`\n")
    page = tmp_path / "page.md"
    text = ("[ok](other.md) [ok](other.md#a-section-with-code) [web](https://example.org/x)\n"
            "[gone](missing.md) [no heading](other.md#nowhere) `[code](not-a-link.md)`\n"
            "```\n[in a block](also-not-a-link.md)\n```\n")
    assert broken_links(page, text) == [
        f"page.md: link to missing.md: {(tmp_path / 'missing.md').resolve()} does not exist",
        "page.md: link to other.md#nowhere: no heading #nowhere in other.md",
    ]


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_docs_stand_alone(path: Path):
    # A clone of the repository has no shared folder beside it: the docs must not send the reader there, by a
    # relative path (../shared) or an absolute one.
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"\.\./shared\b|/shared/(?:data|docs)\b", text)


def test_a_command_shown_failing_need_not_compose_but_must_parse():
    shown = _one("```\n$ python train.py model=bert_tiny data.max_train_sample=10\n"
                 "bertlab: error: unknown configuration key data.max_train_sample ...\n```\n")
    assert shown.shows_error and problems(shown) == []
    broken = _one("```\n$ python train.py model=bert_tiny 'data.max_train_samples=[1,'\n"
                  "bertlab: error: ...\n```\n")
    assert problems(broken) and "do not parse" in problems(broken)[0]


def test_checker_rejects_a_missing_option_of_an_optional_group():
    # Hydra composes `experiment=typo` without an error (the group is optional): the checker must not.
    found = problems(_one("```\npython train.py -m experiment=freeze_comparisn freeze=none,lora\n```\n"))
    assert len(found) == 1 and "experiment/freeze_comparisn.yaml" in found[0]
    assert problems(_one("```\npython train.py debug=overfitt model=bert_tiny\n```\n"))


def test_checker_follows_config_dir():
    line = ("python train.py -m -cd experiments/rnn_vs_transformer experiment=rnn_vs_transformer model=bilstm "
            "task=sst2,conll2003 seed=1,2,3")
    command = _one(f"```\n{line}\n```\n")
    assert command.config_dirs == [str(ROOT / "experiments" / "rnn_vs_transformer")]
    assert problems(command) == []
    assert problems(_one(f"```\n{line.replace('-cd experiments/rnn_vs_transformer ', '')}\n```\n"))
