"""kit.results.reproduction with hand-made figures: each verdict under the kit's noise rule, the band's edges, the
exit codes, the estimate from a bundle's own durations, and check_record (what `kit verify` holds a reproduction.json
to)."""

from __future__ import annotations

import pytest

from kit.config.suites import load_suite
from kit.core.rundir import RunRecord
from kit.results import reproduction as rp
from kit.run.estimate import durations, estimate
from kit.run.plan import plan_for_nodes

BUNDLE = [100.0, 101.0, 99.0, 100.5, 99.5]  # CV 0.8%


def verdict(reproduced, original=BUNDLE, tolerance=0.05, differs=()):
    return rp.compare_case("torch/resnet50/bz2/1n1g/fp32", list(original), list(reproduced), tolerance, list(differs))


def test_within_the_band_is_reproduced():
    v = verdict([100.0, 100.5, 99.8, 101.0, 99.2])
    assert (v.verdict, v.ratio) == (rp.REPRODUCED, 1.0)
    assert 1 / 1.05 <= v.low < 1 < v.high <= 1.05 and v.why == "interval [0.980, 1.022] within 0.95..1.05"


@pytest.mark.parametrize(("runs", "way"), [([80, 81, 79, 80.5, 79.5], "slower"), ([130, 131, 129, 130.5, 129.5],
                                                                                 "faster")])
def test_wholly_beyond_an_edge_is_not_reproduced_saying_which_way_and_by_how_much(runs, way):
    v = verdict(runs)
    assert v.verdict == rp.NOT_REPRODUCED and v.why.startswith(f"{way}: ratio {v.ratio:.3f}, interval [")
    assert v.ratio == pytest.approx(0.8 if way == "slower" else 1.3)


def test_an_interval_across_an_edge_is_inconclusive_and_says_how_many_runs_would_resolve_it():
    v = verdict([102.5, 104.5, 106.5, 103.5, 105.5])  # ratio 1.045: the interval [1.011, 1.080] straddles 1.05
    assert v.verdict == rp.INCONCLUSIVE and v.low < 1.05 < v.high
    assert v.why.startswith("interval [1.011, 1.080] straddles the band 0.95..1.05: about ")
    assert v.why.endswith(" runs a side would resolve it (more repeats, on a quiet host)")
    needed = int(v.why.split("about ")[1].split()[0])
    assert needed > len(BUNDLE)
    closer = verdict([101.5, 103.5, 105.5, 102.5, 104.5])  # further inside the band: fewer runs resolve it
    assert closer.verdict == rp.INCONCLUSIVE and len(BUNDLE) < int(closer.why.split("about ")[1].split()[0]) < needed
    on_edge = verdict([103, 105, 107, 104, 106])  # ratio 1.05 itself: more runs need not resolve it
    assert on_edge.verdict == rp.INCONCLUSIVE and "lies on the band's edge: no number of runs" in on_edge.why


def test_runs_spread_beyond_the_noise_rule_are_inconclusive_even_inside_the_band():
    v = verdict([100, 130, 80, 110, 90])  # CV 19% > 10%: the noise rule refuses to judge
    assert v.verdict == rp.INCONCLUSIVE and v.why.startswith("CV of the reproduction 19% > 10%: about ")


def test_an_interval_wholly_beyond_the_band_is_not_reproduced_however_the_runs_spread():
    """A forgery 100x faster than its commands run, reproduced on a host whose runs spread 11%: the interval holds
    that spread and lies nowhere near the band (measured: 1438.54 against 11.85 samples/s)."""
    v = verdict([1.0, 1.2, 0.95, 1.1, 0.9])  # CV 12%, ratio ~1/100
    assert v.verdict == rp.NOT_REPRODUCED and v.high < 1 / 1.05, v
    assert v.why.startswith("slower: ratio 0.010") and "(CV of the reproduction 12% > 10%: the interval holds" in v.why


@pytest.mark.parametrize(("runs", "expected"), [([125.0] * 3, rp.REPRODUCED), ([126.0] * 3, rp.NOT_REPRODUCED),
                                                ([80.0] * 3, rp.REPRODUCED), ([79.0] * 3, rp.NOT_REPRODUCED)])
def test_the_band_includes_its_edges(runs, expected):
    """t = 0.25: the band is [0.8, 1.25] (both exact in binary); runs without spread give a point interval."""
    v = verdict(runs, [100.0] * 3, tolerance=0.25)
    assert v.low == v.high == v.ratio and v.verdict == expected, v


def test_one_run_a_side_the_point_ratio_decides_and_says_so():
    assert verdict([100.0], [104.0]).verdict == rp.REPRODUCED
    v = verdict([100.0], [110.0])
    assert v.verdict == rp.NOT_REPRODUCED and v.why.startswith("one run on a side: the ratio 0.909 alone decides")


def test_different_systems_or_no_figure_are_not_comparable():
    v = verdict([100.0] * 3, differs=["GPU model: NVIDIA H200 in the bundle, none here"])
    assert (v.verdict, v.why) == (rp.NOT_COMPARABLE, "GPU model: NVIDIA H200 in the bundle, none here")
    assert verdict([]).why == "no figure in the reproduction"


def test_exit_codes_and_counts():
    good, bad, noisy = verdict(BUNDLE), verdict([80] * 5), verdict([100, 130, 80, 110, 90])
    lost = verdict([])
    assert [rp.exit_code(v) for v in ([good], [good, bad], [good, noisy], [good, lost], [noisy, bad])] == \
        [0, 1, 3, 3, 1]
    assert rp.counts([good, bad, noisy, lost, good]) == {"reproduced": 2, "not reproduced": 1, "not comparable": 1,
                                                         "inconclusive": 1}


