#!/usr/bin/env python3
"""A yardstick nobody here wrote: torchvision's ResNet50 / VGG16, trained with the harness's step and timing rule.

    python bench/yardstick.py --model resnet50 --batch-size 256 --precision amp --layout nhwc --mode eager \
        --warmup-steps 20 --measure-steps 100 [--repeats 1] [--image-size 224] [--device auto|cpu|gpu] [--threads N]
        [--json]

The step of scripts/harness/train.py: SGD momentum 0.9, weight decay 1e-4, lr 0.1 x B/256, one synthetic batch made
once on the device, softmax cross-entropy; the same math modes, set by the harness's own scripts/harness/precision.py;
layout nhwc = channels_last memory; mode compiled = torch.compile of the network, which compiles in the first warm-up
step. Each step is timed between two device synchronisations; the figure = B x M / (sum of the M measured step
seconds), images/s, printed on the last line (--json: one JSON object instead). --repeats R times R windows of M
steps one after another after the warm-up: one figure per window ("repeats" in the JSON), the median of them the
figure. harness / yardstick at the same setting on the same machine is what the harness's own code costs (or gains).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "harness"))

import precision  # noqa: E402  (the harness's math modes: one copy)
from backend import cpu_name  # noqa: E402

MODELS = ("resnet50", "vgg16")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="yardstick.py", description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=MODELS, required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--precision", choices=precision.PRECISIONS, default="fp32")
    p.add_argument("--layout", choices=("nchw", "nhwc"), default="nchw")
    p.add_argument("--mode", choices=("eager", "compiled"), default="eager")
    p.add_argument("--compile-backend", default="inductor", help="torch.compile's backend (--mode compiled)")
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--measure-steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=1, help="timed windows of --measure-steps each (default 1)")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the bare figure")
    a = p.parse_args(argv)
    if min(a.batch_size, a.image_size, a.num_classes, a.measure_steps, a.repeats) < 1 or a.warmup_steps < 0:
        p.error("--batch-size, --image-size, --num-classes, --measure-steps, --repeats must be >= 1, "
                "--warmup-steps >= 0")
    if a.mode == "compiled" and a.warmup_steps == 0:
        p.error("--mode compiled needs --warmup-steps >= 1: the network compiles in the first step")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    precision.set_environment(a.precision)  # before torch loads cuBLAS and cuDNN
    import torch
    import torch.nn.functional as F

    try:
        import torchvision
    except Exception as exc:  # noqa: BLE001  (absent, or built for another torch)
        print(f"yardstick.py: torchvision is not importable: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if a.threads:
        torch.set_num_threads(a.threads)
    use_gpu = a.device == "gpu" or (a.device == "auto" and torch.cuda.is_available())
    if use_gpu and not torch.cuda.is_available():
        print("yardstick.py: --device gpu but PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda" if use_gpu else "cpu")
    if use_gpu:
        torch.backends.cudnn.benchmark = True
    precision.torch_set(torch, a.precision)
    mode = precision.MODES[a.precision]
    note = precision.fallback_note(a.precision, "gpu" if use_gpu else "cpu", "torch")
    dtype = None if note else mode.autocast
    torch.manual_seed(0)
    memory_format = torch.channels_last if a.layout == "nhwc" else torch.contiguous_format
    net = getattr(torchvision.models, a.model)(num_classes=a.num_classes).to(dev, memory_format=memory_format)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1 * a.batch_size / 256, momentum=0.9, weight_decay=1e-4)
    forward = torch.compile(net, backend=a.compile_backend) if a.mode == "compiled" else net
    scaler = torch.amp.GradScaler("cuda") if mode.loss_scaling and dtype else None
    x = torch.randn(a.batch_size, 3, a.image_size, a.image_size, device=dev).contiguous(memory_format=memory_format)
    y = torch.randint(0, a.num_classes, (a.batch_size,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with precision.torch_autocast(torch, dev.type, dtype):
            loss = F.cross_entropy(forward(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    def sync():
        if use_gpu:
            torch.cuda.synchronize(dev)

    seconds, skipped, first = [], 0, None
    scale = scaler.get_scale() if scaler else None
    total = a.warmup_steps + a.measure_steps * a.repeats
    for index in range(total):
        sync()
        t0 = time.perf_counter()
        loss = step()
        sync()
        took = time.perf_counter() - t0
        first = took if first is None else first
        if index >= a.warmup_steps:
            seconds.append(took)
            if scaler:  # a lower scale: this step's gradients overflowed and the update was skipped
                skipped += scaler.get_scale() < scale
        scale = scaler.get_scale() if scaler else None
    final = float(loss.detach())
    if not math.isfinite(final):
        print(f"yardstick.py: loss is {final} after {total} steps", file=sys.stderr)
        return 3
    if skipped:
        print(f"yardstick.py: warning: {skipped} of {a.measure_steps * a.repeats} measured steps skipped their update "
              "(loss-scale overflow): the figure covers less work", file=sys.stderr)
    windows = [round(a.batch_size * a.measure_steps / sum(seconds[r * a.measure_steps:(r + 1) * a.measure_steps]), 3)
               for r in range(a.repeats)]
    figure = statistics.median(windows)
    if not a.json:
        print(figure)
        return 0
    result = {
        "model": a.model, "batch_size": a.batch_size, "precision": a.precision, "layout": a.layout, "mode": a.mode,
        "images_per_sec": figure, "device_name": torch.cuda.get_device_name(dev) if use_gpu else cpu_name(),
        "torch": torch.__version__, "torchvision": torchvision.__version__, "image_size": a.image_size,
        "warmup_steps": a.warmup_steps, "measure_steps": a.measure_steps, "repeats": windows,
        "math": precision.torch_math(torch, dev.type, dtype, scaler is not None), "note": note,
        "compile_seconds": round(first, 6) if a.mode == "compiled" else None,
        "loss": round(final, 5), "skipped_steps": skipped,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
