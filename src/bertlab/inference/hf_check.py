"""The gate of a Hugging Face export: transformers, loading the exported folder the standard way, must predict
what the run predicts, or the export fails.

"The standard way" is what a transformers user writes: ``AutoTokenizer.from_pretrained(folder)`` and the head's
``AutoModelFor*.from_pretrained(folder)``, pre-split words with ``is_split_into_words=True``, and for raw text
to classify the ``text-classification`` / ``token-classification`` pipeline. "The run" is the checkpoint as bertlab
computes it, on inputs its own tokenizer (the run's ``tokenizer/``) encodes.

The probes cover what tends to break: single texts and pairs, a batch of one and a padded batch, accents and
punctuation, and a long input (as many tokens as the run's ``max_seq_length`` allows, so past a local attention
window). The export fails (:class:`~bertlab.runtime.errors.CheckpointError`, exit status 1) when transformers'
tokenizer gives other ids, when a logit differs by more than :data:`TOLERANCE`, or when a predicted label (the
argmax; the pipeline's label, a word's tag) differs. Heads no transformers class computes (bertlab's own head
file) and a machine without transformers are not checked, and the export says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertlab.data.tokenizer import EncoderTokenizer, load_tokenizer
from bertlab.inference.text import split_words
from bertlab.runtime.errors import CheckpointError
from bertlab.runtime.model_folders import auto_from_pretrained, task_pipeline

log = logging.getLogger(__name__)

TOLERANCE = 1e-4  # max |Δlogit| allowed between transformers and bertlab (float32 on CPU)
AUTO_CLASSES = {"sequence": "AutoModelForSequenceClassification", "token": "AutoModelForTokenClassification",
                "span": "AutoModelForQuestionAnswering", "multiple_choice": "AutoModelForMultipleChoice",
                "mlm": "AutoModelForMaskedLM", "pretraining": "AutoModelForPreTraining"}
PROBES = (
    "a gorgeous, witty and moving film.",
    "John Smith visited New York in 2019 -- and loved it!",
    "Ünïcode ACCENTS, Mixed-Case & punctuation (\"quoted\") ...",
    "x",
)
_LONG_WORDS = ("the plot of this long story moves from Paris to Tokyo , then back to a small village where "
               "nothing much happens until the last act , which is surprisingly tender and funny .").split()


@dataclass
class ParityReport:
    """What the gate compared: ``checked`` False with the ``reason`` when it could not run."""

    checked: bool
    reason: str = ""
    architecture: str = ""
    inputs: int = 0
    max_delta: float = 0.0
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        if not self.checked:
            return f"transformers check NOT run: {self.reason}"
        return (f"transformers check passed: AutoTokenizer + {self.architecture} on {self.inputs} probe inputs, "
                f"max |Δlogit| {self.max_delta:.2e} (limit {TOLERANCE:g}), the same predictions")


def check_transformers_parity(loaded: Any, tokenizer_dir: Path, out_dir: Path,
                              shown: Path | None = None) -> ParityReport:
    """Compare the export in ``out_dir`` loaded by transformers with ``loaded`` (a ``CheckpointModel``) and the
    run's tokenizer in ``tokenizer_dir``; raise :class:`CheckpointError` on any difference (module docstring).
    ``shown``: the folder the error names when ``out_dir`` is a temporary one that replaces it only if it passes
    (then the error says the export was not written)."""
    head_kind = loaded.model.head_kind
    if head_kind not in AUTO_CLASSES or getattr(loaded.model.bert, "generic", False):
        report = ParityReport(False, "no transformers class computes this head (the export holds bertlab's own "
                                     "head file); bertlab.predict on the folder computes it")
        log.info("export: %s", report.line())
        return report
    try:
        import transformers
    except ImportError:
        report = ParityReport(False, "transformers is not installed, so the export could not be loaded the way a "
                                     "transformers user loads it (pip install transformers, then export again)")
        log.warning("export: %s", report.line())
        return report
    ours = load_tokenizer(tokenizer_dir)
    hf_tok = auto_from_pretrained("AutoTokenizer", out_dir)
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar in the export's output
    try:
        hf_model = auto_from_pretrained(AUTO_CLASSES[head_kind], out_dir).eval()
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    report = ParityReport(True, architecture=type(hf_model).__name__)
    limit = _length_limit(loaded, ours)
    for name, inputs in _probes(loaded, ours, limit).items():
        for batch in (inputs, *([item] for item in inputs)):  # the padded batch, then each input alone
            _compare(loaded, ours, hf_tok, hf_model, name, batch, report)
    if head_kind == "sequence" and not loaded.task.regression or head_kind == "token":
        _compare_pipeline(loaded, ours, hf_tok, hf_model, _probes(loaded, ours, limit), report)
    if report.failures:
        listed = "; ".join(report.failures[:3]) + (f"; … ({len(report.failures)} in all)"
                                                    if len(report.failures) > 3 else "")
        fate = (f"The export was not written ({shown} is as it was)" if shown is not None
                else "The folder must not be used as it is")
        raise CheckpointError(
            f"{shown or out_dir}: transformers, loading this export the standard way (AutoTokenizer + "
            f"{AUTO_CLASSES[head_kind]}), does not compute what the run computes: {listed}. {fate}; predict with "
            f"the run itself (python -m bertlab.predict {loaded.path}) and report this as a bertlab bug, with the "
            "run's config")
    log.info("export: %s", report.line())
    return report


def _length_limit(loaded: Any, tokenizer: EncoderTokenizer) -> int:
    """The longest probe, in tokens: the run's max_seq_length, within the encoder's positions (RoBERTa-style
    positions start after the padding index)."""
    data = (loaded.hparams.get("config") or {}).get("data") or {}
    config = loaded.model.bert.config
    positions = getattr(config, "max_sequence_length", None) or 512  # the family's rule (RoBERTa's offset included)
    return max(8, min(int(data.get("max_seq_length") or tokenizer.model_max_length or 512), positions))


def _fit(tokenizer: EncoderTokenizer, text: str, limit: int, pair_with: str | None = None) -> str:
    """The longest start of ``text`` (whole words) that fits ``limit`` tokens, ``pair_with`` as the pair's first."""
    words = text.split(" ")
    lo, hi = 1, len(words)
    while lo < hi:  # the most words that fit
        mid = (lo + hi + 1) // 2
        part = " ".join(words[:mid])
        enc = tokenizer.encode_batch([pair_with] if pair_with is not None else [part],
                                     [part] if pair_with is not None else None)[0]
        lo, hi = (mid, hi) if len(enc.ids) <= limit else (lo, mid - 1)
    return " ".join(words[:lo])


