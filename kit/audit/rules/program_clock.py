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

Version 3 (rule set v10) also holds the three formats whose lines carry a clock that no version held, each by the
reduction that makes its figure (CLOCKED_FORMATS_V3, HELD_BY; tests/test_program_clock.py measures each band on
every genuine log of them the kit holds):
- PaddleClas (static trainer): each record's ips is the per-card batch over the MEAN step time since the epoch's
  step PADDLECLAS_RESET (ppcls/static/program.py resets its batch_time meter there), so a record says the seconds of
  its epoch's steps since then (batch x (step - 4) / ips); its stamp, to the second, says them too. A span of a
  second or two says nothing to the second (a CPU run prints a record every step, a few a second), so each counted
  record is held over the longest span its log gives it: from its epoch's first record at or after the reset (plus
  the seconds that record says), not from the record before it; the stamps' whole second allowed at each end of
  that span (STAMP_SECOND): a record 560 s into its epoch is held to 0.2% of its clock, one 4 s in to 25%, one less
  than a second in not at all. Each counted record within EXACT_RECORD_BAND, the figure's reduction of them within
  FIGURE_BAND of the same reduction of their clock's (at either end of the second); one timed record is enough to
  hold (each says all its epoch's steps so far). Measured on the 6 Perf logs (1, 8, 32 GPUs; 857 records) and the
  real CPU run (tests/test_paddleclas_real.py: 4 images a step, about 0.6 s a step; 26 records): every record
  within its clock's second to 1.0000-1.00009 (taken at the span's middle instead, 0.80-1.22 and the CPU run's
  0.42-1.01: why the second is allowed); the figure's mean and harmonic mean (the publisher's window, after 10
  records) 1.0000.
- DLE BERT (PyTorch): the figure is a summary, the sequences of every optimizer step over the seconds from the first
  step's start to the last step's line, each step's line stamped by DLLogger (iteration_times): held to the rate
  of the steps between its first and its last stamped line (BERT_SEQUENCES_PER_STEP x (lines - 1) / their
  seconds) within FIGURE_BAND. Measured on the 7 Perf logs (1, 8 GPUs; the 32-GPU excerpt, which the kit does not
  run, at its own 270336 sequences a step): 0.9938-1.0014. (Lambda's 160 SQuAD logs, which the same parser reads,
  are run_squad.py's, another program: its iterations logged every 50 steps, its figure over the whole run.)
- DLE Transformer (fairseq): each record's tokens/s over the steps since the record before, against its clock:
  avg tokens (the mean of those steps' tokens, every card's) x steps / the walltime between them. As version 2:
  the figure's reduction within FIGURE_BAND, each counted interval within EXACT_RECORD_BAND; and the tokens a step
  at most the case's --max-tokens x GPUs (fairseq caps every card's batch there), so that the tokens the clock
  counts cannot be inflated with the rates. Measured on the 11 Perf logs (1, 8, 32 GPUs; 14,459 intervals): the
  figure's mean and harmonic mean 0.999995-1.000005, single intervals 0.9989-1.0011, tokens a step at most 0.981 of
  the cap.
