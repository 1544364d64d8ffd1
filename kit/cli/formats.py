"""`kit formats`: list the log formats the kit reads."""

from __future__ import annotations

import argparse

from kit.cli.common import EXIT_OK
from kit.results.parsers import FORMATS


def add_parser(sub) -> None:
    sub.add_parser("formats", help="list the log formats the kit reads")


def cmd_formats(args: argparse.Namespace) -> int:
    width = max(map(len, FORMATS))
    for name, fmt in FORMATS.items():
        print(f"{name:<{width}}  {fmt.series_kind:<9}  {fmt.description}")
    return EXIT_OK
