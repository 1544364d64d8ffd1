"""Records, errors and the line scanner shared by every log-format parser.

A parser never guesses: it returns the throughput records it found or raises ParseError
naming the file, the line when there is one, and the reason.
"""

from __future__ import annotations

import calendar
import gc
import math
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache, partial
from itertools import accumulate, chain, compress, repeat
from operator import add, itemgetter, truediv
from pathlib import Path
from typing import NamedTuple

from kit.core.inputs import InputError, read_input
from kit.core.text import TERMINAL_ESCAPE

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
    if not data or data.isspace():  # what `not data.strip()` says, without copying the log
        raise ParseError(path, "empty file")
    head_bytes = data[:BINARY_SNIFF_BYTES]
    if head_bytes.count(0) > max(1, int(len(head_bytes) * BINARY_NUL_SHARE)):
        raise ParseError(path, "binary file (NUL bytes), not a text log")
    text = data.decode("utf-8", errors="replace")
    head = text[:BINARY_SNIFF_BYTES]
    if head.count("\ufffd") > len(head) // 10:
        raise ParseError(path, "binary file (mostly non-UTF-8 bytes), not a text log")
    return text


def holds(text: str, literal: str, rare: int = 0) -> bool:
    """literal in text, found through its character literal[rare], one rare in logs ('<', '{'): memchr to each, then a
    compare (over megabytes several times faster than `in`, which slows on the literal's common letters). Where that
    character is not rare after all (over one a 4 KiB), the regex engine's literal search (faster than `in` too)."""
    find, startswith, char = text.find, text.startswith, literal[rare]
    at = find(char, rare)
    for _ in range(64 + len(text) // 4096):
        if at == -1:
            return False
        if startswith(literal, at - rare):
            return True
        at = find(char, at + 1)
    return _literal(literal).search(text, at - rare) is not None


@lru_cache(maxsize=64)
def _literal(literal: str) -> re.Pattern[str]:
    return re.compile(re.escape(literal))


# mpirun --tag-output (optionally --timestamp-output) prefixes: '[1,0]<stdout>:'
_MPI_TAG = re.compile(r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}|)\[\d+,(\d+)\]<std(?:out|err)>:")


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


_minute_starts: dict[tuple, int] = {}


def minute_start(year, month, day, hh, mm) -> int:
    """posix_time() of the minute's first second, an int (cached)."""
    key = (year, month, day, hh, mm)
    start = _minute_starts.get(key)
    if start is None:
        if len(_minute_starts) > 65536:
            _minute_starts.clear()
        start = _minute_starts[key] = _day_start(int(year), int(month), int(day)) + int(hh) * 3600 + int(mm) * 60
    return start


def posix_time(year, month, day, hh, mm, ss, frac: str | None = None) -> float:
    """Seconds since the epoch of a log's wall-clock time, read as UTC (only differences matter).

    Takes ints or the digit strings a regex captured; frac is the digits after the point. The minute's
    start is cached (logs print thousands of lines a minute); integer sums, so the float is exact.
    """
    seconds = minute_start(year, month, day, hh, mm) + int(ss)
    return seconds + (int(frac) / 10 ** len(frac) if frac else 0.0)


class _MinuteStarts(dict):
    """'YYYY-MM-DD HH:MM' (any separators: digits at those places) -> minute_start(), computed once per minute."""

    def __missing__(self, key: str) -> int:
        start = self[key] = minute_start(key[0:4], key[5:7], key[8:10], key[11:13], key[14:16])
        return start


def posix_times(minutes: Iterable[str], seconds: Iterable[str], fractions: list[str | None] | None = None
                ) -> list[float]:
    """posix_time() of each (minute 'YYYY-MM-DD HH:MM', seconds digits[, fraction digits or None]): the same floats,
    and the same error at the same item, with C-level maps."""
    whole = map(add, map(_MinuteStarts().__getitem__, minutes), map(int, seconds))
    if fractions is None:
        return list(map(float, whole))  # posix_time's int + 0.0
    if None in fractions or "" in fractions:
        return [w + (int(f) / 10 ** len(f) if f else 0.0) for w, f in zip(whole, fractions, strict=True)]
    size = len(fractions[0]) if fractions else 0
    if list(map(len, fractions)).count(size) == len(fractions):  # one length (the usual): one divisor for all
        return list(map(add, whole, map(truediv, map(int, fractions), repeat(10**size))))
    return list(map(add, whole, map(truediv, map(int, fractions), map(pow, repeat(10), map(len, fractions)))))


