"""Reproduction record version 2 (kit.results.reproduction.judge_claim): the bundle's figure judged as claimed -- a
point, held to the interval of the auditor's re-runs -- so that the operator cannot steer the outcome class: repeats
forged far apart no longer make an inflated claim inconclusive, a re-run that gives no figure is not reproduced,
"not comparable" only where the systems differ in what a figure means (the GPUs the CASE uses, parsed), and a
record is held to its runs (kit verify)."""

from __future__ import annotations

import pytest

from kit.results import reproduction as rp

CASE = "torch/resnet50/bz256/1n1g/amp-nhwc"
HONEST = [100.0, 100.6, 99.7, 100.2, 99.9]  # the auditor's re-runs: CV 0.3%


def claim(reproduced, original, differs=(), no_figure="", tolerance=0.05):
    return rp.judge_claim(CASE, list(original), list(reproduced), tolerance, list(differs), no_figure)


def test_repeats_forged_far_apart_no_longer_hide_an_inflated_claim():
    """Two repeats at 60 and 200 claim a median of 130 where the system gives 100: the two-sample rule (version 1)
    widened the interval with the operator's spread and said inconclusive; the claim as a point is not reproduced,
    and the bundle's spread is named as a finding."""
    forged = [60.0, 200.0]
    old = rp.compare_case(CASE, forged, HONEST, 0.05, [])
    new = claim(HONEST, forged)
    assert old.verdict == rp.INCONCLUSIVE
    assert new.verdict == rp.NOT_REPRODUCED and new.why.startswith("slower: ratio 0.769")
    assert "the bundle's own runs spread CV 76%, beyond the 10% the kit's noise rule accepts: a finding" in new.why


def test_an_honest_claim_is_reproduced_however_its_own_runs_spread():
    noisy_but_true = [80.0, 100.0, 120.0]  # median 100
    v = claim(HONEST, noisy_but_true)
    assert v.verdict == rp.REPRODUCED and v.why.startswith("the re-runs' interval [0.997, 1.006] within 0.95..1.05")
    assert v.why.endswith("a finding about the bundle")


def test_re_runs_with_no_figure_are_not_reproduced_saying_why():
    v = claim([], HONEST, no_figure="repeat 1: timeout: no end after 60 s: killed (every process of the run)")
    assert (v.verdict, v.why) == (rp.NOT_REPRODUCED, "no figure: repeat 1: timeout: no end after 60 s: killed "
                                                      "(every process of the run)")
    assert claim([], HONEST).why == "no figure: the re-runs gave none"
    assert rp.exit_code([v], 2) == 1


def test_noise_on_the_auditors_side_is_inconclusive_and_says_how_many_re_runs_decide():
    v = claim([96.0, 103.0, 98.0, 104.0, 95.5], HONEST)  # straddles 0.952
    assert v.verdict == rp.INCONCLUSIVE and "about " in v.why and "re-runs would decide it" in v.why
    assert rp.exit_code([v], 2) == 4 and rp.exit_code([v], 1) == 3


@pytest.mark.parametrize(("original", "here", "gpus", "said"), [
    ({"accelerator_model_name": "NVIDIA H100 80GB HBM3", "accelerators_per_node": "1"},
     {"accelerator_model_name": "NVIDIA H100 80GB HBM3", "accelerators_per_node": "8"}, 1, []),
    ({"accelerator_model_name": "NVIDIA H100 80GB HBM3", "accelerators_per_node": "8"},
     {"accelerator_model_name": "NVIDIA H100 80GB HBM3", "accelerators_per_node": "1"}, 8,
     ["GPUs: the case uses 8 per node, this system has 1"]),
    ({"accelerator_model_name": "NVIDIA H100 80GB HBM3"}, {"accelerator_model_name": "NVIDIA H200"}, 1,
     ["GPU model: NVIDIA H100 80GB HBM3 in the bundle, NVIDIA H200 here"]),
    ({"accelerator_model_name": "NVIDIA H100 PCIe"}, {"accelerator_model_name": "NVIDIA H100 80GB HBM3"}, 1,
     ["GPU model: NVIDIA H100 PCIe in the bundle, NVIDIA H100 80GB HBM3 here"]),
])
def test_only_the_gpus_the_case_uses_and_the_model_parsed_make_a_gpu_case_not_comparable(original, here, gpus,
                                                                                       said):
    """A one-GPU case reproduced on an eight-GPU node is comparable (version 1 compared the whole host's GPU count
    as raw strings and said not comparable); the host's GPU count is a noted difference."""
    assert rp.case_differences(original, here, False, gpus, 1) == said
    if original.get("accelerators_per_node") != here.get("accelerators_per_node") and not said:
        assert rp.noted_differences(original, here, False) == ["GPUs per node: 1 in the bundle, 8 here"]


