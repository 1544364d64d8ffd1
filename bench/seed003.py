#!/usr/bin/env python3
"""Seed 003's benchmark set on this host's CPU: CycleGAN, SE-ResNeXt50, DeepLabV3+, BERT, Transformer,
Paddle vs PyTorch, through the kit's harness; then `kit report` (with the peak-memory column).

    python bench/seed003.py [--repeats 1] [--size full|tiny] [--runs-dir runs] [--dry-run]

The published architectures (--size full, the default) at CPU input sizes small enough that both frameworks
finish in about 15 minutes on 2 cores; the figures are CPU throughputs at these sizes, comparable between the two
frameworks on the same host only (seed 003's own table is single-V100, FP32: 7.3/6.1 samples/s CycleGAN,
169.4/153.1 SE-ResNeXt50, 12.8/6.4 DeepLab V3+, 4.0/3.4 BERT, 4.9/4.7 Transformer, Fluid 1.4 / TF or PyTorch).
NLP models run whole epochs of their synthetic corpus (seed 003's rule); figures: images/s (SE-ResNeXt50,
DeepLabV3+), samples/s (CycleGAN), sequences/s (BERT), target tokens/s (Transformer).

Logs go to <runs-dir>/seed003-<UTC time>/logs/<framework>/<model>/bz<B>/1n1g/<model>_b<B>_fp32_<repeat>.log
(the DLPerf layout `kit report` reads; B is the per-process batch: images, sequences, or tokens for the
Transformer); the report to <run>/report/. Exit status 1 if any run failed (the report lists it).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "scripts" / "harness" / "train.py"
FRAMEWORKS = ("paddle", "torch")
# model -> (per-process batch, train.py flags besides --size/--batch-size/--threads)
CASES = {
    "cyclegan": (1, ["--image-size", "32", "--warmup-steps", "3", "--measure-steps", "10"]),
    "se_resnext50": (8, ["--image-size", "64", "--warmup-steps", "3", "--measure-steps", "10"]),
    "deeplabv3p": (2, ["--image-size", "129", "--warmup-steps", "3", "--measure-steps", "10"]),
    "bert": (4, ["--seq-len", "64", "--corpus-size", "24", "--warmup-steps", "3", "--measure-epochs", "1"]),
    "transformer": (512, ["--seq-len", "48", "--corpus-size", "64", "--warmup-steps", "3", "--measure-epochs", "1"]),
}
TIMEOUT_S = 900


def command(framework: str, model: str, size: str, threads: int) -> tuple[list[str], int]:
    batch, flags = CASES[model]
    return ([sys.executable, str(HARNESS), "--framework", framework, "--model", model, "--size", size,
             "--batch-size", str(batch), "--threads", str(threads), *flags], batch)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--size", choices=("full", "tiny"), default="full")
    p.add_argument("--models", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--runs-dir", default=str(REPO / "runs"))
    p.add_argument("--run-id", default=None, help="default: seed003-<UTC time>")
    p.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    a = p.parse_args(argv)
    models = a.models.split(",")
    unknown = [m for m in models if m not in CASES]
    if unknown:
        p.error(f"--models: unknown {', '.join(unknown)}; known: {', '.join(CASES)}")
    run_dir = Path(a.runs_dir) / (a.run_id or time.strftime("seed003-%Y%m%dT%H%M%SZ", time.gmtime()))
    failed = 0
    started = time.monotonic()
    for repeat in range(1, a.repeats + 1):
        for model in models:
            for framework in a.frameworks.split(","):
                argv_, batch = command(framework, model, a.size, a.threads)
                log = (run_dir / "logs" / framework / model / f"bz{batch}" / "1n1g" /
                       f"{model}_b{batch}_fp32_{repeat}.log")
                if a.dry_run:
                    print(f"{shlex.join(argv_)} > {log}")
                    continue
                log.parent.mkdir(parents=True, exist_ok=True)
                err = run_dir / "stderr" / log.relative_to(run_dir / "logs")
                err.parent.mkdir(parents=True, exist_ok=True)
                t0 = time.monotonic()
                with open(log, "w") as out, open(err, "w") as errors:
                    try:
                        rc = subprocess.run(argv_, stdout=out, stderr=errors, cwd=REPO, timeout=TIMEOUT_S).returncode
                    except subprocess.TimeoutExpired:
                        rc = 124
                failed += rc != 0
                print(f"[{time.monotonic() - started:6.0f} s] {framework:6} {model:12} repeat {repeat}: "
                      f"{'ok' if rc == 0 else f'FAILED (exit {rc}, see {err})'} in {time.monotonic() - t0:.0f} s",
                      flush=True)
    if a.dry_run:
        return 0
    kit = [sys.executable, "-m", "kit", "report", str(run_dir / "logs"), "--reduce", "harmonic_mean",
           "--out", str(run_dir / "report")]
    report = subprocess.run(kit, cwd=REPO)
    print(f"seed003: {run_dir}; report: {run_dir / 'report' / 'report.md'}", flush=True)
    return 1 if failed or report.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
