"""``python -m bertlab.export CKPT OUT``: a bertlab checkpoint as a Hugging Face folder (see
:mod:`bertlab.inference.export` for what the folder holds)."""

from __future__ import annotations

import argparse
import json
import logging


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bertlab.export",
        description="Write a bertlab checkpoint as a Hugging Face folder (config.json, model.safetensors, "
                    "tokenizer files).",
    )
    parser.add_argument("ckpt", help="a bertlab .ckpt file, or a run dir (its best checkpoint)")
    parser.add_argument("out", help="the folder to write")
    parser.add_argument("--tokenizer", default=None,
                        help="tokenizer folder (default: <run_dir>/tokenizer next to the checkpoint)")
    parser.add_argument("--format", default="hf", choices=("hf", "onnx"),
                        help="hf (default): a transformers folder; onnx: an ONNX graph with the quality gate")
    parser.add_argument("--quantize", default=None, choices=("int8",),
                        help="with --format onnx: also an int8 graph (one activation scale per token), gated on the dev set")
    parser.add_argument("--max-drop", type=float, default=1.0,
                        help="points of the task metric the int8 graph may lose on the run's dev set (default 1)")
    parser.add_argument("--force", action="store_true", help="keep an int8 graph that fails the gate")
    parser.add_argument("--no-dev-check", action="store_true",
                        help="skip the dev-set check (no gate: only the graph is written)")
    parser.add_argument("--overwrite", action="store_true",
                        help="export into a folder that is not empty, replacing files of the export's names")
    args = parser.parse_args(argv)
    # Imported here, not at the top: they load torch (seconds), and --help or a wrong argument answers at once.
    from bertlab.inference.export import export_checkpoint
    from bertlab.inference.layout import HEAD_CONFIG_NAME, HEAD_WEIGHTS_NAME
    from bertlab.inference.onnx import export_onnx, gate_line
    from bertlab.models.hf_weights import CONFIG_NAME
    from bertlab.runtime.console import configure_console
    from bertlab.runtime.exits import user_errors

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    configure_console("normal")  # a user error is printed once, as its paragraph, not logged again
    if args.format == "onnx":
        with user_errors():
            report = export_onnx(args.ckpt, args.out, quantize=args.quantize, max_drop=args.max_drop,
                                 force=args.force, check_dev=not args.no_dev_check, tokenizer_dir=args.tokenizer,
                                 overwrite=args.overwrite)
        print(f"exported ONNX to {args.out}" + (f": {gate_line(report)}" if gate_line(report) else ""))
        return
    if args.quantize:
        parser.error("--quantize needs --format onnx")
    with user_errors():
        out = export_checkpoint(args.ckpt, args.out, tokenizer_dir=args.tokenizer, overwrite=args.overwrite)
    config = json.loads((out / CONFIG_NAME).read_text())
    print(f"exported {config['architectures'][0]} to {out}")
    if (out / HEAD_CONFIG_NAME).is_file():
        print(f"NOTE: the head has no transformers class; its tensors are in {out / HEAD_WEIGHTS_NAME}")


if __name__ == "__main__":
    main()
