#!/usr/bin/env python3
"""The kit's training harness: one model, one data path, one timing rule, one log line, any framework.

    python train.py --framework paddle|torch --batch-size B [options] --model resnet50|vgg16|arcface|
        se_resnext50|deeplabv3p|bert|transformer|cyclegan

This file holds the command line, the timing rule and the log lines; backend_torch.py and backend_paddle.py hold
what differs between frameworks, precision.py the math modes, models_*.py the networks. See README.md beside this
file for the log lines and exit codes. Standard library + the framework (+ numpy, Pillow for JPEG data); never
imports the kit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

HARNESS_DIR = Path(__file__).resolve().parent
if str(HARNESS_DIR) not in sys.path:
    sys.path.insert(0, str(HARNESS_DIR))

from backend import (  # noqa: E402
    MODELS,
    NLP,
    NOT_COMPILABLE,
    SEED003,
    Backend,
    Dist,
    HarnessFailure,
    model_options,
)
from backend_paddle import PaddleBackend  # noqa: E402  (neither imports its framework before it is built)
from backend_torch import TorchBackend  # noqa: E402
from catalogue import CATALOGUE  # noqa: E402
from precision import PRECISIONS  # noqa: E402

FRAMEWORKS = ("paddle", "torch")
# the published shapes and classes (catalogue.py): ImageNet 224, PLSC's 112 and MS1M-V3 identities, Paddle's
# DeepLabV3+ Cityscapes crop 769 and 19 classes, CycleGAN's 256
DEFAULT_IMAGE_SIZE = {m.name: m.image_size for m in CATALOGUE if m.image_size}
DEFAULT_CLASSES = {m.name: m.num_classes for m in CATALOGUE if m.num_classes}
DEFAULT_SEQ_LEN = {"bert": 512, "transformer": 256}  # BERT's max_seq_len; the Transformer's max sentence length
DEFAULT_CORPUS = {"bert": 4096, "transformer": 20000}  # sequences / sentence pairs in the synthetic corpus
UNIT = {"bert": "sequences/s", "transformer": "tokens/s", "cyclegan": "samples/s"}  # others: images/s
LOG_VERSION = 1
LAYOUTS = ("nchw", "nhwc")
MODES = ("eager", "compiled")
LOADERS = ("cpu", "gpu", "dali")  # the JPEG pipelines: loader_cpu.py, loader_gpu.py, loader_dali.py
PROBE_WARMUP = 4  # untimed batches before an input probe: the loaders' prefetch depth, so the queue is full
GPU_TWIN_NOTE = ("loader gpu decodes with nvJPEG on a GPU: on a CPU its twin runs (Pillow decodes; crop, resize "
                 "and normalisation are tensor ops on the CPU)")
BACKENDS = {"torch": TorchBackend, "paddle": PaddleBackend}

EXIT_ERROR, EXIT_BAD_INPUT, EXIT_NAN, EXIT_OOM = 1, 2, 3, 4
REASON_EXIT = {"error": EXIT_ERROR, "bad_input": EXIT_BAD_INPUT, "nan_loss": EXIT_NAN, "out_of_memory": EXIT_OOM}


def emit(event: str, **fields) -> None:
    line = {"kit": LOG_VERSION, "event": event, "time_ms": round(time.time() * 1000), **fields}
    # one write per line: ranks sharing one stdout (torch.distributed.run, PYTHONUNBUFFERED) must not interleave
    sys.stdout.write(":::KITLOG " + json.dumps(line, separators=(", ", ": ")) + "\n")
    sys.stdout.flush()


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text) if text.lstrip("-").isdigit() else None
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="train.py", description=__doc__.splitlines()[0])
    p.add_argument("--framework", required=True, choices=FRAMEWORKS)
    p.add_argument("--model", required=True, choices=MODELS)
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="per-process batch (not for --count-params): images, sequences (bert), tokens (transformer)")
    p.add_argument("--image-size", type=positive_int, default=None,
                   help="square input side (default 224; arcface 112, deeplabv3p 769, cyclegan 256)")
    p.add_argument("--num-classes", type=positive_int, default=None,
                   help="classes (default 1000; arcface 93431, deeplabv3p 19)")
    p.add_argument("--size", choices=("full", "tiny"), default="full",
                   help="seed 003's models: the published configuration (full) or a small one for CPU tests")
    p.add_argument("--seq-len", type=positive_int, default=None,
                   help="bert: max sequence length (default 512); transformer: max sentence length (default 256)")
    p.add_argument("--corpus-size", type=positive_int, default=None,
                   help="bert: sequences (default 4096), transformer: sentence pairs (default 20000) per epoch")
    p.add_argument("--measure-epochs", type=positive_int, default=1,
                   help="bert, transformer: whole epochs measured (after --warmup-steps steps)")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="fp32 (no TF32 anywhere), tf32, amp (FP16 autocast + loss scaling), bf16 (BF16 autocast)")
    p.add_argument("--data", default="synthetic", help="'synthetic' or the path of an ImageNet train_list.txt")
    p.add_argument("--data-root", default=None, help="root the list's paths are relative to (default: its folder)")
    p.add_argument("--workers", type=positive_int, default=4,
                   help="threads per process that read (and with --loader cpu decode) JPEGs; dali: its num_threads")
    p.add_argument("--loader", choices=LOADERS, default=None,
                   help="JPEG pipeline for --data <list>: cpu (Pillow in threads), gpu (nvJPEG and tensor ops on the "
                        "device; on a CPU its CPU twin), dali (NVIDIA DALI); default gpu on a CUDA device, else cpu")
    p.add_argument("--loader-only", action="store_true",
                   help="time the loader alone for the warm-up + measured steps (no training step): the input rate")
    p.add_argument("--input-probe-steps", type=non_negative_int, default=20,
                   help="real data: before warm-up, time the loader alone over N batches (an input_rate line); 0: no")
    p.add_argument("--layout", choices=LAYOUTS, default="nchw",
                   help="nhwc: NHWC layers and input (Paddle) / channels_last memory (PyTorch)")
    p.add_argument("--channels-last", dest="layout", action="store_const", const="nhwc", default=argparse.SUPPRESS,
                   help="the same as --layout nhwc")
    p.add_argument("--mode", choices=MODES, default="eager",
                   help="compiled: torch.compile / paddle.jit.to_static, compiled in the first warm-up step")
    p.add_argument("--compile-backend", default=None,
                   help="torch: torch.compile's backend (default inductor; aot_eager skips code generation)")
    p.add_argument("--warmup-steps", type=non_negative_int, default=20)
    p.add_argument("--measure-steps", type=positive_int, default=100)
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 0.1 x global batch / 256)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads per process (default: cores/procs)")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count-params", action="store_true", help="print the model's trainable parameter count and exit")
    return p


def default_threads(local_world_size: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, local_world_size))


def count_params_only(args) -> int:
    """Shapes only: the layers are built without allocating or initialising their weights."""
    if args.framework == "torch":
        import models_torch as models
        import torch

        with torch.device("meta"):
            net = models.build_model(args.model, num_classes=args.num_classes, **model_options(args))
    else:
        import models_paddle as models
        import paddle

        with paddle.LazyGuard():
            net = models.build_model(args.model, num_classes=args.num_classes, **model_options(args))
    n = models.count_params(net)
    classes = f" num_classes={args.num_classes}" if args.num_classes is not None else ""
    size = f" size={args.size}" if args.model in SEED003 else ""
    print(f"model={args.model} framework={args.framework}{classes}{size} params={n}", flush=True)
    return 0


@dataclass
class Feed:
    """Where a run's batches come from, and what run_start says of it."""

    loader: str  # synthetic | cpu | gpu | dali
    batches: Iterator  # endless device batches
    decode_device: str | None = None  # where JPEGs are decoded: cpu | gpu
    decoder: str | None = None  # what decodes them
    note: str | None = None  # the pipeline ran elsewhere than its name says


