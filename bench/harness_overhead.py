#!/usr/bin/env python3
"""Harness overhead: the harness's samples/s / a bare training loop's samples/s, same everything else.

    python bench/harness_overhead.py [--frameworks torch,paddle] [--pairs 6] [--model resnet50] ...
    python bench/harness_overhead.py --models resnet50,se_resnext50,deeplabv3p,bert,transformer,cyclegan
    python bench/harness_overhead.py --processes ...   # whole processes against each other

Default design (bench/interleaved_overhead.py): one process per framework and model builds the harness's backend
and alternates blocks of the harness's own timed loop with blocks of a bare loop over the same step, in ABBA
order -- same model, memory and threads, seconds apart, so what differs is the harness's per-step work.
--processes: a harness run against a bare_loop.py run (each its own process, ABBA), which also covers what
happens before the loop (thread and allocator settings) but spreads +-8% per run on a shared machine.
The figure per framework (and model) is the geometric mean of the per-pair ratios with its 95% confidence
interval (Student's t over the log ratios); pairs are added, from --pairs up to --max-pairs, until that interval
is narrower than +-RESOLVE (1%), so the benchmark can tell 0.99 from 1.0. Target: >= 0.99, resolved.
--models runs each listed model at its CPU preset (PRESETS: seed 003's models at their "tiny" size,
NLP over whole epochs of the synthetic corpus, figure in sequences/s or tokens/s as the harness reports it);
--model runs one model with the shape flags below.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO / "scripts" / "harness"))

import train  # noqa: E402  (the harness: its figures' units)
from cpu_shape import add_shape_flags  # noqa: E402

HARNESS = REPO / "scripts" / "harness" / "train.py"
BARE = REPO / "bench" / "bare_loop.py"
INTERLEAVED = REPO / "bench" / "interleaved_overhead.py"
TARGET = 0.99
RESOLVE = 0.01  # the 95% interval's half-width the comparison needs, relative
# Student's t, two-sided 95% (0.975 quantile), by degrees of freedom; beyond 30 the normal's 1.96 is within 2%
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """(geometric mean, low, high): the 95% confidence interval of the mean log ratio, back in ratio units."""
    logs = [math.log(r) for r in ratios]
    centre = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(centre), 0.0, math.inf
    t = T975[len(logs) - 2] if len(logs) - 1 <= len(T975) else 1.96
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)
# CPU shapes per model for --models (seconds per run on 2 cores); bert/transformer are timed over whole epochs
PRESETS = {
    "resnet50": ["--batch-size", "16", "--image-size", "64", "--num-classes", "1000", "--warmup-steps", "5",
                 "--measure-steps", "20"],
    "se_resnext50": ["--size", "tiny", "--batch-size", "16", "--image-size", "64", "--num-classes", "1000",
                     "--warmup-steps", "5", "--measure-steps", "20"],
    "deeplabv3p": ["--size", "tiny", "--batch-size", "4", "--image-size", "96", "--num-classes", "19",
                   "--warmup-steps", "5", "--measure-steps", "20"],
    "cyclegan": ["--size", "tiny", "--batch-size", "1", "--image-size", "64", "--warmup-steps", "5",
                 "--measure-steps", "20"],
    "bert": ["--size", "tiny", "--batch-size", "8", "--seq-len", "128", "--corpus-size", "480",
             "--warmup-steps", "5", "--measure-epochs", "2"],
    "transformer": ["--size", "tiny", "--batch-size", "1024", "--seq-len", "96", "--corpus-size", "640",
                    "--warmup-steps", "5", "--measure-epochs", "1"],
}


def shape_args(a) -> list[str]:
    if getattr(a, "preset", None):
        return ["--model", a.model, *PRESETS[a.model], "--threads", str(a.threads)]
    return ["--model", a.model, "--batch-size", str(a.batch_size), "--image-size", str(a.image_size),
            "--num-classes", str(a.num_classes), "--warmup-steps", str(a.warmup_steps),
            "--measure-steps", str(a.measure_steps), "--threads", str(a.threads)]


def run_harness(framework: str, a) -> float:
    out = subprocess.run([sys.executable, str(HARNESS), "--framework", framework, *shape_args(a)],
                         capture_output=True, text=True, check=False)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith(":::KITLOG ") and '"run_stop"' in line:
            stop = json.loads(line[len(":::KITLOG "):])
            if stop["status"] == "success":  # seed 003's NLP models: sequences/s or tokens/s
                return float(stop.get("throughput", stop["samples_per_sec"]))
    raise SystemExit(f"harness run failed (exit {out.returncode}): {out.stderr[-1500:]}")


def run_bare(framework: str, a) -> float:
    out = subprocess.run([sys.executable, str(BARE), "--framework", framework, *shape_args(a)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"bare loop failed (exit {out.returncode}): {out.stderr[-1500:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frameworks", default="torch,paddle")
    p.add_argument("--pairs", type=int, default=6, help="ABBA pairs at least")
    p.add_argument("--max-pairs", type=int, default=None,
                   help="at most, while the 95%% interval is wider than 1%% (default 200; --processes: 30)")
    p.add_argument("--processes", action="store_true", help="whole runs against each other, not blocks in one process")
    p.add_argument("--block-steps", type=int, default=4,
                   help="steps per block in one process, at least (vision: more if under 1 s; NLP: an epoch)")
    add_shape_flags(p)
    p.add_argument("--models", default=None, help=f"comma-separated, each at its preset: {', '.join(PRESETS)}")
    a = p.parse_args()
    a.max_pairs = a.max_pairs or (30 if a.processes else 200)
    design = ("runs in separate processes" if a.processes
              else f"blocks of >= {a.block_steps} steps and >= 1 s (NLP: an epoch) interleaved in one process")
    if a.models:
        unknown = [m for m in a.models.split(",") if m not in PRESETS]
        if unknown:
            p.error(f"--models: no preset for {', '.join(unknown)}; known: {', '.join(PRESETS)}")
        verdicts = []
        for model in a.models.split(","):
            a.model, a.preset = model, True
            print(f"harness overhead: {model} at {' '.join(PRESETS[model])}, {a.threads} threads, "
                  f"{a.pairs}..{a.max_pairs} ABBA pairs per framework ({design})", flush=True)
            verdicts += compare(a)
        return 0 if all(verdicts) else 1
    print(f"harness overhead: {a.model}, batch {a.batch_size}, {a.image_size}px, {a.threads} threads, "
          f"{f'{a.warmup_steps}+{a.measure_steps}' if a.processes else f'{a.warmup_steps} warm-up'} steps, "
          f"{a.pairs}..{a.max_pairs} ABBA pairs per framework ({design})",
          flush=True)
    return 0 if all(compare(a)) else 1


def wants_more(ratios: list[float], pairs: int, max_pairs: int) -> bool:
    """Another pair? Below `pairs`, yes; up to `max_pairs`, while the 95% interval is wider than +-RESOLVE."""
    if len(ratios) < pairs:
        return True
    ratio, low, high = ratio_interval(ratios)
    return len(ratios) < max_pairs and max(high / ratio - 1, 1 - low / ratio) > RESOLVE


def process_pairs(framework: str, a):
    """(harness, bare) figures per ABBA pair, each run its own process."""
    ratios: list[float] = []
    while wants_more(ratios, a.pairs, a.max_pairs):
        order = ("harness", "bare") if len(ratios) % 2 == 0 else ("bare", "harness")
        got = {kind: run_harness(framework, a) if kind == "harness" else run_bare(framework, a) for kind in order}
        ratios.append(got["harness"] / got["bare"])
        yield got["harness"], got["bare"]


def interleaved_pairs(framework: str, a):
    """(harness, bare) figures per ABBA pair of blocks inside one process (bench/interleaved_overhead.py)."""
    cmd = [sys.executable, str(INTERLEAVED), "--framework", framework, "--pairs", str(a.pairs),
           "--max-pairs", str(a.max_pairs), "--block-steps", str(a.block_steps), "--", *shape_args(a)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            pair = json.loads(line)
            yield pair["harness"], pair["bare"]
        errors = proc.stderr.read()
    if proc.returncode != 0:
        raise SystemExit(f"interleaved run failed (exit {proc.returncode}): {errors[-1500:]}")


def compare(a) -> list[bool]:
    """ABBA pairs per framework for a.model until the ratio's 95% interval is within +-RESOLVE (or --max-pairs);
    prints each pair and the ratio with its interval; True where it is resolved and meets TARGET."""
    verdicts = []
    for framework in a.frameworks.split(","):
        harness, bare, ratios = [], [], []
        ratio, low, high = 0.0, 0.0, math.inf
        for got_harness, got_bare in (process_pairs if a.processes else interleaved_pairs)(framework, a):
            harness.append(got_harness)
            bare.append(got_bare)
            ratios.append(got_harness / got_bare)
            ratio, low, high = ratio_interval(ratios)
            print(f"  {framework} pair {len(ratios)}: harness {got_harness:.2f}  bare {got_bare:.2f}  "
                  f"ratio {ratios[-1]:.4f}  (so far {ratio:.4f} [{low:.4f}, {high:.4f}])", flush=True)
        half = max(high / ratio - 1, 1 - low / ratio)
        resolved = half <= RESOLVE
        verdicts.append(resolved and ratio >= TARGET)
        unit = train.UNIT.get(a.model, "images/s")
        print(f"{framework} {a.model}: median harness {statistics.median(harness):.2f} {unit}, bare "
              f"{statistics.median(bare):.2f} {unit}, ratio {ratio:.4f}, 95% CI [{low:.4f}, {high:.4f}] "
              f"(+-{half:.2%}, {len(ratios)} pairs; {'resolved' if resolved else 'NOT resolved'} at +-{RESOLVE:.0%}) "
              f"({'meets' if ratio >= TARGET else 'BELOW'} target {TARGET})", flush=True)
    return verdicts


if __name__ == "__main__":
    sys.exit(main())
