"""`kit standing RUN`: the real H200 visit's runs (tests/fixtures/gpu-runs/h200-20261128) beside the published
figures the kit re-derives (MLPerf v4.0's H200 per GPU, Lambda's H100 rows), with what differs, and each likely
cause held to the evidence that raises it: the visit's own throttled samples, a loader probe, a busy host, TF32
against a published FP32."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SHARED
from test_gpu_telemetry_report import cut_nvml, cut_smi, span

from kit.cli import main
from kit.core.layout import telemetry_name
from kit.results.crosscheck import check_claims
from kit.results.published import LAMBDA, MLPERF, gpu_of, nearest, published_figures
from kit.results.standing import closest, headline, stand, standing

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128"
H100 = SHARED / "fixtures" / "gpu-runs" / "h100-one-20261126-175228"
HARNESS = "torch/resnet50/bz256/1n1g/amp-nhwc"
DLE = "ngc-pytorch/resnet50/bz256/1n1g/amp"


@pytest.fixture(scope="module")
def figures():
    return published_figures()


def answer_of(capsys, run_dir: Path) -> dict:
    assert main(["standing", str(run_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    return {c["case"]: c for c in out["cases"]} | {"": out}


def test_every_figure_is_the_one_its_claims_file_re_derives_from_its_log(figures):
    recomputed = {str((path.parent / v.claim).resolve()): v for path in (LAMBDA, MLPERF) for v in check_claims(path)}
    assert len(figures) == 74  # Lambda's 72 ResNet50 rows (36 systems x FP32/AMP), MLPerf's H200 and H100
    for p in figures:
        assert recomputed[p.log].status == "match" and recomputed[p.log].recomputed == pytest.approx(p.value, rel=1e-6)


def medians_of(results: dict) -> dict:
    return {f"{g['framework']}/{g['model']}/bz256/{c['case']}/{g['precision']}": c["median"]
            for g in results["groups"] for c in g["cases"]}


def test_the_h200_runs_stand_beside_mlperfs_h200_and_lambdas_h100_with_what_differs(capsys, tmp_path):
    """Its figures are kit report's, recomputed from the logs now (not results.json as the visit wrote it, whose
    DLE median 5815.1 still counts the repeat that trained on NaN). Like for like first: the harness's verdict comes
    from NVIDIA DLE's program at the same setting in the same run (rung 1: 0.99, on par), MLPerf's H200 figure is
    the record, a ceiling, and Lambda's H100 rows another GPU's, context only."""
    got = answer_of(capsys, VISIT / "dle")
    assert got[""]["gpu"] == "NVIDIA H200" and got[""]["power_limit_w"] == 700.0
    main(["report", str(VISIT / "dle"), "--out", str(tmp_path)])
    capsys.readouterr()
    medians = medians_of(json.loads((tmp_path / "results.json").read_text()))
    written = medians_of(json.loads((VISIT / "dle" / "results.json").read_text()))
    assert written[DLE] == pytest.approx(5815.099, abs=1e-3) and medians[DLE] == pytest.approx(5830.961, abs=1e-3)
    same_run, *others = got[HARNESS]["neighbours"]
    assert (same_run["rung"], same_run["label"], same_run["verdict"]) == (
        1, f"the published program {DLE}, this run", "on par")
    assert same_run["ratio"] == pytest.approx(medians[HARNESS] / medians[DLE]) and 0.98 < same_run["ratio"] < 0.99
    assert got[HARNESS]["headline"].startswith(f"{HARNESS}: 5749.1 images/s per GPU, 0.99x the published program")
    assert "on par -- rung 1" in got[HARNESS]["headline"] and got[HARNESS]["headline"].endswith(
        "; 0.72 of the record (MLPerf Training v4.0 (NVIDIA) H200-SXM5-141GB, 8 GPU(s), amp)")
    assert got[DLE]["headline"].startswith(f"{DLE}: 5831.0 images/s per GPU; no like-for-like figure (rungs 1-3)")
    for key, neighbours in ((HARNESS, others), (DLE, got[DLE]["neighbours"])):
        case = got[key]
        assert case["per_gpu"] == pytest.approx(medians[key])
        record, *lambdas = neighbours
        assert record["label"].startswith("MLPerf Training v4.0 (NVIDIA) H200") and record["rung"] == 4
        assert record["per_gpu"] == pytest.approx(63607.69 / 8, rel=1e-6)
        assert record["verdict"] == f"ceiling: {record['ratio']:.2f} of the record"  # never "slower"
        assert "1 GPU(s) here, 8 published (compared per GPU)" in record["differs"]
        assert "batch 256/GPU here, 400/GPU published" in record["differs"]
        assert "data synthetic here, real published" in record["differs"]  # DLE's from its recipe (synthetic)
        assert [n["label"].split(",")[0] for n in lambdas] == ["Lambda 1cc_H100_80GB_SXM5_v1",
                                                               "Lambda RAIDZ1_H100_80GB_SXM5_v1"]
        for n in lambdas:  # read from Lambda's own log: DLE's PARAMETER line says batch 1280, nchw, syntetic
            assert n["rung"] == 5 and n["verdict"].startswith("context only (2.0")
            assert "GPU NVIDIA H200 here, H100 SXM published" in n["differs"]
            assert "batch 256/GPU here, 1280/GPU published" in n["differs"]
            assert "layout nhwc here, nchw published" in n["differs"]
        # no rung of 1-3 says "slower": no setting is a cause; nothing was sampled, so nothing is "none found"
        assert case["causes"] == [] and case["not_checked"] == [
            "no GPU telemetry (throttling, clocks, power draw, GPU busy)"]
    harness_beside_dle = others[1]["differs"][-1]
    assert harness_beside_dle.startswith("the kit's harness here, PyTorch (NVIDIA DLE) published")
    assert not any("harness" in d for d in got[DLE]["neighbours"][1]["differs"])  # DLE beside DLE


def test_the_terminal_answer_starts_with_one_row_per_case(capsys):
    assert main(["standing", str(VISIT / "dle")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "## Where this run stands against published figures"
    assert "Hardware: not measured: `kit yardstick` beside the run tells a slow GPU from slow software" in lines
    rows = {line.split(" | ")[0][2:]: line for line in lines if line.startswith(("| ngc-pytorch/", "| torch/"))}
    assert rows[HARNESS].endswith("| 1 | 0.99 (0.98–0.99) | on par | 0.72 |")
    assert rows[DLE].endswith("| — | — | — | no like-for-like figure (rungs 1-3) | 0.73 |")
    assert "- likely causes: none found in what was checked; not checked: no GPU telemetry (throttling, clocks, " \
           "power draw, GPU busy)" in lines


def test_a_cpu_run_gets_no_gpu_neighbour(capsys):
    fuzz = next((Path(__file__).resolve().parent / "fixtures" / "fuzz").glob("fuzz-*"))
    got = answer_of(capsys, fuzz)
    assert got[""]["gpu"] is None
    for case in (c for k, c in got.items() if k):
        assert case["neighbours"] == [] and case["why_none"] == (
            "a CPU run: the published figures the kit holds are GPU figures")


def test_the_h100_recording_says_which_checks_could_not_run(capsys, tmp_path):
    run = tmp_path / "h100"
    shutil.copytree(H100, run)
    got = answer_of(capsys, run)
    resnet = got["torch/resnet50/bz256/1n1g/fp32"]
    first = resnet["neighbours"][0]
    assert (first["rung"], first["label"].split(",")[0], first["verdict"]) == (
        2, "Lambda 1cc_H100_80GB_SXM5_v1", "on par")
    for case in (c for k, c in got.items() if k):
        assert case["causes"] == [] and case["not_checked"] == [
            "no GPU telemetry (throttling, clocks, power draw, GPU busy)", "no host-load record (a busy host)"]


def test_a_slower_case_is_explained_only_by_settings_that_point_its_way_sized_by_its_own_cases(figures):
    """The H100 recording's fp32 ResNet50 with its figure lowered to 0.6 of Lambda's and a second case at Lambda's
    batch (640) beside it: the smaller batch explains "slower" and is sized by the run's own bz640 case; 1 GPU
    against 1, synthetic against synthetic differ not; the harness against DLE's program points no known way."""
    results = json.loads((H100 / "results.json").read_text())
    group = next(g for g in results["groups"] if g["model"] == "resnet50" and g["precision"] == "fp32")
    case = group["cases"][0]
    for run in case["runs"]:
        run["value"] = 1140.0
    wide = json.loads(json.dumps(group))
    wide["batch_per_device"] = 640
    for run in wide["cases"][0]["runs"]:
        run["value"] = 1710.0
    results["groups"].append(wide)
    answer = stand(H100, results, figures, ladder=True)
    (slow,) = [c for c in answer.cases if c.key == "torch/resnet50/bz256/1n1g/fp32"]
    assert closest(slow).verdict == "slower" and closest(slow).rung == 2
    assert slow.causes[0] == ("batch 256/GPU here, 640/GPU published: this run's torch/resnet50/bz640/1n1g/fp32 "
                              "gives 1.50x this case's figure (0.60x the neighbour here)")
    assert slow.causes[1].startswith("the kit's harness here, PyTorch (NVIDIA DLE) published (another program of "
                                     "the same framework) (which way it points is not known)")
    assert len(slow.causes) == 2  # nothing that would make this run faster is offered as why it is slower
    (wide_case,) = [c for c in answer.cases if c.key == "torch/resnet50/bz640/1n1g/fp32"]
    assert closest(wide_case).verdict == "slower" and wide_case.causes[0].endswith("(which way it points is not "
                                                                                 "known)")


