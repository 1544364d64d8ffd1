"""`kit standing RUN`: the real H200 visit's runs (tests/fixtures/gpu-runs/h200-20261128) beside the published
figures the kit re-derives (MLPerf v4.0's H200 per GPU, Lambda's H100 rows), with what differs, and each likely
cause held to the evidence that raises it: the visit's own throttled samples, a loader probe, a busy host, TF32
against a published FP32."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_gpu_telemetry_report import cut_nvml, cut_smi, span

from kit.cli import main
from kit.core.layout import telemetry_name
from kit.results.crosscheck import check_claims
from kit.results.published import LAMBDA, MLPERF, gpu_of, nearest, published_figures
from kit.results.standing import headline, standing

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128"
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
    DLE median 5815.1 still counts the repeat that trained on NaN)."""
    got = answer_of(capsys, VISIT / "dle")
    assert got[""]["gpu"] == "NVIDIA H200" and got[""]["power_limit_w"] == 700.0
    main(["report", str(VISIT / "dle"), "--out", str(tmp_path)])
    capsys.readouterr()
    medians = medians_of(json.loads((tmp_path / "results.json").read_text()))
    written = medians_of(json.loads((VISIT / "dle" / "results.json").read_text()))
    assert written[DLE] == pytest.approx(5815.099, abs=1e-3) and medians[DLE] == pytest.approx(5830.961, abs=1e-3)
    for key in (HARNESS, DLE):
        case = got[key]
        assert case["per_gpu"] == pytest.approx(medians[key])
        first, *lambdas = case["neighbours"]
        assert first["label"].startswith("MLPerf Training v4.0 (NVIDIA) H200")  # the same GPU model first
        assert first["per_gpu"] == pytest.approx(63607.69 / 8, rel=1e-6) and first["verdict"] == "slower"
        assert "1 GPU(s) here, 8 published (compared per GPU)" in first["differs"]
        assert "batch 256/GPU here, 400/GPU published" in first["differs"]
        assert "data synthetic here, real published" in first["differs"]  # DLE's from its recipe (synthetic)
        assert [n["label"].split(",")[0] for n in lambdas] == ["Lambda 1cc_H100_80GB_SXM5_v1",
                                                               "Lambda RAIDZ1_H100_80GB_SXM5_v1"]
        for n in lambdas:  # read from Lambda's own log: DLE's PARAMETER line says batch 1280, nchw, syntetic
            assert "GPU NVIDIA H200 here, H100 SXM published" in n["differs"]
            assert "batch 256/GPU here, 1280/GPU published" in n["differs"]
            assert "layout nhwc here, nchw published" in n["differs"]
            assert n["verdict"] == "faster" and 2.0 < n["ratio"] < 2.1
        assert case["causes"][-1].startswith("settings unlike the nearest published figure's: 1 GPU(s) here")
    harness_beside_dle = got[HARNESS]["neighbours"][1]["differs"][-1]
    assert harness_beside_dle.startswith("the kit's harness here, PyTorch (NVIDIA DLE) published")
    assert not any("harness" in d for d in got[DLE]["neighbours"][1]["differs"])  # DLE beside DLE


def test_the_terminal_answer_starts_with_one_row_per_case(capsys):
    assert main(["standing", str(VISIT / "dle")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "## Where this run stands against published figures"
    rows = [line for line in lines if line.startswith("| ngc-pytorch/") or line.startswith("| torch/")]
    assert len(rows) == 2 and all("| slower |" in row for row in rows)


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
    assert got[HARNESS]["causes"][0] == "throttled (sw_power_cap) 9% of the measured window"


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
    from kit.results.standing import _differs
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
    assert "MLPerf Training v4.0 (NVIDIA) H200" in row and row.endswith("| slower |")
    assert f"- {HARNESS}: throttled (sw_power_cap) 9% of the measured window; settings unlike" in "\n".join(report)
    assert main(["bundle", str(sampled), "--out", str(tmp_path / "b.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 0
    assert verify(tmp_path / "b.tgz").ok and verify(tmp_path / "b.tgz", rules_version="v6").ok
    text = (sampled / "report.md").read_text()
    (sampled / "report.md").write_text(text.replace("| 0.72 (", "| 0.92 (", 1))  # a better standing, written
    assert main(["bundle", str(sampled), "--out", str(tmp_path / "c.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 1
    for version in ("v7", "v6", "v1"):  # the earlier sets compare the block too where a report has one
        said = {v.rule for v in verify(tmp_path / "c.tgz", rules_version=version).violations}
        assert said == {"report_recomputed"}, (version, said)
