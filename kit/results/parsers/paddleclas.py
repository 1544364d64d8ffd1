"""PaddleClas training logs: per-card 'ips' printed every print_batch_step steps.

2.x static: '[2023/07/28 06:42:45] ppcls INFO: epoch:0   train step:10   lr: 0.100000, ...
             batch_cost: 0.64841 s, reader_cost: 0.00067 s, ips: 394.81086 samples/sec.'
2.x dynamic: '[2022/05/01 10:00:00] ppcls INFO: [Train][Epoch 1/120][Iter: 10/5005]lr: 0.1, ...
             batch_cost: 0.64842s, reader_cost: 0.00067, ips: 394.81086 samples/s, eta: 2 days'
older:       '... ips: 390.12 images/sec'
The figure is per card: the total is ips x number of cards. Launcher lines such as
'--ips:0,1,2,3', 'ips: None' or 'ips: 127.0.0.1' are host lists, never throughput.
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.results.parsers.base import NUMBER, PER_CARD, LogFormat, Record, new_record, posix_time, read_number

_IPS = re.compile(
    r"ips: ?(?P<value>" + NUMBER + r") ?"
    r"(?P<unit>samples/sec|samples/s|images/sec|images/s|img/s)(?![\w/])"
)
_INT = re.compile(r" *(\d+)")
_STEP_MARKERS = ("step:", "Iter:")
_EPOCH_MARKERS = ("epoch:", "[Epoch ")
_TIME = re.compile(r"^\[(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)\]")
_UNITS = {"samples/sec": "samples/s", "images/sec": "images/s", "img/s": "images/s"}


class PaddleClas(LogFormat):
    name = "paddleclas"
    description = "PaddleClas: per-card 'ips: 394.81086 samples/sec' (older 'images/sec')"
    needle = re.compile(r"ips: ?[-+\d.ni]")
    detectors = (re.compile(r"ips: ?[\d.]+ ?(?:samples|images)/s"),)
    detect_literals = ("ips:",)
    default_metric = "ips"
    series_kind = PER_CARD
    priority = 50

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        at = line.rfind("ips:")
        while at > 0 and (line[at - 1].isalnum() or line[at - 1] in "_-"):  # '--ips:', 'relative_ips:'
            at = line.rfind("ips:", 0, at)
        m = _IPS.match(line, at) if at != -1 else None
        if m is None or "[Eval]" in line or "eval step" in line:
            return []
        raw, unit = m.groups()
        value = read_number(raw, path, lineno)
        ts = None
        if line.startswith("["):
            t = _TIME.match(line)
            if t:
                ts = posix_time(*t.groups())
        step = _int_after(line, _STEP_MARKERS, at)
        epoch = _int_after(line, _EPOCH_MARKERS, at)
        return [new_record(Record, (value, _UNITS.get(unit, unit), "ips", PER_CARD, lineno, step, epoch, ts, rank))]


def _int_after(line: str, markers: tuple[str, ...], end: int) -> int | None:
    for marker in markers:
        pos = line.find(marker, 0, end)
        if pos != -1:
            m = _INT.match(line, pos + len(marker))
            if m:
                return int(m.group(1))
    return None
