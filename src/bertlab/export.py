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
    args = parser.parse_args(argv)
    # Imported here, not at the top: they load torch (seconds), and --help or a wrong argument answers at once.
    from bertlab.inference.export import HEAD_CONFIG_NAME, HEAD_WEIGHTS_NAME, export_checkpoint
    from bertlab.models.hf_weights import CONFIG_NAME

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = export_checkpoint(args.ckpt, args.out, tokenizer_dir=args.tokenizer)
    config = json.loads((out / CONFIG_NAME).read_text())
    print(f"exported {config['architectures'][0]} to {out}")
    if (out / HEAD_CONFIG_NAME).is_file():
        print(f"NOTE: the head has no transformers class; its tensors are in {out / HEAD_WEIGHTS_NAME}")


if __name__ == "__main__":
    main()