def test_a_cpu_case_differs_by_its_cpu_model_only_and_nodes_it_needs():
    a = {"host_processor_model_name": "AMD EPYC", "host_processor_vcpu_count": "2", "number_of_nodes": "1"}
    b = {"host_processor_model_name": "AMD EPYC", "host_processor_vcpu_count": "16", "number_of_nodes": "1"}
    assert rp.case_differences(a, b, True, 1, 1) == []
    assert rp.noted_differences(a, b, True) == ["logical CPUs: 2 in the bundle, 16 here"]
    assert rp.case_differences(a, b | {"host_processor_model_name": "Intel Xeon"}, True, 1, 2) == [
        "CPU model: AMD EPYC in the bundle, Intel Xeon here", "nodes: the case uses 2, this system has 1"]


def results_of(values: list[float]) -> dict:
    return {"groups": [{"framework": "torch", "model": "resnet50", "batch_per_device": 256, "precision": "amp-nhwc",
                        "cases": [{"case": "1n1g", "runs": [{"value": x} for x in values]}]}]}


def record_of(reproduced: list[float], original: list[float], failed: list[str] = ()) -> dict:
    v = claim(reproduced, original, no_figure=rp.no_figure_of(CASE, list(failed)))
    return {"schema_version": 2, "tolerance": 0.05, "system_differences": {CASE: []}, "failed_runs": list(failed),
            "counts": rp.counts([v]), "verdicts": [v.to_dict()]}


def test_a_version_2_record_is_held_to_its_runs_and_its_claims():
    problems, again = rp.check_record(record_of(HONEST, [60.0, 200.0]), results_of(HONEST))
    assert problems == [] and [v.verdict for v in again] == [rp.NOT_REPRODUCED]
    lost = record_of([], HONEST, [f"{CASE} repeat 1: timeout: no end after 60 s"])
    problems, again = rp.check_record(lost, results_of([]))
    assert problems == [] and again[0].why == "no figure: repeat 1: timeout: no end after 60 s"
    edited = record_of(HONEST, [60.0, 200.0])
    edited["verdicts"][0]["verdict"] = rp.INCONCLUSIVE  # the old rule's answer, written into a new record
    assert "verdicts[0].verdict" in [k for k, _ in rp.check_record(edited, results_of(HONEST))[0]]
    lost["failed_runs"] = []  # the reason a run gave no figure, taken out
    assert "verdicts[0].why" in [k for k, _ in rp.check_record(lost, results_of([]))[0]]
    assert rp.check_record({**edited, "schema_version": 7}, results_of(HONEST))[0] == [
        ("schema_version", "7 is no reproduction record this kit knows (1, 2, 3, 4)")]


BUSY = {"2": "other processes used 48% of the CPU"}


def runs_results(values: list[float]) -> dict:
    results = results_of(values)
    for n, run in enumerate(results["groups"][0]["cases"][0]["runs"], 1):
        run["run"] = n
    return results


def test_a_re_run_made_on_a_busy_host_is_set_aside_not_judged():
    """Record version 3: the slow second re-run (the auditor's host busy) would make an honest claim not
    reproduced; set aside, the other two decide, and the verdict says what was set aside and why."""
    runs = [(1, 100.0), (2, 52.0), (3, 100.4)]
    assert rp.judge_runs(CASE, [100.0], runs, 0.05, [], [], {}).verdict == rp.INCONCLUSIVE  # judged with it
    v = rp.judge_runs(CASE, [100.0], runs, 0.05, [], [], BUSY)
    assert (v.verdict, v.reproduced, v.set_aside) == (rp.REPRODUCED, [100.0, 100.4], [52.0])
    assert v.why.endswith("; re-runs set aside, made while this host was busy: repeat 2: other processes used 48% "
                          "of the CPU")
    every = rp.judge_runs(CASE, [100.0], [(2, 52.0)], 0.05, [], [], BUSY)
    assert (every.verdict, every.ratio, every.set_aside) == (rp.INCONCLUSIVE, None, [52.0])
    assert every.why.startswith("every re-run set aside, made while this host was busy: repeat 2: ")


