#!/usr/bin/env python3
"""Fan-out: wall time of check_env, and of a no-op launch, on N hosts / on 1 host (target <= 1.3 each).

    python bench/fanout.py [--repeats 7] [--hosts 4]      (make bench-fanout [HOSTS=16])

Starts real SSH hosts (network namespaces + sshd, tests/nethosts.py; needs root), each with an
nvidia-smi stub replaying recorded real outputs (tests/fixtures/nvidia-smi), so every probe runs
as on a GPU host. Then times, alternately on [h1] and [h1..hN] (ABAB..., so drift of a shared
machine falls on both alike): check_env into a fresh env dir, and a launch through the SSH
runner (kit.run.ssh.SshRunner start + wait) whose command on every host is `true` in the runner's
own wrapper (work folder, session, pgid file). Each figure is median(N hosts) / median(1 host).
All hosts share this machine's cores, so the N-host side also pays N hosts' sshd and probe work. Beside each
wall time: the kit's own CPU time (this process: connections, probe parsing, the runner; under one GIL, so on
hosts with their own cores N hosts still take at least N x its per-host share) and how busy the machine's cores
were (the test hosts' sshd and probes are the rest). Last, the N-host runs' CPU work (every process, psutil's
cpu_times) over the cores: the least wall time that work can take here, as a ratio, with and without the kit's
share; above the target without it, no client could meet the target on this machine.
Exit 0: both targets met; 1: one is above; 2: cannot run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from nethosts import NetHosts, install_nvidia_smi, missing_prerequisites, start_free, write_inventory  # noqa: E402

from kit.config.cases import Case  # noqa: E402
from kit.config.hosts import load_hosts  # noqa: E402
from kit.hosts.probe import check_env  # noqa: E402
from kit.run.plan import PlannedRun  # noqa: E402
from kit.run.ssh import SshRunner, wrapper_command  # noqa: E402

NOOP_CASE = Case(framework="paddle", model="resnet50", batch_size=1, precision="fp32", nodes=2, gpus_per_node=1,
                 warmup_steps=0, measure_steps=1, repeats=1, data="synthetic", image_size=32, num_classes=10,
                 layout="nchw", mode="eager", impl="harness", timeout_s=60)

TARGET = 1.3
SMI = REPO / "tests" / "fixtures" / "nvidia-smi"
XML, TOPO = SMI / "a100-sxm4-v12.xml", SMI / "topo-m_2xA100_2xmlx5_della.txt"


def write_hosts(net: NetHosts, tmp: Path) -> Path:
    """hosts.yaml for the namespace hosts, each with the nvidia-smi stub first on its PATH."""
    for h in net.hosts:
        install_nvidia_smi(h, XML, TOPO)
    return write_inventory(net, tmp, gpus=8)


def busy_seconds() -> float:
    """CPU seconds all of the machine's cores have spent busy since boot."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


class Sample:
    """Wall time, this process's CPU time, the machine's busy share (0..1 of all cores) and its busy CPU seconds
    (every process: the kit, the test hosts' sshd and probes) of one measured call."""

    def __init__(self):
        self.wall = self.kit_cpu = self.busy = self.machine_cpu = 0.0

    def __enter__(self):
        psutil.cpu_percent()  # the machine's busy share counts from here
        self._t, self._cpu, self._busy = time.perf_counter(), time.process_time(), busy_seconds()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self._t
        self.kit_cpu = time.process_time() - self._cpu
        self.machine_cpu = busy_seconds() - self._busy
        self.busy = psutil.cpu_percent() / 100


def timed_check_env(inv, hosts, env_dir: Path) -> Sample:
    with Sample() as sample:
        verdict = check_env(inv, hosts, env_dir, require_gpu=True)
    if not verdict.ok:  # every host replays the same A100 outputs: anything else means the probes broke
        raise SystemExit(f"fanout: check_env on {len(hosts)} host(s) was not consistent: {verdict.to_dict()}")
    return sample


class NoopRunner(SshRunner):
    """The SSH runner with `true` as every host's command (its wrapper, connections and threads as in a run)."""

    def commands(self, run, port):
        return [(h, self.workdir(h, run), wrapper_command(self.workdir(h, run), {}, ["true"])) for h in self.hosts]


