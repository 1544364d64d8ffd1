"""`kit crosscheck CLAIMS`: re-derive published figures from their logs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kit.cli.common import EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK
from kit.results.extract import format_number


def add_parser(sub) -> None:
    p = sub.add_parser("crosscheck", help="re-derive published figures from their logs")
    p.add_argument("claims", type=Path)
    p.add_argument("--json", action="store_true")


def cmd_crosscheck(args: argparse.Namespace) -> int:
    from kit.results.crosscheck import ERROR, FLAGGED, MATCH, MISMATCH, check_claims

    verdicts = check_claims(args.claims)
    counts = {s: sum(v.status == s for v in verdicts) for s in (MATCH, FLAGGED, MISMATCH, ERROR)}
    if args.json:
        print(
            json.dumps(
                {"claims_file": str(args.claims), "counts": counts, "verdicts": [v.to_dict() for v in verdicts]},
                indent=2,
            )
        )
    else:
        width = max(len(v.claim) for v in verdicts)
        print(f"{'claim':<{width}}  {'recomputed':>20}  {'published':>12}  {'rel diff':>10}  verdict")
        for v in verdicts:
            rec = "-" if v.recomputed is None else format_number(v.recomputed)
            diff = "-" if v.rel_diff is None else f"{v.rel_diff:+.2e}"
            note = f"  ({v.detail})" if v.status != MATCH and v.detail else ""
            print(f"{v.claim:<{width}}  {rec:>20}  {format_number(v.published):>12}  {diff:>10}  {v.status}{note}")
        tally = (f"{counts[MATCH]} match, {counts[FLAGGED]} flagged (published figures that do not derive from "
                 f"their logs, as the claims file declares), {counts[MISMATCH]} mismatch, {counts[ERROR]} error")
        print(f"\n{tally} of {len(verdicts)} claims")
    for v in verdicts:
        if v.status == ERROR:
            print(f"kit: {args.claims}:{v.source_line}: {v.detail}", file=sys.stderr)  # the claim's file and line
    if counts[ERROR]:
        return EXIT_BAD_INPUT
    return EXIT_MISMATCH if counts[MISMATCH] else EXIT_OK
