"""`kit check-env`: capture every host's GPUs/topology/CPU/OS at once and compare them."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from kit.cli.common import EXIT_MISMATCH, EXIT_OK, add_hosts_file, inventory


def add_parser(sub) -> None:
    p = sub.add_parser("check-env", help="capture every host's GPUs/topology/CPU/OS at once and compare them")
    p.add_argument("--hosts", required=True, help="comma-separated host names from the inventory")
    add_hosts_file(p)
    p.add_argument("--runs-dir", type=Path, default=Path("runs"))
    p.add_argument("--require-gpu", action="store_true", help="a host without GPUs is a problem")
    p.add_argument("--allow-busy", action="store_true", help="do not refuse GPUs that run other processes")
    p.add_argument("--suite", help="also say whether the images of the suite's frameworks share a cuDNN minor version")


def cmd_check_env(args: argparse.Namespace) -> int:
    from kit.hosts import probe as envprobe
    from kit.run import multinode

    inv, hosts = inventory(args)
    multinode.preflight(inv, hosts)
    run_dir = args.runs_dir / f"check-env-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    verdict = envprobe.check_env(inv, hosts, run_dir / "env", require_gpu=args.require_gpu)
    for line in verdict.lines():
        print(f"  {line}")
    if args.suite:
        from kit.config.suites import load_suite
        from kit.images.parity import cudnn_of, parity_warning

        versions = cudnn_of(load_suite(args.suite))
        pinned = ", ".join(f"{fw} {v or 'not pinned'} ({key})" for fw, (key, v) in versions.items()) or "no GPU images"
        print(f"  cuDNN: {parity_warning(versions) or 'the same minor version: ' + pinned}")
    busy_only = not verdict.problems and verdict.busy and args.allow_busy
    print(f"check-env: {'consistent' if verdict.ok or busy_only else 'REFUSED'} "
          f"({len(hosts)} host(s)); captures in {run_dir / 'env'}")
    return EXIT_OK if verdict.ok or busy_only else EXIT_MISMATCH
