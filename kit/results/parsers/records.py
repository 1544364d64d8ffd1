"""What every log-format parser returns or raises: the Record of one throughput figure and its kinds, ParseError,
the readers of one figure (a number, a unit) that name the file and line when they refuse it, and the one test of a
loss printed as NaN or infinite (a run that trained on one gives no figure).

A parser never guesses: it returns the throughput records it found or raises ParseError
naming the file, the line when there is one, and the reason.
"""

from __future__ import annotations

import math
import re
import sys
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


# A loss printed as NaN or infinite: a run that trained on one measured broken steps (NaN arithmetic can run faster),
# so its log gives no figure. A value as any format prints one (nan, NaN, -inf, Infinity: the letters in any case);
# the loss in any format's words: 'train.loss : nan' (DLE), '"loss": NaN' (JSON lines), 'loss: inf' (PaddleClas,
# PaddleNLP), 'Train-loss=nan' (MXNet). Loss or loss, as every format the kit reads spells it: the pattern starts with
# the literal 'oss', which the regex engine scans for fast (an IGNORECASE pattern is tried at every character, ~10x
# slower), its 'l' checked after; its runs possessive (*+: none of them can give back a character the next part
# reads), so a loss that is a number costs a few steps. A format searches the lines it reads (LogFormat.reads_loss).
NON_FINITE_VALUE = re.compile(r"[-+]?(?:[nN][aA][nN]|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)")
NON_FINITE_LOSS = re.compile(r"""oss[\w.-]*+["']?+[^\S\n]*+[:=][^\S\n]*+["']?+(""" + NON_FINITE_VALUE.pattern + r")\b")


def non_finite_loss(text: str, pos: int = 0, endpos: int = sys.maxsize) -> tuple[int, int] | None:
    """(start, end) of the first loss in text[pos:endpos] printed as NaN or infinite, its whole name included
    ('train.loss : nan'), or None."""
    while (found := NON_FINITE_LOSS.search(text, pos, endpos)) is not None:
        start = found.start()
        if start > pos and text[start - 1] in "lL":
            start -= 1
            while start > pos and (text[start - 1].isalnum() or text[start - 1] in "_.-"):  # the loss's whole name
                start -= 1
            return start, found.end()
        pos = found.start() + 1
    return None


def holds_non_finite_loss(text: str) -> bool:
    """non_finite_loss(text) is not None, where losses are many (a DLE BERT line prints five: NON_FINITE_LOSS's 'oss'
    is found often): 'nan' and 'inf', one of which each such loss holds in some letter case, looked for first, at C
    speed (where losses are few, the search alone is faster)."""
    lower = text.lower()
    return ("nan" in lower or "inf" in lower) and non_finite_loss(text) is not None


NON_FINITE = "the run trained on a non-finite loss"  # a ParseError's reason for a run whose training failed


def non_finite_loss_error(path: str | Path, said: str, line: int) -> ParseError:
    return ParseError(path, f"no figure: {NON_FINITE} ({said[-80:]})", line)


def refuse_non_finite_loss(text: str, path: str | Path, pos: int = 0, endpos: int = sys.maxsize,
                           line: int | None = None) -> None:
    """ParseError naming the first loss in text[pos:endpos] printed as NaN or infinite, and its line (line: the
    number of the line pos is on; counted from the text's start when not given)."""
    found = non_finite_loss(text, pos, endpos)
    if found is not None:
        start, end = found
        first = text.count("\n", 0, pos) + 1 if line is None else line
        raise non_finite_loss_error(path, text[start:end], first + text.count("\n", pos, start))


def non_finite_at(values: list[str | None]) -> int | None:
    """The index of the first of values (a loss each, as a line printed it; None where one printed none) that is NaN
    or infinite (NON_FINITE_VALUE, whole), or None: at C speed where each is None or none holds a letter of one."""
    if values.count(None) == len(values):
        return None
    joined = "".join(filter(None, values))
    if not any(map(joined.__contains__, "nNiI")):
        return None
    return next((i for i, value in enumerate(values) if value and NON_FINITE_VALUE.fullmatch(value)), None)
