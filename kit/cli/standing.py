"""`kit standing RUN`: where the run stands against every published figure the kit holds, and why
(kit.results.standing)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kit.cli.common import EXIT_OK
from kit.core.inputs import InputError


def add_parser(sub) -> None:
    p = sub.add_parser("standing", help="per case: the nearest published figures, the ratio, what differs and why",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, metavar="RUN", help="a run directory (results.json, run.json, env/)")
    p.add_argument("--count", type=int, default=3, help="published neighbours per case [3] (MLPerf's is kept)")
    p.add_argument("--json", action="store_true", help="the answer as JSON")


def suite_knowledge(run_dir: Path) -> tuple[dict, dict]:
    """(references, settings) per case key from the run's suite.yaml: the suite's own references, and what each
    published program's recipe says it ran (layout, data); ({}, {}) where the run has no suite.yaml."""
    if not (run_dir / "suite.yaml").is_file():
        return {}, {}
    from kit.config import programs
    from kit.config.suites import load_suite
    suite = load_suite(run_dir / "suite.yaml")
    references = {c.key: list(c.references) for c in suite.cases if c.references}
    settings = {}
    for case in suite.cases:
        if case.impl == "reference":
            job = case.ref_job()
            settings[case.key] = {"layout": programs.ran_as(job).layout,
                                  "data": "synthetic" if job.data == "synthetic" else "real"}
    return references, settings


def cmd_standing(args: argparse.Namespace) -> int:
    from kit.results.published import published_figures
    from kit.results.standing import standing, to_dict, to_markdown
    if not (args.run / "results.json").is_file():
        raise InputError(args.run, "not a run directory with results.json (run `kit report` on it first)")
    if args.count < 1:
        raise InputError(args.run, f"--count must be >= 1, got {args.count}")
    references, settings = suite_knowledge(args.run)
    answer = standing(args.run, published_figures(), references, settings, args.count)
    print(json.dumps(to_dict(answer), indent=2) if args.json else to_markdown(answer), end="" if not args.json
          else "\n")
    return EXIT_OK
