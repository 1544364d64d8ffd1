"""`kit report DIR`: seed-style tables from a DLPerf-layout tree (+ report.html, JSON, CSV, PNG); prints a
summary (--full: the whole report.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit.cli.common import EXIT_BAD_INPUT, EXIT_OK, UsageError, add_method_flags, method_from, progress_console
from kit.core import runlock
from kit.core.inputs import InputError
from kit.core.rundir import has_run_meta, is_sweep


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="seed-style tables from a DLPerf-layout tree (+ report.html, JSON, CSV, PNG)")
    p.add_argument("dir", type=Path)
    add_method_flags(p, scale_default=None)
    p.add_argument("--out", type=Path, help="where to write report.md, report.html, results.json, results.csv, "
                                            "the plots")
    p.add_argument("--full", action="store_true", help="print the whole report.md, not the summary")


def _is_run_dir(source: Path) -> bool:
    """A run directory of `kit bench` / `kit cluster`: run.json, suite.yaml and logs/."""
    return (source / "logs").is_dir() and has_run_meta(source) and (source / "suite.yaml").is_file()


def _default_method(args: argparse.Namespace) -> bool:
    defaults = argparse.ArgumentParser()
    add_method_flags(defaults, scale_default=None)
    return args.format == "auto" and method_from(args) == method_from(defaults.parse_args([]))


def _run_report(run_dir: Path, out: Path, live: str | None, full: bool) -> int:
    """The run's own report (each case by its own rule, the suite's references): what `kit bench` wrote and what
    `kit verify` recomputes. The suite as the run expanded it (run.json, kit.run.frozen), else suite.yaml's; a
    warning line where a case has no logs or a log no case."""
    from kit.core import filecache
    from kit.run.bench import compose_report
    from kit.run.frozen import coverage_warnings, run_suite

    suite, _source = run_suite(run_dir)
    for warning in coverage_warnings(run_dir, suite):
        print(f"kit: warning: {run_dir}: {warning}", file=sys.stderr)
    with filecache.cached():  # each harness log read once for the sections and the plots
        return _write(compose_report(run_dir, suite), out, live, full)


def _in_progress(run_dir: Path) -> str | None:
    """'RUN is still in progress (kit pid N on H since T)' while a kit process holds the run's lock, else None."""
    if not runlock.is_busy(run_dir):
        return None
    return f"{run_dir} is still in progress (kit {runlock.holder(run_dir)})"


def _hold_run(run_dir: Path) -> None:
    """The run's lock for writing its own report files (kit bench writes them when it ends): a live run's report is
    refused, never rewritten under it; a resume started meanwhile is refused."""
    try:
        runlock.acquire(run_dir)
    except runlock.RunDirBusy:
        raise runlock.RunDirBusy(f"{_in_progress(run_dir) or run_dir}: its report.md is written when the run ends; "
                                 "report it then, or give --out elsewhere for a snapshot of the runs finished so far"
                                 ) from None


def _write(report, out: Path, live: str | None = None, full: bool = False) -> int:
    """The report's files into out, its summary on stdout (full: the whole report.md), each unreadable log named;
    live: the report is a snapshot of a run in progress, said at its top and on stderr."""
    from kit.results import exporters, html

    if live:
        report.settings = f"**Run in progress**: {live}; this is a snapshot of the runs finished so far.\n\n" + \
            report.settings
        print(f"kit: warning: {live}: this report is a snapshot of the runs finished so far", file=sys.stderr)
    if report.completion and not report.completion.complete:
        print(f"kit: warning: {report.completion.line()}", file=sys.stderr)
    try:
        written = html.write_report_files(report, out)
    except OSError as exc:  # --out names a file, or a folder that cannot be written
        raise InputError(exc.filename or out, f"cannot write the report there: {exc.strerror or exc}") from None
    print(exporters.to_markdown(report) if full else html.terminal_summary(report, out), end="")
    print(f"\nwrote: {', '.join(str(p) for p in written)}", file=sys.stderr)
    for path, reason in report.failures:
        print(f"kit: {path}: {reason}", file=sys.stderr)
    return EXIT_BAD_INPUT if report.failures else EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from kit.results.report import build_report

    if not args.dir.is_dir():
        raise UsageError(f"{args.dir}: not a directory")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError(args.out, "exists and is not a folder (--out names the folder the report files go to)")
    if is_sweep(args.dir):  # a sweep's report is its fleet table; each host's report is its own run's
        from kit.cli.sweep import fleet_text, write_fleet

        print(fleet_text(write_fleet(args.dir)), end="")
        return EXIT_OK
    method = method_from(args)
    run = _is_run_dir(args.dir)
    if run and _default_method(args) and (args.out is None or args.out.resolve() == args.dir.resolve()):
        _hold_run(args.dir)
        try:
            return _run_report(args.dir, args.dir, None, args.full)
        finally:
            runlock.release(args.dir)
    live = _in_progress(args.dir) if run else None
    if run and _default_method(args):
        return _run_report(args.dir, args.out, live, args.full)
    # a run read by another method: its logs/ only (not the hosts' copies), reported outside the run, whose own
    # report stays the one `kit verify` recomputes; any other tree: ./reports/<name>/ unless --out
    source = args.dir / "logs" if run else args.dir
    console = progress_console()
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("parsing logs", total=None)

        def tick(i: int, n: int, path: Path) -> None:
            progress.update(task, total=n, completed=i, description=f"parsing {path.name}")

        result = build_report(source, method, args.format, scale_given=args.scale is not None, progress=tick)
    if not result.groups and not result.failures:
        raise UsageError(f"{args.dir}: no logs in the DLPerf layout (<N>n<G>g/<model>_b<B>_<precision>_<run>.log)")
    beside = (args.dir / "logs").is_dir() and not run  # a bare DLPerf tree with logs/: its report beside them
    out = args.out or (args.dir if beside else Path.cwd() / "reports" / args.dir.resolve().name)
    return _write(result, out, live, args.full)
