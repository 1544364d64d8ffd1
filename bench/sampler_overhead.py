#!/usr/bin/env python3
"""The GPU sampler's own cost: the harness alone against the harness beside scripts/telemetry/gpu_sampler.py, as
kit bench starts every GPU run, in ABBA pairs of separate processes, until the 95% interval of the ratio lies
within +-1% (bench/harness_overhead.py's rule) or --max-pairs.

    python bench/sampler_overhead.py [--framework torch] [--model resnet50] [--interval-ms 100] [--source nvml]
        [--pairs 6] [--max-pairs 30] [--threads N]

The sampler reads NVML where nvidia-ml-py and a GPU are there (a GPU machine: --device gpu); elsewhere the
STAND-IN pynvml (tests/standin/pynvml, the H200's recorded samples replayed) takes NVML's place, so what is
measured on a CPU machine is the sampler's Python around NVML's calls, each call's own cost aside (NVML reads
counters the driver keeps; microseconds). One line per pair; the verdict last. Exit 0 when the interval lies
wholly at or above 0.99, 1 when wholly below, 3 undecided.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
from harness_overhead import HARNESS, PRESETS, ratio_interval, wants_more  # noqa: E402

SAMPLER = REPO / "scripts" / "telemetry" / "gpu_sampler.py"
STANDIN_NVML = REPO / "tests" / "standin" / "pynvml"
TARGET = 0.99


def harness(argv: list[str], beside: list[str] | None, env: dict) -> float:
    done = subprocess.run([*(beside or []), sys.executable, str(HARNESS), *argv], capture_output=True, text=True,
                          env=env, timeout=900)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(":::KITLOG ") and '"run_stop"' in line:
            stop = json.loads(line[len(":::KITLOG "):])
            if stop["status"] == "success":
                return float(stop["samples_per_sec"])
    raise SystemExit(f"harness run failed (exit {done.returncode}): {done.stderr[-1500:]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", default="torch")
    p.add_argument("--model", default="resnet50", choices=sorted(PRESETS))
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--interval-ms", type=int, default=100)
    p.add_argument("--source", default="nvml", choices=("nvml", "smi", "auto"))
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--max-pairs", type=int, default=30)
    a = p.parse_args(argv)
    env = dict(os.environ)
    standin = a.device == "cpu"
    if standin:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(STANDIN_NVML), env.get("PYTHONPATH")]))
    shape = ["--framework", a.framework, "--model", a.model, *PRESETS[a.model], "--device", a.device]
    if a.device == "cpu":
        shape += ["--threads", str(a.threads)]
    print(f"sampler overhead: {a.framework} {a.model} {' '.join(PRESETS[a.model])} on {a.device}, sampler every "
          f"{a.interval_ms} ms ({a.source}{', the STAND-IN pynvml' if standin else ''}), {a.pairs}..{a.max_pairs} "
          "ABBA pairs of processes", flush=True)
    ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kit-sampler-") as tmp:
        beside = [sys.executable, str(SAMPLER), "--out", f"{tmp}/samples", "--interval-ms", str(a.interval_ms),
                  "--source", a.source, "--"]
        while wants_more(ratios, a.pairs, a.max_pairs):
            order = ("alone", "sampled") if len(ratios) % 2 == 0 else ("sampled", "alone")
            got = {kind: harness(shape, beside if kind == "sampled" else None, env) for kind in order}
            ratios.append(got["sampled"] / got["alone"])
            print(json.dumps({"pair": len(ratios), "alone": got["alone"], "sampled": got["sampled"],
                              "ratio": round(ratios[-1], 4)}), flush=True)
        samples = len(Path(f"{tmp}/samples").read_text().splitlines()) - 1
    ratio, low, high = ratio_interval(ratios)
    verdict = 0 if low >= TARGET else (1 if high < TARGET else 3)
    print(f"sampler overhead: sampled / alone {ratio:.4f}, 95% interval [{low:.4f}, {high:.4f}] over {len(ratios)} "
          f"pairs (the last sampled run took {samples} samples); target >= {TARGET}: "
          f"{ {0: 'met', 1: 'missed', 3: 'undecided'}[verdict] }", flush=True)
    return verdict


if __name__ == "__main__":
    sys.exit(main())
