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
from itertools import repeat
from pathlib import Path

from kit.results.parsers.base import (
    ANSI_ESCAPE,
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

_HEAD = r"step_idx: (?P<step>\d+), epoch: (?P<epoch>\d+), batch: \d+, "
_TAIL = r"ips: (?P<value>" + NUMBER + r") (?P<unit>[^\s\x1b]+)"  # the unit ends at a space or the logger's colour reset
_LINE = re.compile(_HEAD + r"(?:[^\ni]++|i)*?" + _TAIL)  # = [^\n]*? (the first 'ips: ' that reads), skipping to each i
_TIME = re.compile(r"\[?(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d+)")
_TIMES = re.compile(r"\n\[?(\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d),(\d+)")  # _TIME, for leading_times()
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
    greedy_line_regex = re.compile(_HEAD + r"[^\n]*" + _TAIL)
    tail_literal = "ips: "

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _LINE.search(line)
        return [] if m is None else [self.record_of(m, line[: m.start()], lineno, rank, path)]

    bulk_prefixes = True

    def bulk_records(self, found: LineMatches, path: str | Path) -> list[Record] | None:
        steps, epochs, raws, raw_units = found.groups
        values, steps, epochs = finite_floats(raws), ints(steps), ints(epochs)
        units = units_of(raw_units, _UNITS)
        if values is None or steps is None or epochs is None or None in units:
            return None
        prefixes = found.prefixes
        if any(map(str.__contains__, prefixes, repeat("\x1b"))):  # the 2023 logger colours its '[time] [INFO]' prefix
            prefixes = ANSI_ESCAPE.sub("", "\n".join(prefixes)).split("\n")  # (the escapes never hold a newline)
        try:
            times = leading_times(prefixes, _TIMES)
            if times is None:  # a prefix without the time
                times = [posix_time(*t.groups()) if t else None for t in map(_TIME.match, prefixes)]
        except ValueError:
            return None
        return make_records(values, units, "ips", PER_CARD, found.lines, steps, epochs, times, found.ranks)

    def record_of(self, m: re.Match[str], prefix: str, lineno: int, rank: int | None, path: str | Path) -> Record:
        step, epoch, raw, raw_unit = m.groups()
        value = read_number(raw, path, lineno)
        raw_unit = raw_unit.rstrip(",.")
        unit = _UNITS.get(raw_unit) or known_unit(raw_unit, _UNITS, path, lineno)
        if "\x1b" in prefix:  # the 2023 logger colours its '[time] [INFO]' prefix
            prefix = ANSI_ESCAPE.sub("", prefix)
        t = _TIME.match(prefix)
        ts = posix_time(*t.groups()) if t else None
        return new_record(Record, (value, unit, "ips", PER_CARD, lineno, int(step), int(epoch), ts, rank))
