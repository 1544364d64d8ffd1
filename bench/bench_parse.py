"""Parse throughput of the kit's log parsers on >= 200 MB of real log text (not a test).

Each published fixture log is repeated to ~TARGET/len(fixtures) bytes, written to a temp
folder, then read and parsed with --format auto detection, one process (= one core).
Prints MB/s per format and overall, the median of REPEATS timings, and the ratio to the
150 MB/s-per-core target (issue 21). Wall-clock figures; the process's CPU time beside them (on a
shared, busy machine the wall clock also counts time the process waited for a core).

Then the guard: the same corpus parsed side by side by this tree and by the baseline commit named in
bench/parse_baseline.txt (`COMMIT MIN_RATIO`, a git worktree made and removed here), in alternating
fresh processes, CPU time of one pass each; the ratio of the medians (baseline ÷ this tree: this tree's
speed relative to the baseline's) must reach MIN_RATIO: exit status 1 when it does not. A machine's
speed cancels out of the ratio, so the floor holds on any host; move the baseline when a change is
meant to cost speed, measured side by side with the commit before it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kit.results.parsers import parse_log  # noqa: E402

FIXTURES = Path(os.environ.get("KIT_SHARED") or REPO.parent / "shared") / "fixtures" / "published-logs"
TARGET_MB_PER_S = 150.0
BASELINE = Path(__file__).resolve().parent / "parse_baseline.txt"
ONE_PASS = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from kit.results.parsers import parse_log
files = sorted(Path(sys.argv[2]).iterdir())
for f in files[:3]:
    parse_log(f)
start = time.process_time()
for f in files:
    parse_log(f)
print(time.process_time() - start)
"""


def build_corpus(out: Path, total_bytes: int) -> list[Path]:
    sources = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix not in (".yaml", ".md"))
    if not sources:
        raise SystemExit(f"no fixture logs under {FIXTURES}")
    per_file = total_bytes // len(sources) + 1
    made = []
    for i, src in enumerate(sources):
        text = src.read_text(encoding="utf-8", errors="replace")
        if not text.endswith("\n"):
            text += "\n"
        copies = per_file // len(text) + 1
        target = out / f"{i:03d}_{src.name}"
        target.write_text(text * copies, encoding="utf-8")
        made.append(target)
    return made


def baseline() -> tuple[str, float]:
    """(commit, the least ratio) of bench/parse_baseline.txt."""
    try:
        commit, floor = BASELINE.read_text().split("#")[0].split()
        return commit, float(floor)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{BASELINE}: expected one line 'COMMIT MIN_RATIO' ({exc})") from None


def one_pass(root: Path, corpus: Path) -> float:
    done = subprocess.run([sys.executable, "-c", ONE_PASS, str(root), str(corpus)], capture_output=True, text=True,
                          cwd=root, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"bench-parse: a pass in {root} failed: {done.stderr.strip()[-500:]}")
    return float(done.stdout.split()[-1])


def side_by_side(corpus: Path, commit: str, floor: float, rounds: int) -> bool:
    """This tree against `commit` on the corpus, alternating; True when the ratio reaches `floor`."""
    with tempfile.TemporaryDirectory(prefix="kit-bench-parse-base-") as tmp:
        base = Path(tmp) / "tree"
        made = subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(base), commit],
                              capture_output=True, text=True, timeout=300)
        if made.returncode != 0:
            raise SystemExit(f"bench-parse: git worktree of {commit}: {made.stderr.strip()}")
        try:
            ours, theirs = [], []
            for i in range(rounds):
                for side, root in ((ours, REPO), (theirs, base))[::1 if i % 2 == 0 else -1]:
                    side.append(one_pass(root, corpus))
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                           capture_output=True, timeout=300)
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"side by side with {commit} ({rounds} alternating passes each, CPU seconds): this tree median "
          f"{statistics.median(ours):.2f} s, {commit} {statistics.median(theirs):.2f} s; speed ratio {ratio:.3f} "
          f"(floor {floor}: {'held' if ratio >= floor else 'NOT held'})")
    return ratio >= floor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="corpus size in MB [200]")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes; the median is reported [3]")
    parser.add_argument("--rounds", type=int, default=7, help="side-by-side passes per tree [7]")
    parser.add_argument("--against", help="a commit to compare with (default: bench/parse_baseline.txt's)")
    args = parser.parse_args()
    commit, floor = baseline()
    commit = args.against or commit
    with tempfile.TemporaryDirectory(prefix="kit-bench-parse-") as tmp:
        files = build_corpus(Path(tmp), args.mb * 1_000_000)
        sizes = {f: f.stat().st_size for f in files}
        total = sum(sizes.values())
        print(f"corpus: {len(files)} files, {total / 1e6:.1f} MB built from {FIXTURES}")
        passes, cpu_passes = [], []
        per_format: dict[str, list[float]] = defaultdict(list)
        records = 0
        for _ in range(args.repeats):
            spent: dict[str, float] = defaultdict(float)
            volume: dict[str, int] = defaultdict(int)
            records = 0
            start, cpu_start = time.perf_counter(), time.process_time()
            for f in files:
                t0 = time.perf_counter()
                parsed = parse_log(f)
                spent[parsed.format.name] += time.perf_counter() - t0
                volume[parsed.format.name] += sizes[f]
                records += len(parsed.records)
            passes.append(time.perf_counter() - start)
            cpu_passes.append(time.process_time() - cpu_start)
            for name in spent:
                per_format[name].append(volume[name] / 1e6 / spent[name])
        seconds = statistics.median(passes)
        overall = total / 1e6 / seconds
        cpu_overall = total / 1e6 / statistics.median(cpu_passes)
        print(f"records parsed per pass: {records:,}")
        print(f"  {'format':<24} {'MB':>6} {'MB/s':>8}  (median of {args.repeats} passes, wall clock)")
        for name in sorted(per_format):
            print(f"  {name:<24} {volume[name] / 1e6:6.1f} {statistics.median(per_format[name]):8.1f}")
        print(f"overall: {overall:.1f} MB/s per core (median of {args.repeats} passes, {seconds:.2f} s each); "
              f"CPU time: {cpu_overall:.1f} MB/s")
        print(f"target {TARGET_MB_PER_S:.0f} MB/s per core: {overall / TARGET_MB_PER_S:.2f}x "
              f"({'reached' if overall >= TARGET_MB_PER_S else 'NOT reached'})")
        return 0 if side_by_side(Path(tmp), commit, floor, args.rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
