#!/usr/bin/env python3
"""The harness's input pipelines alone: images/s of `train.py --loader-only` per loader and worker count.

    python bench/loader.py [--framework torch|paddle] [--images 512] [--repeats 5] [--batch-size 32] [--image-size 224]

Makes once, and keeps under bench/out/loader-jpegs/, a photo-like JPEG tree with data_prep/make_synthetic_imagenet.py
(--content photo --all-rgb: ~110 KB, ~400x350, quality 90, as ImageNet's files; all RGB, as all but 22 of ImageNet's
1.28M are), then times the cpu loader with 1, 2 and all cores' worth of workers, and on a CUDA device the gpu loader
and DALI (where DALI imports; otherwise the table says why not). Every row runs --repeats times, rows interleaved
(A B C A B C ...), each run a fresh train.py process timing --measure-steps batches after --warmup-steps; a row's
figure is the median of its runs' input_rate lines (the range beside it). The files sit in the page cache, so
this times decoding and augmentation, not the disk. Each run also records the CPU share other processes took
meanwhile (kit.run.hostload); a row whose median share is over 10% is marked busy: its figure is low by about
that much and spreads. Exit 0; 1 when a run fails (its error is printed, no figure).
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
HARNESS = REPO / "scripts" / "harness"
sys.path.insert(0, str(HARNESS))

sys.path.insert(0, str(REPO))

import data  # noqa: E402  (the harness's shared input code: LoaderUnavailable)
import loader_dali  # noqa: E402

from kit.results.noise import BUSY_OTHER_CPU_SHARE  # noqa: E402
from kit.run.hostload import HostLoad  # noqa: E402

TREE_SIZE, CLASSES = "400x350", 8


def jpeg_tree(images: int) -> Path:
    """The train list of a cached photo-like tree of IMAGES JPEGs (made on first use)."""
    root = REPO / "bench" / "out" / "loader-jpegs" / f"photo-rgb-{images}-{TREE_SIZE}"
    if not (root / "train_list.txt").is_file():  # the list is written last: without it the tree is remade
        args = ["--classes", str(CLASSES), "--images-per-class", str(images // CLASSES), "--size", TREE_SIZE,
                "--content", "photo", "--all-rgb"]
        subprocess.run([sys.executable, str(REPO / "data_prep" / "make_synthetic_imagenet.py"), str(root), *args],
                       check=True, stdout=subprocess.DEVNULL)
    return root / "train_list.txt"


def describe(train_list: Path) -> str:
    from PIL import Image

    entries = data.load_list(train_list)
    sizes = [os.path.getsize(path) for path, _ in entries]
    dims = []
    for path, _ in entries:
        with Image.open(path) as img:
            dims.append(img.size)
    width = statistics.fmean(w for w, _ in dims)
    height = statistics.fmean(h for _, h in dims)
    return (f"{len(entries)} JPEGs (photo-like, RGB, quality 90), mean {statistics.fmean(sizes) / 1000:.0f} KB, "
            f"mean {width:.0f}x{height:.0f}")


def cuda_device(framework: str) -> str | None:
    """The CUDA device's name, or None."""
    if framework == "torch":
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    import paddle

    if paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0:
        return paddle.device.cuda.get_device_name(0)
    return None


def one_run(a, train_list: Path, loader: str, workers: int) -> dict:
    """The input_rate line of one loader-only run; SystemExit(1) with the run's error when it fails."""
    cmd = [sys.executable, str(HARNESS / "train.py"), "--framework", a.framework, "--model", "resnet50",
           "--batch-size", str(a.batch_size), "--image-size", str(a.image_size), "--warmup-steps", str(a.warmup_steps),
           "--measure-steps", str(a.measure_steps), "--data", str(train_list), "--loader", loader, "--loader-only",
           "--workers", str(workers), "--threads", str(workers)]
    with HostLoad() as load:
        out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [json.loads(line.split(":::KITLOG ", 1)[1]) for line in out.stdout.splitlines() if ":::KITLOG " in line]
    rates = [e for e in lines if e["event"] == "input_rate"]
    if out.returncode != 0 or not rates:
        tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"loader.py: {loader} with {workers} workers failed (exit {out.returncode}): {tail}", file=sys.stderr)
        raise SystemExit(1)
    start = next(e for e in lines if e["event"] == "run_start")
    return {**rates[-1], "decoder": start["decoder"], "framework_version": start["framework_version"],
            "other_cpu_share": load.result().get("other_cpu_share")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=("torch", "paddle"), default="torch")
    p.add_argument("--images", type=int, default=512, help="JPEGs in the tree (a multiple of 8)")
    p.add_argument("--repeats", type=int, default=5, help="runs per row (the median is the figure)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measure-steps", type=int, default=20)
    a = p.parse_args()
    if a.images < a.batch_size or a.images % CLASSES:
        p.error(f"--images must be a multiple of {CLASSES} and at least --batch-size, got {a.images}")

    train_list = jpeg_tree(a.images)
    cores = len(os.sched_getaffinity(0))
    rows = [("cpu", n) for n in sorted({1, 2, cores})]
    skipped = []
    gpu = cuda_device(a.framework)
    if gpu is None:
        skipped = [f"{name}: not run: no CUDA device visible to {a.framework}" for name in ("gpu", "dali")]
    else:
        rows.append(("gpu", cores))
        try:
            loader_dali.import_dali()
            rows.append(("dali", cores))
        except data.LoaderUnavailable as exc:
            skipped.append(f"dali: not run: {exc}")

    runs: dict[tuple[str, int], list[dict]] = {row: [] for row in rows}
    for _ in range(a.repeats):
        for row in rows:
            runs[row].append(one_run(a, train_list, *row))

    first = runs[rows[0]][0]
    print(f"loader-only input rate: {a.framework} {first['framework_version']}, {cores} cores"
          f"{f', {gpu}' if gpu else ''}; {describe(train_list)}; batch {a.batch_size}, {a.image_size} px, "
          f"{a.warmup_steps} warm-up + {a.measure_steps} timed batches per run, median of {a.repeats} runs")
    print("| loader | workers | decode on | decoder | images/s | range | other processes' CPU |")
    print("|---|---|---|---|---|---|---|")
    for (loader, workers), got in runs.items():
        rates = [r["images_per_sec"] for r in got]
        shares = [r["other_cpu_share"] for r in got if r["other_cpu_share"] is not None]
        other = statistics.median(shares) if shares else None
        busy = "not sampled" if other is None else f"{other:.0%}" + (" (busy)" if other > BUSY_OTHER_CPU_SHARE else "")
        print(f"| {loader} | {workers} | {got[0]['decode_device']} | {got[0]['decoder']} | "
              f"{statistics.median(rates):.1f} | {min(rates):.1f}-{max(rates):.1f} | {busy} |")
    for line in skipped:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