def timed_launch(inv, hosts, run_dir: Path) -> Sample:
    runner = NoopRunner(inv, hosts, run_dir, "gpu")
    run = PlannedRun(NOOP_CASE, 1)
    with Sample() as sample:
        runner.start(run)
        done = runner.wait(60)
    if not done or any(s.error for s in runner.statuses()):
        raise SystemExit(f"fanout: the no-op launch on {len(hosts)} host(s) failed: "
                         f"{[s.to_dict() for s in runner.statuses()]}")
    return sample


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7, help="measurements per host count (default 7)")
    p.add_argument("--hosts", type=int, default=4, help="hosts in the fan-out case (default 4)")
    a = p.parse_args()
    if a.repeats < 1 or a.hosts < 2:
        p.error("--repeats must be >= 1 and --hosts >= 2")
    missing = missing_prerequisites()
    if missing:
        print("fanout: cannot start the SSH test hosts; missing: " + "; ".join(missing)
              + ". Install: scripts/install_system_deps.sh (as root)", file=sys.stderr)
        return 2
    for f in (XML, TOPO):
        if not f.is_file():
            print(f"fanout: fixture missing: {f}", file=sys.stderr)
            return 2

    with tempfile.TemporaryDirectory(prefix="kit-fanout-") as tmpdir:
        tmp = Path(tmpdir)
        try:  # prefix/subnet distinct from the test fixture's (kt, 172.31.213 + 20*slot)
            net = start_free(a.hosts, tmp / "nethosts", prefix="kf", subnet="172.31.101")
        except RuntimeError as e:
            print(f"fanout: {e}", file=sys.stderr)
            return 2
        try:
            print(f"fanout: {a.hosts} SSH hosts up in {net.startup_s:.2f} s (prefix {net.prefix}); "
                  f"{a.repeats} repeats, order ABAB...", flush=True)
            inv = load_hosts(write_hosts(net, tmp))
            one, many = inv.hosts[:1], inv.hosts
            timed_check_env(inv, many, tmp / "warmup")  # first imports / page cache, not measured
            timed_launch(inv, many, tmp / "warmup-launch")
            times: dict[str, dict[int, list[Sample]]] = {"check_env": {1: [], len(many): []},
                                                         "launch": {1: [], len(many): []}}
            for i in range(a.repeats):
                for hosts in (one, many):
                    t = timed_check_env(inv, hosts, tmp / "runs" / f"{i}-{len(hosts)}" / "env")
                    times["check_env"][len(hosts)].append(t)
                    u = timed_launch(inv, hosts, tmp / "runs" / f"{i}-{len(hosts)}")
                    times["launch"][len(hosts)].append(u)
                    print(f"  repeat {i + 1}: {len(hosts):2d} host(s)  check_env {t.wall * 1000:7.1f} ms "
                          f"(kit CPU {t.kit_cpu * 1000:5.1f} ms, cores {t.busy:4.0%} busy)  "
                          f"launch {u.wall * 1000:7.1f} ms (kit CPU {u.kit_cpu * 1000:5.1f} ms, "
                          f"cores {u.busy:4.0%} busy)", flush=True)
        finally:
            net.close()

    met = True
    n, cores = len(many), os.cpu_count() or 1
    for what, by in times.items():
        m1, mn = (statistics.median(s.wall for s in by[k]) for k in (1, n))
        c1, cn = (statistics.median(s.kit_cpu for s in by[k]) for k in (1, n))
        busy = statistics.median(s.busy for s in by[n])
        ratio = mn / m1
        # this machine's own bound: the N-host runs' CPU work (kit, test hosts' sshd and probes) spread over its cores
        work = statistics.median(s.machine_cpu for s in by[n])
        met &= ratio <= TARGET
        print(f"{what}: median 1 host {m1 * 1000:.1f} ms, {n} hosts {mn * 1000:.1f} ms; ratio {ratio:.3f} -> "
              + (f"meets target {TARGET}" if ratio <= TARGET else f"ABOVE target {TARGET}"))
        print(f"  kit CPU: 1 host {c1 * 1000:.1f} ms, {n} hosts {cn * 1000:.1f} ms ({cn / n * 1000:.1f} ms per host; "
              f"{cn / m1:.2f}x the 1-host wall time); the {cores} cores {busy:.0%} busy during the "
              f"{n}-host runs")
        print(f"  the {n}-host runs' CPU work: {work * 1000:.0f} ms on {cores} cores (kit {cn * 1000:.0f} ms, "
              f"test hosts and the rest {(work - cn) * 1000:.0f} ms): the ratio cannot go below "
              f"{work / cores / m1:.2f} on this machine, nor below {(work - cn) / cores / m1:.2f} with a kit "
              "that cost nothing" + ("; the target is out of reach where the test hosts share the kit's cores"
                                     if (work - cn) / cores / m1 > TARGET else ""))
    return 0 if met else 1

if __name__ == "__main__":
    sys.exit(main())
