#!/usr/bin/env python3
"""A minimal training loop: the yardstick for the harness's overhead (bench/harness_overhead.py).

The same model module, optimizer, batch and threads as scripts/harness/train.py, but nothing else:
no per-step timing, synchronisation, loss check or log line. Prints one number: samples/s over
the measured steps (one clock read before and one after them).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "harness"))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--framework", choices=("paddle", "torch"), required=True)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measure-steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = p.parse_args()
    lr = 0.1 * a.batch_size / 256
    if a.framework == "torch":
        import models_torch
        import torch

        torch.set_num_threads(a.threads)
        net = models_torch.build_model(a.model, num_classes=a.num_classes)
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(a.batch_size, 3, a.image_size, a.image_size, generator=gen)
        y = torch.randint(0, a.num_classes, (a.batch_size,), generator=gen)

        def step():
            opt.zero_grad(set_to_none=True)
            net(x, y).backward()
            opt.step()
    else:
        os.environ["FLAGS_paddle_num_threads"] = os.environ["OMP_NUM_THREADS"] = str(a.threads)
        import models_paddle
        import numpy as np
        import paddle

        paddle.set_device("cpu")
        net = models_paddle.build_model(a.model, num_classes=a.num_classes)
        opt = paddle.optimizer.Momentum(learning_rate=lr, momentum=0.9, parameters=net.parameters(),
                                        weight_decay=paddle.regularizer.L2Decay(1e-4))
        rng = np.random.default_rng(0)
        x = paddle.to_tensor(rng.standard_normal((a.batch_size, 3, a.image_size, a.image_size), dtype=np.float32))
        y = paddle.to_tensor(rng.integers(0, a.num_classes, size=(a.batch_size,), dtype=np.int64))

        def step():
            opt.clear_grad()
            net(x, y).backward()
            opt.step()

    net.train()
    for _ in range(a.warmup_steps):
        step()
    t0 = time.perf_counter()
    for _ in range(a.measure_steps):
        step()
    seconds = time.perf_counter() - t0
    print(f"{a.batch_size * a.measure_steps / seconds:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
