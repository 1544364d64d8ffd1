"""PaddleNLP BERT pre-training (examples/language_model/bert/static/run_pretrain.py): per-card 'ips'.

Every logging_steps steps, on every card:
    'total step: 100, epoch: 0, batch: 99, loss: 10.973790, avg_reader_cost: 0.00008 sec,
     avg_batch_cost: 0.14302 sec, avg_samples: 96.00000, ips: 670.84088 sequences/sec'
The 2021 release of the script spells the first word 'tobal step'. 'ips' is one card's
sequences/s (avg_samples / avg_batch_cost): the job's figure is ips x cards (--scale).
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
    make_records,
    new_record,
    read_number,
    units_of,
)

# 'to[tb]al': total or tobal, starting with literal characters (fast over a whole log)
_HEAD = r"to[tb]al step: (?P<step>\d+), epoch: (?P<epoch>\d+), batch: \d+, "
_TAIL = r"ips: (?P<value>" + NUMBER + r") (?P<unit>[^\s\x1b]+)"  # the unit ends at a space or the logger's colour reset
_LINE = re.compile(_HEAD + r"(?:[^\ni]++|i)*?" + _TAIL)  # = [^\n]*? (the first 'ips: ' that reads), skipping to each i
_UNITS = {"sequences/sec": "sequences/s", "sequences/s": "sequences/s", "seqs/sec": "sequences/s",
          "samples/sec": "samples/s", "samples/s": "samples/s"}


class PaddleNLPBert(LogFormat):
    name = "paddlenlp-bert"
    description = "PaddleNLP BERT: per-card 'total step: 100, ... ips: 670.84 sequences/sec'"
    needle = re.compile(r"al step: ")  # total / tobal: a literal needle is fast
    detectors = (re.compile(r"total step: \d+, epoch: \d+, batch: \d+, "),
                 re.compile(r"tobal step: \d+, epoch: \d+, batch: \d+, "))
    detect_literals = ("total step: ", "tobal step: ")
    default_metric = "ips"
    series_kind = PER_CARD
    priority = 56
    value_delimited = True
    line_regex = _LINE
    greedy_line_regex = re.compile(_HEAD + r"[^\n]*" + _TAIL)
    tail_literal = "ips: "

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _LINE.search(line)
        return [] if m is None else [self.record_of(m, line[: m.start()], lineno, rank, path)]

    def bulk_records(self, found: LineMatches, path: str | Path) -> list[Record] | None:
        steps, epochs, raws, raw_units = found.groups
        values, steps, epochs = finite_floats(raws), ints(steps), ints(epochs)
        units = units_of(raw_units, _UNITS)
        if values is None or steps is None or epochs is None or None in units:
            return None
        return make_records(values, units, "ips", PER_CARD, found.lines, steps, epochs, None, found.ranks)

    def record_of(self, m: re.Match[str], prefix: str, lineno: int, rank: int | None, path: str | Path) -> Record:
        step, epoch, raw, raw_unit = m.groups()
        value = read_number(raw, path, lineno)
        raw_unit = raw_unit.rstrip(",.")
        unit = _UNITS.get(raw_unit) or known_unit(raw_unit, _UNITS, path, lineno)
        return new_record(Record, (value, unit, "ips", PER_CARD, lineno, int(step), int(epoch), None, rank))
