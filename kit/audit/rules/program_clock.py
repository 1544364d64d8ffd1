"""A published program's rates against its own clock (rule set v6): where a program's log stamps each rate record
with its time and step, the images between two records are the global batch times the steps between them, so each
printed rate times the seconds since the record before is that many images, whatever the rates say. The median of
(rate x seconds) / (global batch x steps) over the records of the figure's metric must lie within CLOCK_BAND.
Pure; registered in kit.audit.rules.predicates.PREDICATES.

The band, measured on every genuine log the kit holds in these formats (../shared/fixtures/published-logs:
DLPerf's TF2 ResNet50 1-32 GPUs, PaddlePaddle Perf's NGC PyTorch, MXNet and TensorFlow 1-32 GPUs; the H200 visit's
DLE run): 0.989-1.008 (tests/test_program_clock.py). Rates doubled read 2.0. Not covered: a figure its recipe reads
from a summary line alone (DLE PyTorch's last summary) with the per-step records left as they were.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from kit.audit.evidence import Evidence
from kit.audit.rules.predicates import predicate
from kit.config import reference
from kit.results.extract import samples_per_step
from kit.results.parsers import ParseError, parse_log

if TYPE_CHECKING:
    from kit.audit.rules.engine import Finding

CLOCKED_FORMATS = ("dle-pytorch", "dle-mxnet", "dle-tf1", "tf2-keras-timehistory")  # where the band was measured
CLOCK_BAND = (0.9, 1.1)
LEAST_INTERVALS = 3


@predicate()
def program_figure_agrees_with_its_clock(ev: Evidence, out: Finding) -> None:
    """Each published program's rate records of its figure's metric, in a format that stamps them with time and
    step, say what their clock shows: the median of rate x seconds / (global batch x steps) within CLOCK_BAND."""
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
        global_batch = log.group.batch * log.gpus_per_node * log.nodes
        ratios = [samples / global_batch for samples in samples_per_step(records, figure.metric)]
        if len(ratios) < LEAST_INTERVALS:
            out.fail(f"{key} run {log.run}: {len(ratios)} timed intervals between its {figure.metric} records (at "
                     f"least {LEAST_INTERVALS}): its rates cannot be held to its clock", rel, figure.first_line)
            continue
        said = statistics.median(ratios)
        if not CLOCK_BAND[0] <= said <= CLOCK_BAND[1]:
            out.fail(f"{key} run {log.run}: its {figure.metric} rates are {said:.3f}x what its records' clock "
                     f"shows (rate x seconds between records over global batch x steps; genuine logs: "
                     f"{CLOCK_BAND[0]}-{CLOCK_BAND[1]})", rel, figure.first_line)
    if unclocked:
        out.note = f"{unclocked} program run(s) in a format with no per-record clock: not held to one"
