"""A report of a real one-H100 run (../shared/fixtures/gpu-runs/): the input pipeline's own rate beside each
real-data figure, and every published figure its suite gives a case beside the kit's, with kit/published."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import SHARED
from kitlogs import rewrite_kitlog

from kit.config import suites
from kit.run import bench

GPU_RUN = SHARED / "fixtures" / "gpu-runs" / "h100-one-20261126-175228"
LOGS = Path("logs/torch/resnet50/bz256/1n1g")


def copy_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(GPU_RUN, run_dir)
    return run_dir


def with_input_rate(log: Path, images_per_sec: float, loader: str = "gpu", counts: dict | None = None) -> None:
    """The log as a harness with loaders writes it: run_start names the loader, an input_rate line follows; COUNTS:
    the gpu loader's decode counts on run_stop."""
    def edit(line: dict):
        if line["event"] == "run_stop" and counts:
            return line | counts
        if line["event"] != "run_start":
            return line
        return [line | {"loader": loader, "data": "/data/train_list.txt"},
                {"kit": 1, "event": "input_rate", "time_ms": line["time_ms"] + 1, "loader": loader,
                 "images_per_sec": images_per_sec, "batches": 20}]
    rewrite_kitlog(log, edit)


def test_a_real_data_figure_near_its_loaders_own_rate_is_flagged_input_bound(tmp_path):
    run_dir = copy_run(tmp_path)
    with_input_rate(run_dir / LOGS / "resnet50_b256_amp_1.log", 2800.0,  # measured 2679: 96 %
                    counts={"decode_calls": 124, "decoded_batches": 124, "refused_batches": 0})
    with_input_rate(run_dir / LOGS / "resnet50_b256_fp32_1.log", 9000.0)  # measured 1842: 20 %
    suite_path = tmp_path / "s.yaml"
    suite_path.write_text("schema_version: 1\nname: h100-one\nhardware: gpu\n"
                          "defaults: {repeats: 1, data: imagenet, layout: nchw}\ncases:\n"
                          "  - {framework: torch, model: resnet50, precision: [fp32, amp], batch_size: 256}\n")
    suite = suites.load_suite(suite_path)
    assert {c.loader for c in suite.cases} == {"gpu"}
    text = bench.compose_report(run_dir, suite).settings
    assert "### Input pipeline" in text
    assert "**Warning: 1 case(s) train within 10% of their loader's own rate" in text
    assert "| torch/resnet50/bz256/1n1g/amp | gpu | 2800.0 | 2679.1 | 96% | **input-bound?** |" in text
    assert "| torch/resnet50/bz256/1n1g/fp32 | gpu | 9000.0 | 1842.4 | 20% | no |" in text
    # the run that states its decode counts: its decoder, one call a batch, none refused; the other states none
    assert ("torch/resnet50/bz256/1n1g/amp: its decoder made 124 decode calls for 124 batches (1 run(s)), 0 refused"
            in text.splitlines())  # this recorded run_start names no decoder
    assert sum("decode calls" in line for line in text.splitlines()) == 1


def test_synthetic_runs_have_no_input_section(tmp_path):
    run_dir = copy_run(tmp_path)
    suite = suites.load_suite(run_dir / "suite.yaml")
    assert "Input pipeline" not in bench.compose_report(run_dir, suite).settings


def test_a_one_gpu_h100_report_shows_the_published_figures_beside_its_own(tmp_path):
    """The built-in h100 suite's references (Lambda's re-derived 1CC H100 figures) beside the real run's median."""
    run_dir = copy_run(tmp_path)
    suite = suites.load_suite("h100")
    case = next(c for c in suite.cases if c.key == "torch/resnet50/bz256/1n1g/fp32")
    lambda_ref = next(r for r in case.references if r.source.startswith("Lambda"))
    assert (lambda_ref.value, lambda_ref.batch, lambda_ref.math, lambda_ref.bounded) == (1898, 640, "tf32", False)
    claims = (Path(suites.SUITES_DIR).parent / "claims" / "lambda.yaml").read_text()
    assert "1cc_H100_80GB_SXM5_v1/PyTorch_resnet50_FP32/" in claims and "published: 1898," in claims
    text = bench.compose_report(run_dir, suite).settings
    row = next(line for line in text.splitlines() if line.startswith("| torch/resnet50/bz256/1n1g/fp32 | 1842.40 |"))
    assert "| 1898 images/s |  ..  | 0.971 | shown (unbounded) | Lambda deeplearning-benchmark@aa5addb6, 1CC H100" in row
    assert "(batch 640, PyTorch 2.3.0a0 nv24.03, CUDA 12.4, 2024-05-02) (published as FP32; the publisher's " \
           "framework ran TF32" in row


def test_a_run_that_read_outside_its_data_root_says_so_in_the_report(tmp_path):
    """--allow-outside-root: the log's run_start counts the entries read from outside the data root; the input
    section names the case and the count (a run reading only the root's files says nothing)."""
    from kit.results.extract import Method
    from kit.results.report import build_report
    from kit.results.sections import input_section

    run_dir = copy_run(tmp_path)
    with_input_rate(run_dir / LOGS / "resnet50_b256_amp_1.log", 2800.0)
    report = build_report(run_dir / "logs", Method())
    assert "outside its data root" not in input_section(report, run_dir)

    def outside(line: dict):
        return line | {"outside_root": 12, "allow_outside_root": True} if line["event"] == "run_start" else line
    rewrite_kitlog(run_dir / LOGS / "resnet50_b256_amp_1.log", outside)
    said = input_section(build_report(run_dir / "logs", Method()), run_dir)
    assert ("torch/resnet50/bz256/1n1g/amp read 12 list entries from outside its data root (--allow-outside-root, "
            "in 1 run(s)): its images are not all the data root's") in said
