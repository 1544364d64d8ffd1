#!/usr/bin/env python3
"""`make bench-report`: how a run's report work grows with its runs, and what reading each log once saves.

    python bench/report_growth.py [--sizes 5:1,5:10,all:20] [--rewrites 5] [--run-seconds 10]

For each size ENTRIES:REPEATS, a run directory of the v100 suite trimmed to one case per framework of its first
ENTRIES entries (bench/scale.py's generator: real log text, every host's files) with REPEATS repeats each (the
defaults: 10, 100 and 980 runs), then, in this process:
  report      one `kit report` of it (kit.run.bench.compose_report + the report files, plots left out): wall
              seconds and the files under the run opened, with each log read once for every section
              (kit.core.filecache.cached, as the kit does) and without (every section reading for itself,
              as the kit did before 9386b2b);
  rewrites    what `kit bench` pays per finished run for its rewritten report: --rewrites rewrites of the finished
              run's report inside one cached() (as kit bench's loop holds it: a log unchanged since is not read again)
              and outside it; seconds and opens per rewrite.
  bench life  the report work of a whole kit bench of it: the runs finishing one by one (each log moved into the
              run directory and recorded in run.json, --run-seconds apart on a simulated clock that also counts
              the rewrites' real seconds), the report rewritten after every run (as kit bench did before
              ReportPacer) and as ReportPacer affords (kit.run.bench.REPORT_SHARE of the bench's time): the
              rewrites' total seconds, opens and count.
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
from kit.core import filecache, rundir  # noqa: E402
from kit.results.exporters import write_outputs  # noqa: E402
from kit.run.bench import ReportPacer, compose_report  # noqa: E402

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


def life(run_dir: Path, suite, out: Path, run_seconds: float, paced: bool) -> tuple[float, int, int]:
    """(seconds, opens, rewrites) of the report work over a kit bench of the run: its runs' logs and run.json
    entries put back one by one, run_seconds apart, the report rewritten as kit bench would (paced: ReportPacer;
    else after every run), inside one filecache.cached() as kit bench holds it."""
    meta = rundir.read_run_meta(run_dir)
    entries = list(meta["runs"].items())
    stash = run_dir.parent / "stash"
    for log, _ in entries:
        (stash / log).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / log).replace(stash / log)
    meta["runs"] = {}
    clock, opens = [0.0], [0]

    def rewrite() -> None:
        seconds, count = measured(run_dir, lambda: report(run_dir, suite, out))
        clock[0] += seconds
        opens[0] += count

    pacer = ReportPacer(rewrite, share=None if paced else float("inf"), clock=lambda: clock[0])
    try:
        with filecache.cached():
            for log, entry in entries:
                (stash / log).replace(run_dir / log)
                meta["runs"][log] = entry
                rundir.save_run_meta(run_dir, meta)
                clock[0] += run_seconds
                pacer.ran()
            pacer.flush()  # the caller's whole report after the loop, counted here as one more rewrite
    finally:
        for log, _ in entries:
            if (stash / log).exists():
                (stash / log).replace(run_dir / log)
    return pacer.spent, opens[0], pacer.rewrites


def size_row(entries: int | None, repeats: int, rewrites: int, run_seconds: float) -> tuple:
    """(runs, logs, MB, report once cached, once not, rewrites cached, rewrites not, life every run, life paced):
    each (seconds, opens[, rewrites])."""
    with tempfile.TemporaryDirectory(prefix="kit-bench-report-") as tmp:
        run_dir, counts = scale.generate(Path(tmp), nodes=2, repeats=repeats, trim=True, entries=entries)
        suite = load_suite(run_dir / "suite.yaml")
        out = Path(tmp) / "out"
        figures = [measured(run_dir, lambda times=times, cache=cache: reports(run_dir, suite, out, times, cache))
                   for times, cache in ((1, True), (1, False), (rewrites, True), (rewrites, False))]
        lives = [life(run_dir, suite, out, run_seconds, paced) for paced in (False, True)]
        return (counts["runs"], counts["logs"], counts["bytes"] / 1e6, *figures, *lives)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5:1,5:10,all:20",
                        help="ENTRIES:REPEATS of each size: the v100 suite's first ENTRIES entries (all: its 49 "
                             "cases), REPEATS each")
    parser.add_argument("--rewrites", type=int, default=5, help="report rewrites timed per size and mode")
    parser.add_argument("--run-seconds", type=float, default=10.0, help="each run's seconds in the bench life")
    args = parser.parse_args()
    sys.addaudithook(count_opens)
    rows = []
    for size in args.sizes.split(","):
        entries, _, repeats = size.partition(":")
        rows.append(size_row(None if entries == "all" else int(entries), int(repeats), args.rewrites,
                             args.run_seconds))
        print(f"{rows[-1][0]} runs ({rows[-1][1]} logs, {rows[-1][2]:.0f} MB) done", file=sys.stderr)
    k = args.rewrites
    print("| runs | report, each log once: s / opens | report, each section reading: s / opens | "
          f"kit bench rewrite (of {k}, one cache): s / opens | rewrite without: s / opens | "
          "per run: report ms, opens (once / each section) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for runs, _logs, _mb, on, off, loop_on, loop_off, *_ in rows:
        print(f"| {runs} | {on[0]:.2f} / {on[1]} | {off[0]:.2f} / {off[1]} | {loop_on[0] / k:.2f} / "
              f"{loop_on[1] / k:.0f} | {loop_off[0] / k:.2f} / {loop_off[1] / k:.0f} | "
              f"{on[0] / runs * 1000:.1f} ms, {on[1] / runs:.1f} / {off[1] / runs:.1f} |")
    print(f"\nA whole kit bench's report work, runs {args.run_seconds:g} s apart (seconds / opens / rewrites):\n")
    print("| runs | rewritten after every run | paced (ReportPacer) | paced / every run: seconds |")
    print("| --- | --- | --- | --- |")
    for runs, *_, every, paced in rows:
        print(f"| {runs} | {every[0]:.2f} / {every[1]} / {every[2]} | {paced[0]:.2f} / {paced[1]} / {paced[2]} | "
              f"{paced[0] / every[0]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
