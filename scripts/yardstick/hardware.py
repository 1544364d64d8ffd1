#!/usr/bin/env python3
"""Hardware yardsticks: what the device itself delivers, apart from any model.

    python3 scripts/yardstick/hardware.py [--device auto|cpu|gpu] [--repeats 5] [--gemm-n N] [--copy-mib M]
                                          [--only gemm,memory,host,allreduce] [--ranks N] [--json]

Measures, each as R timed windows after a warm-up (one figure per window; the median is the figure):
  gemm    C = A @ B of N x N matrices per math mode: fp32 (TF32 off), and on a GPU tf32, bf16, fp16; TFLOP/s counted
          as 2 N^3 per product (CPU: fp32 and bf16, GFLOP/s is the same figure x 1000)
  memory  a device-to-device copy of M MiB: GB/s counted as 2 M (read + write), as STREAM's copy does
  host    (GPU only) host -> device and device -> host copies of M MiB from pinned host memory: GB/s counted as M
  allreduce  with 2+ GPUs (or --ranks N processes), an all-reduce (sum) of M/4 MiB of fp32 across one process per
          GPU (NCCL; on a CPU gloo, which only proves the path): bus bandwidth as nccl-tests counts it, the bytes over
          the seconds x 2 (n - 1) / n, the figure comparable with an interconnect's per-GPU bandwidth
Each window is timed between two device synchronisations with time.perf_counter. Prints one line a measure, or with
--json one JSON object: the device (name, memory, SM count, driver/CUDA where a GPU), torch's version, and each
measure with its unit, size, iterations per window, every window's figure and the median.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "harness"))

from backend import cpu_name  # noqa: E402  (the harness's: one copy)

os.environ.pop("NVIDIA_TF32_OVERRIDE", None)  # before torch: "0" would forbid the tf32 mode measured here

GPU_MODES = ("fp32", "tf32", "bf16", "fp16")
CPU_MODES = ("fp32", "bf16")
MEASURES = ("gemm", "memory", "host", "allreduce")
GB = 1e9


class Clock:
    def __init__(self, torch, device: str):
        self.torch, self.gpu = torch, device == "cuda"

    def sync(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()

    def window(self, step, iterations: int) -> float:
        """Seconds for `iterations` calls of step, between two synchronisations."""
        self.sync()
        start = time.perf_counter()
        for _ in range(iterations):
            step()
        self.sync()
        return time.perf_counter() - start


def iterations_for(clock: Clock, step, target_s: float) -> int:
    """Enough calls that one window lasts about target_s (after two warm-up calls)."""
    step()
    once = clock.window(step, 1)
    return max(1, min(10_000, round(target_s / max(once, 1e-6))))


def measure(clock: Clock, step, work: float, repeats: int, target_s: float) -> dict:
    """`work` units per call (FLOP or bytes); one figure per window, in units per second."""
    iterations = iterations_for(clock, step, target_s)
    figures = [work * iterations / clock.window(step, iterations) for _ in range(repeats)]
    return {"iterations": iterations, "windows": figures, "median": statistics.median(figures)}


def set_math(torch, mode: str) -> None:
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def matmul_step(torch, n: int, device: str, dtype):
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    return lambda: torch.matmul(a, b, out=out)


def gemm(torch, clock: Clock, device: str, modes, n: int, repeats: int, target_s: float) -> list[dict]:
    rows = []
    for mode in modes:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode, torch.float32)
        set_math(torch, mode)
        row = measure(clock, matmul_step(torch, n, device, dtype), 2.0 * n**3, repeats, target_s)
        scale = 1e12 if device == "cuda" else 1e9
        rows.append({"measure": "gemm", "mode": mode, "n": n, "unit": "TFLOP/s" if scale == 1e12 else "GFLOP/s",
                     **scaled(row, scale)})
    set_math(torch, "fp32")
    return rows


def memory(torch, clock: Clock, device: str, mib: int, repeats: int, target_s: float) -> dict:
    count = mib * 2**20 // 4
    src = torch.ones(count, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    row = measure(clock, lambda: dst.copy_(src), 2.0 * count * 4, repeats, target_s)
    return {"measure": "memory", "mode": "copy", "mib": mib, "unit": "GB/s", **scaled(row, GB)}


def host(torch, clock: Clock, mib: int, repeats: int, target_s: float) -> list[dict]:
    count = mib * 2**20 // 4
    pinned = torch.ones(count, dtype=torch.float32).pin_memory()
    on_device = torch.empty(count, device="cuda", dtype=torch.float32)
    size = float(count * 4)
    to_device = measure(clock, lambda: on_device.copy_(pinned, non_blocking=True), size, repeats, target_s)
    to_host = measure(clock, lambda: pinned.copy_(on_device, non_blocking=True), size, repeats, target_s)
    return [{"measure": "host", "mode": "h2d", "mib": mib, "unit": "GB/s", **scaled(to_device, GB)},
            {"measure": "host", "mode": "d2h", "mib": mib, "unit": "GB/s", **scaled(to_host, GB)}]


def allreduce(device: str, ranks: int, mib: int, repeats: int, target_s: float) -> dict:
    """One process per rank (torch.multiprocessing, a file store: no network); rank 0's windows."""
    import tempfile

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="yardstick-") as tmp:
        out = Path(tmp) / "rank0.json"
        mp.spawn(_allreduce_rank, args=(ranks, device, mib, repeats, target_s, tmp, str(out)), nprocs=ranks)
        row = json.loads(out.read_text())
    return {"measure": "allreduce", "mode": "nccl" if device == "cuda" else "gloo", "mib": mib, "ranks": ranks,
            "unit": "GB/s", **scaled(row, GB)}