def leading_times(texts: list[str], regex: re.Pattern[str]) -> list[float] | None:
    """posix_times() of the time each text (holding no newline) starts with, or None when one does not.

    regex starts with a newline and captures the minute, seconds[, fraction] as posix_times() takes them; it runs once
    over the texts each after a newline (a literal to find fast, where '^' is tried at every character), never
    crossing the next: each text's match is the one regex.match('\\n' + text) gives.
    """
    if not texts:
        return []
    found = regex.findall("\n" + "\n".join(texts))
    return posix_times(*zip(*found, strict=True)) if len(found) == len(texts) else None


@contextmanager
def gc_paused():
    """The cyclic garbage collector off while a log's records are built: they are tuples of numbers and strings (no
    cycles to find), and its passes over hundreds of thousands of fresh tuples cost as much as building them."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


new_record = tuple.__new__
"""new_record(Record, (value, unit, metric, kind, line, step, epoch, timestamp, rank)): a Record, built in C."""


# A throughput number as tools print it (nan/inf are matched so to_float can refuse them).
# The regexes here write an optional group (?:x)? as (?:x|): the same matches, and the regex engine runs a branch
# several times faster than a repeat of a group (one it allocates state for at each try).
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+|)|[-+]?nan|[-+]?inf"

LineParser = Callable[[str, int, int | None], Iterable[Record]]
"""(line text without mpirun tags, 1-based line number, rank) -> records."""


_NUMBER_AT_END = re.compile(r"(?:^|[\s:=,(\[])[-+]?\.?\d[\d.eE+-]*$")


def scan_lines(
    text: str, needle: re.Pattern[str], parse_line: LineParser, path: str | Path, delimited: bool = False,
    first_line: int = 1,
) -> list[Record]:
    """Run parse_line on every line containing a needle match.

    The needle is searched over the whole text (fast), so only candidate lines are parsed.
    A final line without a newline that holds a throughput needle but cannot be parsed
    whole, or ends right on its number, is a log cut mid-line: an error, never a figure.
    delimited: the format's line regex reads a value only when a unit or separator follows
    it, so a parsed final line is complete even when it ends on a number (another field).
    first_line: the number of text's first line (text is the tail of a log).
    """
    records: list[Record] = []
    lineno = first_line
    counted_to = 0
    last_line_start = -1
    length = len(text)
    tagged = holds(text, "<std")  # mpirun --tag-output somewhere in this log
    rfind, find, count = text.rfind, text.find, text.count
    for m in needle.finditer(text):
        start = rfind("\n", 0, m.start()) + 1
        if start == last_line_start:
            continue
        last_line_start = start
        end = find("\n", m.end())
        terminated = end != -1
        if not terminated:
            end = length
        lineno += count("\n", counted_to, start)
        counted_to = start
        line = text[start:end]
        if line.endswith("\r"):
            line = line[:-1]
        try:
            if tagged:
                found = [r for rank, fragment in split_rank_fragments(line) for r in parse_line(fragment, lineno, rank)]
            else:
                found = list(parse_line(line, lineno, None))
        except ValueError as exc:  # int() of a number of thousands of digits
            raise ParseError(path, f"a number that cannot be read ({str(exc).split(';')[0]})", lineno) from None
        if not terminated and (not found or (not delimited and _NUMBER_AT_END.search(line))):
            raise ParseError(path, "log cut mid-line: the last throughput line is incomplete", lineno)
        records.extend(found)
    return records


TWO_TAGS = re.compile(r"<std[^\n]*<std")  # a line of two mpirun fragments: scan_lines joins them per rank


class LineMatches(NamedTuple):
    """The first match of each line of a regex over a whole text (see first_matches)."""

    groups: list[list]  # one list per group of the regex, one item per match (None where it took no part)
    lines: list[int]  # each match's 1-based line number
    prefixes: list[str] | None  # the text before each match on its line, when asked for
    last_on_final_line: bool  # the last match is on the text's final line
    ranks: list[int] | None = None  # each line's mpirun rank, in a tagged log


def first_matches(regex: re.Pattern[str], text: str, prefixes: bool = False, tail: str | None = None
                  ) -> LineMatches | None:
    """regex (whose matches never cross a newline) over the whole text, keeping each line's first match, as
    scan_lines reads a line; one regex.split() and C-level maps, no Python code per match.

    tail: regex is 'head[^\\n]*tail...', a line regex whose lazy run was made greedy (see LogFormat.greedy_line_regex),
    and tail the literal its tail starts with, one that cannot overlap itself. The greedy run ends at the line's last
    tail, the lazy one at its first: None (read it with the lazy regex) unless each match holds the literal once.
    """
    k = regex.groups
    parts = regex.split(text)  # gap 0, groups of match 1, gap 1, ..., the text after the last match
    gaps = parts[0 :: k + 1]
    n = len(gaps) - 1
    if tail is not None:
        total = text.count(tail)  # >= n: each match holds one; those outside the matches are the gaps'
        if total != n and total - sum(map(str.count, gaps, repeat(tail))) != n:
            return None
    newlines = list(map(str.count, gaps[:n], repeat("\n")))  # a match holds no newline: gaps count them all
    lines = list(accumulate(newlines, initial=1))
    del lines[0]  # each match's line
    if 0 in newlines[1:]:  # a later match on a line: keep each line's first (one after a newline, and the first)
        keep = newlines.copy()
        keep[0] = 1
        lines = list(compress(lines, keep))
        groups = [list(compress(parts[j :: k + 1], keep)) for j in range(1, k + 1)]
        gaps_before = compress(gaps, keep)
    else:
        groups = [parts[j :: k + 1] for j in range(1, k + 1)]
        gaps_before = gaps[:n]
    before = list(map(itemgetter(2), map(str.rpartition, gaps_before, repeat("\n")))) if prefixes else None
    return LineMatches(groups, lines, before, n > 0 and "\n" not in gaps[n])


_TAG_AFTER_NEWLINE = re.compile("\n" + _MPI_TAG.pattern)


def line_ranks(prefixes: list[str]) -> tuple[list[int], list[str]] | None:
    """The mpirun rank of the tag each text (a line's start, no newline) starts with, and the text after it; None
    unless each starts with one. One regex.split() over the texts each after a newline: a literal to find fast."""
    parts = _TAG_AFTER_NEWLINE.split("\n" + "\n".join(prefixes))  # '', rank, the text after the tag, rank, ...
    return (list(map(int, parts[1::2])), parts[2::2]) if len(parts) == 2 * len(prefixes) + 1 else None


def with_ranks(found: LineMatches, prefixes: bool) -> LineMatches | None:
    """found (of a tagged log, with prefixes) with each line's mpirun rank, and its prefix after the tag where asked
    (else None); None unless each line starts with one tag."""
    tagged = line_ranks(found.prefixes)
    return None if tagged is None else found._replace(prefixes=tagged[1] if prefixes else None, ranks=tagged[0])


def finite_floats(raws: list[str]) -> list[float] | None:
    """float() of each, or None when one is not a finite float (the caller reads them one by one then)."""
    try:
        values = list(map(float, raws))
    except (TypeError, ValueError):
        return None
    total = sum(values)
    return None if total - total else values  # nan or inf in the values, or a sum past the float range


def ints(raws: list[str]) -> list[int] | None:
    try:
        return list(map(int, raws))
    except (TypeError, ValueError):
        return None


def units_of(raws: list[str], units: dict[str, str]) -> list[str | None]:
    """units[raw.rstrip(",.")] of each (None where unknown), as a record_of() reads a unit that ends a clause; the
    keys of units end in neither."""
    found = list(map(units.get, raws))
    if None in found:  # a unit followed by ',' or '.', or one the format does not know
        found = list(map(units.get, map(str.rstrip, raws, repeat(",."))))
    return found


def positions(column: list, value) -> list[int]:
    """Each i where column[i] == value, in order: list.index() from one to the next (C speed where they are few)."""
    found, at, index = [], -1, column.index
    for _ in range(column.count(value)):
        at = index(value, at + 1)
        found.append(at)
    return found


def drop(columns: Iterable[list], at: list[int]) -> list[list]:
    """Each column but its items at the (increasing) positions at: slices between them where they are few, compress()
    where they are many."""
    columns = list(columns)
    if not at:
        return columns
    if len(at) * 16 > len(columns[0]):
        keep = [True] * len(columns[0])
        for i in at:
            keep[i] = False
        return [list(compress(column, keep)) for column in columns]
    bounds = [-1, *at]
    ends = [*at, None]
    return [list(chain.from_iterable(map(column.__getitem__, map(slice, map((1).__add__, bounds), ends))))
            for column in columns]


def make_records(*columns) -> list[Record]:
    """Records from columns of equal length (a str or None column is repeated)."""
    return list(map(new_record, repeat(Record), zip(*(repeat(c) if c is None or isinstance(c, str) else c
                                                      for c in columns), strict=False)))


def last_line_start(text: str) -> int:
    """Where the final line without a newline starts; len(text) when the log ends with one."""
    return len(text) if text.endswith("\n") else text.rfind("\n") + 1


def cannot_read(path: str | Path, exc: ValueError, lineno: int) -> ParseError:
    """scan_lines' error for int() of a number of thousands of digits."""
    return ParseError(path, f"a number that cannot be read ({str(exc).split(';')[0]})", lineno)


def read_number(raw: str, path: str | Path, line: int) -> float:
    """to_float(), without its cost on the (many) numbers that read as finite floats."""
    try:
        value = float(raw)
    except ValueError:
        return to_float(raw, path, line)  # raises, naming the text
    if value - value:  # inf - inf and nan - nan are nan (true); a finite value gives 0.0
        return to_float(raw, path, line)  # raises
    return value


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

    # Optional fast path: one regex over the whole text that matches a throughput line's payload (starting with
    # literal characters, never crossing a newline), and record_of() turning a match into its Record. It must give
    # exactly what scan_lines + parse_line give (tests check both ways).
    line_regex: re.Pattern[str] | None = None

    def record_of(self, m: re.Match[str], prefix: str, lineno: int, rank: int | None, path: str | Path) -> Record:
        """The Record of a line_regex match; prefix is the line's text before the match."""
        raise NotImplementedError

    # Optional, with a line_regex 'head' + r"[^\n]*?" (or another lazy run to the line's end) + 'tail': the same with
    # a greedy r"[^\n]*", which the regex engine runs several times faster (no tail tried at every character), and
    # tail_literal, the literal the tail starts with. It reads the line's last tail, the lazy one its first: the bulk
    # path uses it where they are the same (first_matches checks), line_regex elsewhere.
    greedy_line_regex: re.Pattern[str] | None = None
    tail_literal = ""

    # Optional, with line_regex: every Record at once from first_matches() (ranks set in a log whose lines each
    # start with one mpirun tag), with C-level maps; None where any match needs more (a number float() or int()
    # refuses, an unknown unit, a time int() refuses): then record_of() reads them one by one, errors included.
    bulk_prefixes = False  # bulk_records reads the prefixes

    def bulk_records(self, found: LineMatches, path: str | Path) -> list[Record] | None:
        return None

    def first_matches(self, text: str, prefixes: bool) -> LineMatches:
        """first_matches() of line_regex, run as greedy_line_regex where that reads the same."""
        if self.greedy_line_regex is not None:
            found = first_matches(self.greedy_line_regex, text, prefixes, self.tail_literal)
            if found is not None:
                return found
        return first_matches(self.line_regex, text, prefixes)

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        if self.line_regex is not None:
            return self.scan_fast(text, path)
        return scan_lines(
            text, self.needle, partial(self.parse_line, path=path), path, self.value_delimited
        )

    def scan_fast(self, text: str, path: str | Path) -> list[Record]:
        """line_regex over the whole text: the first match of each line, as scan_lines would read it.

        Lines behind one mpirun tag each are read here too (the tag's rank, the text after it); a log with a
        line of two fragments (scan_lines joins them per rank) goes to scan_lines whole.
        """
        assert self.line_regex is not None and self.value_delimited
        tagged = holds(text, "<std")
        if tagged and TWO_TAGS.search(text):
            return scan_lines(
                text, self.needle, partial(self.parse_line, path=path), path, self.value_delimited
            )
        records: list[Record] = []
        append = records.append
        record_of = self.record_of
        rfind, count = text.rfind, text.count
        lineno, counted_to, last_start = 1, 0, -1
        if not tagged:  # (a ValueError of record_of is parse_text's to report, as it always was)
            found = self.first_matches(text, self.bulk_prefixes)
            bulk = self.bulk_records(found, path) if found.lines else []
            if bulk is not None:
                if not text.endswith("\n") and not found.last_on_final_line and self.needle.search(text, rfind("\n") + 1):
                    raise ParseError(path, "log cut mid-line: the last throughput line is incomplete", count("\n") + 1)
                return bulk
            for m in self.line_regex.finditer(text):
                begin = m.start()
                start = rfind("\n", 0, begin) + 1
                if start != last_start:
                    last_start = start
                    lineno += count("\n", counted_to, start)
                    counted_to = start
                    append(record_of(m, text[start:begin], lineno, None, path))
            if not text.endswith("\n"):  # a final line holding the needle but no whole throughput line: cut mid-line
                start = rfind("\n") + 1
                if start != last_start and self.needle.search(text, start):
                    raise ParseError(path, "log cut mid-line: the last throughput line is incomplete",
                                     count("\n") + 1)
            return records
        stop = last_line_start(text)  # a cut last line: scan_lines reads it
        found = self.first_matches(text[:stop] if stop < len(text) else text, True)
        ranked = with_ranks(found, self.bulk_prefixes)
        if ranked is not None:
            bulk = self.bulk_records(ranked, path) if found.lines else []
            if bulk is not None:
                if stop < len(text):
                    bulk += scan_lines(text[stop:], self.needle, partial(self.parse_line, path=path),
                                       path, self.value_delimited, count("\n", 0, stop) + 1)
                return bulk
        for m in self.line_regex.finditer(text, 0, stop):
            begin = m.start()
            start = rfind("\n", 0, begin) + 1
            if start == last_start:
                continue
            last_start = start
            lineno += count("\n", counted_to, start)
            counted_to = start
            tag = _MPI_TAG.match(text, start)
            try:
                if tag is None:  # text before a tag, or no tag: split_rank_fragments decides
                    end = text.find("\n", begin)
                    line = text[start : end - 1] if text[end - 1] == "\r" else text[start:end]
                    records += [r for rank, fragment in split_rank_fragments(line)
                                for r in self.parse_line(fragment, lineno, rank, path)]
                else:
                    append(record_of(m, text[tag.end() : begin], lineno, int(tag.group(1)), path))
            except ValueError as exc:
                raise cannot_read(path, exc, lineno) from None
        if stop < len(text):
            lineno += count("\n", counted_to, stop)
            records += scan_lines(text[stop:], self.needle, partial(self.parse_line, path=path),
                                  path, self.value_delimited, lineno)
        return records

    def scan_lines_bulk(self, text: str, path: str | Path, bulk: Callable[[str], list[Record] | None]) -> list[Record]:
        """scan_lines + parse_line, the lines before a final one without a newline read by bulk(those lines) where it
        reads them (not None): it must give what scan_lines gives on them, errors aside (it gives None then)."""
        stop = last_line_start(text)
        records = bulk(text[:stop] if stop < len(text) else text)
        if records is None:
            return scan_lines(text, self.needle, partial(self.parse_line, path=path), path, self.value_delimited)
        if stop < len(text):  # scan_lines' rules for a cut line
            records += scan_lines(text[stop:], self.needle, partial(self.parse_line, path=path), path,
                                  self.value_delimited, text.count("\n", 0, stop) + 1)
        return records

    def bulk_matches(self, regex: re.Pattern[str], lines: str, path: str | Path, prefixes: bool = False
                     ) -> list[Record] | None:
        """bulk_records of regex's first match on each of the (whole) lines, for scan_lines_bulk: regex's first match
        on a line must be the one parse_line reads. None where a line has two mpirun tags, or one not at its start."""
        tagged = holds(lines, "<std")
        if tagged and TWO_TAGS.search(lines):
            return None
        found = first_matches(regex, lines, prefixes or tagged)
        if tagged and (found := with_ranks(found, prefixes)) is None:
            return None
        return self.bulk_records(found, path) if found.lines else []

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


ANSI_ESCAPE = TERMINAL_ESCAPE  # one pattern for every reader of terminal output (kit.core.text)
