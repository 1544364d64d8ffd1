#!/usr/bin/env python3
"""check_env fan-out: wall time of check_env on 4 hosts / on 1 host (target <= 1.3).

    python bench/fanout.py [--repeats 7] [--hosts 4]

Starts real SSH hosts (network namespaces + sshd, tests/nethosts.py; needs root), each with an
nvidia-smi stub replaying recorded real outputs (tests/fixtures/nvidia-smi), so every probe runs
as on a GPU host. Then times check_env(inv, [h1]) and check_env(inv, [h1..hN]) alternately
(ABAB..., so drift of a shared machine falls on both alike), each call into a fresh env dir.
The figure is median(N hosts) / median(1 host). Exit 0: target met; 1: above it; 2: cannot run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from nethosts import NetHosts, install_nvidia_smi, missing_prerequisites, start_free, write_inventory  # noqa: E402

from kit.config.hosts import load_hosts  # noqa: E402
from kit.hosts.probe import check_env  # noqa: E402

TARGET = 1.3
SMI = REPO / "tests" / "fixtures" / "nvidia-smi"
XML, TOPO = SMI / "a100-sxm4-v12.xml", SMI / "topo-m_2xA100_2xmlx5_della.txt"


def write_hosts(net: NetHosts, tmp: Path) -> Path:
    """hosts.yaml for the namespace hosts, each with the nvidia-smi stub first on its PATH."""
    for h in net.hosts:
        install_nvidia_smi(h, XML, TOPO)
    return write_inventory(net, tmp, gpus=8)


def timed_check_env(inv, hosts, env_dir: Path) -> float:
    t0 = time.perf_counter()
    verdict = check_env(inv, hosts, env_dir, require_gpu=True)
    elapsed = time.perf_counter() - t0
    if not verdict.ok:  # every host replays the same A100 outputs: anything else means the probes broke
        raise SystemExit(f"fanout: check_env on {len(hosts)} host(s) was not consistent: {verdict.to_dict()}")
    return elapsed


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
            times: dict[int, list[float]] = {1: [], len(many): []}
            for i in range(a.repeats):
                for hosts in (one, many):
                    t = timed_check_env(inv, hosts, tmp / "runs" / f"{i}-{len(hosts)}" / "env")
                    times[len(hosts)].append(t)
                    print(f"  repeat {i + 1}: {len(hosts)} host(s) {t * 1000:8.1f} ms", flush=True)
        finally:
            net.close()

    m1, mn = statistics.median(times[1]), statistics.median(times[len(many)])
    ratio = mn / m1
    print(f"median 1 host {m1 * 1000:.1f} ms, {len(many)} hosts {mn * 1000:.1f} ms "
          f"(min {min(times[1]) * 1000:.1f} / {min(times[len(many)]) * 1000:.1f} ms)")
    met = ratio <= TARGET
    print(f"ratio {len(many)} hosts / 1 host: {ratio:.3f} -> "
          + (f"meets target {TARGET}" if met else f"ABOVE target {TARGET}"))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
