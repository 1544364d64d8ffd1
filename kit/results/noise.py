"""PURE: was the host busy while the runs ran? The warning for one run (kit bench's console) and the report's lines,
from run.json's `host_load` entries (written by kit.run.hostload).

The rule, one for both: a run's host was BUSY when other processes used more than BUSY_OTHER_CPU_SHARE of the
machine's CPU time during the run (other_cpu_share: the machine's busy CPU time less the run's own process tree,
over wall time x logical cores), or when check-env's capture of the host saw another process on a GPU. The load
average is shown, never decisive: it counts the run's own threads too and trails by a minute.
Like hyperfine's warnings, each message says what to do.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kit.core.rundir import RunRecord

BUSY_OTHER_CPU_SHARE = 0.10
ADVICE = "figures may be low; re-run on a quiet host"
RULE = (f"busy: other processes used more than {BUSY_OTHER_CPU_SHARE:.0%} of the machine's CPU time during a run, "
        "or a GPU ran another process when check-env captured the host")
MAX_NAMED = 5  # runs named in the report's line; the rest counted


def _number(entry: dict, key: str) -> float | None:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _gpus(entry: dict) -> list[str]:
    gpus = entry.get("gpus_busy")
    return [str(g) for g in gpus] if isinstance(gpus, list) else []


def _load_cores(entry: dict) -> float | None:
    """The cores the load average is of: the whole machine's (machine_cores when the run had fewer CPUs)."""
    return _number(entry, "machine_cores") or _number(entry, "cores")


def is_busy(entry) -> bool:
    """The rule above, for one run's host_load entry (anything else: not known to be busy)."""
    if not isinstance(entry, dict):
        return False
    other = _number(entry, "other_cpu_share")
    return (other is not None and other > BUSY_OTHER_CPU_SHARE) or bool(_gpus(entry))


def _what(load: float | None, cores: float | None, other: float | None, gpus: list[str], during: str) -> str:
    parts = []
    if load is not None and cores is not None:
        parts.append(f"load {load:.1f} on {cores:g} cores {during}")
    if other is not None and other > BUSY_OTHER_CPU_SHARE:
        parts.append(f"(other processes used {other:.0%} of the CPU)")
    if gpus:
        parts.append(f"(GPUs held by other processes: {'; '.join(gpus)})")
    return " ".join(parts)


def busy_warning(entry) -> str | None:
    """'host busy: load 3.8 on 2 cores during this run (other processes used 62% of the CPU): figures may be low;
    re-run on a quiet host', or None when the run's host was not busy."""
    if not is_busy(entry):
        return None
    what = _what(_number(entry, "load_during_max"), _load_cores(entry), _number(entry, "other_cpu_share"),
                 _gpus(entry), "during this run")
    return f"host busy: {what}: {ADVICE}"


def busy_reason(entry) -> str:
    """'other processes used 48% of the CPU' (and/or the GPUs other processes held) of a busy run's entry."""
    other = _number(entry, "other_cpu_share")
    parts = ([f"other processes used {other:.0%} of the CPU"] if other is not None and other > BUSY_OTHER_CPU_SHARE
             else []) + ([f"GPUs held by other processes: {'; '.join(_gpus(entry))}"] if _gpus(entry) else [])
    return ", ".join(parts)


def busy_runs(entries: list) -> str | None:
    """'host busy during 2 of 3 runs (other processes used up to 62% of the CPU)' for one case's host_load
    entries (kit compare's reason), or None when none was busy."""
    busy = [e for e in entries if is_busy(e)]
    if not busy:
        return None
    others = [v for e in busy if (v := _number(e, "other_cpu_share")) is not None]
    gpus = sorted({g for e in busy for g in _gpus(e)})
    parts = ([f"other processes used up to {max(others):.0%} of the CPU"] if others else []) + \
        ([f"GPUs held by other processes: {'; '.join(gpus)}"] if gpus else [])
    return f"host busy during {len(busy)} of {len(entries)} runs ({', '.join(parts)})"


def _entries(run: RunRecord) -> list[tuple[str, dict]]:
    return [(e.name, e.host_load) for _, e in sorted(run.runs.items()) if e.host_load is not None]


def host_load_lines(run: RunRecord) -> list[str]:
    """The report's lines (Markdown) on the host's load from run.json: a bold warning naming the busy runs, else one
    line saying how quiet it was; [] when no run recorded its host's load."""
    entries = _entries(run)
    if not entries:
        return []
    sampled = [(name, e) for name, e in entries if _number(e, "other_cpu_share") is not None]
    busy = [(name, e) for name, e in entries if is_busy(e)]
    lines = []
    if busy:
        loads = [v for _, e in busy if (v := _number(e, "load_during_max")) is not None]
        cores = [v for _, e in busy if (v := _load_cores(e)) is not None]
        others = [v for _, e in busy if (v := _number(e, "other_cpu_share")) is not None]
        gpus = sorted({g for _, e in busy for g in _gpus(e)})
        names = ", ".join(name for name, _ in busy[:MAX_NAMED])
        if len(busy) > MAX_NAMED:
            names += f" and {len(busy) - MAX_NAMED} more"
        what = _what(max(loads) if loads else None, max(cores) if cores else None, max(others) if others else None,
                     gpus, f"during runs {names}")
        lines.append(f"**host busy** in {len(busy)} of {len(entries)} runs: {what}: {ADVICE}. ({RULE}.)")
    elif sampled:
        worst = max(_number(e, "other_cpu_share") for _, e in sampled)
        loads = [v for _, e in sampled if (v := _number(e, "load_during_max")) is not None]
        cores = {v for _, e in sampled if (v := _load_cores(e)) is not None}
        load = f", load at most {max(loads):.1f} on {'/'.join(f'{c:g}' for c in sorted(cores))} cores" \
            if loads and cores else ""
        lines.append(f"Host load during the runs: other processes used at most {worst:.0%} of the CPU{load}; "
                     f"no run's host was busy ({RULE}).")
    unsampled = len(entries) - len(sampled)
    if unsampled:
        lines.append(f"The host's load could not be sampled in {unsampled} of {len(entries)} runs (see run.json "
                     "host_load).")
    return lines


INPUT_BOUND_SHARE = 0.9  # a training figure this close to its loader's own rate may be the loader's


def input_share(figure: float, input_rate) -> float | None:
    """A run's training images/s over its loader's own (every rank reading, no training step), or None."""
    if isinstance(input_rate, bool) or not isinstance(input_rate, (int, float)) or input_rate <= 0:
        return None
    return figure / input_rate


def input_bound_warning(figure: float, ran) -> str | None:
    """The console's line for a run that trained within 10% of its loader's own rate."""
    share = input_share(figure, ran.get("input_rate") if isinstance(ran, dict) else None)
    if share is None or share < INPUT_BOUND_SHARE:
        return None
    return (f"input-bound? {figure:.1f} images/s is {share:.0%} of what its {ran.get('loader')} loader delivers "
            f"alone ({ran['input_rate']:.1f}): the figure may measure the input pipeline")
