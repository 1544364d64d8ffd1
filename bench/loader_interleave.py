#!/usr/bin/env python3
"""Real JPEGs against synthetic data in ONE process: the harness's ResNet50 (AMP, channels-last, bs256) built once,
then timed windows alternating on it: synthetic batch, real JPEGs through the gpu loader, synthetic, real, ...

    python bench/loader_interleave.py --list train_list.txt [--device gpu|cpu] [--batch-size 256]
        [--image-size 224] [--workers W] [--pairs 6] [--window-steps 20] [--window-warmup 4] [--loader-windows 3]
        [--decoders torchvision,nvimgcodec] [--budget-s 70] [--log FILE]

The backend (model, AMP, channels-last, Trainer) is built by the harness's own code (scripts/harness: cli.prepare,
train.BACKENDS; --lr 0.001 rather than the harness's 0.1 x B/256, at which alternating batches diverge: STABLE_LR),
each window timed by its own loop (train.timed_loop: each step between two device synchronisations): --window-warmup
untimed steps first (the loader's prefetched batches drained, so a window times its steady rate, not its queue), then
--window-steps timed ones. The real windows read the list through loader_gpu.DeviceImageLoader (decoder torchvision,
then nvimgcodec where it imports; on a CPU, the loader's CPU twin and the harness's CPU backend), handed over by
feed.loader_batches as train.py does. Pairs alternate in ABBA order so that drift hits both sides; after a decoder's
pairs, --loader-windows windows of the loader alone (train.time_batches: batches taken and synchronised, no training
step).

Why one process: real / synthetic is the loader's cost to the same trainer, model, cuDNN algorithms and clocks,
so a process's start-up differences cancel in the ratio; the kit's noise rule (kit.results.stats.ratio_check) is
applied over the paired windows of this process (bench/gpu_proof.py), which are the runs of this comparison.
Each decoder has its own share of --budget-s, in the order of --decoders: the time those before it left (each
takes up to its --pairs pairs and --loader-windows, then hands on); its pairs stop early when its share cannot hold
another, so a timeout of the caller never cuts a window. A decoder whose first pair the time left cannot hold (by
what the decoder before it took to open, warm up and pair) is not opened: out of time, as is one that got no pair.

stdout: one JSON line per window, as it ends: {"kind": "synthetic"|"real"|"loader", "decoder", "window", "images",
"seconds", "images_per_sec"}; first {"kind": "start", ...} (the device, the shape), after each decoder's windows
{"kind": "counters", "decoder", "decode_calls", "decoded_batches", "refused_batches", "batches", ...} (batches:
those the windows took; the rest: the loader's stats(), the decode process's "phases_s" and "process_s" where it
gives them); a decoder not measured says {"kind": "skipped" (not here), "out_of_time" or "failed" (the exception),
"decoder", "why"}. Every line carries "t", seconds since the epoch when it was written. The harness's own KITLOG
lines (each window's steps and run_stop) go to --log. Exit 0 when the windows ran (each decoder's lines say how
far it got), 1 when the harness itself could not start (a traceback), 2 bad input.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "scripts" / "harness"))

import feed  # noqa: E402  (the harness itself: its batches, backend, timed loop)
import train  # noqa: E402
from cli import prepare  # noqa: E402

DECODERS = ("torchvision", "nvimgcodec")
# A step's work does not depend on the learning rate's value. At the harness's 0.1 x B/256, windows alternating one
# synthetic batch (learnt by heart) with real JPEGs diverged on the H200 (2026-12-04: loss 7.8 -> 66 in the first
# real window, NaN in the next synthetic one, and every window after): windows of one process need a rate that
# stays finite whatever the order of the batches.
STABLE_LR = 0.001
# the shape on a CPU (the dry run): the harness's CPU preset of bench/harness_overhead.py, a little smaller
CPU_SHAPE = {"batch_size": 4, "image_size": 64}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="loader_interleave.py", description=__doc__.splitlines()[0])
    p.add_argument("--list", type=Path, required=True, help="the JPEGs' train_list.txt")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--precision", default="amp")
    p.add_argument("--layout", choices=("nchw", "nhwc"), default="nhwc")
    p.add_argument("--batch-size", type=int, default=None, help="default 256 (cpu: 4)")
    p.add_argument("--image-size", type=int, default=None, help="default 224 (cpu: 64)")
    p.add_argument("--workers", type=int, default=None, help="the loader's readers (default: the cores)")
    p.add_argument("--pairs", type=int, default=6, help="synthetic + real window pairs per decoder, at most")
    p.add_argument("--window-steps", type=int, default=20)
    p.add_argument("--window-warmup", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=10, help="synthetic steps once, before any window")
    p.add_argument("--loader-windows", type=int, default=3, help="windows of the loader alone per decoder")
    p.add_argument("--decoders", default=",".join(DECODERS))
    p.add_argument("--lr", type=float, default=STABLE_LR, help=f"learning rate (default {STABLE_LR}: see above)")
    p.add_argument("--budget-s", type=float, default=600)
    p.add_argument("--log", type=Path, default=None, help="the harness's KITLOG lines (default: discarded)")
    a = p.parse_args(argv)
    a.decoders = [d.strip() for d in a.decoders.split(",") if d.strip()]
    if not a.decoders or set(a.decoders) - set(DECODERS):
        p.error(f"--decoders: pick from {', '.join(DECODERS)}")
    if min(a.pairs, a.window_steps) < 1 or min(a.window_warmup, a.loader_windows) < 0:
        p.error("--pairs and --window-steps must be >= 1, --window-warmup and --loader-windows >= 0")
    shape = CPU_SHAPE if a.device == "cpu" else {"batch_size": 256, "image_size": 224}
    a.batch_size = a.batch_size or shape["batch_size"]
    a.image_size = a.image_size or shape["image_size"]
    return a


def say(**line) -> None:
    """One JSON line on the real stdout (the harness's lines go to the log), stamped t (seconds since the epoch)."""
    sys.__stdout__.write(json.dumps({**line, "t": round(time.time(), 3)}) + "\n")
    sys.__stdout__.flush()


def harness(a: argparse.Namespace):
    """(args, dist, backend) of train.py for this shape on synthetic data, built by the harness's own code."""
    args, dist = prepare(["--framework", "torch", "--model", a.model, "--precision", a.precision,
                          "--layout", a.layout, "--batch-size", str(a.batch_size), "--image-size", str(a.image_size),
                          "--device", a.device, "--warmup-steps", str(a.window_warmup),
                          "--measure-steps", str(a.window_steps), "--input-probe-steps", "0", "--lr", str(a.lr)])
    backend = train.BACKENDS["torch"](args, dist, args.threads or train.default_threads(dist.local_world_size))
    return args, dist, backend


def timed_window(args, backend, dist, stream: feed.Feed) -> tuple[int, float]:
    """(images, seconds) of one window: the harness's timed loop over STREAM, its warm-up steps untimed."""
    stop = {}

    def log(event: str, **fields) -> None:
        train.emit(event, **fields)
        if event == "run_stop":
            stop.update(fields)

    train.timed_loop(copy.copy(args), backend, dist, log, stream)
    return args.batch_size * stop["steps"], stop["seconds"]


def loader_window(args, backend, stream: feed.Feed) -> tuple[int, float]:
    """(images, seconds) of the loader alone: batches taken and synchronised, no training step."""
    train.time_batches(stream, backend, args.warmup_steps)
    seconds = train.time_batches(stream, backend, args.measure_steps)
    return args.batch_size * args.measure_steps, sum(seconds)


def open_real(a: argparse.Namespace, args, backend, decoder: str) -> tuple[object, feed.Feed]:
    """The gpu loader (its CPU twin on a CPU) over the list, and its batches as train.py takes them."""
    import data
    import loader_gpu

    entries = data.load_list(a.list, None, args.num_classes)
    loader = loader_gpu.DeviceImageLoader(entries, args.batch_size, args.image_size, framework="torch",
                                          gpu=0 if backend.device == "gpu" else None,
                                          channels_last=args.layout == "nhwc",
                                          workers=a.workers or train.default_threads(1), decoder=decoder)
    stream = feed.Feed("gpu", feed.loader_batches(loader, backend.batch_from_loader), loader.decode_device,
                       getattr(loader, "decoder", None))
    return loader, stream


def why_not(a: argparse.Namespace, decoder: str) -> str | None:
    """Why DECODER cannot run here, or None."""
    if decoder != "nvimgcodec":
        return None
    if a.device == "cpu":
        return "nvimgcodec decodes on a GPU; the CPU twin decodes with Pillow"
    try:
        from nvidia import nvimgcodec  # noqa: F401
    except Exception as exc:  # noqa: BLE001  (absent, or built for another CUDA)
        return f"nvimgcodec not installed ({type(exc).__name__}: {exc})"
    return None


def run_decoder(a, args, dist, backend, decoder: str, deadline: float, need_s: float) -> tuple[int, float]:
    """Pairs of (synthetic, real) windows, then the loader alone, for DECODER until DEADLINE; NEED_S: what a first
    pair is likely to take (a decoder before it opened, warmed and paired in that; 0: unknown). (pairs, what its
    first pair took, opening included). A decoder that cannot start its first pair in time says out_of_time; one
    that raises says failed (the exception), and the next decoder still runs."""
    import data

    left = deadline - time.monotonic()
    if need_s and left < need_s:
        say(kind="out_of_time", decoder=decoder, why=f"{max(left, 0):.0f} s of the stage left for it, a first pair "
            f"took {need_s:.0f} s")
        return 0, 0.0
    began = time.monotonic()
    try:
        loader, real = open_real(a, args, backend, decoder)
    except data.LoaderUnavailable as exc:
        say(kind="skipped", decoder=decoder, why=str(exc))
        return 0, 0.0
    except Exception as exc:  # noqa: BLE001  (this decoder's verdict: failed, naming it; the next one still runs)
        say(kind="failed", decoder=decoder, why=f"opening the loader: {type(exc).__name__}: {exc}")
        return 0, 0.0
    synthetic = feed.open_feed(args, backend, dist)
    batches, pair_s, pairs, first_pair_s = 0, 0.0, 0, 0.0
    try:
        opened = time.monotonic()
        timed_window(args, backend, dist, real)  # the loader's first batches (readers starting), untimed
        batches += args.warmup_steps + args.measure_steps
        first_s = time.monotonic() - opened  # the first real window alone: its opening is paid once
        for pair in range(1, a.pairs + 1):
            # room for this pair: the last one's time, or before any the first real window's (its readers'
            # start and first batches make it longer than a steady window: about a pair's two)
            if time.monotonic() + (pair_s or first_s) > deadline:
                break
            paired = time.monotonic()
            order = (("synthetic", synthetic), ("real", real))
            for kind, stream in order if pair % 2 else order[::-1]:
                images, seconds = timed_window(args, backend, dist, stream)
                batches += (args.warmup_steps + args.measure_steps) * (kind == "real")
                say(kind=kind, decoder=decoder, window=pair, images=images, seconds=round(seconds, 6),
                    images_per_sec=round(images / seconds, 3))
            pairs, pair_s = pair, time.monotonic() - paired
            first_pair_s = first_pair_s or time.monotonic() - began
        if not pairs:
            say(kind="out_of_time", decoder=decoder, why=f"no pair of windows fitted its {deadline - began:.0f} s "
                f"(opening took {opened - began:.0f} s, the first, untimed window {first_s:.0f} s)")
        for window in range(1, a.loader_windows + 1):
            if not pairs or time.monotonic() + pair_s / 2 > deadline:
                break
            images, seconds = loader_window(args, backend, real)
            batches += args.warmup_steps + args.measure_steps
            say(kind="loader", decoder=decoder, window=window, images=images, seconds=round(seconds, 6),
                images_per_sec=round(images / seconds, 3))
    except Exception as exc:  # noqa: BLE001  (as above)
        say(kind="failed", decoder=decoder, why=f"{type(exc).__name__}: {exc}")
    finally:
        real.batches.close()  # the loader's threads and readers stopped (feed.loader_batches' with block)
    say(kind="counters", decoder=decoder, batches=batches, **loader.stats())  # one decode call a batch: the design
    return pairs, first_pair_s


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    began = time.monotonic()
    log = open(a.log, "w") if a.log else open("/dev/null", "w")  # noqa: SIM115  (closed below)
    sys.stdout = log  # the harness's KITLOG lines go where a launcher's log would
    try:
        args, dist, backend = harness(a)
        warm = copy.copy(args)
        warm.warmup_steps, warm.measure_steps = max(a.warmup_steps, 1), 1  # cuDNN's autotuning, untimed
        timed_window(warm, backend, dist, feed.open_feed(args, backend, dist))
        say(kind="start", device=backend.device, device_name=backend.device_name, torch=backend.version,
            model=a.model, precision=a.precision, layout=a.layout, batch_size=a.batch_size, image_size=a.image_size,
            window_steps=a.window_steps, window_warmup=a.window_warmup, list=str(a.list),
            decoders=a.decoders, start_seconds=round(time.monotonic() - began, 3))
        runnable = []
        for decoder in a.decoders:
            if why := why_not(a, decoder):
                say(kind="skipped", decoder=decoder, why=why)
            else:
                runnable.append(decoder)
        need_s = 0.0
        for decoder in runnable:  # each in the time those before it left: their pairs are theirs to finish
            _pairs, took = run_decoder(a, args, dist, backend, decoder, began + a.budget_s, need_s)
            need_s = need_s or took
        return 0
    finally:
        sys.stdout = sys.__stdout__
        log.close()


if __name__ == "__main__":
    sys.exit(main())
