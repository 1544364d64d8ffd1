"""`kit extract LOG`: one throughput figure from one log (printed on the last line)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kit.cli.common import EXIT_OK, add_method_flags, method_from
from kit.results.extract import compute_figure, format_number
from kit.results.parsers import parse_log


def add_parser(sub) -> None:
    p = sub.add_parser("extract", help="one throughput figure from one log (printed on the last line)")
    p.add_argument("log", type=Path)
    add_method_flags(p, scale_default=1.0)
    p.add_argument("--json", action="store_true", help="print the figure and its provenance as JSON")
    p.add_argument("--records", action="store_true", help="also list every record found (JSON lines)")


def cmd_extract(args: argparse.Namespace) -> int:
    method = method_from(args)
    parsed = parse_log(args.log, args.format)
    figure = compute_figure(parsed, method)
    for warning in figure.warnings:
        print(f"kit: warning: {args.log}: {warning}", file=sys.stderr)
    if args.records:
        for record in parsed.records:
            print(json.dumps(record.to_dict()))
    if args.json:
        print(json.dumps({"file": str(args.log), **figure.to_dict()}, indent=2))
        return EXIT_OK
    detected = " (auto)" if args.format == "auto" else ""
    print(f"format: {figure.format}{detected}  metric: {figure.metric}  kind: {figure.kind}  unit: {figure.unit}")
    print(f"records: {figure.used} used of {figure.available} (lines {figure.first_line}-{figure.last_line})")
    print(format_number(figure.value))
    return EXIT_OK
