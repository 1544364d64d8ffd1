#!/usr/bin/env python3
"""`make bench-report`: how a run's report work grows with its runs, and what reading each log once saves.

    python bench/report_growth.py [--repeats 1,5,20] [--rewrites 5]

For each size, a run directory of the v100 suite trimmed to its 49 cases (bench/scale.py's generator: real log
text, every host's files) with R repeats each (49, 245, 980 runs), then, in this process:
  report      one `kit report` of it (kit.run.bench.compose_report + the report files, plots left out): wall
              seconds and the files under the run opened, with each log read once for every section
              (kit.core.filecache.cached, as the kit does) and without (every section reading for itself,
              as the kit did before 9386b2b);
  rewrites    what `kit bench` pays per finished run for its rewritten report: --rewrites rewrites of the finished
              run's report inside one cached() (as kit bench's loop holds it: a log unchanged since is not read again)
              and outside it; seconds and opens per rewrite.
Opens are counted by a sys.addaudithook "open" hook (files under the run directory only). A linear report is one
whose per-run cost stays flat from 49 to 980 runs: the table prints seconds and opens per run. Not a test: nothing
is asserted; the figures go to the note of the change that moves them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import scale  # noqa: E402  (the generated run directory)

from kit.config.suites import load_suite  # noqa: E402
from kit.core import filecache  # noqa: E402
from kit.results.exporters import write_outputs  # noqa: E402
from kit.run.bench import compose_report  # noqa: E402

WATCHED: list[str] = []  # the run directory whose opens are counted ("" : none)
OPENS = [0]


def count_opens(event: str, args: tuple) -> None:
    if event == "open" and WATCHED and isinstance(args[0], (str, bytes)):
        name = args[0].decode(errors="replace") if isinstance(args[0], bytes) else args[0]
        if name.startswith(WATCHED[0]):
            OPENS[0] += 1


def report(run_dir: Path, suite, out: Path) -> None:
    write_outputs(compose_report(run_dir, suite), out, plots=False)


def measured(run_dir: Path, work) -> tuple[float, int]:
    """(seconds, opens under run_dir) of work()."""
    WATCHED[:] = [str(run_dir)]
    OPENS[0] = 0
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    WATCHED.clear()
    return seconds, OPENS[0]


def reports(run_dir: Path, suite, out: Path, times: int, cache: bool) -> None:
    """TIMES reports of the run, inside one filecache.cached() (CACHE), or with cached() a no-op everywhere: each
    section reading for itself, as before 9386b2b."""
    if not cache:
        kept, filecache.cached = filecache.cached, contextlib.nullcontext
        try:
            for _ in range(times):
                report(run_dir, suite, out)
        finally:
            filecache.cached = kept
        return
    with filecache.cached():
        for _ in range(times):
            report(run_dir, suite, out)


def size_row(repeats: int, rewrites: int) -> tuple:
    """(runs, logs, MB, report once cached, once not, rewrites cached, rewrites not): each (seconds, opens)."""
    with tempfile.TemporaryDirectory(prefix="kit-bench-report-") as tmp:
        run_dir, counts = scale.generate(Path(tmp), nodes=2, repeats=repeats, trim=True)
        suite = load_suite(run_dir / "suite.yaml")
        out = Path(tmp) / "out"
        figures = [measured(run_dir, lambda times=times, cache=cache: reports(run_dir, suite, out, times, cache))
                   for times, cache in ((1, True), (1, False), (rewrites, True), (rewrites, False))]
        return (counts["runs"], counts["logs"], counts["bytes"] / 1e6, *figures)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", default="1,5,20", help="repeats per case of each size (49 cases)")
    parser.add_argument("--rewrites", type=int, default=5, help="report rewrites timed per size and mode")
    args = parser.parse_args()
    sys.addaudithook(count_opens)
    rows = []
    for repeats in (int(r) for r in args.repeats.split(",")):
        rows.append(size_row(repeats, args.rewrites))
        print(f"{rows[-1][0]} runs ({rows[-1][1]} logs, {rows[-1][2]:.0f} MB) done", file=sys.stderr)
    k = args.rewrites
    print("| runs | report, each log once: s / opens | report, each section reading: s / opens | "
          f"kit bench rewrite (of {k}, one cache): s / opens | rewrite without: s / opens | "
          "per run: report ms, opens (once / each section) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for runs, _logs, _mb, on, off, loop_on, loop_off in rows:
        print(f"| {runs} | {on[0]:.2f} / {on[1]} | {off[0]:.2f} / {off[1]} | {loop_on[0] / k:.2f} / "
              f"{loop_on[1] / k:.0f} | {loop_off[0] / k:.2f} / {loop_off[1] / k:.0f} | "
              f"{on[0] / runs * 1000:.1f} ms, {on[1] / runs:.1f} / {off[1] / runs:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