@pytest.fixture
def sampled(tmp_path) -> Path:
    """The DLE run directory with each run's real samples beside its log (cut from the visit's recording, as
    tests/test_gpu_telemetry_report.py does) and its report made again: harness run 1 throttled 9% (sw_power_cap)."""
    from kitlogs import made_by_this_kit, recorded_clean, without_the_nan_repeat
    run_dir = tmp_path / "run"
    shutil.copytree(VISIT / "dle", run_dir)
    recorded_clean(run_dir)
    without_the_nan_repeat(run_dir)
    made_by_this_kit(run_dir)  # DERIVED: judged as a run of this kit
    for log in sorted((run_dir / "logs").rglob("*.log")):
        start, end = span(log)
        (cut_smi if "ngc-pytorch" in log.parts else cut_nvml)(start, end, log.with_name(telemetry_name(log.name)))
    assert main(["report", str(run_dir)]) == 0
    return run_dir


def test_throttling_in_the_runs_samples_is_the_first_cause(sampled, capsys):
    got = answer_of(capsys, sampled)
    # sized: throttled 9% of the window, but the SM clock held its maximum there: slower clocks cost nothing
    assert got[HARNESS]["causes"][0] == ("throttled (sw_power_cap) 9% of the measured window (can account for up to "
                                         "0%: the throttled share x the SM clock's shortfall)")


