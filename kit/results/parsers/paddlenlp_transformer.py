"""PaddleNLP Transformer (examples/machine_translation/transformer/static/train.py): per-card 'ips'.

Every print_step steps, on every card. 2023 (the logger's prefix in ANSI colours):
    '\\x1b[32m[2023-07-31 11:35:31,558] [    INFO]\\x1b[0m - step_idx: 100, epoch: 0, batch: 100, avg loss: ...,
     batch_cost: 0.20967 sec, reader_cost: 0.00008 sec, tokens: 47286, ips: 22552.83189 words/sec'
2021:
    '2021-05-08 17:19:20,407-INFO: step_idx: 100, epoch: 0, batch: 100, avg loss: 8.613505, ...,
     avg_speed: 4.77 step/s, batch_cost: 0.20967 sec, reader_cost: 0.00008 sec, tokens: 47286,
     ips: 22552.83189 words/sec'
'ips' is one card's target words/s (tokens / batch_cost): the job's figure is ips x cards (--scale).
'avg_speed' (steps/s) is not a throughput of the data and is not read.
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.results.parsers.base import (
    ANSI_ESCAPE,
    NUMBER,
    PER_CARD,
    LogFormat,
    Record,
    known_unit,
    posix_time,
    to_float,
)

_LINE = re.compile(
    r"step_idx: (?P<step>\d+), epoch: (?P<epoch>\d+), batch: \d+, [^\n]*?"
    r"ips: (?P<value>" + NUMBER + r") (?P<unit>[^\s\x1b]+)"  # the unit ends at a space or the logger's colour reset
)
_TIME = re.compile(r"\[?(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d+)")
_UNITS = {"words/sec": "words/s", "words/s": "words/s", "tokens/sec": "tokens/s", "tokens/s": "tokens/s"}


class PaddleNLPTransformer(LogFormat):
    name = "paddlenlp-transformer"
    description = "PaddleNLP Transformer: per-card 'step_idx: 100, ... ips: 22552.83 words/sec'"
    needle = re.compile(r"step_idx: ")
    detectors = (re.compile(r"step_idx: \d+, epoch: \d+, batch: \d+, avg loss: "),)
    detect_literals = ("step_idx: ",)
    default_metric = "ips"
    series_kind = PER_CARD
    priority = 57
    value_delimited = True
    line_regex = _LINE

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _LINE.search(line)
        return [] if m is None else [self.record_of(m, line[: m.start()], lineno, rank, path)]

    def record_of(self, m: re.Match[str], prefix: str, lineno: int, rank: int | None, path: str | Path) -> Record:
        value = to_float(m["value"], path, lineno)
        unit = known_unit(m["unit"].rstrip(",."), _UNITS, path, lineno)
        if "\x1b" in prefix:  # the 2023 logger colours its '[time] [INFO]' prefix
            prefix = ANSI_ESCAPE.sub("", prefix)
        t = _TIME.match(prefix)
        ts = posix_time(*t.groups()) if t else None
        return Record(value, unit, "ips", PER_CARD, lineno, int(m["step"]), int(m["epoch"]), ts, rank)
