"""`kit suites [--show NAME]`: list the built-in suites, or expand one."""

from __future__ import annotations

import argparse

from kit.cli.common import EXIT_OK


def add_parser(sub) -> None:
    p = sub.add_parser("suites", help="list the built-in suites, or expand one (--show NAME)")
    p.add_argument("--show", metavar="SUITE", help="print every case of a suite (name or path)")


def cmd_suites(args: argparse.Namespace) -> int:
    from kit.config import suites
    from kit.config.case_keys import NLP_MODELS

    if args.show:
        suite = suites.load_suite(args.show)
        print(f"{suite.name}: {suite.description} ({len(suite.cases)} cases, {suite.path})")
        for c in suite.cases:
            ref = ""
            if c.reference:
                ref = f"  ref {c.reference.value:g} {c.reference.unit}" + ("" if c.reference.bounded else " (shown)")
                ref += f" +{len(c.references) - 1} shown" if len(c.references) > 1 else ""
            if c.impl == "harness" and c.model in NLP_MODELS:
                shape = f"seq {c.seq_len or '-':<4} steps {c.warmup_steps}+{c.measure_epochs} epoch(s)"
            else:
                shape = f"img {c.image_size:<4} steps {c.warmup_steps}+{c.measure_steps:<4}"
            print(f"  {c.key:<42} {c.impl:<8} {shape} x{c.repeats}{ref}")
        return EXIT_OK
    for name in suites.available():
        suite = suites.load_suite(name)
        print(f"{name:<8} {len(suite.cases):>3} cases  {suite.description}")
    return EXIT_OK