def open_feed(args, backend: Backend, dist: Dist) -> Feed:
    """The batches: one fixed random batch made once on the device (synthetic), or a JPEG loader's."""
    if args.model in SEED003:  # numpy-made, so both frameworks train on the same batch
        import synthetic

        arrays = synthetic.vision_batch(args.model, args.batch_size, args.image_size, args.num_classes or 0,
                                        args.seed + dist.rank)
        return Feed("synthetic", repeat(backend.to_device(arrays)))
    if args.data == "synthetic":
        fixed = backend.synthetic_batch(args.batch_size, args.image_size, args.num_classes, args.seed + dist.rank)
        return Feed("synthetic", repeat(fixed))
    import data

    name = args.loader or ("gpu" if backend.device == "gpu" else "cpu")
    gpu = dist.local_rank if backend.device == "gpu" else None
    shard = {"rank": dist.rank, "world_size": dist.world_size, "seed": args.seed, "workers": args.workers}
    try:
        entries = data.load_list(args.data, args.data_root)
        if name == "cpu":
            import loader_cpu

            loader = loader_cpu.ImageListLoader(entries, args.batch_size, args.image_size, **shard)
            handoff = backend.batch_from_numpy
        else:
            import loader_dali
            import loader_gpu

            kind = loader_gpu.DeviceImageLoader if name == "gpu" else loader_dali.DaliLoader
            loader = kind(entries, args.batch_size, args.image_size, framework=args.framework, gpu=gpu,
                          channels_last=args.layout == "nhwc", **shard)
            handoff = backend.batch_from_loader
    except (data.DataError, data.LoaderUnavailable) as exc:
        raise HarnessFailure("bad_input", str(exc)) from None
    note = GPU_TWIN_NOTE if name == "gpu" and gpu is None else None
    return Feed(name, loader_batches(loader, handoff), loader.decode_device, loader.decoder, note)


