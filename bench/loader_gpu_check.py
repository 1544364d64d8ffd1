#!/usr/bin/env python3
"""Issue 32's GPU check: ResNet50 AMP channels-last on real JPEGs against the same on synthetic data, one GPU, for a
user with time (bench/gpu_proof.sh's stage 2 is its trimmed twin, same code: bench/gpu_stages.py).

    python bench/loader_gpu_check.py [--images 20000] [--batch-size 256] [--measure-steps 60] [--repeats 3]
        [--min-ratio 0.90] [--out DIR]

Makes a photo-like JPEG tree (data_prep/make_synthetic_imagenet.py --content photo --all-rgb: ~110 KB, ~400x350,
quality 90), one generator process per core, under bench/out/loader-jpegs/, then runs the harness (PyTorch,
resnet50, amp, nhwc) in REPEATS interleaved rounds of four fresh train.py processes: synthetic data; real data
through the gpu loader (nvJPEG, decoding beside the training step); real data through the cpu loader (Pillow, one
worker per core); and the gpu loader alone (--loader-only). Prints each figure, the input_rate probes, and real /
synthetic per loader by the kit's noise rule. Exit 0 when the gpu loader's ratio meets --min-ratio, 1 when it is
missed or a run fails, 2 without a CUDA device, 3 when the ratio is inconclusive.
Needs the harness's own dependencies only (torch with CUDA, torchvision, numpy, Pillow).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_stages as gs  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=20000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--measure-steps", type=int, default=60)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-ratio", type=float, default=gs.LOADER_TARGET)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu", help="cpu: a dry run of this script only")
    p.add_argument("--out", type=Path, default=None,
                   help="logs and figures (default bench/out/gpu-check-loader-<time>)")
    p.add_argument("--budget-s", type=float, default=1800)
    a = p.parse_args()
    import torch

    if a.device == "gpu" and not torch.cuda.is_available():
        print("loader_gpu_check: no CUDA device visible to torch", file=sys.stderr)
        return 2
    out = a.out or gs.REPO / "bench" / "out" / f"gpu-check-loader-{dt.datetime.now():%Y%m%d-%H%M%S}"
    budget = gs.Budget(a.budget_s)
    cores = len(os.sched_getaffinity(0))
    listing = gs.jpeg_tree(gs.REPO / "bench" / "out" / "loader-jpegs", a.images, cores)
    print(f"tree: {len(listing.read_text().splitlines())} JPEGs at {listing.parent}; {cores} cores", flush=True)
    common = ["--framework", "torch", "--model", "resnet50", "--precision", "amp", "--layout", "nhwc",
              "--batch-size", str(a.batch_size), "--warmup-steps", str(a.warmup_steps),
              "--measure-steps", str(a.measure_steps), "--image-size", str(a.image_size), "--device", a.device]
    real = ["--data", str(listing), "--workers", str(cores)]
    runs = {"synthetic": [], "gpu loader": [*real, "--loader", "gpu"], "cpu loader": [*real, "--loader", "cpu"],
            "gpu loader alone": [*real, "--loader", "gpu", "--loader-only"]}
    got = gs.loader_stage(out, budget, a.budget_s, runs=runs, common=common, repeats=a.repeats, listing=listing)
    synthetic = gs.figures_of(got["synthetic"])
    device = next((r.device_name for r in got["synthetic"] if r.device_name), "?")
    print(f"torch resnet50 amp nhwc bs{a.batch_size} on {device}, {a.warmup_steps} warm-up + {a.measure_steps} timed "
          f"steps per run, {a.repeats} interleaved rounds; logs in {out}")
    rows = []
    for name in ("gpu loader", "cpu loader", "gpu loader alone"):
        target = a.min_ratio if name == "gpu loader" else 0.0
        row = gs.ratio_row("loader", f"{name} / synthetic", synthetic, gs.figures_of(got[name]), target,
                           ("synthetic", name))
        probes = [r.input_rate for r in got[name] if r.input_rate]
        row.detail += f"; input_rate probe {gs.stats.median(probes):.1f}" if probes else ""
        if row.verdict == "failed":
            row.detail += f": {gs.first_error(got['synthetic']) or gs.first_error(got[name])}"
        if target == 0.0:
            row.target, row.verdict = "—", "no target" if row.verdict != "failed" else "failed"
        rows.append(row)
    print(gs.table(rows))
    if any(r.bad for r in rows):
        return 1
    return 0 if rows[0].verdict == gs.stats.MET else 3


if __name__ == "__main__":
    sys.exit(main())
