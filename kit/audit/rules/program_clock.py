"""A published program's rates against its own clock (rule set v6): where a program's log stamps each rate record
with its time and step, the images between two records are the global batch times the steps between them, so each
printed rate times the seconds since the record before is that many images, whatever the rates say. The median of
(rate x seconds) / (global batch x steps) over the records of the figure's metric must lie within CLOCK_BAND.
Pure; registered in kit.audit.rules.predicates.PREDICATES.

The band, measured on every genuine log the kit holds in these formats (../shared/fixtures/published-logs:
DLPerf's TF2 ResNet50 1-32 GPUs, PaddlePaddle Perf's NGC PyTorch, MXNet and TensorFlow 1-32 GPUs; the H200 visit's
DLE run): 0.989-1.008 (tests/test_program_clock.py). Rates doubled read 2.0. A figure its recipe reads from a
summary line (DLE PyTorch's last summary, on 2 nodes or more) is held to the mean of the per-step records the clock
holds (SUMMARY_BAND); other formats' summaries (TF1's, MXNet's) are no such mean and are not held to one.

Version 2 (rule set v9) holds the figure by the statistic that makes it, where version 1 held the MEDIAN interval,
so that half the records could be inflated freely and a uniform +9% passed: the rates of the intervals the figure
counts (its window's records; a summary figure: every interval), reduced as the figure's method reduces them (mean,
median, harmonic mean), over the same reduction of what the clock gives for them (global batch x steps / seconds),
within FIGURE_BAND; and every counted interval within RECORD_BAND. Measured on the same genuine logs (49 series,
every interval of each): the mean of the rates over the mean of the clock's 0.9987-1.0082; single intervals
0.821-1.025 (the lowest: DLE PyTorch's 8-GPU Perf logs, the first interval of an epoch).
"""

from __future__ import annotations

import statistics

from kit.audit.evidence import Evidence
from kit.audit.rules.findings import Finding
from kit.audit.rules.predicates import predicate
from kit.config import reference
from kit.results import stats
from kit.results.extract import clocked_intervals, pick_rank, samples_per_step
from kit.results.parsers import PER_STEP, SUMMARY, ParseError, parse_log

CLOCKED_FORMATS = ("dle-pytorch", "dle-mxnet", "dle-tf1", "tf2-keras-timehistory")  # where the band was measured
CLOCK_BAND = (0.9, 1.1)
LEAST_INTERVALS = 3
# a format whose summary rate is the mean of the run's per-step rates (DLE PyTorch's dllogger): a figure read from
# the summary is held to that mean; measured 0.9995-1.0002 on every genuine log (1, 8, 32 GPUs; the H200 visit's)
SUMMARY_IS_MEAN = ("dle-pytorch",)
SUMMARY_BAND = (0.99, 1.01)
NAMED_RUNS = 20  # of the runs not held to a clock, named in verify's note
FIGURE_BAND = (0.98, 1.02)  # version 2: the figure's reduction of its rates over that of their clock
RECORD_BAND = (0.75, 1.25)  # version 2: each interval the figure counts


def summary_over_step_mean(records, metric: str) -> float | None:
    """The last summary record of METRIC over the mean of its per-step records (one rank's: pick_rank); None
    where the log has no summary or no steps of it."""
    summaries = [r for r in records if r.metric == metric and r.kind == SUMMARY]
    steps = pick_rank([r for r in records if r.metric == metric and r.kind == PER_STEP], None, [])
    if not summaries or not steps:
        return None
    mean = statistics.fmean(r.value for r in steps)
    return summaries[-1].value / mean if mean > 0 else None