def _allreduce_rank(rank: int, ranks: int, device: str, mib: int, repeats: int, target_s: float, tmp: str,
                    out: str) -> None:
    import torch
    import torch.distributed as dist

    gpu = device == "cuda"
    if gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if gpu else "gloo", init_method=f"file://{tmp}/store", rank=rank,
                            world_size=ranks)
    try:
        where = f"cuda:{rank}" if gpu else "cpu"
        tensor = torch.ones(max(1, mib * 2**20 // 4 // 4), device=where, dtype=torch.float32)
        clock = Clock(torch, device)
        step = lambda: dist.all_reduce(tensor)  # noqa: E731
        once = torch.tensor([float(iterations_for(clock, step, target_s))], device=where)
        dist.broadcast(once, 0)  # every rank the same count, or the collectives would not pair up
        iterations = int(once.item())
        bus = tensor.numel() * 4 * 2.0 * (ranks - 1) / ranks
        figures = []
        for _ in range(repeats):
            dist.barrier()
            figures.append(bus * iterations / clock.window(step, iterations))
        if rank == 0:
            Path(out).write_text(json.dumps({"iterations": iterations, "windows": figures,
                                             "median": statistics.median(figures)}))
    finally:
        dist.destroy_process_group()


def scaled(row: dict, scale: float) -> dict:
    return {"iterations": row["iterations"], "windows": [round(f / scale, 3) for f in row["windows"]],
            "median": round(row["median"] / scale, 3)}


def describe(torch, device: str) -> dict:
    about = {"torch": torch.__version__, "cpu": cpu_name(), "threads": torch.get_num_threads()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        about.update(gpu=props.name, gpu_memory_mib=props.total_memory // 2**20, sm_count=props.multi_processor_count,
                     capability=f"{props.major}.{props.minor}", cuda=torch.version.cuda)
    return about


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gemm-n", type=int, help="matrix size (default 8192 on a GPU, 1024 on a CPU)")
    parser.add_argument("--copy-mib", type=int, help="copy size in MiB (default 1024 on a GPU, 256 on a CPU)")
    parser.add_argument("--ranks", type=int, help="all-reduce processes (default: every GPU; on a CPU 2, with "
                        "--only allreduce named)")
    parser.add_argument("--window-s", type=float, default=0.2, help="about how long one window lasts")
    parser.add_argument("--only", help=f"measures to run, comma-separated (default {','.join(MEASURES)}; "
                        "on a CPU the all-reduce only when named)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    only = [m for m in (args.only or ",".join(MEASURES)).split(",") if m]
    unknown = sorted(set(only) - set(MEASURES))
    if unknown or args.repeats < 1 or (args.ranks or 2) < 2:
        parser.error(f"--only takes {', '.join(MEASURES)}" if unknown else "--repeats must be 1 or more"
                     if args.repeats < 1 else "--ranks must be 2 or more")
    import torch

    if args.device == "gpu" and not torch.cuda.is_available():
        print("hardware.py: --device gpu but torch sees no CUDA device", file=sys.stderr)
        return 2
    device = "cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu"
    gpu = device == "cuda"
    n = args.gemm_n or (8192 if gpu else 1024)
    mib = args.copy_mib or (1024 if gpu else 256)
    clock = Clock(torch, device)
    rows: list[dict] = []
    steps = {"gemm": lambda: gemm(torch, clock, device, GPU_MODES if gpu else CPU_MODES, n, args.repeats,
                                  args.window_s),
             "memory": lambda: [memory(torch, clock, device, mib, args.repeats, args.window_s)],
             "host": lambda: host(torch, clock, mib, args.repeats, args.window_s) if gpu else [],
             "allreduce": lambda: [allreduce(device, ranks, mib, args.repeats, args.window_s)] if ranks >= 2 else []}
    ranks = args.ranks or (torch.cuda.device_count() if gpu else 2 if args.only and "allreduce" in only else 1)
    for name in MEASURES:
        if name in only:
            for row in steps[name]():
                rows.append(row)
                if args.json:  # progress, as each measure ends
                    print(f"yardstick: {line(row)}", file=sys.stderr, flush=True)
    result = {"device": "gpu" if gpu else "cpu", **describe(torch, device), "host": socket.gethostname(),
              "repeats": args.repeats, "measures": rows}
    if args.json:
        print(json.dumps(result))
    else:
        for row in rows:
            print(line(row))
    return 0


def line(row: dict) -> str:
    spread = f"{min(row['windows'])}..{max(row['windows'])}"
    return f"{row['measure']:<9} {row['mode']:<5} {row['median']:>10} {row['unit']:<8} windows {spread}"


if __name__ == "__main__":
    sys.exit(main())
