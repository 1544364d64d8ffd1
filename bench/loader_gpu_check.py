#!/usr/bin/env python3
"""Issue 32's GPU check: ResNet50 AMP channels-last on real JPEGs against the same on synthetic data, one GPU.

    python bench/loader_gpu_check.py [--images 20000] [--batch-size 256] [--measure-steps 60] [--min-ratio 0.90]

Makes a photo-like JPEG tree (data_prep/make_synthetic_imagenet.py --content photo --all-rgb: ~110 KB, ~400x350,
quality 90), one generator process per core, under bench/out/loader-jpegs/, then runs the harness (PyTorch,
resnet50, amp, nhwc) four times, each a fresh train.py process: synthetic data; real data through the gpu loader
(nvJPEG); real data through the cpu loader (Pillow, one worker per core); and the gpu loader alone
(--loader-only). Prints each figure, each real-data run's input_rate probe, and real / synthetic per loader.
Exit 0 when the gpu loader's ratio is >= --min-ratio, 1 below it or when a run fails, 2 without a CUDA device.
Needs the harness's own dependencies only (torch with CUDA, torchvision, numpy, Pillow).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "scripts" / "harness" / "train.py"
MAKE_TREE = REPO / "data_prep" / "make_synthetic_imagenet.py"
CLASSES = 8


def jpeg_tree(images: int, parts: int) -> Path:
    """The train list of a cached tree of IMAGES photo-like JPEGs, made by PARTS generator processes at once."""
    root = REPO / "bench" / "out" / "loader-jpegs" / f"photo-rgb-{images}-parts"
    listing = root / "train_list.txt"
    if listing.is_file():
        return listing
    per_part = max(1, images // (parts * CLASSES))

    def make(part: int) -> None:
        subprocess.run([sys.executable, str(MAKE_TREE), str(root / f"part{part}"), "--classes", str(CLASSES),
                        "--images-per-class", str(per_part), "--size", "400x350", "--content", "photo", "--all-rgb",
                        "--seed", str(part)], check=True, stdout=subprocess.DEVNULL)

    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(make, range(parts)))
    lines = []
    for part in range(parts):
        for line in (root / f"part{part}" / "train_list.txt").read_text().splitlines():
            lines.append(f"part{part}/{line}")
    tmp = listing.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(listing)  # written last: a tree without it is made again
    return listing


def run(a, label: str, extra: list[str]) -> dict:
    """run_stop and the input_rate line of one harness run; SystemExit(1) with its error when it fails."""
    cmd = [sys.executable, str(HARNESS), "--framework", "torch", "--model", "resnet50", "--precision", "amp",
           "--layout", "nhwc", "--batch-size", str(a.batch_size), "--warmup-steps", str(a.warmup_steps),
           "--measure-steps", str(a.measure_steps), "--image-size", str(a.image_size), "--device", a.device, *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    events = [json.loads(line.split(":::KITLOG ", 1)[1]) for line in out.stdout.splitlines() if ":::KITLOG " in line]
    stops = [e for e in events if e["event"] == "run_stop" and e.get("status") == "success"]
    if out.returncode != 0 or not stops:
        tail = "\n".join(out.stderr.strip().splitlines()[-5:]) or "(no output)"
        print(f"loader_gpu_check: {label} failed (exit {out.returncode}):\n{tail}", file=sys.stderr)
        raise SystemExit(1)
    rate = next((e for e in events if e["event"] == "input_rate"), {})
    start = next(e for e in events if e["event"] == "run_start")
    return {"figure": stops[-1]["samples_per_sec"], "input_rate": rate.get("images_per_sec"),
            "decoder": start.get("decoder"), "device_name": start.get("device_name")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=20000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--measure-steps", type=int, default=60)
    p.add_argument("--min-ratio", type=float, default=0.90)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu", help="cpu: a dry run of this script only")
    a = p.parse_args()
    import torch

    if a.device == "gpu" and not torch.cuda.is_available():
        print("loader_gpu_check: no CUDA device visible to torch", file=sys.stderr)
        return 2
    cores = len(os.sched_getaffinity(0))
    listing = jpeg_tree(a.images, cores)
    print(f"tree: {len(listing.read_text().splitlines())} JPEGs at {listing.parent}; {cores} cores", flush=True)
    real = ["--data", str(listing), "--workers", str(cores)]
    runs = {
        "synthetic": run(a, "synthetic", []),
        "gpu": run(a, "gpu loader", [*real, "--loader", "gpu"]),
        "cpu": run(a, "cpu loader", [*real, "--loader", "cpu"]),
        "gpu loader alone": run(a, "gpu loader alone", [*real, "--loader", "gpu", "--loader-only"]),
    }
    synthetic = runs["synthetic"]["figure"]
    print(f"torch resnet50 amp nhwc bs{a.batch_size} on {runs['synthetic']['device_name']}, "
          f"{a.warmup_steps} warm-up + {a.measure_steps} timed steps per run")
    print("| run | images/s | input_rate probe | decoder | / synthetic |")
    print("|---|---|---|---|---|")
    for name, got in runs.items():
        probe = f"{got['input_rate']:.1f}" if got["input_rate"] else ""
        print(f"| {name} | {got['figure']:.1f} | {probe} | {got['decoder'] or ''} | {got['figure'] / synthetic:.3f} |")
    ratio = runs["gpu"]["figure"] / synthetic
    verdict = "ok" if ratio >= a.min_ratio else "BELOW"
    print(f"real JPEGs (gpu loader) / synthetic = {ratio:.3f} ({verdict}: target >= {a.min_ratio}); "
          f"cpu loader: {runs['cpu']['figure'] / synthetic:.3f}")
    return 0 if ratio >= a.min_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
