#!/usr/bin/env python3
"""The kit's training harness: one model, one data path, one timing rule, one log line, any framework.

    python train.py --framework paddle|torch --batch-size B [options] --model resnet50|vgg16|arcface|
        se_resnext50|deeplabv3p|bert|transformer|cyclegan

This file holds the timing rule, the log lines and the exit codes; cli.py the command line and its checks, feed.py
where the batches come from, run_start.py what run_start says; backend_torch.py and backend_paddle.py hold what
differs between frameworks, precision.py the math modes, models_*.py the networks (model_specs.py what both
frameworks share of them), *_trainer.py the training step. See README.md beside this file for the log lines and
exit codes. Standard library + the framework (+ numpy, Pillow for JPEG data); never
imports the kit.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import time
from pathlib import Path

HARNESS_DIR = Path(__file__).resolve().parent
if str(HARNESS_DIR) not in sys.path:
    sys.path.insert(0, str(HARNESS_DIR))

import run_start  # noqa: E402
from backend import NLP, NOT_COMPILABLE, SEED003, UNIT, Backend, Dist, HarnessFailure, model_options  # noqa: E402
from backend_paddle import PaddleBackend  # noqa: E402  (neither imports its framework before it is built)
from backend_torch import TorchBackend  # noqa: E402
from cli import prepare  # noqa: E402
from feed import Feed, nlp_corpus, open_feed  # noqa: E402

LOG_VERSION = 1
PROBE_WARMUP = 4  # untimed batches before an input probe: the loaders' prefetch depth, so the queue is full
BACKENDS = {"torch": TorchBackend, "paddle": PaddleBackend}

EXIT_ERROR, EXIT_BAD_INPUT, EXIT_NAN, EXIT_OOM = 1, 2, 3, 4
REASON_EXIT = {"error": EXIT_ERROR, "bad_input": EXIT_BAD_INPUT, "nan_loss": EXIT_NAN, "out_of_memory": EXIT_OOM}


def emit(event: str, **fields) -> None:
    line = {"kit": LOG_VERSION, "event": event, "time_ms": round(time.time() * 1000), **fields}
    # one write per line: ranks sharing one stdout (torch.distributed.run, PYTHONUNBUFFERED) must not interleave
    sys.stdout.write(":::KITLOG " + json.dumps(line, separators=(", ", ": ")) + "\n")
    sys.stdout.flush()


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
        **feed.stats(),
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
        loader_only=True, **backend.peak_memory(), **feed.stats())
    return args.measure_steps


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
        notes = run_start.notes(backend, feed)
        if is_logger:
            for line in notes:
                print(f"train.py: warning: {line}", file=sys.stderr, flush=True)
        log("run_start", **run_start.fields(args, dist, backend, feed, threads, notes))
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


def main(argv: list[str] | None = None) -> int:
    args, dist = prepare(argv)
    return count_params_only(args) if args.count_params else run(args, dist)


if __name__ == "__main__":
    sys.exit(main())
