"""Where a windows run loses documents: each dev document's windows classified one at a time, as if each were a
document of its own, against the document's answer.

    python experiments/long_documents/windows_alone.py RUN_DIR DATA_DIR

RUN_DIR is a finished ``data.long_text=windows`` run of the study, DATA_DIR make_data.py's output (its dev.tsv
carries each decider's characters). The windows are cut as the run cuts them (its window and stride); a window
"holds the decider" when the decider's characters lie wholly inside it. Prints the document accuracy, how often
the decider's window alone gets the label right, how confident windows without the decider are, and whether each
wrong document had its decider's window right or wrong alone.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from analyze import read_dev  # this script's folder is first on sys.path


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        raise SystemExit(__doc__)
    from bertlab import Predictor
    from bertlab.data.windows import long_text_stride, window_bounds

    run, data = Path(argv[0]), Path(argv[1])
    rows = read_dev(data / "dev.tsv")
    predictor = Predictor.from_run(run)
    tokenizer = predictor.tokenizer
    window = predictor.settings.max_seq_length - tokenizer.num_special_tokens()
    stride = long_text_stride(window, predictor.settings.window_stride)
    texts, owner, holds = [], [], []
    encodings = tokenizer.encode_batch([row["text"] for row in rows], add_special_tokens=False)
    for d, (row, encoding) in enumerate(zip(rows, encodings)):
        offsets = encoding.offsets
        a, b = int(row["decider_start"]), int(row["decider_end"])
        for ws, we in window_bounds(len(offsets), window, stride):
            start, stop = offsets[ws][0], offsets[we - 1][1]
            texts.append(row["text"][start:stop])
            owner.append(d)
            holds.append(start <= a and b <= stop)
    windows = defaultdict(list)
    for d, h, record in zip(owner, holds, predictor(texts)):
        windows[d].append((h, record))
    documents = predictor([r["text"] for r in rows])
    right = [doc["label"] == row["label"] for doc, row in zip(documents, rows)]
    alone: list[bool | None] = []  # per document: its decider's window alone right? (None: no window holds it)
    top_decider, top_other = [], []
    for d, row in enumerate(rows):
        with_decider = [r for h, r in windows[d] if h]
        alone.append(any(r["label"] == row["label"] for r in with_decider) if with_decider else None)
        top_decider += [max(r["scores"].values()) for r in with_decider]
        top_other += [max(r["scores"].values()) for h, r in windows[d] if not h]
    held = [a for a in alone if a is not None]
    errors = Counter("its decider's window alone is wrong too" if a is False else
                     "no window holds the whole decider" if a is None else "its decider's window alone is right"
                     for a, ok in zip(alone, right) if not ok)
    print(f"documents: {len(rows)}, accuracy {sum(right) / len(rows):.3f}")
    print(f"the decider's window alone right: {sum(held)}/{len(held)} = {sum(held) / len(held):.3f}")
    print(f"median top probability of a window alone: with the decider {statistics.median(top_decider):.3f}, "
          f"without {statistics.median(top_other):.3f} ({sum(p > 0.9 for p in top_other)}/{len(top_other)} "
          "without it above 0.9)")
    print("wrong documents: " + ", ".join(f"{n} where {what}" for what, n in errors.most_common()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
