"""``python -m bertlab.predict RUN_DIR_OR_CKPT [FILE|-]``: one JSON record per input line (see
:mod:`bertlab.inference.predictor` for the records, :mod:`bertlab.inference.inputs` for the input formats)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from bertlab.inference.text import BACKENDS, FORMATS
from bertlab.runtime.exits import user_errors
from bertlab.runtime.files import atomic_path, refuse_writing_over, writing
from bertlab.runtime.outputs import refuse_replacing_bertlab_files

log = logging.getLogger(__name__)


def _special(path: Path) -> bool:
    """A device or a pipe (``/dev/stdout``): not a file that could be replaced through a temporary one."""
    return path.exists() and not path.is_file() and not path.is_dir()


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
                        help="cpu, cuda, cuda:1 ... for a PyTorch model (default: cuda when available, else cpu); an "
                             "ONNX export runs on the cpu")
    parser.add_argument("--backend", default="auto", choices=BACKENDS,
                        help="auto (what the folder holds: an ONNX export's gated int8 graph, else its fp32 one, "
                             "else PyTorch), torch, onnx or onnx-int8")
    parser.add_argument("--output-format", default="auto", choices=("auto", "jsonl", "npy"),
                        help="an embedding model's output: jsonl records, or npy (OUT.npy, a float32 matrix, and "
                             "OUT.ids.txt); auto (default): npy for an --output ending in .npy or an input of more "
                             "than 10,000 texts, else jsonl")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    args = parser.parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    logging.getLogger("bertlab").setLevel(logging.INFO)
    # Here, not at the top: --help and argument errors answer at once. None of these imports torch: a PyTorch
    # model loads it when it is loaded, an ONNX export never does.
    from bertlab.inference.embedding_output import npy_paths, output_kind, write_npy
    from bertlab.inference.inputs import model_files, read_inputs, write_records
    from bertlab.inference.predictor import Predictor
    from bertlab.runtime.logs import configure_console

    configure_console("normal")  # a user error is printed once, as its paragraph, not logged again

    def guard(output: str | Path) -> None:
        """Before any work: an output must not be the input or a file of the model, nor of a run or export."""
        reads = ([(Path(args.input), "the input file")] if args.input != "-" else []) + model_files(args.model)
        refuse_writing_over(output, reads, f"--output {args.output}",
                            "Give --output a file of its own (e.g. --output predictions.jsonl)")
        if not _special(Path(output)):
            refuse_replacing_bertlab_files(
                output, f"--output {args.output}", "Give --output a file outside run and export folders "
                "(or a new file under <run>/predictions/)")

    with user_errors():
        if args.output:
            guard(args.output)
        predictor = Predictor.from_run(args.model, device=args.device or "auto", batch_size=args.batch_size,
                                       backend=args.backend)
        items, total = read_inputs(args.input, predictor.task.family, predictor.settings, args.format)
        kind = output_kind(args.output_format, args.output, predictor.task.family, total)
        if kind == "npy":  # an embedding matrix and its ids (bertlab.inference.embedding_output: the rule)
            for path in npy_paths(args.output):
                guard(path)
            with writing(args.output, "the embeddings", "give --output a path on a disk with room"):
                count, npy = write_npy(predictor, items, total, os.path.realpath(Path(args.output).expanduser()),
                                       not args.no_progress)
            log.info("%d embeddings → %s (ids in %s) (%s)", count, npy, npy_paths(npy)[1], predictor.source)
            return
        if args.output and _special(Path(args.output)):  # /dev/stdout, a named pipe: written as it is
            with open(args.output, "w", encoding="utf-8") as f:
                count = write_records(predictor, items, f, total, not args.no_progress)
        elif args.output:
            out_path = Path(os.path.realpath(Path(args.output).expanduser()))  # through a link to its target
            with writing(args.output, "the predictions", "give --output a path on a disk with room"):
                out_path.parent.mkdir(parents=True, exist_ok=True)
                # Through a temporary file: a failed or stopped prediction leaves the previous output whole.
                with atomic_path(out_path) as tmp, open(tmp, "w", encoding="utf-8") as f:
                    count = write_records(predictor, items, f, total, not args.no_progress)
        else:
            count = write_records(predictor, items, sys.stdout, total, not args.no_progress)
        log.info("%d examples → %s (%s)", count, args.output or "standard output", predictor.source)


if __name__ == "__main__":
    main()