def _long_text(tokenizer: EncoderTokenizer, limit: int, pair_with: str | None = None) -> str:
    """As many words of a long text as fit ``limit`` tokens (with ``pair_with`` as the first text of a pair)."""
    return _fit(tokenizer, " ".join(_LONG_WORDS[i % len(_LONG_WORDS)] for i in range(4 * limit)), limit, pair_with)


def _probes(loaded: Any, tokenizer: EncoderTokenizer, limit: int) -> dict[str, list[Any]]:
    """Probe inputs by kind: ``text`` (str), ``pair`` ((a, b)), ``words`` (list of words), ``choices``
    ((context, [endings])); each within ``limit`` tokens."""
    probes = _raw_probes(loaded, tokenizer, limit)
    short = max(2, limit // 2 - 2)  # the first text of a pair: half the room at most
    for name, items in probes.items():
        if name == "text":
            probes[name] = [_fit(tokenizer, t, limit) for t in items]
        elif name in ("pair", "choices"):
            fitted = []
            for first, second in items:
                first = _fit(tokenizer, first, short)
                second = _fit(tokenizer, second, limit, first) if name == "pair" \
                    else [_fit(tokenizer, ending, limit, first) for ending in second]
                fitted.append((first, second))
            probes[name] = fitted
        else:
            for words in items:
                while len(words) > 1 and len(tokenizer.encode_words_batch([words])[0].ids) > limit:
                    words.pop()
    return probes


def _raw_probes(loaded: Any, tokenizer: EncoderTokenizer, limit: int) -> dict[str, list[Any]]:
    head_kind = loaded.model.head_kind
    long_text = _long_text(tokenizer, limit)
    if head_kind == "token":
        return {"words": [[w for w, _ in split_words(t)] for t in (*PROBES, long_text)]}
    if head_kind == "span":
        question = "Where does the story move to?"
        return {"pair": [(question, PROBES[1]), (PROBES[3], PROBES[0]),
                         (question, _long_text(tokenizer, limit, question))]}
    if head_kind == "multiple_choice":
        return {"choices": [(PROBES[0], ["it was good.", "it was bad.", "x"]),
                            (PROBES[1], ["he stayed home.", "Ünïcode ACCENTS", "he went to Paris, then Tokyo."])]}
    if head_kind == "mlm":
        mask = tokenizer.tokenizer.id_to_token(tokenizer.mask_id) if tokenizer.mask_id is not None else None
        texts = [t.replace("witty", mask) if mask else t for t in PROBES] + [long_text]
        return {"text": texts}
    pairs = [(PROBES[0], PROBES[1]), (PROBES[2], PROBES[3]), (PROBES[3], _long_text(tokenizer, limit, PROBES[3]))]
    return {"text": [*PROBES, long_text], "pair": pairs}


def _ours_encode(tokenizer: EncoderTokenizer, name: str, batch: list[Any]) -> list[Any]:
    if name == "words":
        return tokenizer.encode_words_batch(batch)
    if name == "pair":
        return tokenizer.encode_batch([a for a, _ in batch], [b for _, b in batch])
    if name == "choices":
        return [tokenizer.encode_batch([ctx] * len(ends), ends) for ctx, ends in batch]
    return tokenizer.encode_batch(batch)


def _hf_encode(hf_tok: Any, name: str, batch: list[Any]) -> Any:
    if name == "words":
        return hf_tok(batch, is_split_into_words=True, padding=True, return_tensors="pt")
    if name == "pair":
        return hf_tok([a for a, _ in batch], [b for _, b in batch], padding=True, return_tensors="pt")
    if name == "choices":
        flat = hf_tok([ctx for ctx, ends in batch for _ in ends], [e for _, ends in batch for e in ends],
                      padding=True, return_tensors="pt")
        return {k: v.view(len(batch), -1, v.shape[-1]) for k, v in flat.items()}
    return hf_tok(batch, padding=True, return_tensors="pt")


def _padded(encodings: list[Any], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(e.ids) for e in encodings)
    ids = torch.full((len(encodings), width), pad_id, dtype=torch.long)
    types = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for i, e in enumerate(encodings):
        ids[i, :len(e.ids)] = torch.tensor(e.ids)
        types[i, :len(e.ids)] = torch.tensor(e.type_ids)
        mask[i, :len(e.ids)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _ours_outputs(loaded: Any, tokenizer: EncoderTokenizer, name: str, batch: list[Any]):
    """bertlab's outputs, as named (B, ...) arrays, and the unpadded ids per input."""
    encoded = _ours_encode(tokenizer, name, batch)
    if name == "choices":
        rows = [e for group in encoded for e in group]
        flat = _padded(rows, tokenizer.pad_id)
        tensors = {k: v.view(len(batch), -1, v.shape[-1]) for k, v in flat.items()}
        ids = [[e.ids for e in group] for group in encoded]
        kwargs = {"num_choices": tensors["input_ids"].shape[1]}
    else:
        tensors, ids, kwargs = _padded(encoded, tokenizer.pad_id), [e.ids for e in encoded], {}
    with torch.no_grad():
        out = loaded.model(tensors, **kwargs)
    head_kind = loaded.model.head_kind
    if head_kind == "span":
        named = {"start_logits": out[..., 0], "end_logits": out[..., 1]}
    elif head_kind == "mlm":
        named = {"logits": out[0]}
    elif head_kind == "pretraining":
        named = {"prediction_logits": out[0], "seq_relationship_logits": out[1]}
    else:
        named = {"logits": out}
    return {k: v.float().numpy() for k, v in named.items()}, ids, tensors["attention_mask"]


def _unpadded(hf_batch: Any, name: str) -> list[Any]:
    ids, mask = hf_batch["input_ids"], hf_batch["attention_mask"]
    if name == "choices":
        return [[row[m.bool()].tolist() for row, m in zip(group, gmask)] for group, gmask in zip(ids, mask)]
    return [row[m.bool()].tolist() for row, m in zip(ids, mask)]


def _compare(loaded: Any, ours: EncoderTokenizer, hf_tok: Any, hf_model: Any, name: str, batch: list[Any],
             report: ParityReport) -> None:
    what = f"{name} input{'s' if len(batch) > 1 else ''} {_show(batch[0])}" + \
        (f" (+{len(batch) - 1} more, padded together)" if len(batch) > 1 else " (a batch of one)")
    our_out, our_ids, mask = _ours_outputs(loaded, ours, name, batch)
    hf_batch = _hf_encode(hf_tok, name, batch)
    if _unpadded(hf_batch, name) != our_ids:
        report.failures.append(f"AutoTokenizer gives other token ids than bertlab for the {what}")
        return
    accepted = set(getattr(hf_tok, "model_input_names", ()) or ("input_ids", "attention_mask"))
    with torch.no_grad():
        hf_out = hf_model(**{k: v for k, v in hf_batch.items() if k in accepted})
    report.inputs += len(batch) if len(batch) > 1 else 0
    valid = mask.bool().numpy()
    for key, want in our_out.items():
        got = getattr(hf_out, key).float().numpy()
        if got.shape != want.shape:
            report.failures.append(f"{key} of shape {got.shape} in transformers, {want.shape} in bertlab ({what})")
            continue
        if got.ndim >= 2 and got.shape[:2] == valid.shape and key != "seq_relationship_logits":
            got, want = got[valid], want[valid]  # token-level outputs: padding positions do not count
        if not got.size:
            continue
        delta = float(np.max(np.abs(got - want)))
        report.max_delta = max(report.max_delta, delta)
        if delta > TOLERANCE:
            report.failures.append(f"max |Δ{key}| {delta:.2e} > {TOLERANCE:g} on the {what}")
        elif got.shape[-1] > 1 and (got.argmax(-1) != want.argmax(-1)).any():
            report.failures.append(f"another argmax of {key} on the {what}")


def _compare_pipeline(loaded: Any, ours: EncoderTokenizer, hf_tok: Any, hf_model: Any,
                      probes: dict[str, list[Any]], report: ParityReport) -> None:
    """Raw text through transformers' pipeline: the label of each text (text classification), the tag of each
    token of space-separated words (token classification), as bertlab predicts them."""
    labels = loaded.labels or []
    if loaded.model.head_kind == "sequence":
        texts = probes["text"]
        pipe = task_pipeline("text-classification", hf_model, hf_tok)
        got = [r["label"] for r in pipe(texts)]
        want = [labels[i] if i < len(labels) else str(i)
                for i in _ours_outputs(loaded, ours, "text", texts)[0]["logits"].argmax(-1)]
    else:
        sentences = probes["words"]
        pipe = task_pipeline("token-classification", hf_model, hf_tok)
        got = [[r["entity"] for r in pipe(" ".join(words), ignore_labels=[])] for words in sentences]
        want = []
        for words in sentences:
            out = _ours_outputs(loaded, ours, "words", [words])[0]["logits"][0]
            special = ours.encode_words_batch([words])[0].special_tokens_mask  # [CLS], [SEP]: not in the pipeline
            want.append([labels[int(k)] for s, k in zip(special, out.argmax(-1)) if not s])
    report.inputs += len(got)
    for text, a, b in zip(probes.get("text") or probes["words"], got, want):
        if a != b:
            report.failures.append(f"the {loaded.model.head_kind} pipeline predicts {_show(a)} for {_show(text)}, "
                                   f"bertlab {_show(b)}")


def _show(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 1] + "…"
