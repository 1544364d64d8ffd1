"""Finding a format's throughput lines in a log: line by line (scan_lines), or one regex over the whole text
(first_matches); and undoing mpirun's --tag-output prefixes (each line's rank).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from itertools import accumulate, compress, repeat
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

from kit.results.parsers.logtext import holds
from kit.results.parsers.records import ParseError, Record, cannot_read

# mpirun --tag-output (optionally --timestamp-output) prefixes: '[1,0]<stdout>:'
MPI_TAG = re.compile(r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}|)\[\d+,(\d+)\]<std(?:out|err)>:")


def split_rank_fragments(line: str) -> list[tuple[int | None, str]]:
    """Undo mpirun tagging: one (rank, text) per rank present on the physical line.

    mpirun can interleave fragments of several ranks on one line; fragments of the same
    rank are joined in order so a line split by another rank's output is made whole.
    """
    if "<std" not in line:
        return [(None, line)]
    first = MPI_TAG.match(line)
    if first is not None and "<std" not in line[first.end() :]:
        return [(int(first.group(1)), line[first.end() :])]
    tags = list(MPI_TAG.finditer(line))
    if not tags:
        return [(None, line)]
    pieces: dict[int | None, list[str]] = {}
    if tags[0].start() > 0:
        pieces.setdefault(None, []).append(line[: tags[0].start()])
    for i, tag in enumerate(tags):
        end = tags[i + 1].start() if i + 1 < len(tags) else len(line)
        pieces.setdefault(int(tag.group(1)), []).append(line[tag.end() : end])
    return [(rank, "".join(parts)) for rank, parts in pieces.items()]


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
            raise cannot_read(path, exc, lineno) from None
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


_TAG_AFTER_NEWLINE = re.compile("\n" + MPI_TAG.pattern)


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


def last_line_start(text: str) -> int:
    """Where the final line without a newline starts; len(text) when the log ends with one."""
    return len(text) if text.endswith("\n") else text.rfind("\n") + 1
