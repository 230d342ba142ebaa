"""Generate bertlab's bundled sample datasets and the unit-test fixtures.

Every sentence, name, paragraph and article in these files is invented: this script builds them from
templates and word lists written for bertlab, seeded so that a rerun reproduces the files byte for byte.
Each dataset copies the file format of the public benchmark it stands in for (SST-2, MRPC and RTE in GLUE
TSV form, CoNLL-2003, WNUT-17, SQuAD v1.1, WikiText-2), so the same readers work on both.

    python tools/make_samples.py                  # writes src/bertlab/samples/ and tests/fixtures/data/
    python tools/make_samples.py --only fixtures  # just the test fixtures
    python tools/make_samples.py --check          # exit 1 if the committed files differ from a fresh run

The samples are for smoke runs and demos, not for reporting results.
"""

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
