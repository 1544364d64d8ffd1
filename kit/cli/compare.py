"""`kit compare RUN_A RUN_B`: per case, is run B faster or slower than run A (kit.results.compare)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from kit.cli.common import EXIT_MISMATCH, EXIT_OK
from kit.core import runlock
from kit.core.inputs import InputError
from kit.results import compare


def _number(low: float, high: float, what: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not low <= value < high:
            raise argparse.ArgumentTypeError(f"{what}, got {text}")
        return value
    return parse


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="per case: is run B faster or slower than run A (asv-style; Markdown)",
                       description=compare.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="baseline run directory (or its results.json)")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="run directory to compare with it")
    p.add_argument("--factor", type=_number(1, math.inf, "must be >= 1"), default=compare.DEFAULT_FACTOR,
                   help="a change counts only beyond this ratio [1.1, as asv]")
    p.add_argument("--alpha", type=_number(1e-12, 1, "must be in (0, 1)"), default=compare.DEFAULT_ALPHA,
                   help="p threshold of the Mann-Whitney U test [0.002, asv's p_threshold]")
    p.add_argument("--only-changed", action="store_true", help="leave out the unchanged cases from the table")
    p.add_argument("--out", type=Path, metavar="FILE", help="also write the Markdown to FILE")
    p.add_argument("--fail-on-slower", action="store_true", help="exit 1 when any case is significantly slower")


def _in_progress(side: str, results: compare.Results) -> str | None:
    """'B (run) is still in progress (kit pid N on H since T): ...' while a kit process holds the run's lock."""
    run_dir = results.path.parent
    if not runlock.is_busy(run_dir):
        return None
    return (f"{side} ({run_dir}) is still in progress (kit {runlock.holder(run_dir)}): its results.json is of the "
            "runs finished before; compare again when it ends")


def cmd_compare(args: argparse.Namespace) -> int:
    a, b = compare.load_results(args.run_a), compare.load_results(args.run_b)
    live = [w for side, r in (("A", a), ("B", b)) if (w := _in_progress(side, r))]
    for warning in live:
        print(f"kit: warning: {warning}", file=sys.stderr)
    rows = compare.compare(a, b, args.factor, args.alpha)
    text = compare.to_markdown(rows, a.name, b.name, args.factor, args.alpha, args.only_changed, live)
    print(text, end="")
    if args.out:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text)
        except OSError as exc:
            raise InputError(args.out, f"cannot write: {exc.strerror or exc}") from None
    slower = args.fail_on_slower and any(r.verdict == compare.SLOWER for r in rows)
    return EXIT_MISMATCH if slower else EXIT_OK
