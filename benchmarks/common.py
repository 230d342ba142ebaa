"""Shared pieces of the benchmark scripts: the machine description, timing, child-process measurement, results.

Everything here uses public tools only: ``time.perf_counter`` for wall time, ``os.wait4`` (the child's own
``rusage``) for a subprocess's peak resident memory, ``/proc`` for the machine. Timings are medians of
repeats after warm-up; A/B comparisons interleave their repeats (A, B, A, B, ...) so that a slow stretch
on a shared machine hits both sides alike.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"  # ../shared/data, beside the checkout
RESULTS_DIR = REPO / "benchmarks" / "results"


# --------------------------------------------------------------------------------------------------------
# Machine


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def load_average() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def memory_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return float("nan")


def matmul_peak_gflops(dtype_name: str = "float32", n: int = 2048, repeats: int = 10) -> float:
    """Best-of-``repeats`` GFLOP/s of an ``n × n`` matmul (2·n³ flops) in ``dtype_name``, on torch's threads.

    The best (not the median) is the peak: it is the ceiling MFU is measured against.
    """
    import torch

    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(dtype)
    b = torch.randn(n, n, generator=gen).to(dtype)
    torch.mm(a, b)  # warm-up: thread pool, packing buffers
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


def machine_description(threads: int, peak: bool = True, peak_n: int = 2048) -> dict[str, Any]:
    """What the numbers were measured on: CPU, cores, memory, library versions, threads, load, matmul peak."""
    import torch

    flags = cpu_flags()
    desc: dict[str, Any] = {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "isa": [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags],
        "memory_gib": memory_total_gib(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": threads,
        "load_average": [round(x, 2) for x in load_average()],
    }
    for name in ("transformers", "lightning", "tokenizers"):
        try:
            desc[name] = __import__(name).__version__
        except ImportError:
            desc[name] = None
    if peak:
        torch.set_num_threads(threads)
        desc["matmul_peak_gflops"] = {d: round(matmul_peak_gflops(d, n=peak_n), 1) for d in ("float32", "bfloat16")}
        desc["matmul_peak_size"] = peak_n
    return desc


def set_threads(threads: int) -> None:
    """Pin torch's intra-op pool (and the Rust tokenizer pool via its env var, read when first used)."""
    import torch

    torch.set_num_threads(threads)
    os.environ["RAYON_NUM_THREADS"] = str(threads)


def thread_env(threads: int) -> dict[str, str]:
    """Environment for a child process with ``threads`` compute threads everywhere."""
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
                "RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false",
                "PYTHONHASHSEED": "0", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "WANDB_MODE": "disabled"})
    return env


# --------------------------------------------------------------------------------------------------------
# Timing


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


# Wall time by default. "cpu" (this process's CPU time) is for A/B studies on a busy shared machine, run with
# one thread: it leaves out the time other processes hold the cores (with more threads it counts spin-waits).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def time_once(fn: Callable[[], Any], clock: str = "wall") -> float:
    now = CLOCKS[clock]
    t0 = now()
    fn()
    return now() - t0


def interleaved(fns: Mapping[str, Callable[[], Any]], warmup: int, repeats: int,
                clock: str = "wall") -> dict[str, list[float]]:
    """Seconds per call for each function, repeats interleaved (A B A B ...) after ``warmup`` calls each.

    Interleaving cancels slow drift (another process starting, thermal state) between the sides; the
    order alternates per round so neither side always runs right after the other's allocations.
    """
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            times[name].append(time_once(fns[name], clock))
    return times


# --------------------------------------------------------------------------------------------------------
# Child processes


@dataclass
class ChildRun:
    returncode: int
    wall_s: float
    peak_rss_mib: float
    stdout: str
    stderr: str

    def check(self, what: str) -> ChildRun:
        if self.returncode != 0:
            tail = "\n".join(self.stderr.strip().splitlines()[-30:])
            raise RuntimeError(f"{what} failed with exit code {self.returncode}:\n{tail}")
        return self


