"""Average the weights of runs that share a start (a "model soup") into a new run dir copied from the first.

    python experiments/long_documents/average_runs.py OUT_RUN_DIR RUN_DIR RUN_DIR [...]

Every floating-point tensor of the runs' best checkpoints is averaged; the rest (the first run's optimizer state,
settings, tokenizer) is the first run's. The result predicts as a run dir (analyze.py, bertlab.predict).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args()
    import torch

    from bertlab.inference.export import resolve_checkpoint
    from bertlab.training.checkpoint_files import read_checkpoint

    shutil.rmtree(args.out, ignore_errors=True)
    shutil.copytree(args.runs[0], args.out, ignore=shutil.ignore_patterns("checkpoints"))
    ckpts = [read_checkpoint(resolve_checkpoint(run)) for run in args.runs]  # tensors and plain values only
    averaged = ckpts[0]
    for key, value in averaged["state_dict"].items():
        if value.is_floating_point():
            averaged["state_dict"][key] = sum(c["state_dict"][key] for c in ckpts) / len(ckpts)
    (args.out / "checkpoints").mkdir()
    torch.save(averaged, args.out / "checkpoints" / "last.ckpt")
    print(args.out)


if __name__ == "__main__":
    main()
