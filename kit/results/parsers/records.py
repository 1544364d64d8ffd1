"""What every log-format parser returns or raises: the Record of one throughput figure and its kinds, ParseError,
and the readers of one figure (a number, a unit) that name the file and line when they refuse it.

A parser never guesses: it returns the throughput records it found or raises ParseError
naming the file, the line when there is one, and the reason.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

from kit.core.inputs import InputError

PER_STEP = "per-step"
PER_CARD = "per-card"  # a per-step figure of one device: multiply by the device count
PER_EPOCH = "per-epoch"
SUMMARY = "summary"  # a figure the tool itself printed for the whole run
KINDS = (PER_STEP, PER_CARD, PER_EPOCH, SUMMARY)


class Record(NamedTuple):
    """One throughput figure as the log printed it (a NamedTuple: logs hold millions)."""

    value: float
    unit: str
    metric: str
    kind: str
    line: int
    step: int | None = None
    epoch: int | None = None
    timestamp: float | None = None
    rank: int | None = None

    def to_dict(self) -> dict:
        return self._asdict()


class ParseError(InputError):
    """A log that cannot yield a throughput figure; str() is one line for the user."""



# A throughput number as tools print it (nan/inf are matched so to_float can refuse them).
# The regexes here write an optional group (?:x)? as (?:x|): the same matches, and the regex engine runs a branch
# several times faster than a repeat of a group (one it allocates state for at each try).
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+|)|[-+]?nan|[-+]?inf"


new_record = tuple.__new__
"""new_record(Record, (value, unit, metric, kind, line, step, epoch, timestamp, rank)): a Record, built in C."""


def to_float(text: str, path: str | Path, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ParseError(path, f"throughput value {text!r} is not a number", line) from None
    if not math.isfinite(value):
        raise ParseError(path, f"throughput value is {text} (the run diverged or failed)", line)
    return value


def read_number(raw: str, path: str | Path, line: int) -> float:
    """to_float(), without its cost on the (many) numbers that read as finite floats."""
    try:
        value = float(raw)
    except ValueError:
        return to_float(raw, path, line)  # raises, naming the text
    if value - value:  # inf - inf and nan - nan are nan (true); a finite value gives 0.0
        return to_float(raw, path, line)  # raises
    return value


def cannot_read(path: str | Path, exc: ValueError, lineno: int) -> ParseError:
    """scan_lines' error for int() of a number of thousands of digits."""
    return ParseError(path, f"a number that cannot be read ({str(exc).split(';')[0]})", lineno)


def known_unit(raw: str, units: dict[str, str], path: str | Path, line: int) -> str:
    """The kit's spelling of a unit the log printed; ParseError naming it when the format does not know it."""
    try:
        return units[raw]
    except KeyError:
        known = ", ".join(sorted(set(units) - {""}))
        raise ParseError(path, f"unknown throughput unit {raw!r} (this format prints: {known})", line) from None
