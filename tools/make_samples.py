"""Generate bertlab's bundled sample datasets and the unit-test fixtures: ``python tools/make_samples.py
[--only fixtures|samples] [--check]`` (what they are and every option: tools/samples/cli.py, ``--help``)."""

from __future__ import annotations

import sys
from pathlib import Path

# The generator is the package tools/samples/ beside this script (one module per data set; samples.cli the
# command line); this file keeps `python tools/make_samples.py ...` and `import make_samples` working.
TOOLS = str(Path(__file__).resolve().parent)
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

from samples.cli import BUILDERS, differences, generate, main, write  # noqa: E402

__all__ = ["BUILDERS", "differences", "generate", "main", "write"]

if __name__ == "__main__":
    sys.exit(main())
