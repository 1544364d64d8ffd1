"""PaddleSeg (tools/train.py, paddleseg/core/train.py): per-card 'ips' of the [TRAIN] lines.

Every log_iters iterations, on every card:
    '2023-07-27 12:54:59 [INFO]\\t[TRAIN] epoch: 1, iter: 30/400, loss: 1.4993, lr: 0.009345,
     batch_cost: 0.5432, reader_cost: 0.01917, ips: 14.7280 samples/sec | ETA 00:03:20'
'ips' is one card's images/s (batch_size / batch_cost): the job's figure is ips x cards (--scale).
The launcher's 'ips: 127.0.0.1' (a host list) is not a [TRAIN] line and is never read.
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.results.parsers.base import (
    NUMBER,
    PER_CARD,
    LineMatches,
    LogFormat,
    Record,
    finite_floats,
    ints,
    known_unit,
    leading_times,
    make_records,
    new_record,
    posix_time,
    read_number,
    units_of,
)

_HEAD = r"\[TRAIN\] epoch: (?P<epoch>\d+), iter: (?P<step>\d+)/\d+, "
_TAIL = r"ips: (?P<value>" + NUMBER + r") (?P<unit>[^\s|]+)"
_LINE = re.compile(_HEAD + r"[^\n]*?" + _TAIL)
_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
_TIMES = re.compile(r"\n(\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d)")  # _TIME, for leading_times()
_UNITS = {"samples/sec": "samples/s", "samples/s": "samples/s", "images/sec": "images/s", "images/s": "images/s"}


class PaddleSeg(LogFormat):
    name = "paddleseg"
    description = "PaddleSeg: per-card '[TRAIN] epoch: 1, iter: 30/400, ... ips: 14.7280 samples/sec'"
    needle = re.compile(r"\[TRAIN\] epoch: ")
    detectors = (re.compile(r"\[TRAIN\] epoch: \d+, iter: \d+/\d+, "),)
    detect_literals = ("[TRAIN] epoch: ",)
    default_metric = "ips"
    series_kind = PER_CARD
    priority = 65  # its 'ips: 14.7 samples/sec' would also satisfy PaddleClas's (50) detector
    value_delimited = True
    line_regex = _LINE
    greedy_line_regex = re.compile(_HEAD + r"[^\n]*" + _TAIL)
    tail_literal = "ips: "

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _LINE.search(line)
        return [] if m is None else [self.record_of(m, line[: m.start()], lineno, rank, path)]

    bulk_prefixes = True

    def bulk_records(self, found: LineMatches, path: str | Path) -> list[Record] | None:
        epochs, steps, raws, raw_units = found.groups
        values, steps, epochs = finite_floats(raws), ints(steps), ints(epochs)
        units = units_of(raw_units, _UNITS)
        if values is None or steps is None or epochs is None or None in units:
            return None
        times = leading_times(found.prefixes, _TIMES)
        if times is None:  # a prefix without the time
            times = [posix_time(*t.groups()) if t else None for t in map(_TIME.match, found.prefixes)]
        return make_records(values, units, "ips", PER_CARD, found.lines, steps, epochs, times, found.ranks)

    def record_of(self, m: re.Match[str], prefix: str, lineno: int, rank: int | None, path: str | Path) -> Record:
        epoch, step, raw, raw_unit = m.groups()
        value = read_number(raw, path, lineno)
        raw_unit = raw_unit.rstrip(",.")
        unit = _UNITS.get(raw_unit) or known_unit(raw_unit, _UNITS, path, lineno)
        t = _TIME.match(prefix)
        ts = posix_time(*t.groups()) if t else None
        return new_record(Record, (value, unit, "ips", PER_CARD, lineno, int(step), int(epoch), ts, rank))
