"""harness_window(): the measured window of a harness log, read as the kit reads its figure (where a GPU run's
telemetry is summarised: kit.telemetry.summarize)."""

from __future__ import annotations

from pathlib import Path

from kit.results.parsers import PER_STEP, ParseError, parse_log
from kit.results.parsers.kitlog import events


def harness_window(log_path: str | Path) -> tuple[float, float, int]:
    """(start_s, end_s, images) of a harness log's measured steps, in epoch seconds: from the first measured step's
    start (its time_ms - seconds) to the last one's end (its time_ms), and the images they trained (their
    global_batch). The log is parsed as for its figure first (kit.results.parsers: a failed, unfinished or untimed
    run raises ParseError); measured steps are those past run_start's warmup_steps, as many as run_stop's steps."""
    parsed = parse_log(log_path, "kitlog")
    lines = {r.line for r in parsed.records if r.kind == PER_STEP}
    found = events(log_path)
    start = next((e.data for e in found if e.data.get("event") == "run_start"), None)
    stop = next((e for e in reversed(found) if e.data.get("event") == "run_stop"), None)
    if start is None or stop is None:
        raise ParseError(log_path, "not a harness log (no run_start and run_stop): no measured window")
    steps = [e for e in found if e.line in lines and e.data.get("event") == "step"]
    if not steps:
        raise ParseError(log_path, "no timed step records (an epoch-timed run has no per-step window)")
    warm = start.get("warmup_steps") or 0
    measured = [e for e in steps if isinstance(e.data.get("step"), int) and e.data["step"] > warm]
    if len(measured) != stop.data.get("steps"):
        raise ParseError(log_path, f"{len(measured)} measured step records (past warmup_steps {warm}), run_stop says "
                                   f"{stop.data.get('steps')!r}", stop.line)
    first, last = measured[0].data, measured[-1].data
    return (first["time_ms"] / 1000 - first["seconds"], last["time_ms"] / 1000,
            sum(int(e.data["global_batch"]) for e in measured))