def _rewrite_entries(run_dir: Path, change) -> None:
    meta = json.loads((run_dir / "run.json").read_text())
    for rel, entry in meta["runs"].items():
        if "/torch/" in rel:
            change(entry)
    (run_dir / "run.json").write_text(json.dumps(meta))


def test_a_loader_no_faster_than_the_training_and_a_busy_host_are_causes(tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(VISIT / "dle", run_dir)
    got = answer_of(capsys, run_dir)
    assert not any(c.startswith(("input-bound", "host busy")) for c in got[HARNESS]["causes"])

    def probed_and_busy(entry: dict) -> None:
        entry["ran"]["input_rate"] = 5800.0  # the loader alone: 1% above the training's 5749
        entry["host_load"] |= {"other_cpu_share": 0.62, "load_during_max": 14.0}
    _rewrite_entries(run_dir, probed_and_busy)
    causes = answer_of(capsys, run_dir)[HARNESS]["causes"]
    assert causes[0] == "input-bound: the training took 99% of what its loader delivers alone (5800 images/s)"
    assert causes[1].startswith("host busy: load 14.0 on 16 cores during this run (other processes used 62% of the "
                                "CPU)") and causes[1].endswith("(2 of 2 runs)")


def test_tf32_against_a_published_fp32_is_named(figures):
    (pub,) = [p for p in nearest(figures, "resnet50", gpu_of("NVIDIA H100 80GB HBM3"), "tf32", 1, 1)
              if p.publisher == "Lambda"]
    assert pub.precision == "fp32" and pub.gpus == 1 and pub.gpu.family == "H100"
    from kit.results.standing import _signed

    def _differs(*args):
        return [d.text for d in _signed(*args)]
    mine = {"framework": "torch", "gpus": 1, "batch": 256, "precision": "tf32", "layout": "nchw", "data": "synthetic"}
    said = _differs(mine, gpu_of("NVIDIA H100 80GB HBM3"), 700.0, pub)
    assert said[0] == "batch 256/GPU here, 640/GPU published"
    assert said[1].startswith("TF32 here, 'FP32' published (PyTorch's cuDNN convolutions take TF32 by default")
    low = _differs(mine, gpu_of("NVIDIA H100 80GB HBM3"), 500.0, pub)
    assert low[0] == "power limit 500 W here, the SKU's 700 W"


def test_headline_and_a_run_without_results_is_refused(tmp_path, capsys, figures):
    answer = standing(VISIT / "dle", figures)
    line = headline(answer.cases[1])
    assert line.startswith(f"{HARNESS}: 5749.1 samples/s per GPU, 0.72x MLPerf") and line.endswith("differ")
    assert main(["standing", str(tmp_path)]) == 2
    assert "not a run directory with results.json" in capsys.readouterr().err


def test_the_gpu_report_starts_with_the_answer_and_verify_recomputes_it(sampled, tmp_path):
    from kit.audit.verify import verify
    report = (sampled / "report.md").read_text().splitlines()
    assert report[2] == "## Where this run stands against published figures"  # first under the title
    row = next(line for line in report if line.startswith(f"| {HARNESS} |"))
    assert f"(the published program {DLE}, this run) | 1 |" in row and row.endswith("| on par | 0.72 |")
    assert f"- {HARNESS}: (1) throttled (sw_power_cap) 9% of the measured window (can account for up to 0%: the " \
           "throttled share x the SM clock's shortfall)" in report
    assert not any(line.startswith("Hardware: ") for line in report)  # kit yardstick's runs are not the run's
    assert main(["bundle", str(sampled), "--out", str(tmp_path / "b.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 0
    assert verify(tmp_path / "b.tgz").ok and verify(tmp_path / "b.tgz", rules_version="v6").ok
    text = (sampled / "report.md").read_text()
    (sampled / "report.md").write_text(text.replace("| on par | 0.72 |", "| faster | 0.92 |", 1))  # a better one
    assert main(["bundle", str(sampled), "--out", str(tmp_path / "c.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 1
    for version in ("v7", "v6", "v1"):  # the earlier sets compare the block too where a report has one
        said = {v.rule for v in verify(tmp_path / "c.tgz", rules_version=version).violations}
        assert said == {"report_recomputed"}, (version, said)


def test_the_plot_marks_the_closest_rung_and_the_record_beside_each_case(figures, capsys):
    """throughput.png draws, across each case's bar, its closest like-for-like figure and the record, both for the
    case's whole job as its bar is (kit.results.plotting.write_throughput_plot)."""
    from kit.config import programs
    from kit.config.suites import load_suite
    from kit.results.compose import suite_knowledge
    from kit.results.standing import plot_marks

    references, settings, pairs = suite_knowledge(load_suite(VISIT / "dle" / "suite.yaml"), programs.ran_as)
    results = json.loads((VISIT / "dle" / "results.json").read_text())
    marks = plot_marks(stand(VISIT / "dle", results, figures, references, settings, pairs=pairs, ladder=True))
    dle = medians_of(results)[DLE]
    assert marks[HARNESS] == [("rung 1: its program here", pytest.approx(dle)),
                              ("the record (MLPerf), per GPU x GPUs", pytest.approx(63607.69 / 8, rel=1e-6))]
    assert marks[DLE] == [("the record (MLPerf), per GPU x GPUs", pytest.approx(63607.69 / 8, rel=1e-6))]
