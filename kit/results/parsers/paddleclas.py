"""PaddleClas training logs: per-card 'ips' printed every print_batch_step steps.

2.x static: '[2023/07/28 06:42:45] ppcls INFO: epoch:0   train step:10   lr: 0.100000, ...
             batch_cost: 0.64841 s, reader_cost: 0.00067 s, ips: 394.81086 samples/sec.'
2.x dynamic: '[2022/05/01 10:00:00] ppcls INFO: [Train][Epoch 1/120][Iter: 10/5005]lr: 0.1, ...
             batch_cost: 0.64842s, reader_cost: 0.00067, ips: 394.81086 samples/s, eta: 2 days'
older:       '... ips: 390.12 images/sec'
The figure is per card: the total is ips x number of cards. Launcher lines such as
'--ips:0,1,2,3', 'ips: None' or 'ips: 127.0.0.1' are host lists, never throughput.
The line's loss ('loss:  8.3496', 'CELoss: 6.9, loss: 6.9') comes before its 'ips:': one printed as NaN or infinite
there refuses the log.
"""

from __future__ import annotations

import re
from itertools import accumulate, compress, repeat
from operator import add, itemgetter, methodcaller
from pathlib import Path

from kit.results.parsers.columns import finite_floats, make_records
from kit.results.parsers.logtext import holds
from kit.results.parsers.paddle_ips import METRIC, PaddleIps
from kit.results.parsers.records import (
    NUMBER,
    PER_CARD,
    Record,
    new_record,
    non_finite_loss,
    read_number,
    refuse_non_finite_loss,
)

_UNIT = r"(?P<unit>samples/sec|samples/s|images/sec|images/s|img/s)(?![\w/])"
_IPS = re.compile(r"ips: ?(?P<value>" + NUMBER + r") ?" + _UNIT)
# each 'ips:' parse_line may read (none of '--ips:', 'relative_ips:'), with _IPS's groups where it reads there
_ANY_IPS = re.compile(r"ips:(?<![\w-]ips:)(?: ?(?P<value>" + NUMBER + r") ?" + _UNIT + r"|)")
_INT = re.compile(r" *(\d+)")
_STEP_MARKERS = ("step:", "Iter:")
_EPOCH_MARKERS = ("epoch:", "[Epoch ")
_UNITS = {"samples/sec": "samples/s", "images/sec": "images/s", "img/s": "images/s"}
_EVAL = ("[Eval]", "eval step")  # a line holding one is not read


class PaddleClas(PaddleIps):
    name = "paddleclas"
    description = "PaddleClas: per-card 'ips: 394.81086 samples/sec' (older 'images/sec')"
    needle = re.compile(r"ips: ?[-+\d.ni]")
    detectors = (re.compile(r"ips: ?[\d.]+ ?(?:samples|images)/s"),)
    detect_literals = ("ips:",)
    priority = 50
    reads_loss = True
    time = re.compile(r"\[(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)\]")
    times = re.compile(r"\n\[(\d{4}/\d\d/\d\d \d\d:\d\d):(\d\d)\]")

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        at = line.rfind("ips:")
        while at > 0 and (line[at - 1].isalnum() or line[at - 1] in "_-"):  # '--ips:', 'relative_ips:'
            at = line.rfind("ips:", 0, at)
        m = _IPS.match(line, at) if at != -1 else None
        if m is None or "[Eval]" in line or "eval step" in line:
            return []
        refuse_non_finite_loss(line, path, 0, at, lineno)
        raw, unit = m.groups()
        value = read_number(raw, path, lineno)
        ts = self.time_of(line) if line.startswith("[") else None
        step = _int_after(line, _STEP_MARKERS, at)
        epoch = _int_after(line, _EPOCH_MARKERS, at)
        return [new_record(Record, (value, _UNITS.get(unit, unit), METRIC, PER_CARD, lineno, step, epoch, ts, rank))]

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        return self.scan_lines_bulk(text, path, self._bulk)

    def _bulk(self, text: str) -> list[Record] | None:
        """parse_line's records of text (whole lines) from one regex.split() and C-level maps; None where a line needs
        more (scan_lines reads the text then, errors included): mpirun tags, two 'ips:' parse_line may read on a
        line, a figure float() refuses or that is not finite, a step or epoch int() refuses, lines that read their
        step or epoch markers differently, a loss printed as NaN or infinite."""
        if holds(text, "<std"):
            return None
        parts = _ANY_IPS.split(text)  # gap, value, unit, gap, ...
        gaps = parts[::3]
        n = len(gaps) - 1
        newlines = list(map(str.count, gaps[:n], repeat("\n")))
        if 0 in newlines[1:]:  # two on a line: parse_line reads the last, where it reads
            return None
        lines = list(accumulate(newlines, initial=1))
        del lines[0]
        raws, units = parts[1::3], parts[2::3]
        prefixes = list(map(itemgetter(2), map(str.rpartition, gaps[:n], repeat("\n"))))  # each line's text before it
        skip = set()  # the lines of an evaluation
        for literal in _EVAL:
            at, counted, line = text.find(literal), 0, 1
            while at != -1:
                line += text.count("\n", counted, at)
                counted = at
                skip.add(line)
                at = text.find(literal, at + 1)
        if None in raws or skip:  # an 'ips:' that does not read, an evaluation's
            keep = [raw is not None and line not in skip for raw, line in zip(raws, lines, strict=True)]
            lines, raws, units, prefixes = (list(compress(c, keep)) for c in (lines, raws, units, prefixes))
        values = finite_floats(raws)
        if values is None or non_finite_loss("\n".join(prefixes)) is not None:  # (a line's loss before its figure)
            return None
        try:
            times = self.times_of(prefixes)
            steps, epochs = _ints_after(prefixes, _STEP_MARKERS), _ints_after(prefixes, _EPOCH_MARKERS)
        except ValueError:  # (scan_lines names its line)
            return None
        return make_records(values, list(map(_UNITS.get, units, units)), METRIC, PER_CARD, lines, steps, epochs,
                            times, None)


def _ints_after(prefixes: list[str], markers: tuple[str, ...]) -> list[int | None]:
    """_int_after(p, markers, len(p)) of each prefix: with C-level maps where the first marker any prefix holds is
    in each, followed by its int."""
    for marker in markers:
        at = list(map(str.find, prefixes, repeat(marker)))
        if -1 not in at:
            found = list(map(_INT.match, prefixes, map(add, at, repeat(len(marker)))))
            if None not in found:
                return list(map(int, map(methodcaller("group", 1), found)))
            break
        if at.count(-1) != len(at):
            break
    else:
        return [None] * len(prefixes)
    return [_int_after(p, markers, len(p)) for p in prefixes]


def _int_after(line: str, markers: tuple[str, ...], end: int) -> int | None:
    for marker in markers:
        pos = line.find(marker, 0, end)
        if pos != -1:
            m = _INT.match(line, pos + len(marker))
            if m:
                return int(m.group(1))
    return None