def test_the_estimate_comes_from_the_bundles_own_durations_times_its_repeats(tmp_path):
    (tmp_path / "s.yaml").write_text(
        "schema_version: 1\nname: s\ndescription: two cases\nhardware: cpu\n"
        "defaults: {repeats: 3, timeout_s: 600, batch_size: 2}\n"
        "cases:\n  - {framework: torch, model: resnet50}\n  - {framework: paddle, model: resnet50, repeats: 2}\n")
    suite = load_suite(tmp_path / "s.yaml")
    torch = next(c.key for c in suite.cases if c.framework == "torch")
    meta = RunRecord(None, {"runs": {"a.log": {"case": torch, "status": "ok", "wall_seconds": 10.0},
                                     "b.log": {"case": torch, "status": "ok", "wall_seconds": 14.0},
                                     "c.log": {"case": torch, "status": "failed", "wall_seconds": 1.0}}})
    found = estimate(plan_for_nodes(suite, 1), past=durations(meta), source="the bundle's own runs of these cases")
    assert (found.known, found.known_runs, found.unknown_runs, found.bound) == (36.0, 3, 2, 1200)
    assert found.line() == ("estimated time: 36 s for 3 run(s), from the bundle's own runs of these cases (median "
                            "run.json wall_seconds); at most 20 min 0 s for 2 run(s) it does not time (their cases' "
                            "timeout_s)")


def results_of(values: list[float]) -> dict:
    return {"groups": [{"framework": "torch", "model": "resnet50", "batch_per_device": 2, "precision": "fp32",
                        "cases": [{"case": "1n1g", "runs": [{"value": x} for x in values]}]}]}


def record_of(reproduced: list[float], tolerance: float = 0.05) -> dict:
    v = verdict(reproduced, tolerance=tolerance)
    return {"schema_version": 1, "tolerance": tolerance, "system_differences": [], "counts": rp.counts([v]),
            "verdicts": [v.to_dict()]}


def test_check_record_holds_a_record_to_its_runs_results():
    runs = [100.0, 100.5, 99.8, 101.0, 99.2]
    problems, again = rp.check_record(record_of(runs), results_of(runs))
    assert problems == [] and [v.verdict for v in again] == [rp.REPRODUCED]


@pytest.mark.parametrize(("edit", "key"), [
    (lambda r: r["verdicts"][0]["reproduced"].__setitem__(0, 200.0), "verdicts[0].reproduced"),
    (lambda r: r["verdicts"][0].__setitem__("ratio", 1.2), "verdicts[0].ratio"),
    (lambda r: r["verdicts"][0].__setitem__("verdict", rp.NOT_REPRODUCED), "verdicts[0].verdict"),
    (lambda r: r["verdicts"][0].__setitem__("original", [50.0] * 5), "verdicts[0].ratio"),
    (lambda r: r.__setitem__("tolerance", 0.5), "verdicts[0].why"),
    (lambda r: r["counts"].__setitem__("reproduced", 2), "counts"),
    (lambda r: r.__setitem__("verdicts", []), "verdicts"),
])
def test_check_record_names_the_key_an_edit_broke(edit, key):
    runs = [100.0, 100.5, 99.8, 101.0, 99.2]
    record = record_of(runs)
    edit(record)
    problems, _ = rp.check_record(record, results_of(runs))
    assert key in [k for k, _ in problems], problems


def test_a_gpu_system_of_another_driver_or_cuda_major_version_is_not_comparable():
    def system(driver: str, cuda: str) -> dict:
        return {"accelerator_model_name": "NVIDIA H200", "accelerators_per_node": "1", "number_of_nodes": "1",
                "other_software_stack": {"driver": driver, "cuda_driver_api": cuda, "kernel": "6.8"}}

    bundle = system("580.159.04", "13.0")
    assert rp.case_differences(bundle, system("580.65.06", "13.0"), False, 1, 1) == []  # a minor release
    assert rp.case_differences(bundle, system("550.54.15", "12.4"), False, 1, 1) == [
        "driver major version: 580.159.04 in the bundle, 550.54.15 here",
        "CUDA (driver) major version: 13.0 in the bundle, 12.4 here"]
    assert rp.case_differences(bundle, system("550.54.15", "12.4"), True, 1, 1) == []  # a CPU case: its CPU counts
    made = rp.judge_claim("torch/resnet50/bz256/1n1g/amp", [5749.0], [5750.0], 0.05,
                          rp.case_differences(bundle, system("550.54.15", "12.4"), False, 1, 1))
    assert made.verdict == rp.NOT_COMPARABLE and "driver major version" in made.why


def test_gpus_held_to_another_power_limit_are_not_comparable():
    def capture(*limits: float) -> dict:
        return {"smi": {"gpus": [{"product_name": "NVIDIA H200", "power_limit_w": w} for w in limits]}}

    h200 = [capture(700.0)]  # as the H200 visit's env/vm/capture.json holds it
    assert rp.power_limit_differences(h200, [capture(700.0)]) == []
    assert rp.power_limit_differences(h200, [capture(695.0)]) == []  # within 1%
    assert rp.power_limit_differences(h200, [capture(500.0), capture(500.0)]) == [
        "GPU power limit: 700 W in the bundle, 500 W here"]
    assert rp.power_limit_differences(h200, [capture(700.0, 450.0)]) == [
        "GPU power limit: 700 W in the bundle, 450 W/700 W here"]
    assert rp.power_limit_differences(h200, [{"smi": None}]) == []  # nothing to compare with: not a difference
