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


def test_a_ratio_against_a_threshold_is_met_missed_or_inconclusive():
    yardstick = [1000.0, 1004.0, 998.0, 1001.0]
    met = stats.ratio_check(yardstick, [995.0, 992.0, 997.0, 993.0])  # ~0.99, tight
    assert stats.ratio_target(met, 0.97) == stats.MET
    missed = stats.ratio_check(yardstick, [948.0, 951.0, 946.0, 950.0])  # ~0.95, tight
    assert stats.ratio_target(missed, 0.97) == stats.MISSED
    straddles = stats.ratio_check(yardstick, [940.0, 1000.0, 970.0, 985.0])  # the interval holds 0.97
    assert straddles.low < 0.97 < straddles.high and stats.ratio_target(straddles, 0.97) == stats.INCONCLUSIVE
    noisy = stats.ratio_check(yardstick, [500.0, 1000.0, 1500.0])  # CV 50%: no verdict, whatever the median
    assert stats.ratio_target(noisy, 0.5) == stats.INCONCLUSIVE
    one = stats.ratio_check(yardstick, [990.0])
    assert stats.ratio_target(one, 0.97) == stats.UNTESTED


def test_a_figure_against_a_floor():
    assert stats.figure_target([4620.0, 4631.0, 4625.0], 4500)[0] == stats.MET
    verdict, low, high = stats.figure_target([4410.0, 4420.0, 4415.0], 4500)
    assert verdict == stats.MISSED and high < 4500
    assert stats.figure_target([4450.0, 4560.0, 4500.0], 4500)[0] == stats.INCONCLUSIVE
    assert stats.figure_target([4600.0], 4500) == (stats.UNTESTED, -math.inf, math.inf)
    with pytest.raises(stats.StatsError):
        stats.figure_target([], 4500)
