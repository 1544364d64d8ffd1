"""How long a bench will take: from this machine's earlier runs of the same cases (run.json `wall_seconds` under the
runs dir, median per case), bounded by the cases' timeout_s where none ran before; and, while it runs, an ETA from
the runs finished so far (kit.cli.bench's progress bar).
"""

from __future__ import annotations

import socket
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kit.core.inputs import InputError
from kit.core.rundir import RunRecord, has_run_meta, read_run
from kit.run.plan import PlannedRun

MOST_RUN_DIRS = 200  # the newest run directories read for earlier durations


def history(runs_dir: Path, hostname: str | None = None) -> tuple[dict[str, list[float]], int]:
    """{case key: wall seconds of its finished runs} from this host's run directories under runs_dir (newest
    MOST_RUN_DIRS), and how many directories gave any."""
    host = hostname or socket.gethostname()
    runs_dir = Path(runs_dir)
    dirs = sorted((p for p in runs_dir.iterdir() if has_run_meta(p)), key=lambda p: p.name,
                  reverse=True)[:MOST_RUN_DIRS] if runs_dir.is_dir() else []
    found: dict[str, list[float]] = {}
    used = 0
    for run_dir in dirs:
        try:
            run = read_run(run_dir)
        except InputError:  # one unreadable run.json costs its own durations only
            continue
        if run.host.get("hostname") != host:
            continue
        took = durations(run)
        for key, seconds in took.items():
            found.setdefault(key, []).extend(seconds)
        used += bool(took)
    return found, used


def durations(run: RunRecord) -> dict[str, list[float]]:
    """{case key: wall seconds of each run} a run.json records as ok (its `runs`); {} where it records none."""
    found: dict[str, list[float]] = {}
    for e in run.runs.values():
        if e.ok and e.wall_seconds is not None:
            found.setdefault(str(e.case), []).append(float(e.wall_seconds))
    return found


@dataclass
class Estimate:
    known: float = 0.0  # seconds of the runs with earlier durations
    known_runs: int = 0
    bound: float = 0.0  # the timeout_s of the runs without
    unknown_runs: int = 0
    dirs: int = 0  # run directories the durations came from
    source: str = ""  # where the durations came from, where not this host's run directories

    def line(self, runs_dir: Path | None = None) -> str:
        """'estimated time: ...', saying what it came from."""
        if not self.known_runs and not self.unknown_runs:
            return "estimated time: nothing to run"
        parts = []
        if self.known_runs:
            source = f"{self.source} (" if self.source else (
                f"this host's earlier runs of the same cases ({self.dirs} run "
                f"director{'y' if self.dirs == 1 else 'ies'} under {runs_dir}/: ")
            parts.append(f"{duration(self.known)} for {self.known_runs} run(s), from {source}median run.json "
                         "wall_seconds)")
        if self.unknown_runs:
            parts.append(f"at most {duration(self.bound)} for {self.unknown_runs} run(s) "
                         f"{'it does not time' if self.source else 'no earlier run here times'} (their cases' "
                         "timeout_s)")
        return "estimated time: " + "; ".join(parts)


def estimate(runs: Iterable[PlannedRun], runs_dir: Path | None = None, past: dict[str, list[float]] | None = None,
             source: str = "") -> Estimate:
    """The runs' time from `past` ({case key: seconds}, said to come from `source`) where given, else from this
    host's earlier runs under runs_dir (history)."""
    past, dirs = (past, 0) if past is not None else history(runs_dir)
    out = Estimate(dirs=dirs, source=source)
    for run in runs:
        if took := past.get(run.case.key):
            out.known += statistics.median(took)
            out.known_runs += 1
        else:
            out.bound += run.case.timeout_s
            out.unknown_runs += 1
    return out


def duration(seconds: float) -> str:
    """'45 s', '12 min 5 s', '3 h 20 min'."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


@dataclass
class Eta:
    """Remaining time of a bench: each run left takes its case's mean duration in this bench, else its case's
    earlier median on this host, else the mean of this bench's runs so far; None until one of these exists for
    every run left."""
    past: dict[str, list[float]] = field(default_factory=dict)
    took: dict[str, list[float]] = field(default_factory=dict)

    def done(self, run: PlannedRun, seconds: float) -> None:
        self.took.setdefault(run.case.key, []).append(seconds)

    def per_run(self, run: PlannedRun) -> float | None:
        if here := self.took.get(run.case.key):
            return statistics.fmean(here)
        if before := self.past.get(run.case.key):
            return statistics.median(before)
        every = [s for v in self.took.values() for s in v]
        return statistics.fmean(every) if every else None

    def remaining(self, left: list[PlannedRun], current_elapsed: float = 0.0) -> float | None:
        """Seconds for the runs left (the first of them running for current_elapsed s)."""
        each = [self.per_run(r) for r in left]
        if any(e is None for e in each):
            return None
        total = sum(each)  # type: ignore[arg-type]
        if left:
            total -= min(current_elapsed, each[0])  # type: ignore[type-var]
        return max(total, 0.0)
