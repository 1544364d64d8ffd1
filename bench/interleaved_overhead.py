#!/usr/bin/env python3
"""Harness and bare loop interleaved in one process: bench/harness_overhead.py's default design.

    python bench/interleaved_overhead.py --framework torch [--pairs 6] [--max-pairs 80] -- <train.py arguments>

One backend -- model, Trainer (optimizer and step), batch, threads -- built by the harness's own code
(scripts/harness/), then blocks alternate in ABBA order on it: the harness's timed loop (its clock reads,
synchronisation, loss check and a KITLOG line per step, written to a real file as a launcher's log would be) and a
bare loop (the same step, one clock read before and one after the block). The figure of a harness block is the one
the harness reports; the bare block's is the work over its wall time. Vision models: a block is --block-steps
steps, or as many as last --min-block-seconds where steps are fast (short blocks, many pairs: on a shared VM a
block's figure jitters ~5% whatever its length above ~1 s, so short ones resolve sooner; below, far more); seed
003's NLP models: a block is one whole epoch of the corpus. Pairs are added from --pairs up to --max-pairs
until the 95% interval of the ratio is within +-1%. One JSON line per pair on stdout.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "scripts" / "harness"))
sys.path.insert(0, str(BENCH))

import feed  # noqa: E402  (the harness itself: its batches, command line, timed loop)
import train  # noqa: E402
from backend import NLP, UNIT  # noqa: E402
from cli import FRAMEWORKS, prepare  # noqa: E402
from harness_overhead import wants_more  # noqa: E402

MIN_BLOCK_S = 1.0  # shorter blocks are mostly jitter here (0.1 s blocks: ~15% per pair, 1 s and more: ~5%)


def harness_block(args, backend, dist) -> float:
    """The harness's own timed loop over one block (no warm-up); its reported figure."""
    stop = {}

    def log(event: str, **fields) -> None:
        train.emit(event, **fields)
        if event == "run_stop":
            stop.update(fields)

    block = copy.copy(args)
    block.warmup_steps = 0
    if args.model in NLP:
        block.measure_epochs = 1
        train.timed_epochs(block, backend, dist, log)
    else:
        train.timed_loop(block, backend, dist, log)
    return float(stop["throughput"])


def bare_work(args, backend, dist) -> tuple[list, list[int]]:
    """(device batches of one block, the count each contributes): the harness's own batch, or its NLP corpus."""
    if args.model in NLP:
        corpus = feed.nlp_corpus(args, dist)
        counts = [train.counted(UNIT[args.model], b.sequences, b.tokens) for b in corpus]
        return [backend.to_device(b.arrays) for b in corpus], counts
    fixed = next(feed.batches(args, backend, dist))
    return [fixed] * args.measure_steps, [args.batch_size] * args.measure_steps  # measure_steps: the block's


def bare_block(backend, work: list, counts: list[int]) -> float:
    step = backend.launch_step
    sync = backend.sync
    sync()
    t0 = time.perf_counter()
    for batch in work:
        step(*batch)
    sync()
    return sum(counts) / (time.perf_counter() - t0)


def built(framework: str, train_args: list[str], block_steps: int | None = None,
          min_block_seconds: float = MIN_BLOCK_S):
    """(args, dist, backend, work, counts): the harness's backend for TRAIN_ARGS, warmed up, its vision blocks
    sized to last MIN_BLOCK_SECONDS (or BLOCK_STEPS steps)."""
    args, dist = prepare(["--framework", framework, *train_args])
    if block_steps and args.model not in NLP:
        args.measure_steps = block_steps
    threads = args.threads or train.default_threads(dist.local_world_size)
    backend = train.BACKENDS[framework](args, dist, threads)
    work, counts = bare_work(args, backend, dist)
    for i in range(args.warmup_steps):
        backend.train_step(*work[i % len(work)])
    if args.model not in NLP:  # fast steps: more of them per block
        step_s = counts[0] / bare_block(backend, work[:1], counts[:1])
        steps = max(args.measure_steps, math.ceil(min_block_seconds / step_s))
        if steps != args.measure_steps:
            args.measure_steps = steps
            work, counts = bare_work(args, backend, dist)
    return args, dist, backend, work, counts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=FRAMEWORKS, required=True)
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--max-pairs", type=int, default=200)
    p.add_argument("--block-steps", type=int, default=None,
                   help="steps per block (vision models; default: the run's --measure-steps)")
    p.add_argument("--min-block-seconds", type=float, default=MIN_BLOCK_S,
                   help=f"vision blocks get the steps that last at least this long [{MIN_BLOCK_S}]")
    p.add_argument("train_args", nargs=argparse.REMAINDER, help="after --: train.py's arguments (shape, threads)")
    a = p.parse_args()
    rest = a.train_args[1:] if a.train_args[:1] == ["--"] else a.train_args
    report = sys.stdout
    with tempfile.TemporaryDirectory(prefix="kit-overhead-") as tmp, open(Path(tmp) / "harness.log", "w") as log:
        sys.stdout = log  # the harness's KITLOG lines go where a launcher's log would
        try:
            args, dist, backend, work, counts = built(a.framework, rest, a.block_steps, a.min_block_seconds)
            ratios: list[float] = []
            while wants_more(ratios, a.pairs, a.max_pairs):
                got = {}
                for kind in (("harness", "bare") if len(ratios) % 2 == 0 else ("bare", "harness")):
                    if kind == "bare" and args.model in NLP:
                        # the harness block builds its corpus's tensors anew (timed_epochs, once per run): so does
                        # this one (Paddle's first epoch on fresh tensors runs ~2% slower than on reused ones)
                        work, counts = bare_work(args, backend, dist)
                    got[kind] = (harness_block(args, backend, dist) if kind == "harness"
                                 else bare_block(backend, work, counts))
                ratios.append(got["harness"] / got["bare"])
                report.write(json.dumps({"pair": len(ratios), **got}) + "\n")
                report.flush()
                log.seek(0)  # the log's cost per line, not a growing file
                log.truncate()
        finally:
            sys.stdout = report
    return 0


if __name__ == "__main__":
    sys.exit(main())
