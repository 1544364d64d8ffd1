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
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.results.parsers.base import NUMBER, PER_STEP, SUMMARY, LogFormat, Record, known_unit, posix_time, to_float

_LINE = re.compile(
    r"DLL (\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))? - \s*(?:Iteration: (?P<step>\d+)\s+)?"
    r"throughput_train : (?P<value>" + NUMBER + r") (?P<unit>\S+)"
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

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _LINE.search(line)
        if m is None:
            return []
        value = to_float(m["value"], path, lineno)
        unit = known_unit(m["unit"], _UNITS, path, lineno)
        step = m["step"]
        kind = SUMMARY if step is None else PER_STEP
        ts = posix_time(*m.groups()[:7])
        return [Record(value, unit, METRIC, kind, lineno, None if step is None else int(step), None, ts, rank)]
