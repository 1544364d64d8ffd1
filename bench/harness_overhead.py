#!/usr/bin/env python3
"""Harness overhead: the harness's samples/s / a bare training loop's samples/s, same everything else.

    python bench/harness_overhead.py [--frameworks torch,paddle] [--pairs 3] [--model resnet50] ...

Runs alternate harness / bare in ABBA order (so drift of a shared machine falls on both alike);
the figure per framework is the median of the per-pair ratios. Target: >= 0.99.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "scripts" / "harness" / "train.py"
BARE = REPO / "bench" / "bare_loop.py"
TARGET = 0.99


def shape_args(a) -> list[str]:
    return ["--model", a.model, "--batch-size", str(a.batch_size), "--image-size", str(a.image_size),
            "--num-classes", str(a.num_classes), "--warmup-steps", str(a.warmup_steps),
            "--measure-steps", str(a.measure_steps), "--threads", str(a.threads)]


def run_harness(framework: str, a) -> float:
    out = subprocess.run([sys.executable, str(HARNESS), "--framework", framework, *shape_args(a)],
                         capture_output=True, text=True, check=False)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith(":::KITLOG ") and '"run_stop"' in line:
            stop = json.loads(line[len(":::KITLOG "):])
            if stop["status"] == "success":
                return float(stop["samples_per_sec"])
    raise SystemExit(f"harness run failed (exit {out.returncode}): {out.stderr[-1500:]}")


def run_bare(framework: str, a) -> float:
    out = subprocess.run([sys.executable, str(BARE), "--framework", framework, *shape_args(a)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"bare loop failed (exit {out.returncode}): {out.stderr[-1500:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frameworks", default="torch,paddle")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measure-steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = p.parse_args()
    print(f"harness overhead: {a.model}, batch {a.batch_size}, {a.image_size}px, {a.threads} threads, "
          f"{a.warmup_steps}+{a.measure_steps} steps, {a.pairs} ABBA pairs per framework", flush=True)
    verdicts = []
    for framework in a.frameworks.split(","):
        harness, bare, ratios = [], [], []
        for i in range(a.pairs):
            order = ("harness", "bare") if i % 2 == 0 else ("bare", "harness")
            got = {}
            for kind in order:
                got[kind] = run_harness(framework, a) if kind == "harness" else run_bare(framework, a)
            harness.append(got["harness"])
            bare.append(got["bare"])
            ratios.append(got["harness"] / got["bare"])
            print(f"  {framework} pair {i + 1}: harness {got['harness']:.2f}  bare {got['bare']:.2f}  "
                  f"ratio {ratios[-1]:.4f}", flush=True)
        ratio = statistics.median(ratios)
        verdicts.append(ratio >= TARGET)
        print(f"{framework}: median harness {statistics.median(harness):.2f} samples/s, bare "
              f"{statistics.median(bare):.2f} samples/s, ratio {ratio:.4f} "
              f"({'meets' if ratio >= TARGET else 'BELOW'} target {TARGET})", flush=True)
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
