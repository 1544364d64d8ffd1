#!/usr/bin/env python3
"""The GPU sampler's own cost: the harness's figure beside scripts/telemetry/gpu_sampler.py (sampling as kit bench
starts it beside every GPU run) against the same harness with the sampler held still, in ABBA pairs.

    python bench/sampler_overhead.py [--framework torch] [--model resnet50] [--device cpu|gpu] [--interval-ms 200]
        [--samplers 10] [--source nvml|smi|auto] [--pairs 6] [--max-pairs 200] [--processes]

Default design: one process builds the harness's backend (bench/interleaved_overhead.py's) and times blocks of
the harness's own loop while one sampler process samples, except during the "alone" blocks, for which it is
stopped (SIGSTOP to its process group, nvidia-smi included; SIGCONT after). So a pair differs only in whether the
sampler works beside it: what it costs the run as it trains, not a process start.

A cost under 1% is below what pairs resolve on a noisy machine (+-5-15% per pair here), so it is resolved where it
is ten times larger: --pairs pairs beside one sampler at the kit's rate (--interval-ms) give its CPU time per CPU
second of the harness and its samples a second; then pairs beside --samplers samplers at that rate, their wake-ups
spread over the interval (each as cold as one sampler's: one sampler at a tenth of the interval is cheaper per
wake-up, its caches kept warm), until the cost scaled back to one sampler is known to +-0.25%. The scale is the
larger of two measured ratios: CPU time (one sampler's over the samplers') and samples a second (likewise).
--samplers 1: pairs beside one sampler alone until their ratio is within +-1% (or --max-pairs). --processes: whole
harness runs alone and beside the sampler as kit bench starts them, each its own process.

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
import threading
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
from kit.run.runner import dies_with_kit  # noqa: E402

SAMPLER = REPO / "scripts" / "telemetry" / "gpu_sampler.py"
STANDIN_NVML = REPO / "tests" / "standin" / "pynvml"
TARGET = 0.99
AMPLIFY = 10  # samplers side by side, 10x the wake-ups, each as cold as one sampler's: ~0.5% becomes ~5%
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


class Samplers:
    """COUNT samplers at INTERVAL_MS, each in a process group of its own writing its own file, their wake-ups spread
    over the interval: held still (SIGSTOP) and let go (SIGCONT) together, each let go its share of the interval
    after the one before (a sampler let go samples at once, then keeps its interval from there)."""

    def __init__(self, a, count: int, env: dict, tmp: str) -> None:
        self.step = a.interval_ms / 1000 / count
        self.outs = [Path(tmp) / f"samples-{a.interval_ms}ms-{i}" for i in range(count)]
        # SIGKILL when this process ends however it ends: a held sampler would not act on a pending SIGTERM
        self.procs = [subprocess.Popen(dies_with_kit([sys.executable, str(SAMPLER), "--out", str(out), "--interval-ms",
                                                      str(a.interval_ms), "--source", a.source], signal.SIGKILL),
                                       env=env, start_new_session=True, stdin=subprocess.DEVNULL)
                      for out in self.outs]
        self.letting_go: threading.Thread | None = None
        deadline = time.monotonic() + 60
        while min(sampler_rows(out) for out in self.outs) < 3:
            if any(p.poll() is not None for p in self.procs) or time.monotonic() > deadline:
                said = " | ".join(out.read_text()[-500:] for out in self.outs if out.exists())
                self.stop()
                raise SystemExit(f"a sampler did not sample ({said})")
            time.sleep(0.05)

    def samples(self) -> int:
        return sum(sampler_rows(out) for out in self.outs)

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs)

    def hold(self) -> None:
        if self.letting_go:
            self.letting_go.join()
        for p in self.procs:
            os.killpg(p.pid, signal.SIGSTOP)

    def let_go(self) -> None:
        """SIGCONT each in turn, self.step apart, from a thread (the harness's block starts meanwhile)."""
        def staggered():
            for i, p in enumerate(self.procs):
                time.sleep(self.step if i else 0)
                os.killpg(p.pid, signal.SIGCONT)
        self.letting_go = threading.Thread(target=staggered, daemon=True)
        self.letting_go.start()

    def stop(self) -> None:
        if self.letting_go:
            self.letting_go.join()
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGCONT)
                p.terminate()
                p.wait(timeout=30)


