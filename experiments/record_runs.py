"""Copy finished runs' metrics.json into an experiment's recorded results, without machine-specific paths.

    python experiments/record_runs.py OUT_DIR RUN_DIR...   → OUT_DIR/<run dir name>.json for each run

``best_checkpoint`` (an absolute path in metrics.json) is written relative to the repository root, and the
run's command-line overrides (``.hydra/overrides.yaml``) are added as ``overrides`` so each record says how
it was made, an absolute path given as a value (``model.init_from=/.../logs/...``, ``paths.data_dir=/.../data``)
written relative to the repository root too (``../shared/data`` for a folder beside it).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import yaml

# An absolute path inside an override's value: at its start or after a bracket, brace, comma, colon, quote or space
# (a single path, a [a,b] list, a {k:v} dict), up to the next of those.
_ABSOLUTE = re.compile(r"(?:(?<=^)|(?<=[\[{,:'\" ]))/[^\]},'\" ]+")


def _relative(override: str) -> str:
    """An override with every absolute path in its value made relative to the working folder."""
    key, eq, value = override.partition("=")
    if not eq:
        return override
    return f"{key}=" + _ABSOLUTE.sub(lambda m: os.path.relpath(m.group()), value)


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for run_dir in map(Path, argv[1:]):
        source = run_dir / "metrics.json"
        if not source.is_file():
            print(f"record_runs: {source} missing (the run did not finish); skipped", file=sys.stderr)
            continue
        metrics = json.loads(source.read_text())
        if metrics.get("best_checkpoint"):
            metrics["best_checkpoint"] = os.path.relpath(metrics["best_checkpoint"])
        overrides = run_dir / ".hydra" / "overrides.yaml"
        if overrides.is_file():
            metrics["overrides"] = [_relative(item) for item in yaml.safe_load(overrides.read_text())]
        (out / f"{run_dir.name}.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
