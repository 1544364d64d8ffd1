"""What the PaddlePaddle suites' 'ips: <value> <unit>' formats share (PaddleClas, PaddleNLP BERT and Transformer,
PaddleSeg): one card's figure, read as records named 'ips', per card (the job's figure is ips x cards, --scale).

PaddleIps: the metric, the kind and a line's leading time. PaddleIpsLine: a suite whose throughput line is
'<head>, loss: <loss>, ... ips: <value> <unit>', read whole by one regex (line_regex, the bulk path included); a
loss printed as NaN or infinite there refuses the log. Each suite's module keeps its own pieces: the head, its loss's
name, its units, its time's regexes, its quirks.
"""

from __future__ import annotations

import re
from operator import itemgetter
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.columns import finite_floats, ints, make_records, units_of
from kit.results.parsers.lines import LineMatches
from kit.results.parsers.records import (
    NUMBER,
    PER_CARD,
    Record,
    known_unit,
    new_record,
    non_finite_at,
    non_finite_loss_error,
    read_number,
)
from kit.results.parsers.times import leading_times, posix_time

METRIC = "ips"


class PaddleIps(LogFormat):
    """A PaddlePaddle suite's per-card 'ips:' figures. A suite whose lines start with a time sets time (matched at a
    line's start, its groups posix_time()'s) and times (the same for leading_times())."""

    default_metric = METRIC
    series_kind = PER_CARD
    time: re.Pattern[str] | None = None
    times: re.Pattern[str] | None = None

    def time_of(self, prefix: str) -> float | None:
        """posix_time() of the time prefix (a line's text before its figure) starts with; None without one."""
        t = self.time.match(prefix)
        return posix_time(*t.groups()) if t else None

    def times_of(self, prefixes: list[str]) -> list[float | None]:
        """time_of() of each prefix, at C speed where each has one; ValueError where posix_time() refuses one."""
        times = leading_times(prefixes, self.times)
        if times is None:  # a prefix without the time
            times = [posix_time(*t.groups()) if t else None for t in map(self.time.match, prefixes)]
        return times


class PaddleIpsLine(PaddleIps):
    """A suite whose throughput line is '<head>, loss: <loss>, ... ips: <value> <unit>': the first 'ips: ' after the
    head that reads; the loss printed right after the head (where it is) must not be NaN or infinite.

    A subclass sets head (a regex starting with literal characters, with the groups step and epoch), loss (the loss's
    name and separator after the head), unit_chars (a regex class of a unit's characters: the unit ends at the first
    other one) and units (the log's spellings, none ending in ',' or '.', -> the kit's); line_regex and
    greedy_line_regex are made from them.
    """

    value_delimited = True
    reads_loss = True
    tail_literal = "ips: "
    head: str
    loss = "loss: "
    unit_chars: str
    units: dict[str, str]

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        # the loss where it may be NaN or infinite (it starts with one's letter): a number leaves the group None,
        # which costs split() no string per line
        head = cls.head + r"(?:" + re.escape(cls.loss) + r"(?P<loss>[-+]?[nNiI][^,\s]*+)|)"
        tail = r"ips: (?P<value>" + NUMBER + r") (?P<unit>" + cls.unit_chars + r"+)"
        # (?:[^\ni]++|i)*? is [^\n]*? (the first tail that reads), skipping to each i
        cls.line_regex = re.compile(head + r"(?:[^\ni]++|i)*?" + tail)
        cls.greedy_line_regex = re.compile(head + r"[^\n]*" + tail)
        cls.bulk_prefixes = cls.time is not None
        groups = cls.line_regex.groupindex
        cls._step_epoch_value_unit = itemgetter(*(groups[name] - 1 for name in ("step", "epoch", "value", "unit")))
        cls._loss_of = itemgetter(groups["loss"] - 1)

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = self.line_regex.search(line)
        return [] if m is None else [self.record_of(m, line[: m.start()], lineno, rank, path)]

    def bulk_records(self, found: LineMatches, path: str | Path) -> list[Record] | None:
        losses = self._loss_of(found.groups)
        if (at := non_finite_at(losses)) is not None:
            raise non_finite_loss_error(path, self.loss + losses[at], found.lines[at])
        steps, epochs, raws, raw_units = self._step_epoch_value_unit(found.groups)
        values, steps, epochs = finite_floats(raws), ints(steps), ints(epochs)
        units = units_of(raw_units, self.units)
        if values is None or steps is None or epochs is None or None in units:
            return None
        times = None
        if self.time is not None:
            try:
                times = self.times_of(found.prefixes)
            except ValueError:  # a time posix_time() refuses: record_of reads the lines (and reports it)
                return None
        return make_records(values, units, METRIC, PER_CARD, found.lines, steps, epochs, times, found.ranks)

    def record_of(self, m: re.Match[str], prefix: str, lineno: int, rank: int | None, path: str | Path) -> Record:
        if non_finite_at([m["loss"]]) is not None:
            raise non_finite_loss_error(path, self.loss + m["loss"], lineno)
        step, epoch, raw, raw_unit = self._step_epoch_value_unit(m.groups())
        value = read_number(raw, path, lineno)
        raw_unit = raw_unit.rstrip(",.")
        unit = self.units.get(raw_unit) or known_unit(raw_unit, self.units, path, lineno)
        ts = None if self.time is None else self.time_of(prefix)
        return new_record(Record, (value, unit, METRIC, PER_CARD, lineno, int(step), int(epoch), ts, rank))
