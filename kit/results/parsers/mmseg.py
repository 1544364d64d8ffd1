"""mmsegmentation (tools/train.py, mmcv's TextLoggerHook): iteration lines with seconds per iteration.

Every log interval, on rank 0:
    '2023-08-03 02:24:35,237 - mmseg - INFO - Iter [20/180]\\tlr: 9.054e-03, eta: 0:04:34, time: 0.987,
     data_time: 0.049, memory: 11439, decode.loss_ce: 1.3258, decode.acc_seg: 68.7370, loss: 1.3258'
  (2021 releases: 'decode.loss_seg' instead of 'decode.loss_ce'; multi-node runs behind mpirun's
  'Mon May 31 14:03:44 2021[1,0]<stderr>:' tag).
'time' is the mean seconds per iteration over the interval, the same on every card. The log prints
no throughput: each line becomes one card's samples/s = samples_per_gpu / time, with samples_per_gpu
read from the config the log prints ('samples_per_gpu=8,'); the job's figure is that x cards
(--scale), and the harmonic mean of those records is samples_per_gpu x cards / mean(time).
A log that records no samples_per_gpu gives per-step steps/s (1 / time), the job's, the same on every
card: read them with --kind per-step and pass --scale <global batch>.
An iteration line ends with its losses ('decode.loss_ce: 1.3258, ..., loss: 1.3258'): one printed as NaN or
infinite there refuses the log.
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.lines import scan_lines
from kit.results.parsers.records import NUMBER, PER_CARD, PER_STEP, ParseError, Record, refuse_non_finite_loss, to_float
from kit.results.parsers.times import posix_time

_LINE = re.compile(
    r"(?:(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d+) - )?mmseg - INFO - Iter \[(?P<step>\d+)/\d+\]\s+"
    r"lr: [^\n]*? time: (?P<value>" + NUMBER + r"),"  # eta may read '1 day, 2:03:04'; not 'data_time'"
)
_BATCH = re.compile(r"\bsamples_per_gpu=(\d+)")


class MMSeg(LogFormat):
    name = "mmseg"
    description = "mmsegmentation: 'Iter [20/180]  lr: ..., time: 0.987, ...' (s/iter) -> per-card samples/s"
    needle = re.compile(r"mmseg - INFO - Iter \[")
    detectors = (re.compile(r"mmseg - INFO - Iter \[\d+/\d+\]\s+lr: "),)
    detect_literals = ("mmseg - INFO - Iter [",)
    default_metric = "time"  # the field read; the unit says what it became
    series_kind = PER_CARD
    priority = 42
    value_delimited = True
    reads_loss = True

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        batch = _BATCH.search(text)
        per_gpu = int(batch.group(1)) if batch else None
        if per_gpu is not None and per_gpu < 1:
            raise ParseError(path, f"samples_per_gpu={per_gpu} in the config it printed: not a batch size")

        def parse_line(line: str, lineno: int, rank: int | None) -> list[Record]:
            m = _LINE.search(line)
            if m is None:
                return []
            refuse_non_finite_loss(line, path, m.end(), line=lineno)
            seconds = to_float(m["value"], path, lineno)
            if not seconds > 0:
                raise ParseError(path, f"time: {m['value']} s per iteration is not a duration (must be > 0)", lineno)
            ts = posix_time(*m.groups()[:7]) if m.group(1) else None
            if per_gpu is None:
                return [Record(1 / seconds, "steps/s", "time", PER_STEP, lineno, int(m["step"]), None, ts, rank)]
            return [Record(per_gpu / seconds, "samples/s", self.default_metric, PER_CARD, lineno, int(m["step"]),
                           None, ts, rank)]

        return scan_lines(text, self.needle, parse_line, path, self.value_delimited)
