"""A published program's figure against its own clock (rule set v6): where a program's log stamps each rate record
with its time and step, the images between two records are the global batch times the steps between them, so the
records' clock gives a rate no edit of the printed figures moves. The figure (whatever its recipe's reduction) must
lie within CLOCK_BAND of the median of those rates. Pure; registered in kit.audit.rules.predicates.PREDICATES.

The band, measured on every genuine log the kit holds in these formats (../shared/fixtures/published-logs:
DLPerf's TF2 ResNet50 1-32 GPUs, PaddlePaddle Perf's NGC PyTorch, MXNet and TensorFlow 1-32 GPUs; the H200 visit's
DLE run): the median printed rate over the median clock rate is 0.989-1.008 (tests/test_program_clock.py). A
doubled figure reads 2.0.
"""

from __future__ import annotations

import statistics
from itertools import pairwise
from typing import TYPE_CHECKING

from kit.audit.evidence import Evidence
from kit.audit.rules.predicates import predicate
from kit.config import reference
from kit.results.parsers import PER_STEP, ParseError, parse_log

if TYPE_CHECKING:
    from kit.audit.rules.engine import Finding

CLOCKED_FORMATS = ("dle-pytorch", "dle-mxnet", "dle-tf1", "tf2-keras-timehistory")  # where the band was measured
CLOCK_BAND = (0.9, 1.1)
LEAST_INTERVALS = 3


def clock_rates(records, global_batch: int, metric: str) -> list[float]:
    """The images/s the records' own clock gives between consecutive records of METRIC (one rank's: the first)."""
    series = [r for r in records if r.metric == metric and r.kind == PER_STEP and r.timestamp is not None
              and r.step is not None]
    ranks = {r.rank for r in series}
    if len(ranks) > 1:
        first = min(ranks, key=lambda rank: -1 if rank is None else rank)
        series = [r for r in series if r.rank == first]
    return [global_batch * (b.step - a.step) / (b.timestamp - a.timestamp) for a, b in pairwise(series)
            if b.step > a.step and b.timestamp > a.timestamp and a.epoch == b.epoch]


@predicate()
def program_figure_agrees_with_its_clock(ev: Evidence, out: Finding) -> None:
    """Each published program's figure, in a format that stamps its records with time and step, lies within
    CLOCK_BAND of the rate its records' clock gives (global batch x steps / seconds between records)."""
    unclocked = 0
    for key, log, figure in ev.runs():
        if reference.log_reduction(log) is None:
            continue
        if figure.format not in CLOCKED_FORMATS:
            unclocked += 1
            continue
        out.checked += 1
        rel = ev.rel(log.path)
        try:
            records = parse_log(log.path, figure.format).records
        except ParseError:
            continue  # it gave the figure above: read the same
        rates = clock_rates(records, log.group.batch * log.gpus_per_node * log.nodes, figure.metric)
        if len(rates) < LEAST_INTERVALS:
            out.fail(f"{key} run {log.run}: {len(rates)} timed intervals between its {figure.metric} records (at "
                     f"least {LEAST_INTERVALS}): its figure cannot be held to its clock", rel, figure.first_line)
            continue
        clock = statistics.median(rates)
        ratio = figure.value / clock
        if not CLOCK_BAND[0] <= ratio <= CLOCK_BAND[1]:
            out.fail(f"{key} run {log.run}: its figure {figure.value:.2f} {figure.unit} is {ratio:.3f}x the "
                     f"{clock:.2f} its records' clock gives (global batch x steps / seconds between them; genuine "
                     f"logs: {CLOCK_BAND[0]}-{CLOCK_BAND[1]})", rel, figure.first_line)
    if unclocked:
        out.note = f"{unclocked} program run(s) in a format with no per-record clock: not held to one"
