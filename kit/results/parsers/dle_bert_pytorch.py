"""NGC PyTorch BERT (DeepLearningExamples PyTorch/LanguageModeling/BERT run_pretraining.py): DLLogger text.

Per iteration (no throughput): 'DLL 2023-07-28 15:18:20.1 - Training Epoch: 0 Training Iteration: 22
                                 average_loss : 8.306  step_loss : 8.320  learning_rate : 0.0031'
End of run, one line (the figure):
    'DLL 2023-07-28 15:25:07.507816 -  e2e_train_time : 428.12 s training_sequences_per_second :
     5055.566265125031 sequences/s final_loss : 8.566617012023926 None raw_train_time : 400.44 s'
Older releases print no units ('training_sequences_per_second : 16610.595729661483  final_loss : ...'),
often behind mpirun's 'Thu Jun  9 09:17:45 2022[1,0]<stdout>:'. The figure is the whole job's
sequences/s, as the script computed it over the timed steps: a summary record.
Its clock (iteration_times): run_pretraining.py prints one 'Training Iteration' line at the end of every optimizer
step, the steps dynamic loss scaling skipped included (their iteration number repeats), the last with final_loss
('DLL 2023-07-28 15:17:50.783778 - Training Epoch: 0 Training Iteration: 20  final_loss : 8.557'); the figure is
the sequences of all those steps over the seconds from the first step's start to the last line.
The figure's line carries the run's final_loss: one printed as NaN or infinite there refuses the log (the
per-iteration lines, average_loss and step_loss, are not read). An fp16 run's steps that dynamic loss scaling skipped
print a finite loss ('skipped_steps : 12' in the published logs).
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.lines import split_rank_fragments
from kit.results.parsers.records import NUMBER, SUMMARY, Record, known_unit, refuse_non_finite_loss, to_float
from kit.results.parsers.times import posix_time

_HEAD = re.compile(r"DLL (\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))? - ")
_ITEM = re.compile(
    r"(?P<name>training_sequences_per_second) : (?P<value>" + NUMBER + r")(?= |$)(?: (?P<next>\S+)(?P<key> :)?)?"
)
_UNITS = {"sequences/s": "sequences/s", "seq/s": "sequences/s", "sequences/sec": "sequences/s"}
METRIC = "training_sequences_per_second"
_ITERATION = re.compile(r"DLL (\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))? - Training Epoch: \d+ "
                        r"Training Iteration: \d+ ")


class DLEBertPyTorch(LogFormat):
    name = "dle-bert-pytorch"
    description = "NGC PyTorch BERT DLLogger: 'training_sequences_per_second : 5055.57 sequences/s' (end of run)"
    needle = re.compile(r"training_sequences_per_second : ")
    detectors = (re.compile(r"training_sequences_per_second : "),)
    detect_literals = ("training_sequences_per_second : ",)
    default_metric = METRIC
    summary_metric = METRIC
    series_kind = SUMMARY
    priority = 33
    reads_loss = True

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        head = _HEAD.search(line)
        if head is None:
            return []
        refuse_non_finite_loss(line, path, head.end(), line=lineno)
        found = []
        for m in _ITEM.finditer(line, head.end()):
            value = to_float(m["value"], path, lineno)
            # the token after the value is its unit, unless it is the next 'name :' (the unitless releases)
            unit = "sequences/s" if m["next"] is None or m["key"] else known_unit(m["next"], _UNITS, path, lineno)
            found.append(Record(value, unit, METRIC, SUMMARY, lineno, None, None, posix_time(*head.groups()), rank))
        return found


def iteration_times(text: str) -> list[tuple[int, float, int | None]]:
    """(line, DLLogger stamp, mpirun rank or None) of each optimizer step's 'Training Iteration' line, in order (the
    module's text): a line of a step the figure counts."""
    found = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if "Training Iteration: " in line:
            found += [(lineno, posix_time(*m.groups()), rank) for rank, fragment in split_rank_fragments(line)
                      if (m := _ITERATION.search(fragment))]
    return found
