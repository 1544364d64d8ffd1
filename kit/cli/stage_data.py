"""`kit stage-data`: put a convert.py output (--format F --source DIR) or train_list.txt (and --images) on
every host at once; verify counts and sha256 there."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit.cli.common import EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK, add_hosts_file, inventory

FORMATS = ("paddle", "fleetx", "folder", "tfrecord", "recordio")  # kit.hosts.stage.FORMATS (imported lazily there)


def add_parser(sub) -> None:
    p = sub.add_parser("stage-data", help="put a dataset on every host (a format to <data_dir>/<format>/, or "
                                          "train_list.txt); verify counts + sha256 on each")
    p.add_argument("--hosts", required=True, help="comma-separated host names from the inventory")
    add_hosts_file(p)
    p.add_argument("--format", choices=FORMATS, help="stage a data_prep/convert.py output of this format to "
                                                     "<data_dir>/<format>/ (with --source)")
    p.add_argument("--source", type=Path, help="the local convert.py output directory (with --format)")
    p.add_argument("--delete", action="store_true", help="with --format: remove files the source does not have "
                                                         "from <data_dir>/<format>/ on the hosts")
    p.add_argument("--train-list", type=Path, help="list mode: the local train_list.txt (beside its train/ tree), "
                                                   "to <data_dir>/train_list.txt")
    p.add_argument("--images", action="store_true", help="list mode: also rsync the JPEG tree to each data_dir")


def cmd_stage_data(args: argparse.Namespace) -> int:
    from kit.hosts import stage as datastage

    if bool(args.format) != bool(args.source) or bool(args.format) == bool(args.train_list):
        print("kit stage-data: give --format F --source DIR (a data_prep/convert.py output), or --train-list FILE",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.format and args.images:
        print("kit stage-data: --images belongs to --train-list mode (a format's directory is staged whole)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.delete and not args.format:
        print("kit stage-data: --delete needs --format", file=sys.stderr)
        return EXIT_BAD_INPUT
    inv, hosts = inventory(args)

    def progress(host: str, what: str, detail: str) -> None:
        print(f"  {host:<10} {what:<13} {detail}", file=sys.stderr, flush=True)

    if args.format:
        statuses = datastage.stage_format(inv, hosts, args.format, args.source, delete=args.delete,
                                          progress=progress)
    else:
        statuses = datastage.stage_data(inv, hosts, args.train_list, images=args.images, progress=progress)
    for st in statuses:
        if st.error:  # no counts to show: the reason is among the problems below
            print(f"{st.name}: NOT staged")
        elif st.format:
            print(f"{st.name}: {st.format} at {st.data_dir.rstrip('/')}/{st.format}/: {st.images} images, "
                  f"{st.classes} classes, manifest sha256 {st.list_sha256}, {'ok' if st.ok else 'NOT OK'} "
                  f"({st.files_sent} file(s) sent)")
        else:
            print(f"{st.name}: {st.images} images, {st.classes} classes, list sha256 {st.list_sha256}, "
                  f"{'ok' if st.ok else 'NOT OK'}{' (list copied)' if st.copied else ''}")
    problems = datastage.compare(statuses)
    for line in problems:
        print(f"  problem: {line}")
    return EXIT_MISMATCH if problems else EXIT_OK
