"""NGC MXNet (DeepLearningExamples resnet50v1.5 benchmark.py / runner): 'train.ips' lines.

Per logged iteration: 'Epoch: 0 Iteration: 19  train.loss : 7.10  train.ips : 265.84 images/s'
Per epoch:            'Epoch: 1  train.loss : 6.50  train.ips : 389.44 images/s'
benchmark.py's table (harmonic mean of the epochs after the first, printed '{:.5g}'):
    train.ips
               |    128    |
    ------------------------
         1     |   389.54  |
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kit.results.parsers.dllogger import DEFAULT_UNIT, DLLoggerFormat
from kit.results.parsers.records import PER_EPOCH, SUMMARY, Record, to_float

_TABLE = re.compile(
    r"^(?P<metric>[\w.]*ips)[ \t]*\r?\n"
    r"(?P<header>[ \t]*\|(?:[^\n|]*\|)+)[ \t]*\r?\n"
    r"-+[ \t]*\r?\n"
    r"(?P<rows>(?:[ \t]*\d+[ \t]*\|(?:[^\n|]*\|)+[ \t]*(?:\r?\n|$))+)",
    re.MULTILINE,
)
_METRIC_LINE_END = re.compile(r"ips[ \t]*\r?\n")  # the end of a line _TABLE can start with (a literal: fast to find)


class DLEMXNet(DLLoggerFormat):
    name = "dle-mxnet"
    description = "NGC MXNet DLLogger: per-epoch 'train.ips : 389.44 images/s' and benchmark.py's table"
    needle = re.compile(r"DLLL? ")
    detectors = (re.compile(r"train\.ips\b"),)
    detect_literals = ("train.ips",)
    default_metric = "train.ips"
    summary_metric = "train.ips"
    series_kind = PER_EPOCH
    priority = 10

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        return super().parse_text(text, path) + list(self._tables(text, path))

    def _tables(self, text: str, path: str | Path) -> Iterator[Record]:
        """benchmark.py's result table: rows = GPU counts, columns = batch sizes."""
        lineno, counted_to, end = 1, 0, 0
        for metric_end in _METRIC_LINE_END.finditer(text):  # _TABLE.finditer(text), tried only where one can start
            start = text.rfind("\n", 0, metric_end.start()) + 1
            table = _TABLE.match(text, start) if start >= end else None
            if table is None:
                continue
            end = table.end()
            lineno += text.count("\n", counted_to, table.start())
            counted_to = table.start()
            rows = table["rows"].splitlines()
            for offset, row in enumerate(rows):
                cells = [c.strip() for c in row.split("|")]
                for cell in cells[1:]:
                    if cell:
                        value = to_float(cell, path, lineno + 3 + offset)
                        yield Record(value, DEFAULT_UNIT, table["metric"], SUMMARY, lineno + 3 + offset)
