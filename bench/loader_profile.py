#!/usr/bin/env python3
"""Where the gpu loader's time goes, batch by batch: one JSON object per phase on stdout (and --json FILE).

    python3 bench/loader_profile.py --list TRAIN_LIST [--batch-size 256] [--batches 8] [--workers N] [--device gpu]

Phases, each over the same batches after one warm-up batch:
  loader      DeviceImageLoader inline (decode_ahead=0): images/s of next(), split into waiting for the reader
              processes' files, the one decode call a batch, and the crop/resize/normalise; its decode calls and
              the batches the decoder refused
  workers     the reader processes alone: files per second into the shared buffers, nothing decoded
  nvjpeg      torchvision.io.decode_jpeg(list, device="cuda") on the loader's last batch's files, in memory (GPU)
  host_decode Pillow decoding the same files in --workers threads (what the cpu loader's decode costs)
The GPU is synchronised at each phase's edges. Made to find the gpu loader's bound on a GPU machine (bench/gpu_proof.sh
stage 2 measured it at 0.22 of synthetic on an H200).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "harness"))
import data  # noqa: E402
import loader_gpu  # noqa: E402


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--list", type=Path, required=True)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


class Timed(loader_gpu.DeviceImageLoader):
    """The loader, its decode call and its crop/resize timed (GPU synchronised around each)."""

    def __init__(self, *args, sync, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sync, self.spent = sync, {"decode": 0.0, "crop_resize": 0.0}

    def _timed(self, phase: str, work, *args):
        self.sync()
        t0 = time.perf_counter()
        out = work(*args)
        self.sync()
        self.spent[phase] += time.perf_counter() - t0
        return out

    def _decode(self, *args):
        return self._timed("decode", super()._decode, *args)

    def _crop_resize(self, *args):
        return self._timed("crop_resize", super()._crop_resize, *args)


class Files(loader_gpu.DeviceImageLoader):
    """The loader's reader processes alone: a batch is its entry indices, its files read, nothing decoded."""

    def _collate(self, buffer, indices, plan):
        return indices, None

    def __next__(self):
        return self._next_batch()  # nothing to normalise


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    import torch

    gpu = 0 if a.device == "gpu" else None
    sync = torch.cuda.synchronize if gpu is not None else (lambda: None)
    entries = data.load_list(a.list)
    results = []

    def say(row: dict) -> None:
        results.append(row)
        print(json.dumps(row), flush=True)

    with Timed(entries, a.batch_size, a.image_size, framework="torch", gpu=gpu, workers=a.workers,
               channels_last=True, decode_ahead=0, sync=sync) as loader:
        next(loader)
        loader.spent = {"decode": 0.0, "crop_resize": 0.0}
        sync()
        t0 = time.perf_counter()
        for _ in range(a.batches):
            next(loader)
        sync()
        total = time.perf_counter() - t0
        images = a.batches * a.batch_size
        say({"phase": "loader", "images_per_sec": round(images / total, 1), "seconds": round(total, 3),
             "decode_s": round(loader.spent["decode"], 3), "crop_resize_s": round(loader.spent["crop_resize"], 3),
             "items_wait_s": round(total - sum(loader.spent.values()), 3), "workers": a.workers,
             "decoder": loader.decoder, "decode_calls": loader.decode_calls, "refused_batches": loader.refused_batches})
    files = [bytearray(Path(p).read_bytes()) for p, _ in entries[: a.batch_size]]
    with Files(entries, a.batch_size, a.image_size, framework="torch", gpu=gpu, workers=a.workers,
               decode_ahead=0) as items:
        next(items)
        t0 = time.perf_counter()
        for _ in range(a.batches):
            next(items)
        took = time.perf_counter() - t0
        say({"phase": "workers", "images_per_sec": round(a.batches * a.batch_size / took, 1),
             "seconds": round(took, 3), "workers": a.workers})
    if gpu is not None:
        from torchvision.io import ImageReadMode, decode_jpeg

        batch = [torch.frombuffer(f, dtype=torch.uint8) for f in files]
        decode_jpeg(batch, mode=ImageReadMode.RGB, device="cuda")
        sync()
        t0 = time.perf_counter()
        for _ in range(a.batches):
            decode_jpeg(batch, mode=ImageReadMode.RGB, device="cuda")
        sync()
        took = time.perf_counter() - t0
        say({"phase": "nvjpeg", "images_per_sec": round(a.batches * len(files) / took, 1), "seconds": round(took, 3),
             "torchvision": __import__("torchvision").__version__})
    image = data.pillow()

    def host_decode(f: bytes) -> tuple:
        with image.open(io.BytesIO(f)) as img:
            return img.convert("RGB").size

    with ThreadPoolExecutor(a.workers) as pool:
        list(pool.map(host_decode, files))
        t0 = time.perf_counter()
        for _ in range(a.batches):
            list(pool.map(host_decode, files))
        took = time.perf_counter() - t0
    say({"phase": "host_decode", "images_per_sec": round(a.batches * len(files) / took, 1), "seconds": round(took, 3),
         "workers": a.workers})
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
