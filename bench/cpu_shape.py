"""The workload's shape on the command line, as bench/harness_overhead.py and bench/bare_loop.py both take it: one
model at a CPU size that runs in seconds on two cores (harness_overhead passes each value on to both loops)."""

from __future__ import annotations

import argparse
import os


def add_shape_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measure-steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
