"""LogFormat, the base of every log-format parser: what a format declares (its needle, detectors, line regex) and
how its text is read, line by line or in bulk (kit.results.parsers.lines, .columns).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from kit.results.parsers.lines import (
    MPI_TAG,
    TWO_TAGS,
    LineMatches,
    first_matches,
    last_line_start,
    scan_lines,
    split_rank_fragments,
    with_ranks,
)
from kit.results.parsers.logtext import holds
from kit.results.parsers.records import PER_STEP, ParseError, Record, cannot_read


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
    # True when parse_text refuses a loss printed as NaN or infinite on the lines it reads (records.NON_FINITE_LOSS:
    # a search of those lines, or non_finite_at of the losses its line regex reads); False for a format whose lines
    # carry no loss: the package's parse_text searches the whole text first (a pass over megabytes).
    reads_loss: bool = False

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
            tag = MPI_TAG.match(text, start)
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