def loader_batches(loader, handoff) -> Iterator:
    import data

    with loader:
        try:
            for images, labels in loader:
                yield handoff(images, labels)
        except data.DataError as exc:
            raise HarnessFailure("bad_input", str(exc)) from None


def batches(args, backend: Backend, dist: Dist) -> Iterator:
    """An endless stream of device batches (open_feed's)."""
    return open_feed(args, backend, dist).batches


def time_batches(feed: Feed, backend: Backend, count: int) -> list[float]:
    """Seconds to take each of COUNT batches from FEED, the device synchronised after each: the loader alone."""
    seconds = []
    for _ in range(count):
        t0 = time.perf_counter()
        next(feed.batches)
        backend.sync()
        seconds.append(time.perf_counter() - t0)
    return seconds


def input_rate(feed: Feed, global_batch: int, seconds: list[float], probe: bool, dist: Dist) -> dict:
    """The input_rate line's fields: images/s of the loader alone, every rank reading its shard at the same time
    (rank 0's time, as the step lines)."""
    total = sum(seconds)
    return {"images_per_sec": round(global_batch * len(seconds) / total, 3), "loader": feed.loader,
            "decode_device": feed.decode_device, "steps": len(seconds), "seconds": round(total, 6),
            "global_batch": global_batch, "ranks": dist.world_size, "probe": probe}


def run_fields(args, dist: Dist) -> dict:
    """What every step, epoch and run_stop line carries beside its figures."""
    return {"ranks": dist.world_size, "framework": args.framework, "model": args.model, "precision": args.precision,
            "layout": args.layout, "mode": args.mode}