def block_pairs(samplers: Samplers, harness: tuple, log, more):
    """(sampled, alone) figures per ABBA pair of harness blocks in this process, the samplers held still for the
    alone ones, while MORE(the pairs so far) says so."""
    args, dist, backend = harness
    got_all: list[dict] = []
    while more(got_all):
        got = {}
        for kind in (("sampled", "alone") if len(got_all) % 2 == 0 else ("alone", "sampled")):
            samplers.hold()
            before, cpu, mine = samplers.samples(), samplers.cpu_seconds(), cpu_seconds(os.getpid())
            switched, t0 = preempted(os.getpid()), time.monotonic()
            if kind == "sampled":
                samplers.let_go()
            with redirect_stdout(log):
                got[kind] = harness_block(args, backend, dist)
            seconds = time.monotonic() - t0
            got[f"{kind}_preempted_per_s"] = (preempted(os.getpid()) - switched) / seconds
            got[f"{kind}_samples_per_s"] = (samplers.samples() - before) / seconds
            if kind == "sampled":  # the samplers' CPU time per CPU second the harness's block took
                got["sampler_cpu_share"] = (samplers.cpu_seconds() - cpu) / (cpu_seconds(os.getpid()) - mine)
            log.seek(0)  # the log's cost per line, not a growing file
            log.truncate()
        got_all.append(got)
        yield got


