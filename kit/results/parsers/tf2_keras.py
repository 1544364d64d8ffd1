"""TensorFlow 2 official models (keras_utils.TimeHistory), as run by DLPerf.

'I0826 15:13:29.256277 140405777909504 keras_utils.py:133] TimeHistory: 39.13 seconds,
 327.08 examples/second between steps 100 and 200'
Older releases print "BenchmarkMetric: {'global step':100, 'time_taken': 39.13,
'examples_per_second': 327.08}". One record per logged interval, at its end step.
Those lines carry no loss. Keras prints an epoch's mean loss at its end ('600/600 - 239s - loss: 10.4633 - ...')
and the run's in its 'Run stats:' ({..., 'loss': 10.46327018737793, ...}), both after the epoch's last throughput
line: the text after the log's last one is searched, and a loss printed as NaN or infinite there refuses the log
(a run that trained on NaN ends on one; an earlier epoch's end is not searched).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.columns import finite_floats, ints, make_records
from kit.results.parsers.lines import LineMatches, scan_lines
from kit.results.parsers.logtext import holds
from kit.results.parsers.records import PER_STEP, Record, refuse_non_finite_loss, to_float
from kit.results.parsers.times import posix_time

_TIME_HISTORY = re.compile(
    r"TimeHistory: (?P<seconds>[\d.]+) seconds, (?P<value>\S+) examples/second "
    r"between steps (?P<first>\d+) and (?P<last>\d+)"
)
_BENCHMARK_METRIC = re.compile(
    r"BenchmarkMetric: \{'global step': ?(?P<last>\d+), ?'time_taken': ?(?P<seconds>[\d.]+), ?"
    r"'examples_per_second': ?(?P<value>[^}\s,]+)\}"
)
# glog prefix has no year: a fixed leap year keeps differences right within one log
_GLOG_TIME = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)")
_GLOG_YEAR = 2000


class TF2KerasTimeHistory(LogFormat):
    name = "tf2-keras-timehistory"
    description = "TF2 official models: 'TimeHistory: 39.13 seconds, 327.08 examples/second between steps 100 and 200'"
    needle = re.compile(r"examples[/_]")  # examples/second, examples_per_second
    detectors = (re.compile(r"examples/second between steps"), re.compile(r"BenchmarkMetric: \{"))
    detect_literals = ("examples/second", "examples_per_second")
    default_metric = "examples_per_second"
    priority = 40
    reads_loss = True  # after its last throughput line (above)

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        if holds(text, "BenchmarkMetric: {"):  # older releases: a line's TimeHistory, else its BenchmarkMetric
            records = scan_lines(text, self.needle, lambda ln, no, rk: self.parse_line(ln, no, rk, path), path)
            last = max(text.rfind("TimeHistory: "), text.rfind("BenchmarkMetric: {"))
        else:
            records = self.scan_lines_bulk(text, path, lambda lines: self.bulk_matches(_TIME_HISTORY, lines, path, True))
            last = text.rfind("TimeHistory: ")
        if records:  # the epochs' and the run's losses, printed after the last throughput line
            refuse_non_finite_loss(text, path, text.rfind("\n", 0, last) + 1)
        return records

    def bulk_records(self, found: LineMatches, path: str | Path) -> list[Record] | None:
        _, raws, _, lasts = found.groups
        values, steps = finite_floats(raws), ints(lasts)
        if values is None or steps is None:
            return None
        try:
            times = [posix_time(_GLOG_YEAR, *t.groups()) if t else None for t in map(_GLOG_TIME.match, found.prefixes)]
        except ValueError:
            return None
        return make_records(values, "images/s", "examples_per_second", PER_STEP, found.lines, steps, None, times,
                            found.ranks)

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        m = _TIME_HISTORY.search(line) or _BENCHMARK_METRIC.search(line)
        if m is None:
            return
        value = to_float(m["value"], path, lineno)
        ts = None
        t = _GLOG_TIME.match(line)
        if t:
            ts = posix_time(_GLOG_YEAR, *t.groups())
        yield Record(value, "images/s", "examples_per_second", PER_STEP, lineno, int(m["last"]), None, ts, rank)
