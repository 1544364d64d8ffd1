from __future__ import annotations

import math

import pytest

from kit.results import stats


def test_window_skip_and_count():
    assert stats.window([1, 2, 3, 4, 5, 6], skip=1, count=3) == [2, 3, 4]
    assert stats.window([1, 2, 3], skip=1) == [2, 3]
    with pytest.raises(stats.StatsError, match="no value left after skipping 3 of 3"):
        stats.window([1, 2, 3], skip=3)
    with pytest.raises(stats.StatsError, match="only 2 value\\(s\\) after skipping 1 of 3; 5 asked for"):
        stats.window([1, 2, 3], skip=1, count=5)
    with pytest.raises(stats.StatsError):
        stats.window([1, 2], skip=-1)


def test_reductions():
    values = [100.0, 200.0, 400.0]
    assert stats.reduce(values, "mean") == pytest.approx(233.3333333333)
    assert stats.reduce(values, "median") == 200.0
    assert stats.reduce(values, "harmonic_mean") == pytest.approx(3 / (1 / 100 + 1 / 200 + 1 / 400))
    with pytest.raises(stats.StatsError, match="positive"):
        stats.reduce([1.0, 0.0], "harmonic_mean")
    with pytest.raises(stats.StatsError, match="unknown reduction"):
        stats.reduce(values, "geometric")
    with pytest.raises(stats.StatsError):
        stats.reduce([], "mean")


def test_rounding_as_publishers_did():
    assert stats.round_decimals(321.80000001, 2) == 321.8
    assert stats.round_significant(10335.656409329686, 5) == 10336.0
    assert stats.round_significant(389.5377884017642, 5) == 389.54
    assert stats.round_significant(0.000123456, 3) == 0.000123
    with pytest.raises(stats.StatsError):
        stats.round_significant(1.0, 0)


def test_repeats_speedup_efficiency():
    runs = [323.9, 321.8, 320.18, 322.25, 321.22]
    assert stats.median(runs) == 321.8
    assert stats.median([1.0, 2.0, 3.0, 4.0]) == 2.5
    assert stats.mean([1.0, 2.0, 6.0]) == 3.0
    assert round(stats.speedup(574.66, 321.8), 2) == 1.79
    assert stats.scaling_efficiency(7.64, 8) == pytest.approx(0.955)
    with pytest.raises(stats.StatsError):
        stats.speedup(1.0, 0.0)


def test_cv_and_mad_outliers():
    assert stats.cv([5.0]) == 0.0
    assert stats.cv([90.0, 100.0, 110.0]) == pytest.approx(0.1)
    values = [100.0, 101.0, 99.0, 100.5, 60.0]
    assert stats.mad(values) == 1.0
    assert stats.mad_outliers(values) == [4]
    assert stats.mad_outliers([100.0, 100.0, 100.0, 100.0]) == []
    assert stats.mad_outliers([100.0, 100.0, 100.0, 97.0]) == [3]  # zero MAD: any departure stands out
    assert stats.mad_outliers([1.0, 50.0]) == []  # too few to judge


def test_olympic_mean():
    assert stats.olympic_mean([10.0, 1.0, 4.0, 6.0, 100.0]) == pytest.approx((4 + 6 + 10) / 3)
    with pytest.raises(stats.StatsError):
        stats.olympic_mean([1.0, 2.0])


def test_relative_difference():
    assert stats.relative_difference(1432.067, 1438.518) == pytest.approx(-0.0044845, abs=1e-6)
    assert math.isclose(stats.relative_difference(110.0, 100.0), 0.1)


def test_median_confidence_interval_at_a_level():
    # order statistics: 8 values at 95%: P(K <= 0) = 1/256 <= 2.5% < P(K <= 1) = 9/256; symmetric above
    assert stats.median_ci(range(8), 0.95) == (0, 7)
    # 20 values: P(K <= 5) = 0.0207 <= 2.5% < P(K <= 6) = 0.0577; P(K <= 14) = 0.9793 is the first >= 97.5%
    assert stats.median_ci(range(20), 0.95) == (5, 14)
    assert stats.median_ci(range(20)) == (3, 16)  # 99% by default, as asv
    lo95, hi95 = stats.median_ci([9, 10, 11], 0.95)
    lo99, hi99 = stats.median_ci([9, 10, 11], 0.99)
    assert lo99 < lo95 < 9 and 11 < hi95 < hi99  # the Laplace posterior widens three values, less at 95%
    assert stats.median_ci([7.0], 0.95) == (float("-inf"), float("inf"))
    for bad in (0, 1, 1.5):
        with pytest.raises(stats.StatsError):
            stats.median_ci([1, 2, 3], bad)
