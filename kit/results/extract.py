"""From parsed records to one throughput figure by a stated method (pure).

The method vocabulary is the publishers' (see the fixtures' expected.yaml): skip, count,
trim, reduce (mean | harmonic_mean | median | last_summary | wallclock), scale, round, trunc, sig;
plus metric, kind and rank to choose the series, and steps/batch for wallclock.
Order: window (skip, count) -> trim (drop the trim lowest and trim highest values of the window,
PaddlePaddle/benchmark's analysis rule) -> reduce -> x scale -> round | trunc | sig.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from decimal import ROUND_DOWN, Decimal, localcontext
from itertools import pairwise
from typing import Any

from kit.results import stats
from kit.results.parsers import PER_CARD, PER_STEP, SUMMARY, LogFormat, ParsedLog, Record

REDUCE_CHOICES = ("mean", "harmonic_mean", "median", "last_summary", "wallclock")
DEFAULT_WALLCLOCK_STEPS = (20, 120)  # DLPerf's "_time" scripts

# The closed set of warnings; each says what to do.
WARNINGS = {
    "per_card_unscaled": "the figure is per card; pass --scale <cards> for the total throughput",
    "several_ranks": "records come from several ranks; rank {rank} was used (choose with --rank)",
    "unstable": "throughput varies {cv:.1%} (CV) inside the window; consider more warm-up steps (--skip)",
    "unterminated": "the log's last line has no newline: it may have been cut short; check the run finished",
    "steps_per_second": "the figure is in steps/s; pass --scale <global batch> for samples/s",
}
UNSTABLE_CV = 0.05


class MethodError(ValueError):
    """A method that does not fit the log (unknown metric, too few records, ...)."""


@dataclass(frozen=True)
class Method:
    skip: int = 0
    count: int | None = None
    reduce: str = "mean"
    scale: float = 1.0
    round: int | None = None
    sig: int | None = None
    trim: int = 0  # drop the `trim` lowest and the `trim` highest values of the window before reducing
    trunc: int | None = None  # cut (toward zero) to D decimals, as a publisher who printed '%.Nf' of a cut value
    metric: str | None = None
    kind: str | None = None
    rank: int | None = None
    steps: tuple[int, int] = DEFAULT_WALLCLOCK_STEPS
    batch: float | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Method:
        known = [f.name for f in fields(cls)]
        unknown = set(data) - set(known)
        if unknown:
            raise MethodError(f"unknown method key(s): {', '.join(sorted(unknown))}; known: {', '.join(known)}")
        values = {k: v for k, v in data.items() if v is not None}
        if "steps" in values:
            values["steps"] = tuple(values["steps"])
        return cls(**values)

    def __post_init__(self) -> None:
        """Every Method is valid: bad values raise MethodError when it is made."""
        if self.reduce not in REDUCE_CHOICES:
            raise MethodError(f"unknown reduce {self.reduce!r}; known: {', '.join(REDUCE_CHOICES)}")
        for name in ("skip", "count", "round", "sig", "rank", "trim", "trunc"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise MethodError(f"{name} must be an integer, got {value!r}")
        if self.skip < 0:
            raise MethodError(f"skip must be >= 0, got {self.skip}")
        if self.count is not None and self.count < 1:
            raise MethodError(f"count must be >= 1, got {self.count}")
        for name in ("scale", "batch"):
            value = getattr(self, name)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if (value is not None or name == "scale") and not (number and 0 < value < math.inf):
                raise MethodError(f"{name} must be a finite number > 0, got {value!r}")
        if self.trim < 0:
            raise MethodError(f"trim must be >= 0, got {self.trim}")
        if self.trim and self.reduce in ("last_summary", "wallclock"):
            raise MethodError(f"trim drops values of a window; reduce {self.reduce} reduces no window")
        if sum(x is not None for x in (self.round, self.sig, self.trunc)) > 1:
            raise MethodError("give round or sig or trunc, not more than one")
        if self.trunc is not None and self.trunc < 0:
            raise MethodError(f"trunc must be >= 0 decimals, got {self.trunc}")
        if self.sig is not None and self.sig < 1:
            raise MethodError(f"sig must be >= 1, got {self.sig}")
        if len(self.steps) != 2 or self.steps[0] >= self.steps[1]:
            raise MethodError(f"steps must be FROM:TO with FROM < TO, got {self.steps}")
        if self.reduce == "wallclock" and self.batch is None:
            raise MethodError("reduce wallclock needs --batch (samples per step)")

    def with_overrides(self, **changes: Any) -> Method:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict:
        data = asdict(self)
        data["steps"] = list(self.steps)
        return data


# The harness logs measured steps only, so the run's figure is global batch x steps / sum of step seconds:
# the harmonic mean of the per-step throughputs (the harness's own run_stop figure).
HARNESS_METHOD = Method(skip=0, reduce="harmonic_mean")


@dataclass(frozen=True)
class Figure:
    value: float
    unit: str
    metric: str
    kind: str
    format: str
    used: int  # records reduced into the figure
    available: int  # records in the series before the window
    first_line: int | None
    last_line: int | None
    method: Method
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        data = asdict(self)
        data["method"] = self.method.to_dict()
        data["warnings"] = list(self.warnings)
        return data


def resolve_metric(records: list[Record], wanted: str) -> str:
    names = sorted({r.metric for r in records})
    if wanted in names:
        return wanted
    for candidate in (f"train.{wanted}", f"train_{wanted}"):
        if candidate in names:
            return candidate
    suffixed = [n for n in names if n.endswith("." + wanted)]
    if len(suffixed) == 1:
        return suffixed[0]
    raise MethodError(f"no metric {wanted!r} in this log; it has: {', '.join(names) or 'none'}")


def pick_rank(records: list[Record], rank: int | None, warnings: list[str]) -> list[Record]:
    """Records of one mpirun rank (plus untagged lines); the lowest rank unless one is chosen."""
    tagged = {r.rank for r in records if r.rank is not None}
    if rank is not None:
        chosen = [r for r in records if r.rank == rank]
        if not chosen:
            raise MethodError(f"no records from rank {rank}; ranks present: {sorted(tagged) or 'none'}")
        return chosen
    if len(tagged) <= 1:
        return records
    lowest = min(tagged)
    warnings.append(WARNINGS["several_ranks"].format(rank=lowest))
    return [r for r in records if r.rank in (lowest, None)]


def compute_figure(parsed: ParsedLog, method: Method) -> Figure:
    fmt: LogFormat = parsed.format
    warnings: list[str] = []
    used: int | None = None  # values reduced, where trim leaves fewer than the window's records
    if method.reduce == "last_summary":
        wanted = method.metric or fmt.summary_metric or fmt.default_metric
        summaries = [r for r in parsed.records if r.kind == SUMMARY]
        if not summaries:
            raise MethodError(f"no summary line in this {fmt.name} log (reduce last_summary needs one)")
        metric = resolve_metric(summaries, wanted)
        series = pick_rank([r for r in summaries if r.metric == metric], method.rank, warnings)
        chosen = [series[-1]]
        raw = chosen[0].value
        available = len(series)
    else:
        kind = method.kind or fmt.series_kind
        of_kind = [r for r in parsed.records if r.kind == kind]
        if not of_kind:
            kinds = sorted({r.kind for r in parsed.records})
            raise MethodError(f"no {kind} records in this {fmt.name} log; it has: {', '.join(kinds)}")
        metric = resolve_metric(of_kind, method.metric or fmt.default_metric)
        series = pick_rank([r for r in of_kind if r.metric == metric], method.rank, warnings)
        available = len(series)
        if method.reduce == "wallclock":
            raw, chosen = _wallclock(series, method)
        else:
            try:
                values = stats.window([r.value for r in series], method.skip, method.count)
            except stats.StatsError as exc:
                raise MethodError(f"{metric}: {exc}") from None
            chosen = series[method.skip : method.skip + len(values)]
            for r in chosen:  # a finite record can still overflow: 1e308 samples / 0.5 s, 4 / 5e-324 s
                if not math.isfinite(r.value) or r.value <= 0:
                    raise MethodError(f"line {r.line}: {metric} {r.value:g} is not a positive finite figure "
                                      "(a step's numbers out of range)")
            if method.trim:
                if len(values) <= 2 * method.trim:
                    raise MethodError(f"{metric}: trim {method.trim} drops all {len(values)} value(s) of the window")
                values = sorted(values)[method.trim : len(values) - method.trim]
            used = len(values)
            raw = stats.reduce(values, method.reduce)
            spread = stats.cv(values)
            if len(values) >= 3 and spread > UNSTABLE_CV:
                warnings.append(WARNINGS["unstable"].format(cv=spread))
    value = raw * method.scale
    if not math.isfinite(value):
        raise MethodError(f"{raw:g} x scale {method.scale:g} is past the largest number (a wrong --scale?)")
    value = rounded(value, method)
    unit = chosen[0].unit
    if chosen[0].kind == PER_CARD and method.scale == 1:
        warnings.append(WARNINGS["per_card_unscaled"])
    if parsed.unterminated:
        warnings.append(WARNINGS["unterminated"])
    if unit == "steps/s" and method.scale == 1:
        warnings.append(WARNINGS["steps_per_second"])
    elif unit == "steps/s":  # times the global batch (--scale, or a recipe's): samples/s
        unit = "samples/s"
    return Figure(
        value=value,
        unit=unit,
        metric=metric,
        kind=chosen[0].kind,
        format=fmt.name,
        used=len(chosen) if used is None else used,
        available=available,
        first_line=chosen[0].line,
        last_line=chosen[-1].line,
        method=method,
        warnings=tuple(warnings),
    )


def _wallclock(series: list[Record], method: Method) -> tuple[float, list[Record]]:
    """(to - from) x batch / (t_to - t_from): DLPerf's timestamp method."""
    first, last = method.steps
    by_step = {r.step: r for r in series if r.step is not None}
    missing = [s for s in (first, last) if s not in by_step]
    if missing:
        have = sorted(by_step)
        shown = ", ".join(map(str, have[:8])) + (" ..." if len(have) > 8 else "")
        raise MethodError(f"wallclock: no record at step {missing[0]}; steps logged: {shown or 'none'}")
    start, end = by_step[first], by_step[last]
    if start.timestamp is None or end.timestamp is None:
        raise MethodError("wallclock: this log's throughput lines carry no timestamps")
    elapsed = end.timestamp - start.timestamp
    if elapsed <= 0:
        raise MethodError(f"wallclock: step {last} is not later than step {first} (lines {start.line}, {end.line})")
    assert method.batch is not None
    return (last - first) * method.batch / elapsed, [start, end]


