"""NGC TensorFlow 1 BERT (DeepLearningExamples TensorFlow/LanguageModeling/BERT run_pretraining.py): DLLogger.

Per iteration (one optimizer step, gradients accumulated over num_accumulation_steps):
    'DLL 2023-08-01 05:53:14.850203 - Iteration: 20  throughput_train : 4184.413 sequences/s mlm_loss : ...'
  (older releases: '... throughput_train : 4380.324 seq/s ...', under mpirun's '[1,0]<stdout>:' tag).
End of run (1- and 8-GPU logs of the 2023 release; the 32-GPU runs print none):
    'DLL 2023-08-02 10:40:07.029559 -  throughput_train : 862.988 sequences/s'
  also printed as 'Throughput Average (sentences/sec) = 862.99' (not read: the same figure, rounded).
'throughput_val' (the evaluation after training) is not a training throughput and is not read.
The script prints 'Skipping time record for  N  due to checkpoint-saving/warmup overhead' before a
warm-up iteration's line; the line still carries a figure, which the publisher's method may skip.
Every figure is the whole job's sequences/s (global batch x accumulation / step time).
A line's losses follow its figure ('mlm_loss : 10.4574  nsp_loss : 0.7004  total_loss : 11.1578 ...'): one printed
as NaN or infinite there refuses the log. An fp16 run's overflow steps halve its 'loss_scaler' and print finite
losses (the published logs).
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.columns import finite_floats, make_records
from kit.results.parsers.lines import LineMatches
from kit.results.parsers.records import (
    NUMBER,
    PER_STEP,
    SUMMARY,
    Record,
    cannot_read,
    holds_non_finite_loss,
    known_unit,
    new_record,
    read_number,
    refuse_non_finite_loss,
)
from kit.results.parsers.times import posix_time, posix_times

# (its blanks never cross a line's end: it reads whole logs too); rest: the line after the figure, its losses
_LINE = re.compile(
    r"DLL (\d{4}-\d\d-\d\d[ T]\d\d:\d\d):(\d\d)(?:\.(\d+)|) - [^\S\n]*(?:Iteration: (?P<step>\d+)[^\S\n]+|)"
    r"throughput_train : (?P<value>" + NUMBER + r") (?P<unit>\S+)(?P<rest>[^\n]*)"
)
_UNITS = {"sequences/s": "sequences/s", "seq/s": "sequences/s", "sentences/s": "sequences/s",
          "sequences/sec": "sequences/s"}
METRIC = "throughput_train"


class DLEBertTF1(LogFormat):
    name = "dle-bert-tf1"
    description = "NGC TensorFlow 1 BERT DLLogger: 'Iteration: 20  throughput_train : 4184.41 sequences/s'"
    needle = re.compile(r"throughput_train : ")
    detectors = (re.compile(r"throughput_train : "),)
    detect_literals = ("throughput_train : ",)
    default_metric = METRIC
    summary_metric = METRIC
    priority = 34
    value_delimited = True
    reads_loss = True

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        return self.scan_lines_bulk(text, path, lambda lines: self.bulk_matches(_LINE, lines, path))

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _LINE.search(line)
        return [] if m is None else [self.record_of(m, line[: m.start()], lineno, rank, path)]

    def bulk_records(self, found: LineMatches, path: str | Path) -> list[Record] | None:
        minutes, seconds, fractions, steps, raws, raw_units, rests = found.groups
        values, units = finite_floats(raws), list(map(_UNITS.get, raw_units))
        if values is None or None in units or holds_non_finite_loss("\n".join(rests)):  # (record_of names it)
            return None
        try:
            times = posix_times(minutes, seconds, fractions)
            kinds, steps = [SUMMARY if s is None else PER_STEP for s in steps], [s and int(s) for s in steps]
        except ValueError:
            return None
        return make_records(values, units, METRIC, kinds, found.lines, steps, None, times, found.ranks)

    def record_of(self, m: re.Match[str], prefix: str, lineno: int, rank: int | None, path: str | Path) -> Record:
        refuse_non_finite_loss(m.string, path, m.start("rest"), m.end("rest"), lineno)
        minute, ss, frac, step, raw, raw_unit, _ = m.groups()
        value = read_number(raw, path, lineno)
        unit = _UNITS.get(raw_unit) or known_unit(raw_unit, _UNITS, path, lineno)
        try:
            ts = posix_time(minute[0:4], minute[5:7], minute[8:10], minute[11:13], minute[14:16], ss, frac)
            step = None if step is None else int(step)
        except ValueError as exc:  # as scan_lines reports it
            raise cannot_read(path, exc, lineno) from None
        return new_record(Record, (value, unit, METRIC, SUMMARY if step is None else PER_STEP, lineno, step, None, ts,
                                   rank))