def timed_loop(args, backend: Backend, dist: Dist, log, feed: Feed | None = None) -> int:
    global_batch = args.batch_size * dist.world_size
    common = run_fields(args, dist)
    feed = feed or open_feed(args, backend, dist)
    if feed.loader != "synthetic" and args.input_probe_steps:  # every real-data figure carries its input rate
        time_batches(feed, backend, PROBE_WARMUP)
        log("input_rate", **input_rate(feed, global_batch, time_batches(feed, backend, args.input_probe_steps),
                                       True, dist))
    stream = feed.batches
    total_steps = args.warmup_steps + args.measure_steps
    measured = 0.0
    warm_start = time.perf_counter()
    compiled = {}
    for step in range(1, total_steps + 1):
        first = not backend.started
        backend.sync()
        t0 = time.perf_counter()
        batch = next(stream)
        loss = backend.train_step(*batch)  # float(): waits for the step's work
        backend.sync()
        seconds = time.perf_counter() - t0
        if not math.isfinite(loss):
            raise HarnessFailure("nan_loss", f"loss is {loss} at step {step} (lr {args.lr}, batch {args.batch_size})")
        if first and backend.compiler:  # a warm-up step (prepare refuses --mode compiled without warm-up)
            compiled["compile_seconds"] = round(seconds, 6)
            log("compile", step=step, seconds=round(seconds, 6), compiler=backend.compiler)
        if step == args.warmup_steps:
            log("warmup_end", steps=step, seconds=round(time.perf_counter() - warm_start, 6))
        if step > args.warmup_steps:
            measured += seconds
            log(
                "step",
                step=step,
                global_batch=global_batch,
                seconds=round(seconds, 6),
                samples_per_sec=round(global_batch / seconds, 3),
                **common,
                loss=round(loss, 5),
            )
    steps = args.measure_steps
    figure = round(global_batch * steps / measured, 3)
    log(
        "run_stop",
        status="success",
        steps=steps,
        seconds=round(measured, 6),
        samples_per_sec=figure,
        **common,
        unit=UNIT.get(args.model, "images/s"),
        throughput=figure,
        **compiled,
        **backend.peak_memory(),
    )
    return steps


def loader_only(args, backend: Backend, dist: Dist, log, feed: Feed) -> int:
    """--loader-only: the loader's batches taken and synchronised as in timed_loop, with no training step; the
    step lines and run_stop carry the input rate as the run's figure (run_stop says loader_only)."""
    global_batch = args.batch_size * dist.world_size
    common = run_fields(args, dist)
    warm_start = time.perf_counter()
    time_batches(feed, backend, args.warmup_steps)
    if args.warmup_steps:
        log("warmup_end", steps=args.warmup_steps, seconds=round(time.perf_counter() - warm_start, 6))
    measured = []
    for step in range(args.warmup_steps + 1, args.warmup_steps + args.measure_steps + 1):
        (seconds,) = time_batches(feed, backend, 1)
        measured.append(seconds)
        log("step", step=step, global_batch=global_batch, seconds=round(seconds, 6),
            samples_per_sec=round(global_batch / seconds, 3), **common)
    rate = input_rate(feed, global_batch, measured, False, dist)
    log("input_rate", **rate)
    log("run_stop", status="success", steps=args.measure_steps, seconds=rate["seconds"],
        samples_per_sec=rate["images_per_sec"], **common, unit="images/s", throughput=rate["images_per_sec"],
        loader_only=True, **backend.peak_memory())
    return args.measure_steps


def nlp_corpus(args, dist: Dist) -> list:
    """The epoch's batches (synthetic.Batch, numpy) for this rank: the same corpus on every rank, rows split."""
    import synthetic

    vocab = synthetic_vocab(args)
    if args.model == "bert":
        return synthetic.bert_corpus(args.corpus_size, args.batch_size, args.seq_len, vocab, args.seed,
                                     dist.rank, dist.world_size)
    return synthetic.transformer_corpus(args.corpus_size, args.batch_size, args.seq_len, vocab, args.seed,
                                        dist.rank, dist.world_size)


def synthetic_vocab(args) -> int:
    """The configuration's vocabulary, from the framework's own model module (already imported by the backend)."""
    import importlib

    return importlib.import_module(f"models_{args.framework}").seed003_config(args.model, args.size)["vocab"]