@predicate(versions={1: {"by_figure": False}, 2: {"by_figure": True}})
def program_figure_agrees_with_its_clock(ev: Evidence, out: Finding, by_figure: bool = False) -> None:
    """Each published program's rate records of its figure's metric, in a format that stamps them with time and
    step, say what their clock shows: the median of rate x seconds / (global batch x steps) within CLOCK_BAND;
    from version 2 (by_figure), the figure held by its own reduction (held_by_its_reduction)."""
    unclocked = []
    for key, log, figure in ev.runs():
        if reference.log_reduction(log) is None:
            continue
        if figure.format not in CLOCKED_FORMATS:
            unclocked.append(f"{key} run {log.run} ({figure.format})")
            continue
        out.checked += 1
        rel = ev.rel(log.path)
        try:
            records = parse_log(log.path, figure.format).records
        except ParseError:
            continue  # it gave the figure above: read the same
        global_batch = log.group.batch * log.gpus_per_node * log.nodes
        if by_figure:
            for line, said in held_by_its_reduction(records, figure, global_batch):
                out.fail(f"{key} run {log.run}: {said}", rel, line)
            continue
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
        for line, said in summary_not_its_steps(records, figure):
            out.fail(f"{key} run {log.run}: {said}", rel, line)
    if unclocked:
        out.note = not_held_to_a_clock(unclocked)


def not_held_to_a_clock(runs: list[str]) -> str:
    """verify's note naming each program run whose figure the rule does not hold to a clock: its format is none of
    CLOCKED_FORMATS (the first NAMED_RUNS named, the rest counted)."""
    named = "; ".join(runs[:NAMED_RUNS]) + (f"; {len(runs) - NAMED_RUNS} more" if len(runs) > NAMED_RUNS else "")
    return (f"not held to a clock, {len(runs)} program run(s) (the rule holds only {', '.join(CLOCKED_FORMATS)} logs "
            f"to theirs): {named}")


def held_by_its_reduction(records, figure, global_batch: int) -> list[tuple[int | None, str]]:
    """(line, what does not hold) of a clocked program log's figure against its clock (version 2: module text)."""
    intervals = clocked_intervals(records, figure.metric)
    counted = intervals if figure.kind == SUMMARY or figure.first_line is None else [
        (a, b) for a, b in intervals if figure.first_line <= b.line <= (figure.last_line or b.line)]
    if len(counted) < LEAST_INTERVALS:
        return [(figure.first_line, f"{len(counted)} timed intervals among the {figure.metric} records its figure "
                 f"counts (at least {LEAST_INTERVALS}): its rates cannot be held to its clock")]
    printed = [b.value for _, b in counted]
    clock = [global_batch * (b.step - a.step) / (b.timestamp - a.timestamp) for a, b in counted]
    how = figure.method.reduce if figure.method.reduce in stats.REDUCTIONS else "mean"
    found = []
    held = stats.reduce(printed, how) / stats.reduce(clock, how)
    if not FIGURE_BAND[0] <= held <= FIGURE_BAND[1]:
        found.append((figure.first_line, f"the {how} of the {len(counted)} {figure.metric} rates its figure counts "
                      f"is {held:.3f}x the {how} of what their clock gives (global batch x steps / seconds; genuine "
                      f"logs: {FIGURE_BAND[0]}-{FIGURE_BAND[1]})"))
    off = [(b.line, p / c) for (_, b), p, c in zip(counted, printed, clock, strict=True)
           if not RECORD_BAND[0] <= p / c <= RECORD_BAND[1]]
    if off:
        found.append((off[0][0], f"{len(off)} of the {len(counted)} {figure.metric} records its figure counts lie "
                      f"beyond {RECORD_BAND[0]}-{RECORD_BAND[1]}x their clock (the first {off[0][1]:.3f}x)"))
    return found + summary_not_its_steps(records, figure)


def summary_not_its_steps(records, figure) -> list[tuple[int | None, str]]:
    """(line, what does not hold) where the figure is a summary that should be the mean of its per-step records
    (SUMMARY_IS_MEAN), which the clock holds, and is not (SUMMARY_BAND)."""
    if figure.kind != SUMMARY or figure.format not in SUMMARY_IS_MEAN:
        return []
    share = summary_over_step_mean(records, figure.metric)
    if share is not None and SUMMARY_BAND[0] <= share <= SUMMARY_BAND[1]:
        return []
    shown = "no per-step records to be their mean" if share is None else f"{share:.4f}x their mean"
    return [(figure.last_line, f"its figure is its summary {figure.metric}, {shown} (the mean of its per-step "
             f"records, which its clock holds; genuine logs: {SUMMARY_BAND[0]}-{SUMMARY_BAND[1]})")]
