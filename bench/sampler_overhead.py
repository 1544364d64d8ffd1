#!/usr/bin/env python3
"""The GPU sampler's own cost: the harness's figure beside scripts/telemetry/gpu_sampler.py (sampling as kit bench
starts it beside every GPU run) against the same harness with the sampler held still, in ABBA pairs.

    python bench/sampler_overhead.py [--framework torch] [--model resnet50] [--device cpu|gpu] [--interval-ms 200]
        [--amplified-ms 20] [--source nvml|smi|auto] [--pairs 6] [--max-pairs 200] [--processes]

Default design: one process builds the harness's backend (bench/interleaved_overhead.py's) and times blocks of
the harness's own loop while one sampler process samples, except during the "alone" blocks, for which it is
stopped (SIGSTOP to its process group, nvidia-smi included; SIGCONT after). So a pair differs only in whether the
sampler works beside it: what it costs the run as it trains, not a process start.

A cost near 1% is below what pairs resolve on a noisy machine (+-5-7% per pair here), so it is resolved where it is
larger: --pairs pairs at the kit's rate (--interval-ms) give the sampler's CPU time per CPU second of the harness,
then pairs at --amplified-ms (10x the wake-ups) until the cost scaled back to the kit's rate is known to +-0.25%.
The scale is the larger of two: the sampler's CPU time at the kit's rate over that at the amplified one (both
measured, by the scheduler's nanosecond count), and the ratio of wake-ups. Per wake-up the sampler costs more when
it wakes less often (cold caches), which the CPU time scale carries; a cost per wake-up alike at both rates, the
wake-up scale. --amplified-ms 0: pairs at --interval-ms alone until its ratio is within +-1% (or --max-pairs).
--processes: whole harness runs alone and beside the sampler as kit bench starts them, each its own process.

The sampler reads NVML where nvidia-ml-py and a GPU are there (a GPU machine: --device gpu); elsewhere the
STAND-IN pynvml (tests/standin/pynvml, the H200's recorded samples replayed) takes NVML's place, so what is
measured on a CPU machine is the sampler's Python around NVML's calls, each call's own cost aside. A CPU run that
keeps every core busy is the sampler's worst case: each wake-up takes a CPU from the run (the harness's involuntary
context switches per second, sampled against alone, are printed too). One line per pair; the verdict last. Exit 0
when the cost's interval lies wholly at or under 1% (the ratio's at or above 0.99), 1 when wholly over, 3 undecided.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

import psutil

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
from harness_overhead import HARNESS, PRESETS, ratio_interval, wants_more  # noqa: E402
from interleaved_overhead import MIN_BLOCK_S, built, harness_block  # noqa: E402

sys.path.insert(0, str(REPO))
from kit.run.command import SAMPLE_INTERVAL_MS  # noqa: E402

SAMPLER = REPO / "scripts" / "telemetry" / "gpu_sampler.py"
STANDIN_NVML = REPO / "tests" / "standin" / "pynvml"
TARGET = 0.99
AMPLIFY = 10  # the wake-ups of the amplified rate per one at --interval-ms: a cost of ~0.5% becomes several %
RESOLVE_COST = 0.0025  # the cost at the kit's rate resolved to +-0.25% (of the figure)
BLOCK_S = 2 * MIN_BLOCK_S  # blocks of ~10 samples at 200 ms, each a whole number of the sampler's wake-ups and more


def harness(argv: list[str], beside: list[str] | None, env: dict) -> float:
    done = subprocess.run([*(beside or []), sys.executable, str(HARNESS), *argv], capture_output=True, text=True,
                          env=env, timeout=900)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(":::KITLOG ") and '"run_stop"' in line:
            stop = json.loads(line[len(":::KITLOG "):])
            if stop["status"] == "success":
                return float(stop["samples_per_sec"])
    raise SystemExit(f"harness run failed (exit {done.returncode}): {done.stderr[-1500:]}")


def sampler_rows(path: Path) -> int:
    """Samples in the sampler's file so far (its header lines aside)."""
    try:
        return max(0, sum(1 for line in path.read_text().splitlines() if not line.startswith(("#", "{\"telemetry"))
                          and not line.startswith("timestamp")))
    except OSError:
        return 0


