#!/usr/bin/env python3
"""Image delivery fan-out: wall time of streaming a ~1 GB image to 3 hosts / to 1 host (target <= 1.3).

    python bench/image_delivery.py [--repeats 3] [--hosts 3] [--mb 800]

Starts real SSH hosts (network namespaces + sshd, tests/nethosts.py; needs root), each with a Docker
engine of its own, and a test image FROM the kit's debootstrap base plus one layer of --mb MB of random
bytes (incompressible, so nothing is cheaper than a real image). Then, alternately (ABAB...), removes
the image from every host and times kit.deliver.deliver_stream to h1 alone and to h1..hN: one
`docker save` stream read once and fed to every host's `docker load` at the same time.
The figure is median(N hosts) / median(1 host). Also prints the time of a second delivery that
finds the image everywhere (skip). Exit 0: target met; 1: above it; 2: cannot run.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from dockerparts import ensure_engine  # noqa: E402
from nethosts import missing_prerequisites, start_free, write_inventory  # noqa: E402

from kit.config.hosts import load_hosts  # noqa: E402
from kit.images import build, deliver  # noqa: E402
from kit.images.spec import load_pins  # noqa: E402

TARGET = 1.3


def test_image(client, mb: int) -> str:
    ref = f"kit/bench-delivery:{mb}mb"
    if build.image_id(client, ref):
        return ref
    build.make_base(client, load_pins().get("cpu"), lambda who, line: print(f"  [{who}] {line}", flush=True))
    dockerfile = (f"FROM kit/debian:bookworm-minbase\n"
                  f"RUN head -c {mb}M /dev/urandom > /payload.bin\n").encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    buf.seek(0)
    for chunk in client.api.build(fileobj=buf, custom_context=True, tag=ref, rm=True, decode=True):
        if "error" in chunk:
            raise SystemExit(f"image_delivery: building {ref} failed: {chunk['error']}")
    return ref


def timed_delivery(client, net, inv, hosts, ref: str) -> float:
    for h in net.hosts:  # nobody holds it: every delivery moves the whole image
        net.run(h.name, ["docker", "rmi", "-f", ref])
    t0 = time.perf_counter()
    results = deliver.deliver_stream(client, inv, hosts, ref)
    elapsed = time.perf_counter() - t0
    bad = [f"{r.host}: {r.action} {r.error}" for r in results.values() if r.action != "loaded"]
    if bad:
        raise SystemExit("image_delivery: " + "; ".join(bad))
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="measurements per host count (default 3)")
    p.add_argument("--hosts", type=int, default=3, help="hosts in the fan-out case (default 3)")
    p.add_argument("--mb", type=int, default=800, help="random payload on top of the ~200 MB base (default 800)")
    a = p.parse_args()
    if a.repeats < 1 or a.hosts < 2:
        p.error("--repeats must be >= 1 and --hosts >= 2")
    missing = missing_prerequisites()
    if missing:
        print("image_delivery: cannot start the SSH test hosts; missing: " + "; ".join(missing), file=sys.stderr)
        return 2
    try:
        client = ensure_engine()
    except RuntimeError as e:
        print(f"image_delivery: {e}", file=sys.stderr)
        return 2
    ref = test_image(client, a.mb)
    size = client.images.get(ref).attrs["Size"]
    with tempfile.TemporaryDirectory(prefix="kit-delivery-") as tmpdir:
        tmp = Path(tmpdir)
        try:
            net = start_free(a.hosts, tmp / "nethosts", prefix="kd", subnet="172.31.121")
            for h in net.hosts:
                net.start_docker(h.name)
        except RuntimeError as e:
            print(f"image_delivery: {e}", file=sys.stderr)
            return 2
        try:
            print(f"image_delivery: {ref} ({size / 1e9:.2f} GB), {a.hosts} hosts with their own engines; "
                  f"{a.repeats} repeats, order ABAB...", flush=True)
            inv = load_hosts(write_inventory(net, tmp, runtime="docker"))
            one, many = inv.hosts[:1], inv.hosts
            times: dict[int, list[float]] = {1: [], len(many): []}
            for i in range(a.repeats):
                for hosts in (one, many):
                    t = timed_delivery(client, net, inv, hosts, ref)
                    times[len(hosts)].append(t)
                    print(f"  repeat {i + 1}: {len(hosts)} host(s) {t:7.2f} s", flush=True)
            t0 = time.perf_counter()
            again = deliver.deliver_stream(client, inv, many, ref)
            skip = time.perf_counter() - t0
            assert {r.action for r in again.values()} == {"skipped"}, again
        finally:
            net.close()
    m1, mn = statistics.median(times[1]), statistics.median(times[len(many)])
    ratio = mn / m1
    print(f"median 1 host {m1:.2f} s ({size / 1e6 / m1:.0f} MB/s), {len(many)} hosts {mn:.2f} s; "
          f"second delivery (all skipped) {skip:.2f} s")
    met = ratio <= TARGET
    print(f"ratio {len(many)} hosts / 1 host: {ratio:.3f} -> "
          + (f"meets target {TARGET}" if met else f"ABOVE target {TARGET}"))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