def counted(unit: str, sequences: int, tokens: int) -> int:
    """What an NLP figure in unit counts: tokens for tokens/s, else sequences."""
    return tokens if unit == "tokens/s" else sequences


def timed_epochs(args, backend: Backend, dist: Dist, log) -> int:
    """Seed 003's rule for NLP: samples differ in length, so the figure is whole epochs of a fixed corpus over
    their time. W warm-up steps (cycling through the corpus), then E epochs; each step timed as in timed_loop.
    BERT: sequences/s; Transformer: (target) tokens/s."""
    try:
        corpus = nlp_corpus(args, dist)
    except ValueError as exc:
        raise HarnessFailure("bad_input", str(exc)) from None
    batches = [backend.to_device(b.arrays) for b in corpus]
    unit = UNIT[args.model]
    common = run_fields(args, dist)
    log("corpus", batches_per_epoch=len(corpus), sequences_per_epoch=sum(b.sequences for b in corpus),
        tokens_per_epoch=sum(b.tokens for b in corpus), seq_len=args.seq_len, corpus_size=args.corpus_size)

    def one_step(index: int, what: str) -> tuple[float, float]:
        backend.sync()
        t0 = time.perf_counter()
        loss = backend.train_step(*batches[index])
        backend.sync()
        seconds = time.perf_counter() - t0
        if not math.isfinite(loss):
            raise HarnessFailure("nan_loss", f"loss is {loss} at {what} (lr {args.lr}, batch {args.batch_size})")
        return seconds, loss

    warm_start = time.perf_counter()
    for step in range(1, args.warmup_steps + 1):
        one_step((step - 1) % len(batches), f"warm-up step {step}")
    if args.warmup_steps:
        log("warmup_end", steps=args.warmup_steps, seconds=round(time.perf_counter() - warm_start, 6))
    step = args.warmup_steps
    total = {"seconds": 0.0, "sequences": 0, "tokens": 0, "steps": 0}
    for epoch in range(1, args.measure_epochs + 1):
        seconds_sum, sequences, tokens = 0.0, 0, 0
        for index, item in enumerate(corpus):
            step += 1
            seconds, loss = one_step(index, f"epoch {epoch} batch {index + 1}")
            seconds_sum += seconds
            sequences += item.sequences
            tokens += item.tokens
            log("step", step=step, epoch=epoch, timing="epochs", global_batch=item.sequences, tokens=item.tokens,
                seconds=round(seconds, 6), samples_per_sec=round(item.sequences / seconds, 3),
                tokens_per_sec=round(item.tokens / seconds, 3), **common, loss=round(loss, 5))
        value = counted(unit, sequences, tokens) / seconds_sum
        log("epoch", epoch=epoch, steps=len(corpus), sequences=sequences, tokens=tokens,
            seconds=round(seconds_sum, 6), unit=unit, throughput=round(value, 3), **common)
        total["seconds"] += seconds_sum
        total["sequences"] += sequences
        total["tokens"] += tokens
        total["steps"] += len(corpus)
    measured = total["seconds"]
    log(
        "run_stop",
        status="success",
        steps=total["steps"],
        epochs=args.measure_epochs,
        sequences=total["sequences"],
        tokens=total["tokens"],
        seconds=round(measured, 6),
        samples_per_sec=round(total["sequences"] / measured, 3),
        sequences_per_sec=round(total["sequences"] / measured, 3),
        tokens_per_sec=round(total["tokens"] / measured, 3),
        **common,
        unit=unit,
        throughput=round(counted(unit, total["sequences"], total["tokens"]) / measured, 3),
        **backend.peak_memory(),
    )
    return total["steps"]


