"""`kit standing RUN`: where the run stands against every published figure the kit holds, and why
(kit.results.standing)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kit.cli.common import EXIT_OK
from kit.core.inputs import InputError
from kit.core.rundir import has_results, is_sweep, read_results, sweep_parts


def add_parser(sub) -> None:
    p = sub.add_parser("standing", help="per case: the nearest published figures, the ratio, what differs and why",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, metavar="RUN", help="a run directory (results.json, run.json, env/)")
    p.add_argument("--count", type=int, default=3, help="published neighbours per case [3] (MLPerf's is kept)")
    p.add_argument("--yardstick", type=Path, metavar="FILE",
                   help="kit yardstick's result for the run's device [the one kept nearest the run, within an hour, "
                        "under RUN/../yardstick/<host>/]")
    p.add_argument("--json", action="store_true", help="the answer as JSON")


def run_results(run_dir: Path) -> dict:
    """The run's results as `kit report` computes them now from its logs (a run directory: run.json, suite.yaml,
    logs/), so both commands give one figure; else results.json as written."""
    from kit.cli.report import _is_run_dir

    if not _is_run_dir(run_dir):
        return read_results(run_dir)
    from kit.run.bench import compose_report
    from kit.run.frozen import run_suite

    return compose_report(run_dir, run_suite(run_dir)[0]).to_dict()


def hardware(run_dir: Path, given: Path | None):
    """kit yardstick's judgement of the run's device: GIVEN, else the one its run directory keeps (env/<host>/), else
    the one kept beside the run; None without one."""
    from kit.cli.yardstick import beside_run, judged
    from kit.core.inputs import aware_instant
    from kit.core.rundir import host_captures, host_yardsticks, read_run

    if given is None:
        given = next(iter(host_yardsticks(run_dir).values()), None)  # measured before a GPU suite's runs
    if given is None:
        run = read_run(run_dir, missing_ok=True)
        hosts = list(host_captures(run_dir)) or [str(run.host.get("hostname") or "")]
        given = beside_run(run_dir, aware_instant(run.started), aware_instant(run.finished), hosts)
    return judged(given, run_dir.parent) if given else None


def cmd_standing(args: argparse.Namespace) -> int:
    from kit.results.published import published_figures
    from kit.results.standing import stand, to_dict, to_markdown
    if is_sweep(args.run):  # a sweep: each host's (or GPU's) standing, the ladder applied to its own figures
        code = EXIT_OK
        for name, part in sweep_parts(args.run).items():
            if has_results(part):
                print(f"## {name}\n")
                code = max(code, cmd_standing(argparse.Namespace(**{**vars(args), "run": part})))
        return code
    if not has_results(args.run):
        raise InputError(args.run, "not a run directory with results.json (run `kit report` on it first)")
    if args.count < 1:
        raise InputError(args.run, f"--count must be >= 1, got {args.count}")
    references, settings, pairs = {}, {}, {}
    if (args.run / "suite.yaml").is_file():
        from kit.config import programs
        from kit.config.suites import load_suite
        from kit.results.compose import suite_knowledge
        references, settings, pairs = suite_knowledge(load_suite(args.run / "suite.yaml"), programs.ran_as)
    answer = stand(args.run, run_results(args.run), published_figures(), references, settings, args.count,
                   hardware(args.run, args.yardstick), pairs=pairs, ladder=True)
    print(json.dumps(to_dict(answer), indent=2) if args.json else to_markdown(answer), end="" if not args.json
          else "\n")
    return EXIT_OK