A clock compressed with the rates (stamps and walltime moved as the rates are inflated) agrees with itself: only
another clock of the run can tell (tests/test_forger.py names it as a hole).
"""

from __future__ import annotations

import statistics
from itertools import pairwise
from typing import NamedTuple

from kit.audit.evidence import Evidence
from kit.audit.rules.findings import Finding
from kit.audit.rules.predicates import predicate
from kit.config import reference
from kit.config.programs import BERT_SEQUENCES_PER_STEP
from kit.results import stats
from kit.results.extract import clocked_intervals, pick_rank, samples_per_step
from kit.results.parsers import PER_STEP, SUMMARY, ParseError, Record, parse_log
from kit.results.parsers.dle_bert_pytorch import iteration_times
from kit.results.parsers.fairseq_transformer import step_clocks
from kit.results.parsers.logtext import read_log_text

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
# version 3: the formats whose lines carry a clock no earlier version held, each held by its own reduction (HELD_BY)
CLOCKED_FORMATS_V3 = (*CLOCKED_FORMATS, "paddleclas", "dle-bert-pytorch", "dle-transformer-pytorch")
EXACT_RECORD_BAND = (0.98, 1.02)  # version 3: a PaddleClas record (its second allowed), a DLE Transformer interval
PADDLECLAS_RESET = 5  # the step at which ppcls/static/program.py resets its batch_time meter in each epoch
STAMP_SECOND = 1.0  # PaddleClas stamps its records to the second: so much of a span's each end is unknown


def summary_over_step_mean(records, metric: str) -> float | None:
    """The last summary record of METRIC over the mean of its per-step records (one rank's: pick_rank); None
    where the log has no summary or no steps of it."""
    summaries = [r for r in records if r.metric == metric and r.kind == SUMMARY]
    steps = pick_rank([r for r in records if r.metric == metric and r.kind == PER_STEP], None, [])
    if not summaries or not steps:
        return None
    mean = statistics.fmean(r.value for r in steps)
    return summaries[-1].value / mean if mean > 0 else None


@predicate(versions={1: {"by_figure": False}, 2: {"by_figure": True},
                     3: {"by_figure": True, "formats": CLOCKED_FORMATS_V3}})
def program_figure_agrees_with_its_clock(ev: Evidence, out: Finding, by_figure: bool = False,
                                         formats: tuple[str, ...] = CLOCKED_FORMATS) -> None:
    """Each published program's rate records of its figure's metric, in a format that stamps them with time and
    step, say what their clock shows: the median of rate x seconds / (global batch x steps) within CLOCK_BAND;
    from version 2 (by_figure), the figure held by its own reduction (held_by_its_reduction); from version 3, the
    formats of CLOCKED_FORMATS_V3, each by its own (HELD_BY)."""
    unclocked = []
    for key, log, figure in ev.runs():
        if reference.log_reduction(log) is None:
            continue
        if figure.format not in formats:
            unclocked.append(f"{key} run {log.run} ({figure.format})")
            continue
        out.checked += 1
        rel = ev.rel(log.path)
        try:
            records = parse_log(log.path, figure.format).records
        except ParseError:
            continue  # it gave the figure above: read the same
        global_batch = log.group.batch * log.gpus_per_node * log.nodes
        if figure.format in HELD_BY:
            for line, said in HELD_BY[figure.format](log, records, figure):
                out.fail(f"{key} run {log.run}: {said}", rel, line)
            continue
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
        out.note = not_held_to_a_clock(unclocked, formats)


def not_held_to_a_clock(runs: list[str], formats: tuple[str, ...] = CLOCKED_FORMATS) -> str:
    """verify's note naming each program run whose figure the rule does not hold to a clock: its format is none of
    FORMATS (the first NAMED_RUNS named, the rest counted)."""
    named = "; ".join(runs[:NAMED_RUNS]) + (f"; {len(runs) - NAMED_RUNS} more" if len(runs) > NAMED_RUNS else "")
    return (f"not held to a clock, {len(runs)} program run(s) (the rule holds only {', '.join(formats)} logs "
            f"to theirs): {named}")


def held_by_its_reduction(records, figure, global_batch: int) -> list[tuple[int | None, str]]:
    """(line, what does not hold) of a clocked program log's figure against its clock (version 2: module text)."""
    intervals = clocked_intervals(records, figure.metric)
    counted = intervals if figure.kind == SUMMARY or figure.first_line is None else [
        (a, b) for a, b in intervals if figure.first_line <= b.line <= (figure.last_line or b.line)]
    if len(counted) < LEAST_INTERVALS:
        return [(figure.first_line, f"{len(counted)} timed intervals among the {figure.metric} records its figure "
                 f"counts (at least {LEAST_INTERVALS}): its rates cannot be held to its clock")]
    clock = [global_batch * (b.step - a.step) / (b.timestamp - a.timestamp) for a, b in counted]
    timed = Timed([b.line for _, b in counted], [b.value for _, b in counted], clock, clock)
    return held_rates(figure, timed, "global batch x steps / seconds", RECORD_BAND) + summary_not_its_steps(
        records, figure)


class Timed(NamedTuple):
    """The rates a figure counts against their clock: each record's line, its printed rate, and the rate its clock
    gives, at most FAST and at least SLOW (the same where the clock reads to its last digit)."""

    lines: list[int]
    printed: list[float]
    fast: list[float]
    slow: list[float]


def held_rates(figure, timed: Timed, how_clock: str, record_band: tuple[float, float]) -> list[tuple[int | None, str]]:
    """(line, what does not hold) of the rates a figure counts against what their clock gives (TIMED): the figure's
    reduction of them within FIGURE_BAND of the same reduction of the clock's, each within RECORD_BAND; the ratio
    shown, the nearest to 1 the clock allows (nearest)."""
    how = figure.method.reduce if figure.method.reduce in stats.REDUCTIONS else "mean"
    found = []
    said = stats.reduce(timed.printed, how)
    held = nearest(said / stats.reduce(timed.fast, how), said / stats.reduce(timed.slow, how))
    if not FIGURE_BAND[0] <= held <= FIGURE_BAND[1]:
        found.append((figure.first_line, f"the {how} of the {len(timed.printed)} {figure.metric} rates its figure "
                      f"counts is {held:.3f}x the {how} of what their clock gives ({how_clock}; genuine "
                      f"logs: {FIGURE_BAND[0]}-{FIGURE_BAND[1]})"))
    off = [(line, share) for line, share in zip(timed.lines, shares(timed), strict=True)
           if not record_band[0] <= share <= record_band[1]]
    if off:
        found.append((off[0][0], f"{len(off)} of the {len(timed.printed)} {figure.metric} records its figure counts "
                      f"lie beyond {record_band[0]}-{record_band[1]}x their clock (the first {off[0][1]:.3f}x)"))
    return found


def shares(timed: Timed) -> list[float]:
    """Each record's printed rate over its clock's, the nearest to 1 the clock allows."""
    return [nearest(p / f, p / s) for p, f, s in zip(timed.printed, timed.fast, timed.slow, strict=True)]


def nearest(low: float, high: float) -> float:
    """Of the ratios between LOW and HIGH (a clock known to its resolution), the nearest to 1."""
    return min(max(1.0, low), high)


def paddleclas_timed(records, metric: str, kind: str, batch: int, first: int | None = None,
                     last: int | None = None) -> Timed:
    """PaddleClas's records of METRIC and KIND (one rank's) between lines FIRST and LAST against their clock (version
    3: module text): the seconds each says of its epoch's steps since the meter's reset (BATCH, per card, x those
    steps / its ips) against those its stamps give since the epoch's first record at or after the reset, plus the
    seconds that record says (STAMP_SECOND allowed at each end). A record less than a second after that first one
    is not timed."""
    timed = Timed([], [], [], [])
    starts: dict[int | None, Record] = {}
    for r in pick_rank([r for r in records if r.metric == metric and r.kind == kind and r.timestamp is not None
                        and r.step is not None], None, []):
        if r.step < PADDLECLAS_RESET:
            continue
        start = starts.setdefault(r.epoch, r)
        span = r.timestamp - start.timestamp
        if r.step <= start.step or span < STAMP_SECOND or not (first or r.line) <= r.line <= (last or r.line):
            continue
        before = batch * (start.step - PADDLECLAS_RESET + 1) / start.value  # the seconds the first record says
        steps = r.step - PADDLECLAS_RESET + 1
        timed.lines.append(r.line)
        timed.printed.append(r.value)
        timed.fast.append(batch * steps / (before + span - STAMP_SECOND))
        timed.slow.append(batch * steps / (before + span + STAMP_SECOND))
    return timed


def held_paddleclas(log, records, figure) -> list[tuple[int | None, str]]:
    """(line, what does not hold) of a PaddleClas log's figure against its clock (paddleclas_timed)."""
    timed = paddleclas_timed(records, figure.metric, figure.kind, log.group.batch, figure.first_line,
                             figure.last_line)
    if not timed.lines:  # (one is enough: each says the seconds of its epoch's steps since the reset)
        return [(figure.first_line, f"none of the {figure.metric} records its figure counts lies a second or more "
                 f"after its epoch's first record from step {PADDLECLAS_RESET}: its rates cannot be held to its "
                 f"clock")]
    return held_rates(figure, timed, f"per-card batch x steps since the meter's reset at step {PADDLECLAS_RESET} / "
                      f"seconds, the stamps' second allowed at each end", EXACT_RECORD_BAND)


def bert_steps(records, iterations: list[tuple[int, float, int | None]], metric: str) -> tuple[Record | None,
                                                                                               list[float]]:
    """(the last summary of METRIC, one rank's; the stamps of that rank's optimizer steps' lines before it: of
    ITERATIONS, dle_bert_pytorch.iteration_times)."""
    summaries = pick_rank([r for r in records if r.metric == metric and r.kind == SUMMARY], None, [])
    if not summaries:
        return None, []
    summary = summaries[-1]
    return summary, [t for line, t, rank in iterations if line < summary.line and rank == summary.rank]


def held_bert(log, records, figure) -> list[tuple[int | None, str]]:
    """(line, what does not hold) of a DLE BERT log's summary figure against the rate of the optimizer steps whose
    lines DLLogger stamped before it (version 3: module text)."""
    summary, steps = bert_steps(records, iteration_times(read_log_text(log.path)), figure.metric)
    if summary is None:
        return []
    if len(steps) <= LEAST_INTERVALS:
        return [(summary.line, f"{len(steps)} stamped optimizer steps before its {figure.metric} (at least "
                 f"{LEAST_INTERVALS + 1}): its figure cannot be held to its clock")]
    held = summary.value / (BERT_SEQUENCES_PER_STEP * (len(steps) - 1) / (steps[-1] - steps[0]))
    if FIGURE_BAND[0] <= held <= FIGURE_BAND[1]:
        return []
    return [(summary.line, f"its figure, its summary {figure.metric}, is {held:.3f}x what the clock of its "
             f"{len(steps)} optimizer steps gives ({BERT_SEQUENCES_PER_STEP} sequences a step x the steps between the "
             f"first step's line and the last's / their seconds; genuine logs: {FIGURE_BAND[0]}-{FIGURE_BAND[1]})")]


def transformer_timed(records, clocks: dict, metric: str, first: int | None = None,
                      last: int | None = None) -> tuple[Timed, list[float]]:
    """DLE Transformer's records of METRIC (one rank's) between lines FIRST and LAST against their clock (version 3:
    module text), each over the steps since the record before in its epoch: (avg tokens x steps / walltime's
    seconds; the record's avg tokens). CLOCKS: fairseq_transformer.step_clocks."""
    series = pick_rank([r for r in records if r.metric == metric and r.kind == PER_STEP and r.step is not None
                        and (r.line, r.rank) in clocks], None, [])
    timed, tokens = Timed([], [], [], []), []
    for a, b in pairwise(series):
        (_, start), (said, end) = clocks[(a.line, a.rank)], clocks[(b.line, b.rank)]
        if a.epoch != b.epoch or b.step <= a.step or end <= start or not (first or b.line) <= b.line <= (
                last or b.line):
            continue
        clock = said * (b.step - a.step) / (end - start)
        timed.lines.append(b.line)
        timed.printed.append(b.value)
        timed.fast.append(clock)
        timed.slow.append(clock)
        tokens.append(said)
    return timed, tokens


def held_transformer(log, records, figure) -> list[tuple[int | None, str]]:
    """(line, what does not hold) of a DLE Transformer log's figure against its clock (transformer_timed), and its
    tokens a step against the case's cap (--max-tokens, per GPU, x GPUs)."""
    timed, tokens = transformer_timed(records, step_clocks(read_log_text(log.path)), figure.metric,
                                      figure.first_line, figure.last_line)
    if len(timed.lines) < LEAST_INTERVALS:
        return [(figure.first_line, f"{len(timed.lines)} timed intervals among the {figure.metric} records its "
                 f"figure counts (at least {LEAST_INTERVALS}): its rates cannot be held to its clock")]
    found = held_rates(figure, timed, "avg tokens x steps / walltime's seconds", EXACT_RECORD_BAND)
    cap = log.group.batch * log.gpus_per_node * log.nodes
    over = [(line, n) for line, n in zip(timed.lines, tokens, strict=True) if n > cap]
    if over:
        found.append((over[0][0], f"{len(over)} of the {len(timed.lines)} {figure.metric} records its figure counts "
                      f"say more tokens a step than its cards may take (--max-tokens {log.group.batch} x "
                      f"{log.gpus_per_node * log.nodes} GPU(s) = {cap}; the first {over[0][1]:g})"))
    return found


HELD_BY = {"paddleclas": held_paddleclas, "dle-bert-pytorch": held_bert, "dle-transformer-pytorch": held_transformer}


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
