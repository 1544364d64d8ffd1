"""Records, errors and the line scanner shared by every log-format parser.

A parser never guesses: it returns the throughput records it found or raises ParseError
naming the file, the line when there is one, and the reason.
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from kit.core.inputs import InputError, read_input

PER_STEP = "per-step"
PER_CARD = "per-card"  # a per-step figure of one device: multiply by the device count
PER_EPOCH = "per-epoch"
SUMMARY = "summary"  # a figure the tool itself printed for the whole run
KINDS = (PER_STEP, PER_CARD, PER_EPOCH, SUMMARY)

BINARY_SNIFF_BYTES = 8192
# Real text logs can carry a stray NUL (Paddle 2.5 prints 'WARNING: device: \x00.' on a cuDNN mismatch):
# a file is binary when NULs are more than this share of its first BINARY_SNIFF_BYTES, not at the first one.
BINARY_NUL_SHARE = 1 / 1000


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


def read_log_text(path: str | Path) -> str:
    """The log as text; refuses missing, empty and binary files."""
    return decode_log_bytes(read_input(path, "log file", ParseError), path)


def decode_log_bytes(data: bytes, path: str | Path) -> str:
    if not data.strip():
        raise ParseError(path, "empty file")
    head_bytes = data[:BINARY_SNIFF_BYTES]
    if head_bytes.count(0) > max(1, int(len(head_bytes) * BINARY_NUL_SHARE)):
        raise ParseError(path, "binary file (NUL bytes), not a text log")
    text = data.decode("utf-8", errors="replace")
    head = text[:BINARY_SNIFF_BYTES]
    if head.count("\ufffd") > len(head) // 10:
        raise ParseError(path, "binary file (mostly non-UTF-8 bytes), not a text log")
    return text


# mpirun --tag-output (optionally --timestamp-output) prefixes: '[1,0]<stdout>:'
_MPI_TAG = re.compile(r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})?\[\d+,(\d+)\]<std(?:out|err)>:")


def split_rank_fragments(line: str) -> list[tuple[int | None, str]]:
    """Undo mpirun tagging: one (rank, text) per rank present on the physical line.

    mpirun can interleave fragments of several ranks on one line; fragments of the same
    rank are joined in order so a line split by another rank's output is made whole.
    """
    if "<std" not in line:
        return [(None, line)]
    first = _MPI_TAG.match(line)
    if first is not None and "<std" not in line[first.end() :]:
        return [(int(first.group(1)), line[first.end() :])]
    tags = list(_MPI_TAG.finditer(line))
    if not tags:
        return [(None, line)]
    pieces: dict[int | None, list[str]] = {}
    if tags[0].start() > 0:
        pieces.setdefault(None, []).append(line[: tags[0].start()])
    for i, tag in enumerate(tags):
        end = tags[i + 1].start() if i + 1 < len(tags) else len(line)
        pieces.setdefault(int(tag.group(1)), []).append(line[tag.end() : end])
    return [(rank, "".join(parts)) for rank, parts in pieces.items()]


def to_float(text: str, path: str | Path, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ParseError(path, f"throughput value {text!r} is not a number", line) from None
    if not math.isfinite(value):
        raise ParseError(path, f"throughput value is {text} (the run diverged or failed)", line)
    return value


@lru_cache(maxsize=4096)
def _day_start(year: int, month: int, day: int) -> int:
    return calendar.timegm((year, month, day, 0, 0, 0, 0, 0, 0))


def posix_time(year, month, day, hh, mm, ss, frac: str | None = None) -> float:
    """Seconds since the epoch of a log's wall-clock time, read as UTC (only differences matter).

    Takes ints or the digit strings a regex captured; frac is the digits after the point.
    """
    seconds = _day_start(int(year), int(month), int(day)) + int(hh) * 3600 + int(mm) * 60 + int(ss)
    return seconds + (int(frac) / 10 ** len(frac) if frac else 0.0)


# A throughput number as tools print it (nan/inf are matched so to_float can refuse them).
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf"

LineParser = Callable[[str, int, int | None], Iterable[Record]]
"""(line text without mpirun tags, 1-based line number, rank) -> records."""


_NUMBER_AT_END = re.compile(r"(?:^|[\s:=,(\[])[-+]?\.?\d[\d.eE+-]*$")


def scan_lines(
    text: str, needle: re.Pattern[str], parse_line: LineParser, path: str | Path, delimited: bool = False
) -> list[Record]:
    """Run parse_line on every line containing a needle match.

    The needle is searched over the whole text (fast), so only candidate lines are parsed.
    A final line without a newline that holds a throughput needle but cannot be parsed
    whole, or ends right on its number, is a log cut mid-line: an error, never a figure.
    delimited: the format's line regex reads a value only when a unit or separator follows
    it, so a parsed final line is complete even when it ends on a number (another field).
    """
    records: list[Record] = []
    lineno = 1
    counted_to = 0
    last_line_start = -1
    length = len(text)
    tagged = "<std" in text  # mpirun --tag-output somewhere in this log
    for m in needle.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if start == last_line_start:
            continue
        last_line_start = start
        end = text.find("\n", m.end())
        terminated = end != -1
        if not terminated:
            end = length
        lineno += text.count("\n", counted_to, start)
        counted_to = start
        line = text[start:end]
        if line.endswith("\r"):
            line = line[:-1]
        fragments = split_rank_fragments(line) if tagged else ((None, line),)
        try:
            found = [r for rank, fragment in fragments for r in parse_line(fragment, lineno, rank)]
        except ValueError as exc:  # int() of a number of thousands of digits
            raise ParseError(path, f"a number that cannot be read ({str(exc).split(';')[0]})", lineno) from None
        if not terminated and (not found or (not delimited and _NUMBER_AT_END.search(line))):
            raise ParseError(path, "log cut mid-line: the last throughput line is incomplete", lineno)
        records.extend(found)
    return records


class LogFormat:
    """One real log format. Subclasses set the class attributes and parse_line()."""

    name: str = ""
    description: str = ""  # the print statement it reads, one line
    needle: re.Pattern[str]  # finds candidate lines fast
    # Present only in this format (--format auto). Detection scans whole logs: start each
    # detector with literal characters so the regex engine skips ahead fast (an alternation
    # or a look-behind first is slow); give alternatives as separate detectors.
    detectors: tuple[re.Pattern[str], ...] = ()
    # Plain substrings one of which every log of this format holds: a C-speed pre-check
    # that lets detection skip the regexes on the (many) logs of other formats.
    detect_literals: tuple[str, ...] = ()
    default_metric: str = ""
    summary_metric: str = ""  # the metric of the tool's own end-of-run line, if it prints one
    series_kind: str = PER_STEP  # the record kind skip/count/reduce work on
    priority: int = 0  # breaks detection ties: higher wins
    # True when parse_line reads a value only with the unit or separator that follows it (see scan_lines)
    value_delimited: bool = False

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        raise NotImplementedError

    # Optional fast path for logs without mpirun tags: one regex over the whole text that matches a throughput
    # line's payload (starting with literal characters, never crossing a newline), and record_of() turning a
    # match into its Record. It must give exactly what scan_lines + parse_line give (tests check both ways).
    line_regex: re.Pattern[str] | None = None

    def record_of(self, m: re.Match[str], prefix: str, lineno: int, rank: int | None, path: str | Path) -> Record:
        """The Record of a line_regex match; prefix is the line's text before the match."""
        raise NotImplementedError

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        if self.line_regex is not None and "<std" not in text:
            return self.scan_fast(text, path)
        return scan_lines(
            text, self.needle, lambda ln, no, rk: self.parse_line(ln, no, rk, path), path, self.value_delimited
        )

    def scan_fast(self, text: str, path: str | Path) -> list[Record]:
        """line_regex over the whole text: the first match of each line, as scan_lines would read it."""
        assert self.line_regex is not None and self.value_delimited
        records: list[Record] = []
        lineno, counted_to, last_start = 1, 0, -1
        for m in self.line_regex.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            if start == last_start:
                continue
            last_start = start
            lineno += text.count("\n", counted_to, start)
            counted_to = start
            records.append(self.record_of(m, text[start : m.start()], lineno, None, path))
        if not text.endswith("\n"):  # a final line holding the needle but no whole throughput line: cut mid-line
            start = text.rfind("\n") + 1
            if start != last_start and self.needle.search(text, start):
                raise ParseError(path, "log cut mid-line: the last throughput line is incomplete",
                                 text.count("\n") + 1)
        return records

    def detect(self, text: str) -> bool:
        if self.detect_literals and not any(literal in text for literal in self.detect_literals):
            return False
        return any(d.search(text) is not None for d in self.detectors)


def known_unit(raw: str, units: dict[str, str], path: str | Path, line: int) -> str:
    """The kit's spelling of a unit the log printed; ParseError naming it when the format does not know it."""
    try:
        return units[raw]
    except KeyError:
        known = ", ".join(sorted(set(units) - {""}))
        raise ParseError(path, f"unknown throughput unit {raw!r} (this format prints: {known})", line) from None


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
