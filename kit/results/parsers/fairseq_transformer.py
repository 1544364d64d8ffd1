"""NGC PyTorch Transformer (DeepLearningExamples PyTorch/Translation/Transformer, fairseq-derived train.py).

Every log_interval steps, on rank 0:
    'Transformer | epoch 0 | step 100 |avg loss 12.415 |avg tokens 36320.000 |tokens/s 65689.780 |walltime 67.142 |'
  (multi-node runs behind mpirun's 'Thu Feb 25 12:11:25 2021[1,0]<stdout>:' tag).
'tokens/s' is the whole job's source+target tokens per second over the interval (every card's
tokens), 'avg tokens' the mean of its steps' tokens (every card's), 'walltime' the seconds since training began: over
two records of an epoch, avg tokens x steps / walltime's seconds is what the clock says of tokens/s (step_clocks).
Not read for a figure: the end-of-epoch line 'Transformer | epoch 0 | step () |avg loss 4.774 |walltime ...'
(no figure), 'Epoch time: ...', '| done training in ... seconds' and the evaluation's
'| Translated 3003 sentences (...) in 2.6s (1133.53 sentences/s, 21597.18 tokens/s)' (inference).
A line's 'avg loss nan' (no ':', which the search for a non-finite loss does not read as one) is read as a figure, as
it always was: the published V100 and A100 fp16 1-GPU logs print it 450 and 529 times, each after a line 'NaN or Inf
found in input tensor.', and their published figures are re-derived from those lines (kit/claims/perf-models.yaml).
Those runs did not recover: a few intervals alternate with finite losses (steps dynamic loss scaling skipped), then
every line prints nan to the end (A100 from step 26240 of 31487), the validation loss is nan and BLEU 0.00; in the
published window the intervals that print nan print about 3% more tokens/s. A refusal here would refuse those figures.
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.columns import finite_floats, ints, make_records
from kit.results.parsers.lines import LineMatches, split_rank_fragments
from kit.results.parsers.records import NUMBER, PER_STEP, Record, new_record, read_number

_HEAD = r"Transformer \| epoch (?P<epoch>\d+) \| step (?P<step>\d+) \|"
_TAIL = r"\|tokens/s (?P<value>" + NUMBER + r") \|"
_LINE = re.compile(_HEAD + r"[^\n]*?" + _TAIL)
_CLOCK = re.compile(_HEAD + r"[^\n]*?\|avg tokens (?P<tokens>" + NUMBER + r") " + _TAIL + r"walltime (?P<walltime>"
                    + NUMBER + r") \|")


class FairseqTransformer(LogFormat):
    name = "dle-transformer-pytorch"
    description = "NGC PyTorch Transformer (fairseq): 'Transformer | epoch 0 | step 100 |... |tokens/s 65689.78 |'"
    needle = re.compile(r"\|tokens/s ")
    detectors = (re.compile(r"\| step \d+ \|avg loss [\d.]+ \|avg tokens [\d.]+ \|tokens/s "),)
    detect_literals = ("|tokens/s ",)
    default_metric = "tokens/s"
    priority = 43
    value_delimited = True
    reads_loss = True  # its one loss, 'avg loss', never refuses (above)
    line_regex = _LINE
    greedy_line_regex = re.compile(_HEAD + r"[^\n]*" + _TAIL)
    tail_literal = "|tokens/s "

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _LINE.search(line)
        return [] if m is None else [self.record_of(m, line[: m.start()], lineno, rank, path)]

    def bulk_records(self, found: LineMatches, path: str | Path) -> list[Record] | None:
        epochs, steps, raws = found.groups
        values, steps, epochs = finite_floats(raws), ints(steps), ints(epochs)
        if values is None or steps is None or epochs is None:
            return None
        return make_records(values, "tokens/s", "tokens/s", PER_STEP, found.lines, steps, epochs, None, found.ranks)

    def record_of(self, m: re.Match[str], prefix: str, lineno: int, rank: int | None, path: str | Path) -> Record:
        epoch, step, raw = m.groups()
        value = read_number(raw, path, lineno)
        return new_record(Record, (value, "tokens/s", "tokens/s", PER_STEP, lineno, int(step), int(epoch), None, rank))


def step_clocks(text: str) -> dict[tuple[int, int | None], tuple[float, float]]:
    """(line, mpirun rank or None) -> (avg tokens, walltime) of each record's line that prints both (the module's
    text)."""
    found = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        if "|walltime " in line:
            for rank, fragment in split_rank_fragments(line):
                if (m := _CLOCK.search(fragment)) is not None:
                    found[(lineno, rank)] = (float(m["tokens"]), float(m["walltime"]))
    return found
