#!/usr/bin/env python3
"""A minimal training loop: the yardstick for the harness's overhead (bench/harness_overhead.py).

The same model module, Trainer (optimizer and step), batch and threads as scripts/harness/train.py, but nothing
else: no per-step timing, synchronisation, loss check or log line. Prints one number: the figure over the measured
steps (one clock read before and one after them) -- samples/s, or for seed 003's NLP models whole epochs of the
same synthetic corpus: sequences/s (bert) or target tokens/s (transformer). Every model steps through its
framework's Trainer (torch_trainer.py, paddle_trainer.py: momentum SGD with the linear-scaling lr for the ImageNet
models, their publisher's optimizer for seed 003's), as the harness does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "harness"))

from catalogue import NLP, SEED003  # noqa: E402  (the harness's catalogue: seed 003's models, those timed by epoch)
from cpu_shape import add_shape_flags  # noqa: E402


def training(a):
    """(step function over a batch, list of device batches, counts per batch)."""
    import model_specs
    import synthetic

    if a.framework == "torch":
        import models_torch as models
        import torch
        from torch_trainer import Trainer

        torch.set_num_threads(a.threads)
        torch.manual_seed(0)

        def to_device(arrays):
            return tuple(torch.from_numpy(x) for x in arrays)
    else:
        import models_paddle as models
        import paddle
        from paddle_trainer import Trainer

        paddle.set_device("cpu")
        paddle.seed(0)

        def to_device(arrays):
            return tuple(paddle.to_tensor(x) for x in arrays)
    classes = a.num_classes if a.model not in SEED003 or a.model in ("se_resnext50", "deeplabv3p") else None
    net = models.build_model(a.model, num_classes=classes, **({"size": a.size} if a.model in SEED003 else {}))
    net.train()
    step = Trainer(a.model, net, batch_size=a.batch_size).launcher()
    if a.model in NLP:
        vocab = model_specs.seed003_config(a.model, a.size)["vocab"]
        make = synthetic.bert_corpus if a.model == "bert" else synthetic.transformer_corpus
        corpus = make(a.corpus_size, a.batch_size, a.seq_len, vocab, 0)
        count = [b.sequences if a.model == "bert" else b.tokens for b in corpus]
        return step, [to_device(b.arrays) for b in corpus], count
    if a.model not in SEED003 and a.framework == "torch":  # the harness's torch batch (TorchBackend.synthetic_batch)
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(a.batch_size, 3, a.image_size, a.image_size, generator=gen)
        y = torch.randint(0, a.num_classes, (a.batch_size,), generator=gen)
        return step, [(x, y)], [a.batch_size]
    arrays = synthetic.vision_batch(a.model, a.batch_size, a.image_size, classes or 0, 0)
    return step, [to_device(arrays)], [a.batch_size]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--framework", choices=("paddle", "torch"), required=True)
    add_shape_flags(p)
    p.add_argument("--size", default="full")
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--corpus-size", type=int, default=None)
    p.add_argument("--measure-epochs", type=int, default=1)
    a = p.parse_args()
    if a.framework == "paddle":
        os.environ["FLAGS_paddle_num_threads"] = os.environ["OMP_NUM_THREADS"] = str(a.threads)
    step, batches, counts = training(a)
    for i in range(a.warmup_steps):
        step(*batches[i % len(batches)])
    if a.model in NLP:  # whole epochs of the corpus, as the harness times them
        t0 = time.perf_counter()
        for _ in range(a.measure_epochs):
            for batch in batches:
                step(*batch)
        seconds = time.perf_counter() - t0
        print(f"{sum(counts) * a.measure_epochs / seconds:.4f}")
        return 0
    t0 = time.perf_counter()
    for _ in range(a.measure_steps):
        step(*batches[0])
    seconds = time.perf_counter() - t0
    print(f"{a.batch_size * a.measure_steps / seconds:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