def test_one_re_run_left_beside_those_set_aside_decides_nothing():
    """Record version 4: three re-runs asked, two made while the host was busy; the third alone (0.932, its spread
    unknown) would say "not reproduced" of an honest claim (seen in a real run on this VM): inconclusive, and
    --until-decided asks the round's three again. A version 3 record is still recomputed by its own rule."""
    from kit.cli.reproduce import next_round

    busy = {"1": "other processes used 38% of the CPU", "2": "other processes used 37% of the CPU"}
    runs = [(1, 6.92), (2, 9.82), (3, 13.48)]
    v = rp.judge_runs(CASE, [14.46], runs, 0.05, [], [], busy)
    assert (v.verdict, v.reproduced, v.set_aside, v.low) == (rp.INCONCLUSIVE, [13.48], [6.92, 9.82], None)
    assert v.ratio == pytest.approx(13.48 / 14.46) and v.why.startswith("one re-run left, 2 set aside, made while "
                                                                        "this host was busy: repeat 1: other ")
    assert "one re-run cannot decide what 3 were asked to" in v.why
    assert next_round([v], 0.05, 12, {CASE: 2}) == ({CASE: 3}, "1 inconclusive case(s) again with 3 re-runs each")
    assert next_round([v], 0.05, 12, {CASE: 12})[0] is None  # the cap of set-aside re-runs, as when all were
    old = rp.judge_runs(CASE, [14.46], runs, 0.05, [], [], busy, version=3)
    assert old.verdict == rp.NOT_REPRODUCED and old.why.startswith("one re-run: the ratio 0.932 alone decides")
    results = runs_results([6.92, 9.82, 13.48])
    record = {"schema_version": 3, "tolerance": 0.05, "system_differences": {CASE: []}, "failed_runs": [],
              "disturbed_runs": {CASE: busy}, "allow_busy": False, "counts": rp.counts([old]),
              "verdicts": [old.to_dict()]}
    assert rp.check_record(record, results) == ([], [old])  # made before version 4: verified by its own rule
    relabelled = rp.check_record({**record, "schema_version": 4}, results)[0]  # the same verdict called version 4
    assert [k for k, _ in relabelled] == ["verdicts[0].verdict", "verdicts[0].why"]
    assert relabelled[0][1] == "'not reproduced', but results.json's runs give 'inconclusive'"
    spread = rp.judge_runs(CASE, [14.46, 9.0, 20.0], runs, 0.05, [], [], busy)  # the bundle's spread still said
    assert spread.verdict == rp.INCONCLUSIVE and spread.why.endswith("a finding about the bundle")
    # one re-run asked (--repeats 1) on a quiet host: it alone decides, as it always did
    assert rp.judge_runs(CASE, [14.46], [(1, 13.48)], 0.05, [], [], {}).verdict == rp.NOT_REPRODUCED


def test_a_failed_re_run_on_a_quiet_host_is_still_not_reproduced_a_busy_one_set_aside():
    failed = [f"{CASE} repeat 1: timeout: no end after 60 s", f"{CASE} repeat 2: timeout: no end after 60 s"]
    quiet = rp.judge_runs(CASE, [100.0], [], 0.05, [], failed, BUSY)
    assert quiet.verdict == rp.NOT_REPRODUCED and quiet.why.startswith("no figure: repeat 1: timeout")
    assert "repeat 2: timeout" not in quiet.why.split(";")[0]
    both = rp.judge_runs(CASE, [100.0], [], 0.05, [], failed, {**BUSY, "1": "other processes used 30% of the CPU"})
    assert both.verdict == rp.INCONCLUSIVE and both.why.startswith("every re-run set aside")


def test_a_version_3_record_is_held_to_its_runs_and_what_it_set_aside():
    results = runs_results([100.0, 52.0, 100.4])
    v = rp.judge_runs(CASE, [100.0], rp.runs_by_case(results)[CASE], 0.05, [], [], BUSY)
    record = {"schema_version": 3, "tolerance": 0.05, "system_differences": {CASE: []}, "failed_runs": [],
              "disturbed_runs": {CASE: BUSY}, "allow_busy": False, "counts": rp.counts([v]),
              "verdicts": [v.to_dict()]}
    assert rp.check_record(record, results) == ([], [v])
    allowed = {**record, "allow_busy": True}  # the auditor judged every re-run: the record must say so
    assert "verdicts[0].reproduced" in [k for k, _ in rp.check_record(allowed, results)[0]]
    assert rp.check_record({**record, "disturbed_runs": [2]}, results)[0] == [
        ("disturbed_runs", "not an object of case -> {repeat: why}, or allow_busy not true/false")]
    old = record_of(HONEST, [100.0])  # version 2: nothing set aside, the field absent
    assert "set_aside" not in old["verdicts"][0] and rp.check_record(old, results_of(HONEST))[0] == []


def test_until_decided_runs_a_set_aside_case_again_until_the_cap():
    from kit.cli.reproduce import next_round

    every = rp.judge_runs(CASE, [100.0], [(1, 50.0), (2, 51.0), (3, 49.0)], 0.05, [], [],
                          {str(n): "other processes used 50% of the CPU" for n in (1, 2, 3)})
    assert next_round([every], 0.05, 10, {CASE: 3}) == ({CASE: 3}, "1 inconclusive case(s) again with 3 re-runs each")
    straddles = rp.judge_runs(CASE, [100.0], [(n, 90.0 + 2 * n) for n in range(1, 10)] + [(10, 40.0)], 0.05, [], [],
                              {"10": "other processes used 13% of the CPU"})
    assert straddles.verdict == rp.INCONCLUSIVE and len(straddles.reproduced) == 9
    assert next_round([straddles], 0.05, 10, {CASE: 1}) == (  # 9 judged + 1 set aside: the round had the cap
        None, f"left inconclusive: {CASE} (10 re-runs, the cap)")
    assert next_round([every], 0.05, 10, {CASE: 10}) == (
        None, f"left inconclusive: {CASE} (10 re-runs set aside, the cap: the host stays busy)")