def run(args, dist: Dist) -> int:
    is_logger = dist.rank == 0

    def log(event: str, **fields) -> None:
        if is_logger:
            emit(event, **fields)

    threads = args.threads or default_threads(dist.local_world_size)
    backend = None
    try:
        if args.mode == "compiled" and args.model in NOT_COMPILABLE:
            raise HarnessFailure("bad_input", f"--mode compiled: {args.model} has no compiled path here: "
                                              f"{NOT_COMPILABLE[args.model]}")
        backend = BACKENDS[args.framework](args, dist, threads)
        feed = None if args.model in NLP else open_feed(args, backend, dist)
        notes = [n for n in (backend.note, feed and feed.note) if n]
        note = {"note": "; ".join(notes)} if notes else {}
        if is_logger:
            for line in notes:
                print(f"train.py: warning: {line}", file=sys.stderr, flush=True)
        loader = {"loader": feed.loader if feed else "synthetic", "decode_device": feed and feed.decode_device,
                  "decoder": feed and feed.decoder, "loader_only": args.loader_only}
        if backend.trainer is not None:
            settings = backend.trainer.settings
            optimizer = {"optimizer": settings["optimizer"], "lr": settings["lr"],
                         **{k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()
                            if k not in ("optimizer", "lr")}}
        else:
            optimizer = {"optimizer": "momentum_sgd", "lr": args.lr, "momentum": args.momentum,
                         "weight_decay": args.weight_decay}
        shape = {"image_size": args.image_size} if args.model not in NLP else {
            "seq_len": args.seq_len, "corpus_size": args.corpus_size, "measure_epochs": args.measure_epochs}
        seed003 = {"size": args.size, "unit": UNIT.get(args.model, "images/s")} if args.model in SEED003 else {}
        log(
            "run_start",
            framework=args.framework,
            framework_version=backend.version,
            model=args.model,
            params=backend.count_params(),
            num_classes=args.num_classes,
            precision=args.precision,
            math=backend.math,
            amp_effective=backend.amp_effective,
            **note,
            layout=args.layout,
            mode=args.mode,
            compiler=backend.compiler,
            device=backend.device,
            device_name=backend.device_name,
            device_count=backend.device_count,
            cuda_version=backend.cuda_version,
            cudnn_version=backend.cudnn_version,
            ranks=dist.world_size,
            local_batch=args.batch_size,
            global_batch=args.batch_size * dist.world_size,
            **shape,
            **seed003,
            data=args.data,
            **loader,
            workers=args.workers if feed and feed.decoder else None,
            channels_last=args.channels_last,
            threads=threads,
            warmup_steps=args.warmup_steps,
            measure_steps=args.measure_steps,
            **optimizer,
            seed=args.seed,
            host=socket.gethostname(),
            python=platform.python_version(),
        )
        if args.model in NLP:
            steps = timed_epochs(args, backend, dist, log)
        else:
            steps = (loader_only if args.loader_only else timed_loop)(args, backend, dist, log, feed)
        backend.barrier()
        rank_stop(dist, "success", steps, **backend.peak_memory())
        return 0
    except HarnessFailure as exc:
        return fail(exc.reason, str(exc), dist, log)
    except KeyboardInterrupt:
        fail("interrupted", "interrupted (Ctrl-C / SIGINT)", dist, log)
        return 130
    except Exception as exc:  # the framework's own errors: report them as a failed run, never as a figure
        reason = "out_of_memory" if backend is not None and backend.is_oom(exc) else "error"
        if reason == "error" and isinstance(exc, MemoryError):
            reason = "out_of_memory"
        return fail(reason, f"{type(exc).__name__}: {exc}", dist, log)
    finally:
        if backend is not None:
            backend.close()


def fail(reason: str, message: str, dist: Dist, log) -> int:
    first_line = message.strip().splitlines()[0] if message.strip() else reason
    print(f"train.py: rank {dist.rank}: {reason}: {message}", file=sys.stderr, flush=True)
    log("run_stop", status="failed", reason=reason, message=first_line[:500])
    rank_stop(dist, "failed", 0, reason=reason)
    return REASON_EXIT.get(reason, EXIT_ERROR)


