"""`kit stage-data`: put train_list.txt (and --images) on every host; verify counts and sha256."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit.cli.common import EXIT_MISMATCH, EXIT_OK, add_hosts_file, inventory


def add_parser(sub) -> None:
    p = sub.add_parser("stage-data", help="put train_list.txt (and --images) on every host; verify counts + sha256")
    p.add_argument("--hosts", required=True, help="comma-separated host names from the inventory")
    add_hosts_file(p)
    p.add_argument("--train-list", type=Path, required=True, help="the local train_list.txt (beside its train/ tree)")
    p.add_argument("--images", action="store_true", help="also rsync the JPEG tree to each host's data_dir")


def cmd_stage_data(args: argparse.Namespace) -> int:
    from kit.hosts import stage as datastage

    inv, hosts = inventory(args)

    def progress(host: str, what: str, detail: str) -> None:
        print(f"  {host:<10} {what:<13} {detail}", file=sys.stderr)

    statuses = datastage.stage_data(inv, hosts, args.train_list, images=args.images, progress=progress)
    for st in statuses:
        if st.error:  # no counts to show: the reason is among the problems below
            print(f"{st.name}: NOT staged")
            continue
        print(f"{st.name}: {st.images} images, {st.classes} classes, list sha256 {st.list_sha256}, "
              f"{'ok' if st.ok else 'NOT OK'}{' (list copied)' if st.copied else ''}")
    problems = datastage.compare(statuses)
    for line in problems:
        print(f"  problem: {line}")
    return EXIT_MISMATCH if problems else EXIT_OK
