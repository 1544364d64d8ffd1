"""`kit` command line: the parser of every subcommand (one module each under kit/cli/) and main().

Exit status: 0 fine; 1 a cross-check mismatch (or a report with failed logs); 2 bad input
or usage (one line naming the file and the reason, no traceback); 3 a bug in the kit.

The subcommand modules import at top level only what `kit --help` loads anyway (the log parsers, the
comparison); the rest (yaml, rich, fabric, docker, the report writer, the run machinery) inside the commands.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import traceback

from kit import __version__
from kit.cli import (
    audit,
    bench,
    check_env,
    compare,
    crosscheck,
    extract,
    formats,
    images,
    multinode,
    report,
    reproduce,
    stage_data,
    standing,
    suites,
    sweep,
    yardstick,
)
from kit.cli.common import EXIT_BAD_INPUT, EXIT_BUG, EXIT_MISMATCH, EXIT_OK, UsageError
from kit.config import settings
from kit.core.inputs import InputError, KitError
from kit.core.text import printable
from kit.results.extract import MethodError
from kit.results.parsers import UnknownFormat
from kit.results.stats import StatsError

__all__ = ["EXIT_BAD_INPUT", "EXIT_BUG", "EXIT_MISMATCH", "EXIT_OK", "UsageError", "build_parser", "main"]

# in the order `kit --help` lists them; multinode adds multinode, cluster and gather-logs, audit bundle and verify
SUBCOMMANDS = (extract, report, crosscheck, formats, bench, multinode, stage_data, check_env, images, compare,
               standing, audit, reproduce, suites, yardstick, sweep)
COMMANDS = {
    "extract": extract.cmd_extract,
    "report": report.cmd_report,
    "crosscheck": crosscheck.cmd_crosscheck,
    "formats": formats.cmd_formats,
    "bench": bench.cmd_bench,
    "suites": suites.cmd_suites,
    "multinode": multinode.cmd_multinode,
    "check-env": check_env.cmd_check_env,
    "cluster": multinode.cmd_cluster,
    "gather-logs": multinode.cmd_gather_logs,
    "stage-data": stage_data.cmd_stage_data,
    "images": images.cmd_images,
    "compare": compare.cmd_compare,
    "standing": standing.cmd_standing,
    "bundle": audit.cmd_bundle,
    "verify": audit.cmd_verify,
    "reproduce": reproduce.cmd_reproduce,
    "yardstick": yardstick.cmd_yardstick,
    "sweep": sweep.cmd_sweep,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kit", description="Training Benchmark Reproducibility Kit")
    parser.add_argument("--version", action="version", version=f"kit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM / SIGHUP, raised where Ctrl-C would be, so every clean-up a Ctrl-C runs runs for them too."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _terminate(signum, _frame):
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, _terminate) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return _run(args)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace) -> int:
    try:
        return COMMANDS[args.command](args)
    except InputError as exc:
        print(printable(f"kit: {exc}"), file=sys.stderr)
    except KitError as exc:
        print(printable(f"kit: {exc}"), file=sys.stderr)
    except (MethodError, StatsError) as exc:
        where = getattr(args, "log", None) or getattr(args, "dir", None) or getattr(args, "claims", "")
        print(printable(f"kit: {where}: {exc}"), file=sys.stderr)
    except (UsageError, UnknownFormat) as exc:
        print(printable(f"kit: {exc}"), file=sys.stderr)
    except KeyboardInterrupt as exc:
        print(f"kit: {'terminated (' + str(exc) + ')' if isinstance(exc, Terminated) else 'interrupted'}",
              file=sys.stderr)
        return 128 + exc.signum if isinstance(exc, Terminated) else 130
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # the file system said no (not a folder, read-only, full): the path and why, one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(printable(f"kit: {where}{exc.strerror or exc}"), file=sys.stderr)
    except Exception as exc:  # a bug: say so plainly, keep the traceback for KIT_DEBUG=1
        if settings.resolve().debug:
            traceback.print_exc()
        print(
            f"kit: internal error ({type(exc).__name__}: {exc}); rerun with KIT_DEBUG=1 and report it", file=sys.stderr
        )
        return EXIT_BUG
    return EXIT_BAD_INPUT