def rank_stop(dist: Dist, status: str, steps: int, **fields) -> None:
    """Every rank, not only the logger, says it finished: an auditor checks that no rank is missing."""
    emit("rank_stop", status=status, rank=dist.rank, ranks=dist.world_size, local_rank=dist.local_rank,
         host=socket.gethostname(), steps=steps, **fields)


def prepare(argv: list[str] | None = None) -> tuple[argparse.Namespace, Dist]:
    """The command line checked and completed (defaults per model, the lr rule) and this process's place in the
    run; a bad argument exits with argparse's message. --count-params is main's."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.channels_last = args.layout == "nhwc"  # the older name, for readers of args
    if args.model in NLP:
        for flag, value in (("--image-size", args.image_size), ("--num-classes", args.num_classes)):
            if value is not None:
                parser.error(f"{flag} does not apply to {args.model}")
        args.seq_len = args.seq_len or DEFAULT_SEQ_LEN[args.model]
        args.corpus_size = args.corpus_size or DEFAULT_CORPUS[args.model]
    elif args.model == "cyclegan":
        if args.num_classes is not None:
            parser.error("--num-classes does not apply to cyclegan")
        args.image_size = args.image_size or DEFAULT_IMAGE_SIZE[args.model]
    else:
        args.image_size = args.image_size or DEFAULT_IMAGE_SIZE[args.model]
        args.num_classes = args.num_classes or DEFAULT_CLASSES[args.model]
    if args.model not in SEED003 and args.size != "full":
        parser.error(f"--size applies to seed 003's models ({', '.join(SEED003)}), not {args.model}")
    if args.count_params:
        return args, Dist(0, 1, 0, 1)
    if args.batch_size is None:
        parser.error("--batch-size is required (per process)")
    if args.data != "synthetic" and not Path(args.data).is_file():
        parser.error(f"--data: no such train list: {args.data} (give 'synthetic' or a train_list.txt)")
    for flag, given in (("--loader", args.loader is not None), ("--loader-only", args.loader_only)):
        if given and args.data == "synthetic":
            parser.error(f"{flag} applies to --data <train_list.txt>: synthetic data is made on the device")
    if args.loader_only and args.mode == "compiled":
        parser.error("--loader-only runs no network, so --mode compiled does not apply")
    if args.model in ("arcface", "deeplabv3p") and args.batch_size < 2:
        parser.error(f"--batch-size must be >= 2 for {args.model} (its BatchNorm on pooled features needs two samples)")
    if args.model in SEED003:
        if args.data != "synthetic":
            parser.error(f"--data: {args.model} runs on synthetic data only (no reader for its dataset yet)")
        if args.layout == "nhwc":
            parser.error(f"--layout nhwc (--channels-last): {args.model} is built NCHW only")
    if args.mode == "compiled" and args.warmup_steps == 0:
        parser.error("--mode compiled needs --warmup-steps >= 1: the network compiles in the first step, "
                     "which must not be timed")
    if args.compile_backend is not None and (args.framework != "torch" or args.mode != "compiled"):
        parser.error("--compile-backend applies to --framework torch --mode compiled only")
    if args.framework == "torch" and args.mode == "compiled":
        args.compile_backend = args.compile_backend or "inductor"
    if args.model in NLP and args.measure_steps != parser.get_default("measure_steps"):
        parser.error(f"--measure-steps: {args.model} is timed over whole epochs; give --measure-epochs")
    dist = Dist.from_env(args.framework)
    if args.model == "cyclegan" and dist.world_size > 1:
        parser.error("cyclegan runs in one process (seed 003's single-card CycleGAN); no data-parallel path")
    if args.lr is None and args.model not in SEED003:  # seed 003's models: their publisher's lr (models_*.py)
        args.lr = 0.1 * args.batch_size * dist.world_size / 256  # the linear scaling rule the seeds use
    return args, dist


def main(argv: list[str] | None = None) -> int:
    args, dist = prepare(argv)
    return count_params_only(args) if args.count_params else run(args, dist)


if __name__ == "__main__":
    sys.exit(main())
