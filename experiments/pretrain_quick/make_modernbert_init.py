"""A randomly initialised ModernBERT folder (transformers' initialisation, torch seed 0) with a bertlab run's
WordPiece tokenizer: the start of the recorded attempt ``modernbert_4x128`` (docs/pretraining.md), which pre-trained
with ``MODEL=auto PRETRAIN_OVERRIDES="model.pretrained=<this folder> ..."``. Its network is ``model=modernbert_tiny``'s
(4 layers, hidden 128, 2 heads, GeGLU 256, every layer global, no dropout); ``model=modernbert_tiny`` builds the
same network with bertlab's own initialisation (the same truncated-normal scheme).

    python experiments/pretrain_quick/make_modernbert_init.py TOKENIZER_DIR OUT_DIR [--layers 4 --hidden 128 --intermediate 256]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tokenizer", type=Path, help="a bertlab run's tokenizer/ folder (WordPiece)")
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--intermediate", type=int, default=256)
    args = parser.parse_args()
    import torch
    import transformers
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(args.tokenizer / "tokenizer.json"))
    vocab = tokenizer.get_vocab()
    config = transformers.ModernBertConfig(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // 64, intermediate_size=args.intermediate, max_position_embeddings=512,
        local_attention=128, global_attn_every_n_layers=1, pad_token_id=vocab["[PAD]"], cls_token_id=vocab["[CLS]"],
        sep_token_id=vocab["[SEP]"], bos_token_id=vocab["[CLS]"], eos_token_id=vocab["[SEP]"], mlp_dropout=0.0,
        attention_dropout=0.0)
    torch.manual_seed(0)
    transformers.AutoModel.from_config(config).save_pretrained(args.out)
    for f in args.tokenizer.iterdir():
        shutil.copy(f, args.out / f.name)
    print(args.out)


if __name__ == "__main__":
    main()
