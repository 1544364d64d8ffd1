"""`kit report DIR`: seed-style tables from a DLPerf-layout tree (+ JSON, CSV, PNG)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kit.cli.common import EXIT_BAD_INPUT, EXIT_OK, UsageError, add_method_flags, method_from, progress_console
from kit.core.inputs import InputError


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="seed-style tables from a DLPerf-layout tree (+ JSON, CSV, PNG)")
    p.add_argument("dir", type=Path)
    add_method_flags(p, scale_default=None)
    p.add_argument("--out", type=Path, help="where to write report.md, results.json, results.csv, scaling.png")


def _default_out(source: Path) -> Path:
    """A run directory (runs/<id>/ with logs/) gets its report beside the logs; any other
    tree is left untouched and the report goes to ./reports/<name>/."""
    if (source / "logs").is_dir():
        return source
    return Path.cwd() / "reports" / source.resolve().name


def cmd_report(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from kit.results import exporters
    from kit.results.report import build_report

    if not args.dir.is_dir():
        raise UsageError(f"{args.dir}: not a directory")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError(args.out, "exists and is not a folder (--out names the folder the report files go to)")
    method = method_from(args)
    console = progress_console()
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("parsing logs", total=None)

        def tick(i: int, n: int, path: Path) -> None:
            progress.update(task, total=n, completed=i, description=f"parsing {path.name}")

        result = build_report(args.dir, method, args.format, scale_given=args.scale is not None, progress=tick)
    if not result.groups and not result.failures:
        raise UsageError(f"{args.dir}: no logs in the DLPerf layout (<N>n<G>g/<model>_b<B>_<precision>_<run>.log)")
    out = args.out or _default_out(args.dir)
    try:
        written = exporters.write_outputs(result, out)
    except OSError as exc:  # --out names a file, or a folder that cannot be written
        raise InputError(exc.filename or out, f"cannot write the report there: {exc.strerror or exc}") from None
    print(exporters.to_markdown(result), end="")
    print(f"\nwrote: {', '.join(str(p) for p in written)}", file=sys.stderr)
    for path, reason in result.failures:
        print(f"kit: {path}: {reason}", file=sys.stderr)
    return EXIT_BAD_INPUT if result.failures else EXIT_OK
