#!/usr/bin/env python3
"""The one-GPU check (`make gpu-check`): the whole gpu1 suite beside the torchvision yardstick, for a user with time
(an estimated 12 minutes on an H100; bench/gpu_proof.sh is its trimmed twin for a short visit, same code).

    python bench/gpu_check.py [--runs-dir DIR] [--out DIR] [--suite gpu1] [--no-yardstick] [--budget-s 1800]

1. `kit check-env --local --require-gpu`: this machine's GPUs, driver, topology (the probes every pre-flight runs).
2. `kit bench --suite gpu1`: ResNet50 v1.5 bs256 in fp32, tf32, amp (nchw, nhwc, nhwc compiled), VGG16 amp-nhwc,
   ArcFace fp32, BERT-base amp on one GPU, 3 interleaved repeats (kit/suites/gpu1.yaml), then bundle + verify.
3. The yardstick: torchvision's own ResNet50 / VGG16 (bench/yardstick.py), same step, batch, precision, layout and
   mode, 3 timed windows, and harness / yardstick per setting by the kit's noise rule (bench/gpu_stages.py).
Targets: harness / yardstick >= 0.97 for every setting; ResNet50 amp-nhwc >= 4500 images/s on an H100 (4950 on an
H200; the GPU named by the kit's own capture). Exit 0: all met; 1: one missed or a step failed; 3: something
inconclusive. Needs PyTorch with CUDA; Paddle is not needed (gpu1 is torch only).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_stages as gs  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument("--out", type=Path, default=None,
                        help="results copied here (default bench/out/gpu-check-<time>)")
    parser.add_argument("--suite", default="gpu1")
    parser.add_argument("--no-yardstick", action="store_true")
    parser.add_argument("--budget-s", type=float, default=1800)
    args = parser.parse_args()
    out = args.out or gs.REPO / "bench" / "out" / f"gpu-check-{dt.datetime.now():%Y%m%d-%H%M%S}"
    budget = gs.Budget(args.budget_s)
    rows = gs.suite_stage(out, budget, args.budget_s, suite=args.suite, runs_dir=args.runs_dir,
                          yardstick_on=not args.no_yardstick)
    report = out / "report.md"
    print(report.read_text() if report.is_file() else "no report.md")
    print(gs.table(rows))
    print(f"gpu-check: {budget.elapsed():.0f} s; results in {out}")
    if any(r.bad for r in rows):
        return 1
    return 0 if all(r.verdict in (gs.stats.MET, "no target") for r in rows) else 3


if __name__ == "__main__":
    sys.exit(main())
