"""Models bertlab accepts as encoders: an allowlist (``bertlab.models.families.encoder_refusal``), not a list of
decoder name prefixes. A model_type is accepted when it is a native family or transformers has a masked-LM class
for it and no sequence-to-sequence one, and its config.json sets no decoder flag; everything else is refused
with one paragraph before any weights are read. The issue's biogpt and mpt trained as "generic" encoders."""

from __future__ import annotations

import pytest
from conftest import run_train, tiny_hf_folder

from bertlab.models.families import (
    DECODER_FLAGS,
    encoder_refusal,
    families,
    is_encoder_type,
    known_encoder_types,
)
from bertlab.runtime.errors import CheckpointError, ConfigError

transformers = pytest.importorskip("transformers")
from transformers.models.auto import modeling_auto as auto  # noqa: E402

# Decoder-only and encoder-decoder types, most of them outside the issue (and outside the old prefix list:
# biogpt, mpt, xlnet, reformer-as-decoder, codegen's cousins, ...).
DECODERS = ["biogpt", "mpt", "gpt2", "llama", "opt", "bloom", "falcon", "qwen2", "gpt_neox", "xglm", "xlnet",
            "gpt_bigcode", "bart", "t5", "pegasus", "marian", "mamba", "recurrent_gemma"]
ENCODERS = ["convbert", "mpnet", "albert", "camembert", "roformer", "squeezebert", "xlm", "deberta", "ibert"]


def test_the_allowlist_holds_no_decoder_of_transformers():
    known = known_encoder_types()
    causal_only = set(auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - set(auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    seq2seq = set(auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
    assert not known & causal_only and not known & seq2seq
    assert {*families(), *ENCODERS} <= known


@pytest.mark.parametrize("model_type", DECODERS)
def test_decoders_are_refused_before_any_weights_are_read(model_type, tmp_path):
    """config.json alone (no weights): the refusal comes first, names the file and the model_type."""
    from bertlab.models.families.generic import AutoEncoder

    folder = tiny_hf_folder(tmp_path / model_type, model_type, weights=False)
    assert not is_encoder_type(model_type)
    with pytest.raises(ConfigError, match=rf"config\.json: model_type '{model_type}' is not an encoder") as err:
        AutoEncoder.from_pretrained(folder)
    assert "bidirectional" in str(err.value) and "Traceback" not in str(err.value)


@pytest.mark.parametrize("flag", DECODER_FLAGS)
def test_an_encoder_type_configured_as_a_decoder_is_refused(flag, tmp_path):
    """camembert (and bert) have causal-LM classes too: the same encoder run with is_decoder=true."""
    from bertlab.models.families.generic import AutoEncoder

    assert encoder_refusal("camembert", {flag: True}) is not None
    assert encoder_refusal("camembert", {flag: False}) is None
    folder = tmp_path / "camembert"
    folder.mkdir()
    (folder / "config.json").write_text(f'{{"model_type": "camembert", "{flag}": true}}')
    with pytest.raises(ConfigError, match=f"key '{flag}' is true"):
        AutoEncoder.from_pretrained(folder)


@pytest.mark.parametrize("model_type", ["biogpt", "mpt", "opt"])
def test_train_refuses_a_decoder_checkpoint(model_type, tmp_path):
    """The issue's two and a fresh one, through train.py: an error, no run."""
    folder = tiny_hf_folder(tmp_path / model_type, model_type, weights=False)
    from bertlab.data.tokenizer import train_wordpiece

    train_wordpiece(["a b c", "d e f"] * 4, vocab_size=50).save(folder)
    with pytest.raises((ConfigError, CheckpointError), match="is not an encoder"):
        run_train(["model=auto", f"model.pretrained={folder}", "task=sst2", "trainer.max_epochs=1"],
                  tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("model_type", ENCODERS)
def test_encoders_are_accepted_and_run(model_type, tmp_path):
    import torch

    from bertlab.models.families.generic import AutoEncoder

    encoder = AutoEncoder.from_pretrained(tiny_hf_folder(tmp_path / model_type, model_type)).eval()
    with torch.no_grad():
        out = encoder(torch.tensor([[2, 7, 8, 9, 3]]))
    assert out.last_hidden_state.shape[:2] == (1, 5)


def test_xlm_trained_as_a_causal_lm_is_refused(tmp_path):
    """XLM's config names its causal variant with its own key (``causal``), not is_decoder."""
    from bertlab.models.families.generic import AutoEncoder

    folder = tiny_hf_folder(tmp_path / "xlm", "xlm", causal=True)
    with pytest.raises(ConfigError, match="key 'causal' is true"):
        AutoEncoder.from_pretrained(folder)
