"""``python -m bertlab.predict RUN_DIR_OR_CKPT [FILE|-]``: one JSON record per input line (see
:mod:`bertlab.inference.predictor` for the records, :mod:`bertlab.inference.inputs` for the input formats)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bertlab.inference.text import FORMATS
from bertlab.runtime.errors import user_errors

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bertlab.predict",
        description="Predict with a bertlab run, checkpoint or export; writes one JSON record per input line.",
    )
    parser.add_argument("model", metavar="RUN_DIR_OR_CKPT",
                        help="a run dir (its best checkpoint), a .ckpt file, or an exported Hugging Face folder")
    parser.add_argument("input", nargs="?", default="-", metavar="INPUT_FILE",
                        help="plain text (one example a line), JSONL, or the task's own format; '-' (default) "
                             "reads standard input")
    parser.add_argument("--output", "-o", default=None, help="write the JSONL here instead of standard output")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="inputs per forward pass (default: the run's data.eval_batch_size)")
    parser.add_argument("--format", default="auto", choices=FORMATS,
                        help="how to read INPUT_FILE (default: detected from its name and first lines)")
    parser.add_argument("--device", default=None,
                        help="cpu, cuda, cuda:1 ... (default: cuda when available, else cpu)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    args = parser.parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    logging.getLogger("bertlab").setLevel(logging.INFO)

    import torch  # here, not at the top: --help and argument errors answer without loading torch

    from bertlab.inference.inputs import read_inputs, write_records
    from bertlab.inference.predictor import Predictor

    with user_errors():
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        predictor = Predictor.from_run(args.model, device=device, batch_size=args.batch_size)
        items, total = read_inputs(args.input, predictor.task.family, predictor.settings, args.format)
        if args.output:
            out_path = Path(args.output)
            out_path.parent.mkdir(parents=True, exist_ok=True)
            with open(out_path, "w", encoding="utf-8") as f:
                count = write_records(predictor, items, f, total, not args.no_progress)
        else:
            count = write_records(predictor, items, sys.stdout, total, not args.no_progress)
        log.info("%d examples → %s (%s)", count, args.output or "standard output", predictor.source)


if __name__ == "__main__":
    main()
