"""Pure statistics of throughput figures: windows, reductions, rounding, repeats, scaling.

No I/O, no clock. Every function raises StatsError instead of returning a made-up number.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

REDUCTIONS = ("mean", "harmonic_mean", "median")
MAD_Z = 0.6745  # consistency constant: MAD of a normal sample -> sigma
DEFAULT_OUTLIER_Z = 3.5  # Iglewicz & Hoaglin's modified z-score cut-off


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
