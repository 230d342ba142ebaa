"""Tiny random checkpoints of every encoder family, built offline (config → model → save_pretrained), each with a
WordPiece tokenizer trained on a text file beside it (DeBERTa-v3: a SentencePiece spm.model, as its hub folders):
what docs/models.md's family examples and the family tests run on when no hub weights can be downloaded.

    python experiments/families/make_tiny.py OUT_DIR [--text FILE] [--types roberta distilbert electra ...]

Each OUT_DIR/<model_type>/ is a Hugging Face folder that `model=auto model.pretrained=OUT_DIR/<model_type>` trains.
Random weights: a run on them shows the machinery (family, heads, export), not accuracy.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from bertlab.data.tokenizer import train_wordpiece

SIZES = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


# DeBERTa-v3's relative attention (microsoft/deberta-v3-base's config.json).
DEBERTA_V3 = dict(relative_attention=True, position_biased_input=False, pos_att_type=["p2c", "c2p"],
                  position_buckets=256, max_relative_positions=-1, share_att_key=True, norm_rel_ebd="layer_norm",
                  type_vocab_size=0, layer_norm_eps=1e-7)


def make_deberta(folder: Path, texts: list[str]) -> Path:
    """DeBERTa-v3 as the hub ships it: weights and a SentencePiece spm.model (300 pieces: the sample text holds no
    more; no tokenizer.json, bertlab converts it), [MASK] after the pieces (added_tokens.json). Needs the
    sentencepiece package to train the model."""
    import io
    import json

    import sentencepiece
    import transformers

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=300, model_type="unigram", pad_id=0,
        pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2, eos_piece="[SEP]", unk_id=3, unk_piece="[UNK]",
        minloglevel=2)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spm.model").write_bytes(model.getvalue())
    (folder / "added_tokens.json").write_text(json.dumps({"[MASK]": 300}) + "\n")
    config = transformers.DebertaV2Config(vocab_size=320, max_position_embeddings=512, **SIZES, **DEBERTA_V3)
    torch.manual_seed(0)
    transformers.DebertaV2Model(config).save_pretrained(folder)
    return folder


def make(out: Path, model_type: str, texts: list[str]) -> Path:
    import transformers

    folder = out / model_type
    if model_type == "deberta-v2":
        return make_deberta(folder, texts)
    tok = train_wordpiece(texts, vocab_size=2000)
    kw = dict(SIZES)
    if model_type == "distilbert":
        kw = dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128)
    if model_type == "electra":
        kw["embedding_size"] = 32
    if model_type == "modernbert":  # 3 layers (global, local, global), 16-token local windows; the ids of the vocab
        kw.update(num_hidden_layers=3, intermediate_size=96, local_attention=16, global_attn_every_n_layers=2,
                  cls_token_id=tok.cls_id, sep_token_id=tok.sep_id, bos_token_id=tok.cls_id, eos_token_id=tok.sep_id)
    config = transformers.AutoConfig.for_model(model_type, vocab_size=tok.vocab_size, max_position_embeddings=514,
                                               pad_token_id=0, **kw)
    torch.manual_seed(0)
    transformers.AutoModel.from_config(config).save_pretrained(folder)
    tok.save(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--text", type=Path, default=Path(__file__).resolve().parents[2] / "src" / "bertlab" /
                        "samples" / "sst2" / "train.tsv", help="text to train the WordPiece vocabulary on")
    parser.add_argument("--types", nargs="+", default=["roberta", "xlm-roberta", "distilbert", "electra", "modernbert",
                                                         "deberta-v2", "mpnet"])
    args = parser.parse_args()
    texts = [line.split("\t")[0] for line in args.text.read_text(encoding="utf-8").splitlines()[1:]]
    for model_type in args.types:
        print(make(args.out, model_type, texts))


if __name__ == "__main__":
    main()