def clocked_intervals(records: list[Record], metric: str, kind: str = PER_STEP) -> list[tuple[Record, Record]]:
    """(the record before, the record) of each record of METRIC and KIND (one rank's: pick_rank) that follows another
    in the same epoch by steps and time: the intervals a log's own clock times."""
    series = pick_rank([r for r in records if r.metric == metric and r.kind == kind and r.timestamp is not None
                        and r.step is not None], None, [])
    return [(a, b) for a, b in pairwise(series) if b.step > a.step and b.timestamp > a.timestamp and a.epoch == b.epoch]


def samples_per_step(records: list[Record], metric: str, kind: str = PER_STEP) -> list[float]:
    """What a log's own clock says of its steps: for each clocked interval (clocked_intervals), its record's rate x
    the seconds between them over the steps between them."""
    return [b.value * (b.timestamp - a.timestamp) / (b.step - a.step)
            for a, b in clocked_intervals(records, metric, kind)]


def rounded(value: float, method: Method) -> float:
    """value rounded, cut or given significant digits as the method says (a figure's last step)."""
    if method.round is not None:
        return stats.round_decimals(value, method.round)
    if method.trunc is not None:
        return truncate_decimals(value, method.trunc)
    if method.sig is not None:
        return stats.round_significant(value, method.sig)
    return value


def truncate_decimals(value: float, decimals: int) -> float:
    """value cut toward zero to `decimals` decimals, on its shortest decimal text (59.70984... -> 59.709)."""
    exact = Decimal(repr(value))
    shape = exact.as_tuple()
    if not isinstance(shape.exponent, int) or shape.exponent >= -decimals:  # no more decimals than that
        return value
    with localcontext() as ctx:
        ctx.prec = len(shape.digits) + 1  # the cut value has fewer digits than the text it is cut from
        return float(exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_DOWN))


def format_number(value: float) -> str:
    """Shortest exact text: 321.8, 10336, 370.19444444444446."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)