def run_child(cmd: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None,
              timeout_s: float | None = None) -> ChildRun:
    """Run ``cmd`` to completion; its wall time and its own peak RSS.

    ``ru_maxrss`` from ``os.wait4`` is the larger of the child's own peak and this process's peak when it forked
    (Linux carries it across fork and exec): above this process's peak it is the child's, exact. Otherwise the
    peak is the child's ``VmHWM`` (its own address space's high-water mark), read from ``/proc`` while it runs.
    """
    out_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_child_{os.getpid()}_{time.monotonic_ns()}"
    with open(f"{out_path}.out", "w+") as out, open(f"{out_path}.err", "w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=dict(env) if env else None,
                                cwd=str(cwd or REPO))
        deadline = None if timeout_s is None else t0 + timeout_s
        parent_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        hwm_kib = 0
        while True:
            hwm_kib = max(hwm_kib, _vm_hwm_kib(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    for suffix in (".out", ".err"):
        Path(f"{out_path}{suffix}").unlink(missing_ok=True)
    peak_kib = usage.ru_maxrss if usage.ru_maxrss > parent_kib or not hwm_kib else hwm_kib
    return ChildRun(proc.returncode, wall, peak_kib / 1024, stdout, stderr)  # KiB → MiB


def _vm_hwm_kib(pid: int) -> int:
    """The process's peak resident set (``VmHWM`` of ``/proc/<pid>/status``, KiB); 0 where unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def time_processes(name: str, commands: Mapping[str, Sequence[str]], threads: int,
                   rounds: int) -> dict[str, dict[str, Any]]:
    """Each command run as a whole process ``rounds`` times, the sides interleaved (load drifts hit each alike):
    per side the median wall seconds, every round's, and the median peak RSS. A failed command stops the
    benchmark with its stderr's end."""
    walls: dict[str, list[float]] = {side: [] for side in commands}
    rss: dict[str, list[float]] = {side: [] for side in commands}
    for _ in range(rounds):
        for side, cmd in commands.items():
            child = run_child(cmd, env=thread_env(threads))
            if child.returncode != 0:
                raise SystemExit(f"{name} {side} failed:\n{child.stderr[-3000:]}")
            walls[side].append(round(child.wall_s, 2))
            rss[side].append(round(child.peak_rss_mib, 1))
    return {side: {"wall_s": median(w), "rounds_s": w, "peak_rss_mib": median(rss[side])} for side, w in walls.items()}


def last_json_line(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            return json.loads(line)
    raise ValueError("no JSON line in the output")


def peak_rss_mib() -> float:
    """This process's own peak RSS so far (MiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --------------------------------------------------------------------------------------------------------
# Results


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (benchmarks draw figures without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def emit(data: Mapping[str, Any], json_out: str | None) -> None:
    """Write ``data`` to ``json_out`` when given, and print it as one JSON line (what run_all reads)."""
    if json_out:
        write_json(Path(json_out), data)
    print(json.dumps(data), flush=True)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(x: Any) -> str:
        if x is None:
            return "—"
        if isinstance(x, float):
            return f"{x:,.2f}" if abs(x) < 100 else f"{x:,.0f}"
        return str(x)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def python() -> str:
    return sys.executable


def onnx_export(run_dir: Path, out: Path, threads: int) -> Path:
    """The run's ONNX export and its int8 graph (kept whatever its gate says: ``--force``; :func:`int8_gate` reads
    the verdict), written fresh into ``out`` (a scratch folder): an export kept from an earlier call could hold
    an older checkpoint of the same run dir."""
    child = run_child([python(), "-m", "bertlab.export", str(run_dir), str(out), "--format", "onnx",
                       "--quantize", "int8", "--force"], env=thread_env(threads))
    if child.returncode != 0:
        raise SystemExit(f"ONNX export of {run_dir} failed:\n{child.stderr[-3000:]}")
    return out


def int8_gate(onnx_dir: Path) -> dict[str, Any] | None:
    """The int8 quality gate's verdict of an ONNX export (its export_report.json)."""
    report = json.loads((onnx_dir / "export_report.json").read_text())
    gate = report.get("onnx_int8_vs_fp32")
    return None if gate is None else {k: gate[k] for k in ("metric", "fp32", "int8", "drop_points", "passed")}