def scaled_cost(amplified: list[dict], kit: list[dict]) -> tuple[float, ...]:
    """(cost, low, high, scale): the share of the figure one sampler costs at the kit's rate, from the cost of the
    amplified phase's samplers times the larger of two scales, both measured: their CPU time (the kit phase's over
    the amplified one's) and their wake-ups (samples a second, likewise). Wake-ups that each cost the run alike scale
    by their number; ones that cost less where there are more (caches kept warm), by the CPU time they take."""
    ratio, low, high = ratio_interval([g["sampled"] / g["alone"] for g in amplified])
    share = statistics.median(g["sampler_cpu_share"] for g in kit) / statistics.median(
        g["sampler_cpu_share"] for g in amplified)
    wakes = statistics.median(g["sampled_samples_per_s"] for g in kit) / statistics.median(
        g["sampled_samples_per_s"] for g in amplified)
    scale = max(share, wakes)
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
    """The default design: the harness built once; pairs beside one sampler, then (unless --samplers 1) beside
    --samplers of them. Yields (phase, samplers, one pair's figures)."""
    phases = [("kit", 1)] + ([("amplified", a.samplers)] if a.samplers > 1 else [])
    kit: list[dict] = []

    def more(phase: str, got: list[dict]) -> bool:
        if phase == "kit":
            return len(got) < a.pairs if a.samplers > 1 else wants_more(
                [g["sampled"] / g["alone"] for g in got], a.pairs, a.max_pairs)
        if len(got) < a.pairs:
            return True
        _cost, low, high, _scale = scaled_cost(got, kit)
        return len(got) < a.max_pairs and (high - low) / 2 > RESOLVE_COST

    with open(Path(tmp) / "harness.log", "w") as log:  # the harness's KITLOG lines, as a launcher's log
        with redirect_stdout(log):
            args, dist, backend, _work, _counts = built(a.framework, shape, a.block_steps, a.min_block_seconds)
        for phase, count in phases:
            samplers = Samplers(a, count, env, tmp)
            try:
                for got in block_pairs(samplers, (args, dist, backend), log, functools.partial(more, phase)):
                    if phase == "kit":
                        kit.append(got)
                    yield phase, count, got
            finally:
                samplers.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", default="torch")
    p.add_argument("--model", default="resnet50", choices=sorted(PRESETS))
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--interval-ms", type=int, default=SAMPLE_INTERVAL_MS,
                   help=f"each sampler's interval [the kit's: {SAMPLE_INTERVAL_MS}]")
    p.add_argument("--samplers", type=int, default=AMPLIFY,
                   help=f"samplers side by side where the cost is resolved [{AMPLIFY}]; 1: beside one alone")
    p.add_argument("--source", default="nvml", choices=("nvml", "smi", "auto"))
    p.add_argument("--pairs", type=int, default=6, help="pairs beside one sampler, and at least beside --samplers")
    p.add_argument("--max-pairs", type=int, default=200)
    p.add_argument("--min-block-seconds", type=float, default=BLOCK_S,
                   help=f"each block the steps that last at least this long [{BLOCK_S}] (default design)")
    p.add_argument("--block-steps", type=int, default=4,
                   help="steps per block at least (default design; more where they last under --min-block-seconds)")
    p.add_argument("--processes", action="store_true", help="whole runs, each its own process, alone / beside")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks stop the samplers (own sessions)
    if a.processes:
        a.samplers = 1
    if not 1 <= a.samplers <= 50:
        p.error(f"--samplers: 1 to 50, got {a.samplers}")
    env = dict(os.environ)
    standin = a.device == "cpu"
    if standin:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(STANDIN_NVML), env.get("PYTHONPATH")]))
    shape = ["--model", a.model, *PRESETS[a.model], "--device", a.device]
    if a.device == "cpu":
        shape += ["--threads", str(a.threads)]
    design = ("whole runs, each its own process" if a.processes
              else "blocks of one process, the samplers held still for the alone ones")
    amplified = f"; resolved beside {a.samplers} such samplers and scaled back" if a.samplers > 1 else ""
    print(f"sampler overhead: {a.framework} {a.model} {' '.join(PRESETS[a.model])} on {a.device}, sampler every "
          f"{a.interval_ms} ms ({a.source}{', the STAND-IN pynvml' if standin else ''}){amplified}; ABBA pairs: "
          f"{design}", flush=True)
    figures: dict[str, list[dict]] = {"kit": [], "amplified": []}
    with tempfile.TemporaryDirectory(prefix="kit-sampler-") as tmp:
        if a.processes:
            pairs = (("kit", 1, got) for got in process_pairs(a, ["--framework", a.framework, *shape], env, tmp))
        else:
            pairs = interleaved(a, shape, env, tmp)
        for phase, count, got in pairs:
            figures[phase].append(got)
            shown = {k: round(v, 5 if k.endswith("share") else 3) if isinstance(v, float) else v
                     for k, v in got.items()}
            print(json.dumps({"pair": len(figures[phase]), "samplers": count, **shown,
                              "ratio": round(got["sampled"] / got["alone"], 4)}), flush=True)
    for phase, count in (("kit", 1), ("amplified", a.samplers)):
        got = figures[phase]
        if not got:
            continue
        ratio, low, high = ratio_interval([g["sampled"] / g["alone"] for g in got])
        print(f"beside {count} sampler{'s' if count > 1 else ''}: sampled / alone {ratio:.4f}, 95% interval "
              f"[{low:.4f}, {high:.4f}] over {len(got)} pairs", flush=True)
        if shares := [g["sampler_cpu_share"] for g in got if "sampler_cpu_share" in g]:
            # the samplers' CPU time per CPU second of the harness: noise-free, and the scale of what they take
            wakes = statistics.median(g["sampled_samples_per_s"] for g in got)
            print(f"  their CPU time per CPU second of the harness: median {statistics.median(shares):.3%}, at most "
                  f"{max(shares):.3%} over {len(shares)} blocks; {wakes:.1f} samples a second", flush=True)
        if more := [g["sampled_preempted_per_s"] - g["alone_preempted_per_s"] for g in got
                    if "sampled_preempted_per_s" in g]:
            print(f"  the harness preempted more often beside them than alone: median "
                  f"{statistics.median(more):+.1f}/s", flush=True)
    if figures["amplified"]:
        cost, low, high, scale = scaled_cost(figures["amplified"], figures["kit"])
        verdict = 0 if high <= 1 - TARGET else (1 if low > 1 - TARGET else 3)
        print(f"sampler overhead at {a.interval_ms} ms: {cost:.2%} of the figure, 95% interval [{low:.2%}, "
              f"{high:.2%}] (the cost beside {a.samplers} x {scale:.3f}, the larger of their CPU time's and their "
              f"wake-ups' scale); target <= {1 - TARGET:.0%}: {({0: 'met', 1: 'missed', 3: 'undecided'})[verdict]}",
              flush=True)
        return verdict
    ratio, low, high = ratio_interval([g["sampled"] / g["alone"] for g in figures["kit"]])
    verdict = 0 if low >= TARGET else (1 if high < TARGET else 3)
    print(f"sampler overhead: target >= {TARGET}: {({0: 'met', 1: 'missed', 3: 'undecided'})[verdict]}", flush=True)
    return verdict


if __name__ == "__main__":
    sys.exit(main())
