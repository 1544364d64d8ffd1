"""Pure statistics of throughput figures: windows, reductions, rounding, repeats, scaling.

No I/O, no clock. Every function raises StatsError instead of returning a made-up number.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

REDUCTIONS = ("mean", "harmonic_mean", "median")
MAD_Z = 0.6745  # consistency constant: MAD of a normal sample -> sigma
DEFAULT_OUTLIER_Z = 3.5  # Iglewicz & Hoaglin's modified z-score cut-off
NOISE_LEVEL = 0.95  # a ratio of medians is conclusive when its interval at this level excludes 1 ...
NOISE_MAX_CV = 0.10  # ... and neither side's runs spread more than this (coefficient of variation)
NOISE_ADVICE = "more repeats, on a quiet host"


class StatsError(ValueError):
    pass


def window(values: Sequence[float], skip: int = 0, count: int | None = None) -> list[float]:
    """Drop the first `skip` values, keep the next `count` (all when None)."""
    if skip < 0:
        raise StatsError(f"skip must be >= 0, got {skip}")
    if count is not None and count < 1:
        raise StatsError(f"count must be >= 1, got {count}")
    kept = list(values[skip:] if count is None else values[skip : skip + count])
    if not kept:
        raise StatsError(f"no value left after skipping {skip} of {len(values)}")
    if count is not None and len(kept) < count:
        raise StatsError(f"only {len(kept)} value(s) after skipping {skip} of {len(values)}; {count} asked for")
    return kept


def reduce(values: Sequence[float], how: str) -> float:
    if not values:
        raise StatsError("nothing to reduce")
    if how == "mean":
        return math.fsum(values) / len(values)
    if how == "median":
        return float(statistics.median(values))
    if how == "harmonic_mean":
        if any(v <= 0 for v in values):
            raise StatsError("harmonic mean needs positive values")
        return len(values) / math.fsum(1.0 / v for v in values)
    raise StatsError(f"unknown reduction {how!r}; known: {', '.join(REDUCTIONS)}")


def round_decimals(value: float, decimals: int) -> float:
    return round(value, decimals)


def round_significant(value: float, digits: int) -> float:
    """As printed with '{:.<digits>g}' (MXNet's benchmark.py), read back as a number."""
    if digits < 1:
        raise StatsError(f"significant digits must be >= 1, got {digits}")
    return float(f"{value:.{digits}g}")


def median(values: Sequence[float]) -> float:
    if not values:
        raise StatsError("median of no values")
    return float(statistics.median(values))


def mean(values: Sequence[float]) -> float:
    if not values:
        raise StatsError("mean of no values")
    return math.fsum(values) / len(values)


def speedup(value: float, baseline: float) -> float:
    if baseline <= 0:
        raise StatsError(f"speedup needs a positive baseline, got {baseline}")
    return value / baseline


def scaling_efficiency(speedup_value: float, devices: int) -> float:
    """Speedup over ideal linear speedup (1.0 = perfect scaling)."""
    if devices < 1:
        raise StatsError(f"device count must be >= 1, got {devices}")
    return speedup_value / devices


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation: sample standard deviation / mean (0 for one value)."""
    if not values:
        raise StatsError("CV of no values")
    if len(values) == 1:
        return 0.0
    m = mean(values)
    if m == 0:
        raise StatsError("CV undefined for a zero mean")
    return statistics.stdev(values) / abs(m)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median."""
    med = median(values)
    return median([abs(v - med) for v in values])


def mad_outliers(values: Sequence[float], z: float = DEFAULT_OUTLIER_Z) -> list[int]:
    """Indices whose modified z-score |0.6745 (x - median) / MAD| exceeds z."""
    if len(values) < 3:
        return []
    med = median(values)
    spread = mad(values)
    if spread == 0:
        return [i for i, v in enumerate(values) if v != med]
    return [i for i, v in enumerate(values) if abs(MAD_Z * (v - med) / spread) > z]


def olympic_mean(values: Sequence[float]) -> float:
    """Mean without the single lowest and highest value (needs at least 3 values)."""
    if len(values) < 3:
        raise StatsError(f"olympic mean needs at least 3 values, got {len(values)}")
    ordered = sorted(values)
    return mean(ordered[1:-1])


def relative_difference(value: float, reference: float) -> float:
    if reference == 0:
        raise StatsError("relative difference to zero")
    return (value - reference) / abs(reference)


# ----- confidence intervals of a median, and the one rule for "is this ratio conclusive?" -----

def _laplace_ppf(y: list[float], q: float) -> float:
    """Quantile q of asv's posterior of the location under Laplace noise (asv/_stats.py LaplacePosterior): density
    proportional to (sum_j |y_j - b|) ** -n, integrated piece by piece between the sorted samples y, where the sum
    is linear in b: c * b + d."""
    n, nu = len(y), len(y) - 1
    mid = median(y)
    scale = sum(abs(v - mid) for v in y)
    if scale == 0:
        return mid
    z = [(v - mid) / scale for v in y]
    edges = [-math.inf, *z, math.inf]

    def power(t: float, c: int, d: float) -> float:  # (c t + d) ** -nu, 0 at infinity
        return 0.0 if math.isinf(t) else (c * t + d) ** -nu

    pieces = []
    for k in range(n + 1):
        lo, hi, c, d = edges[k], edges[k + 1], 2 * k - n, sum(z[k:]) - sum(z[:k])
        mass = (hi - lo) / d ** (nu + 1) if c == 0 else (power(lo, c, d) - power(hi, c, d)) / (nu * c)
        pieces.append((lo, hi, c, d, mass))
    target = q * sum(p[4] for p in pieces)
    k = 0
    while target > pieces[k][4] and k < n:
        target -= pieces[k][4]
        k += 1
    lo, hi, c, d, _ = pieces[k]
    if c == 0:
        b = lo + target * d ** (nu + 1)
    else:
        w = power(lo, c, d) - nu * c * target
        b = (w ** (-1 / nu) - d) / c if w > 0 else hi
    return mid + scale * min(b, hi)


def median_ci(values: Sequence[float], level: float = 0.99) -> tuple[float, float]:
    """asv's confidence interval of the median at `level`: order statistics where the binomial allows (8+ values
    at 99%), else widened to the Laplace posterior's (1 - level) / 2 and (1 + level) / 2 quantiles. One value:
    (-inf, inf), nothing is known of its spread."""
    if not 0 < level < 1:
        raise StatsError(f"confidence level must be in (0, 1), got {level}")
    tail = round((1 - level) / 2, 12)  # 0.005 exactly for 99%
    y, lo, hi, cdf = sorted(values), -math.inf, math.inf, 0.0
    if not y:
        raise StatsError("confidence interval of no values")
    for k, v in enumerate(y):
        cdf += math.comb(len(y), k) / 2 ** len(y)
        if cdf <= tail:
            lo = v
        if cdf >= 1 - tail:
            hi = v
            break
    if len(y) > 1 and math.isinf(lo):
        lo = min(_laplace_ppf(y, tail), y[0])
    if len(y) > 1 and math.isinf(hi):
        hi = max(_laplace_ppf(y, 1 - tail), y[-1])
    return lo, hi


CONCLUSIVE, INCONCLUSIVE, UNTESTED = "conclusive", "inconclusive", "untested"


@dataclass(frozen=True)
class RatioCheck:
    """Whether median(b) / median(a) of two sets of runs is a figure one can quote (ratio_check)."""

    ratio: float
    low: float  # the ratio's interval at NOISE_LEVEL; (0, inf) when a side has one run
    high: float
    cv_a: float
    cv_b: float
    verdict: str  # CONCLUSIVE | INCONCLUSIVE | UNTESTED (one run on a side: its spread is unknown)
    max_cv: float = NOISE_MAX_CV
    level: float = NOISE_LEVEL

    @property
    def conclusive(self) -> bool | None:
        return None if self.verdict == UNTESTED else self.verdict == CONCLUSIVE

    @property
    def apart(self) -> bool:
        """The ratio's interval excludes 1 (never with one run on a side: [0, inf])."""
        return not self.low <= 1 <= self.high

    @property
    def noisy(self) -> bool:
        return max(self.cv_a, self.cv_b) > self.max_cv

    def why(self, name_a: str = "A", name_b: str = "B", advice: bool = True) -> str:
        """What makes it inconclusive (or untested), and (advice) what to do: '' when conclusive."""
        if self.verdict == CONCLUSIVE:
            return ""
        reasons = ["one run on a side, its spread unknown"] if self.verdict == UNTESTED else self.spread(name_a, name_b)
        if self.verdict == INCONCLUSIVE and not self.apart:
            reasons.append(f"{self.level:.0%} interval of the ratio [{self.low:.3g}, {self.high:.3g}] includes 1")
        return "; ".join(reasons) + (f" ({NOISE_ADVICE})" if advice else "")

    def spread(self, name_a: str = "A", name_b: str = "B") -> list[str]:
        """'CV of B 150% > 10%' for each side whose runs spread beyond max_cv."""
        return [f"CV of {name} {cv:.0%} > {self.max_cv:.0%}"
                for name, cv in ((name_a, self.cv_a), (name_b, self.cv_b)) if cv > self.max_cv]


def ratio_check(a: Sequence[float], b: Sequence[float], level: float = NOISE_LEVEL,
                max_cv: float = NOISE_MAX_CV) -> RatioCheck:
    """THE noise rule for a ratio or speedup median(b) / median(a) of positive figures (runs of two cases):
    inconclusive when either side's CV exceeds max_cv, or when the ratio's interval at `level` includes 1 (the
    two sets cannot be told apart). The interval divides the two medians' intervals (median_ci), each taken at
    sqrt(level) so that both hold together with probability `level` (independent runs): [lo_b / hi_a,
    hi_b / lo_a], and it excludes 1 exactly when those two intervals do not overlap. Untested with one run
    on a side (no spread is known)."""
    if not a or not b:
        raise StatsError("a ratio check needs runs on both sides")
    if any(not v > 0 for v in (*a, *b)):
        raise StatsError("a ratio check needs positive figures")
    ratio = median(b) / median(a)
    cv_a, cv_b = cv(a), cv(b)
    if len(a) < 2 or len(b) < 2:
        return RatioCheck(ratio, 0.0, math.inf, cv_a, cv_b, UNTESTED, max_cv, level)
    each = math.sqrt(level)
    (lo_a, hi_a), (lo_b, hi_b) = median_ci(a, each), median_ci(b, each)
    low = max(lo_b, 0.0) / hi_a
    high = hi_b / lo_a if lo_a > 0 else math.inf
    verdict = INCONCLUSIVE if max(cv_a, cv_b) > max_cv or low <= 1 <= high else CONCLUSIVE
    return RatioCheck(ratio, low, high, cv_a, cv_b, verdict, max_cv, level)


MET, MISSED = "met", "missed"


def ratio_target(check: RatioCheck, target: float) -> str:
    """The noise rule against a threshold: MET when the ratio's whole interval lies at or above `target`, MISSED
    when it lies below, INCONCLUSIVE when it straddles the target or a side spreads more than max_cv, UNTESTED with
    one run on a side (its spread unknown)."""
    if check.verdict == UNTESTED:
        return UNTESTED
    if check.noisy:
        return INCONCLUSIVE
    if check.low >= target:
        return MET
    return MISSED if check.high < target else INCONCLUSIVE


def figure_target(values: Sequence[float], target: float, level: float = NOISE_LEVEL,
                  max_cv: float = NOISE_MAX_CV) -> tuple[str, float, float]:
    """(verdict, low, high): a figure's runs against a floor, by the interval of their median at `level`
    (median_ci) as ratio_target judges a ratio's."""
    if not values:
        raise StatsError("a figure target needs runs")
    if len(values) < 2:
        return UNTESTED, -math.inf, math.inf
    low, high = median_ci(values, level)
    if cv(values) > max_cv:
        return INCONCLUSIVE, low, high
    if low >= target:
        return MET, low, high
    return (MISSED if high < target else INCONCLUSIVE), low, high