def cpu_seconds(pid: int) -> float:
    """CPU seconds a process and its children (nvidia-smi's loop under the smi source) have run so far: the
    scheduler's own count in nanoseconds (/proc/PID/task/*/schedstat), where user + system time is counted in whole
    ticks (a sampler's 0.1-1 ms per wake-up would be charged a 4 ms tick or nothing)."""
    total = 0.0
    for p in (psutil.Process(pid), *psutil.Process(pid).children(recursive=True)):
        with contextlib.suppress(OSError, psutil.Error):
            tasks = list(Path(f"/proc/{p.pid}/task").iterdir())
            total += sum(int((t / "schedstat").read_text().split()[0]) for t in tasks) / 1e9
    return total


def preempted(pid: int) -> int:
    """Times the kernel took a CPU from any thread of a process so far (involuntary context switches): a count the
    machine's speed does not blur, which a sampler's wake-up adds to when it preempts the run."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            for line in (task / "status").read_text().splitlines():
                if line.startswith("nonvoluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


def start_sampler(a, interval_ms: int, env: dict, out: Path) -> subprocess.Popen:
    """The sampler at INTERVAL_MS into OUT, in a process group of its own, once it has taken 3 samples."""
    sampler = subprocess.Popen([sys.executable, str(SAMPLER), "--out", str(out), "--interval-ms", str(interval_ms),
                                "--source", a.source], env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while sampler_rows(out) < 3:
        if sampler.poll() is not None or time.monotonic() > deadline:
            said = out.read_text()[-1500:] if out.exists() else ""
            stop_sampler(sampler)
            raise SystemExit(f"the sampler did not sample ({out}: {said})")
        time.sleep(0.05)
    return sampler


def stop_sampler(sampler: subprocess.Popen) -> None:
    if sampler.poll() is None:
        os.killpg(sampler.pid, signal.SIGCONT)
        sampler.terminate()
        sampler.wait(timeout=30)


def block_pairs(sampler: subprocess.Popen, out: Path, harness: tuple, log, more):
    """(sampled, alone) figures per ABBA pair of harness blocks in this process, the sampler held still for the
    alone ones, while MORE(ratios so far, pairs so far) says so."""
    args, dist, backend = harness
    got_all: list[dict] = []
    while more([g["sampled"] / g["alone"] for g in got_all], got_all):
        got = {}
        for kind in (("sampled", "alone") if len(got_all) % 2 == 0 else ("alone", "sampled")):
            os.killpg(sampler.pid, signal.SIGCONT if kind == "sampled" else signal.SIGSTOP)
            before, cpu, mine = sampler_rows(out), cpu_seconds(sampler.pid), cpu_seconds(os.getpid())
            switched, t0 = preempted(os.getpid()), time.monotonic()
            with redirect_stdout(log):
                got[kind] = harness_block(args, backend, dist)
            got[f"{kind}_preempted_per_s"] = (preempted(os.getpid()) - switched) / (time.monotonic() - t0)
            got[f"{kind}_samples"] = sampler_rows(out) - before
            if kind == "sampled":  # the sampler's CPU time per CPU second the harness's block took
                got["sampler_cpu_share"] = (cpu_seconds(sampler.pid) - cpu) / (cpu_seconds(os.getpid()) - mine)
            log.seek(0)  # the log's cost per line, not a growing file
            log.truncate()
        got_all.append(got)
        yield got


def scaled_cost(amplified: list[dict], kit_share: float, kit_ms: int, amplified_ms: int) -> tuple[float, ...]:
    """(cost, low, high, scale): the share of the figure the sampler costs at the kit's rate, from its cost at the
    amplified rate times the larger of two scales: its CPU time (kit rate / amplified rate, both measured) and its
    wake-ups (amplified_ms / kit_ms). A sampler that is cheaper per wake-up when it wakes more often (warm caches)
    is scaled by its CPU time; one whose every wake-up costs the run alike, by its wake-ups."""
    ratio, low, high = ratio_interval([g["sampled"] / g["alone"] for g in amplified])
    amplified_share = statistics.median(g["sampler_cpu_share"] for g in amplified)
    scale = max(kit_share / amplified_share, amplified_ms / kit_ms)
    return (1 - ratio) * scale, (1 - high) * scale, (1 - low) * scale, scale


def process_pairs(a, shape: list[str], env: dict, tmp: str):
    """(sampled, alone) figures per ABBA pair of whole harness runs, each its own process."""
    beside = [sys.executable, str(SAMPLER), "--out", f"{tmp}/samples", "--interval-ms", str(a.interval_ms),
              "--source", a.source, "--"]
    ratios: list[float] = []
    while wants_more(ratios, a.pairs, a.max_pairs):
        order = ("alone", "sampled") if len(ratios) % 2 == 0 else ("sampled", "alone")
        got = {kind: harness(shape, beside if kind == "sampled" else None, env) for kind in order}
        got["sampled_samples"] = sampler_rows(Path(f"{tmp}/samples"))
        ratios.append(got["sampled"] / got["alone"])
        yield got


def interleaved(a, shape: list[str], env: dict, tmp: str):
    """The default design: the harness built once; pairs at the kit's rate, then (unless --amplified-ms 0) at the
    amplified rate. Yields (phase, its interval in ms, one pair's figures)."""
    phases = [("kit", a.interval_ms)] + ([("amplified", a.amplified_ms)] if a.amplified_ms else [])
    kit_share: list[float] = []

    def more(phase: str, ratios: list[float], got: list[dict]) -> bool:
        if phase == "kit":
            return len(got) < a.pairs if a.amplified_ms else wants_more(ratios, a.pairs, a.max_pairs)
        if len(got) < a.pairs:
            return True
        _cost, low, high, _scale = scaled_cost(got, statistics.median(kit_share), a.interval_ms, a.amplified_ms)
        return len(got) < a.max_pairs and (high - low) / 2 > RESOLVE_COST

    with open(Path(tmp) / "harness.log", "w") as log:  # the harness's KITLOG lines, as a launcher's log
        with redirect_stdout(log):
            args, dist, backend, _work, _counts = built(a.framework, shape, a.block_steps, a.min_block_seconds)
        for phase, interval_ms in phases:
            out = Path(tmp) / f"samples-{interval_ms}ms"
            sampler = start_sampler(a, interval_ms, env, out)
            try:
                for got in block_pairs(sampler, out, (args, dist, backend), log, functools.partial(more, phase)):
                    if phase == "kit":
                        kit_share.append(got["sampler_cpu_share"])
                    yield phase, interval_ms, got
            finally:
                stop_sampler(sampler)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", default="torch")
    p.add_argument("--model", default="resnet50", choices=sorted(PRESETS))
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--interval-ms", type=int, default=SAMPLE_INTERVAL_MS,
                   help=f"the rate whose cost is wanted [the kit's: {SAMPLE_INTERVAL_MS}]")
    p.add_argument("--amplified-ms", type=int, default=None,
                   help=f"the rate at which the cost is resolved [--interval-ms / {AMPLIFY}, at least 10]; "
                        "0: at --interval-ms itself")
    p.add_argument("--source", default="nvml", choices=("nvml", "smi", "auto"))
    p.add_argument("--pairs", type=int, default=6, help="pairs at --interval-ms, and at least at --amplified-ms")
    p.add_argument("--max-pairs", type=int, default=200)
    p.add_argument("--min-block-seconds", type=float, default=BLOCK_S,
                   help=f"each block the steps that last at least this long [{BLOCK_S}] (default design)")
    p.add_argument("--block-steps", type=int, default=4,
                   help="steps per block at least (default design; more where they last under --min-block-seconds)")
    p.add_argument("--processes", action="store_true", help="whole runs, each its own process, alone / beside")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks stop the sampler (its own session)
    if a.amplified_ms is None:
        a.amplified_ms = max(10, a.interval_ms // AMPLIFY)
    if a.processes:
        a.amplified_ms = 0
    if a.amplified_ms and not 10 <= a.amplified_ms < a.interval_ms:
        p.error(f"--amplified-ms: 10 to under --interval-ms ({a.interval_ms}), or 0; got {a.amplified_ms}")
    env = dict(os.environ)
    standin = a.device == "cpu"
    if standin:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(STANDIN_NVML), env.get("PYTHONPATH")]))
    shape = ["--model", a.model, *PRESETS[a.model], "--device", a.device]
    if a.device == "cpu":
        shape += ["--threads", str(a.threads)]
    design = ("whole runs, each its own process" if a.processes
              else "blocks of one process, the sampler held still for the alone ones")
    amplified = (f"; resolved at {a.amplified_ms} ms ({a.interval_ms / a.amplified_ms:.0f}x the wake-ups) and scaled "
                 "back" if a.amplified_ms else "")
    print(f"sampler overhead: {a.framework} {a.model} {' '.join(PRESETS[a.model])} on {a.device}, sampler every "
          f"{a.interval_ms} ms ({a.source}{', the STAND-IN pynvml' if standin else ''}){amplified}; ABBA pairs: "
          f"{design}", flush=True)
    figures: dict[str, list[dict]] = {"kit": [], "amplified": []}
    with tempfile.TemporaryDirectory(prefix="kit-sampler-") as tmp:
        if a.processes:
            pairs = (("kit", a.interval_ms, got) for got in process_pairs(a, ["--framework", a.framework, *shape],
                                                                          env, tmp))
        else:
            pairs = interleaved(a, shape, env, tmp)
        for phase, interval_ms, got in pairs:
            figures[phase].append(got)
            shown = {k: round(v, 5 if k.endswith("share") else 3) if isinstance(v, float) else v
                     for k, v in got.items()}
            print(json.dumps({"pair": len(figures[phase]), "interval_ms": interval_ms, **shown,
                              "ratio": round(got["sampled"] / got["alone"], 4)}), flush=True)
    for phase, interval_ms in (("kit", a.interval_ms), ("amplified", a.amplified_ms)):
        got = figures[phase]
        if not got:
            continue
        ratio, low, high = ratio_interval([g["sampled"] / g["alone"] for g in got])
        print(f"at {interval_ms} ms: sampled / alone {ratio:.4f}, 95% interval [{low:.4f}, {high:.4f}] over "
              f"{len(got)} pairs", flush=True)
        if shares := [g["sampler_cpu_share"] for g in got if "sampler_cpu_share" in g]:
            # the sampler's CPU time per CPU second of the harness: noise-free, and the scale of what it takes
            print(f"  the sampler's CPU time per CPU second of the harness: median {statistics.median(shares):.3%}, "
                  f"at most {max(shares):.3%} over {len(shares)} blocks", flush=True)
        if more := [g["sampled_preempted_per_s"] - g["alone_preempted_per_s"] for g in got
                    if "sampled_preempted_per_s" in g]:
            print(f"  the harness preempted more often beside the sampler than alone: median "
                  f"{statistics.median(more):+.1f}/s (the sampler wakes {1000 / interval_ms:.0f}/s)", flush=True)
    if figures["amplified"]:
        kit_share = statistics.median(g["sampler_cpu_share"] for g in figures["kit"])
        cost, low, high, scale = scaled_cost(figures["amplified"], kit_share, a.interval_ms, a.amplified_ms)
        verdict = 0 if high <= 1 - TARGET else (1 if low > 1 - TARGET else 3)
        print(f"sampler overhead at {a.interval_ms} ms: {cost:.2%} of the figure, 95% interval [{low:.2%}, "
              f"{high:.2%}] (the cost at {a.amplified_ms} ms x {scale:.3f}, the larger of its CPU time's and its "
              f"wake-ups' scale); target <= {1 - TARGET:.0%}: {({0: 'met', 1: 'missed', 3: 'undecided'})[verdict]}",
              flush=True)
        return verdict
    ratio, low, high = ratio_interval([g["sampled"] / g["alone"] for g in figures["kit"]])
    verdict = 0 if low >= TARGET else (1 if high < TARGET else 3)
    print(f"sampler overhead: target >= {TARGET}: {({0: 'met', 1: 'missed', 3: 'undecided'})[verdict]}", flush=True)
    return verdict


if __name__ == "__main__":
    sys.exit(main())
