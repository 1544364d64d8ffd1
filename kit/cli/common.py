"""What several `kit` subcommands share: exit codes, UsageError, the method flags, the hosts file, progress."""

from __future__ import annotations

import argparse
import math
from dataclasses import fields
from pathlib import Path

from kit.config import settings
from kit.results.extract import REDUCE_CHOICES, Method, MethodError

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_BUG = 0, 1, 2, 3


class UsageError(Exception):
    pass


def _steps(text: str) -> tuple[int, int]:
    try:
        first, last = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FROM:TO (e.g. 20:120), got {text!r}") from None
    return first, last


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def add_method_flags(p: argparse.ArgumentParser, scale_default: float | None) -> None:
    g = p.add_argument_group("method (the publishers' vocabulary)")
    g.add_argument("--format", default="auto", help="log format, or auto (see `kit formats`)")
    g.add_argument("--metric", help="metric to use where a log has several (e.g. compute_ips)")
    g.add_argument(
        "--kind",
        choices=("per-step", "per-card", "per-epoch", "summary"),
        help="record kind of the series (default: the format's)",
    )
    g.add_argument("--rank", type=int, help="mpirun rank whose lines to use (default: the lowest)")
    g.add_argument("--skip", type=int, default=0, help="drop the first N records (warm-up)")
    g.add_argument("--count", type=int, help="keep exactly M records after the skip (default: all)")
    g.add_argument("--trim", type=int, default=0, metavar="N",
                   help="drop the N lowest and N highest values of the window before reducing")
    g.add_argument("--reduce", choices=REDUCE_CHOICES, default="mean", help="how to reduce the window")
    g.add_argument(
        "--scale",
        type=_positive_float,
        default=scale_default,
        help="multiply by G (per-card -> total)"
        + (" [default: auto from the case folder]" if scale_default is None else ""),
    )
    rounding = g.add_mutually_exclusive_group()
    rounding.add_argument("--round", type=int, metavar="D", help="round to D decimals")
    rounding.add_argument("--sig", type=int, metavar="S", help="round to S significant digits")
    rounding.add_argument("--trunc", type=int, metavar="D", help="cut (toward zero) to D decimals")
    g.add_argument(
        "--steps", type=_steps, default=(20, 120), metavar="FROM:TO", help="wallclock: steps to time between [20:120]"
    )
    g.add_argument("--batch", type=_positive_float, help="wallclock: samples per step (global batch)")


def method_from(args: argparse.Namespace) -> Method:
    """The Method named by the flags (each Method field has a flag of the same name)."""
    try:
        return Method.from_mapping({f.name: getattr(args, f.name) for f in fields(Method)})
    except MethodError as exc:
        raise UsageError(str(exc)) from None


def add_hosts_file(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts-file", type=Path, default=None, help="inventory (default: $KIT_HOSTS_FILE or hosts.yaml)")


def hosts_file(args: argparse.Namespace) -> Path:
    """The inventory to load: --hosts-file, else $KIT_HOSTS_FILE, else hosts.yaml (kit.config.settings)."""
    return settings.hosts_file(args.hosts_file)


def inventory(args: argparse.Namespace):
    """The inventory and the hosts named by --hosts, in that order."""
    from kit.config.hosts import load_hosts

    names = [n.strip() for n in args.hosts.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--hosts {args.hosts!r}: no host named (comma-separated names from the inventory)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"--hosts {args.hosts!r}: {', '.join(twice)} named twice (name each host once)")
    inv = load_hosts(hosts_file(args))
    return inv, [inv.get(name) for name in names]


def progress_console():
    from rich.console import Console

    return Console(stderr=True)
