"""Honest precision, layout and mode: suites name what runs, logs are filed by it, run.json and the report say it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SHARED
from kitlogs import rewrite_kitlog

from kit.audit.rules.closed import _math_problems
from kit.config import suites
from kit.config.case_keys import NHWC_MODELS
from kit.config.cases import Reference, Suite
from kit.core.catalogue import contract
from kit.core.layout import classify, split_tag, variant_tag
from kit.core.yamlio import ConfigError
from kit.run import bench, records
from kit.run.command import harness_args
from kit.run.plan import PlannedRun

GPU_RUN = SHARED / "fixtures" / "gpu-runs" / "h100-one-20261126-175228"


def load(tmp_path: Path, cases: str, hardware: str = "gpu", name: str = "s.yaml") -> Suite:
    path = tmp_path / name
    path.write_text(f"schema_version: 1\nname: s\nhardware: {hardware}\ndefaults: {{repeats: 1}}\ncases:\n{cases}")
    return suites.load_suite(path)


def test_layout_defaults_to_what_publishers_run_on_gpus_and_nchw_elsewhere(tmp_path):
    entry = "  - {framework: torch, model: [resnet50, se_resnext50], precision: [fp32, tf32, amp, bf16], batch_size: 8}\n"
    gpu = {c.key: c for c in load(tmp_path, entry).cases}
    assert {k for k, c in gpu.items() if c.layout == "nhwc"} == {"torch/resnet50/bz8/1n1g/amp-nhwc",
                                                                  "torch/resnet50/bz8/1n1g/bf16-nhwc"}
    assert gpu["torch/se_resnext50/bz8/1n1g/amp"].layout == "nchw"  # built NCHW only
    assert all(c.mode == "eager" for c in gpu.values())
    cpu = load(tmp_path, entry, "cpu", "c.yaml").cases
    assert {c.tag for c in cpu} == {"fp32", "tf32", "amp", "bf16"} and {c.layout for c in cpu} == {"nchw"}


def test_tag_names_the_case_and_its_logs(tmp_path):
    (case,) = load(tmp_path, "  - {framework: paddle, model: vgg16, precision: bf16, layout: nhwc, mode: compiled, "
                             "batch_size: 4}\n").cases
    assert case.key == "paddle/vgg16/bz4/1n1g/bf16-nhwc-compiled"
    assert case.log_path(2).as_posix() == "paddle/vgg16/bz4/1n1g/vgg16_b4_bf16-nhwc-compiled_2.log"
    found = classify(Path("/r/logs") / case.log_path(2), Path("/r/logs"))
    assert (found.group.precision, split_tag(found.group.precision)["precision"], found.run) == (
        "bf16-nhwc-compiled", "bf16", 2)
    assert split_tag(found.group.precision) == {"precision": "bf16", "layout": "nhwc", "mode": "compiled"}
    assert variant_tag("fp32", layout="nchw", mode="eager") == "fp32" and split_tag("amp") == {"precision": "amp"}
    with pytest.raises(ValueError, match="unknown variant 'xla'"):
        split_tag("amp-xla")
    args = harness_args(case)
    assert args[args.index("--precision") + 1] == "bf16"
    assert args[args.index("--layout") + 1] == "nhwc" and args[args.index("--mode") + 1] == "compiled"
    (eager,) = load(tmp_path, "  - {framework: torch, model: resnet50, precision: fp32, batch_size: 4}\n",
                    name="e.yaml").cases
    assert "--layout" not in harness_args(eager) and "--mode" not in harness_args(eager)  # train.py's defaults


@pytest.mark.parametrize("entry, line_key, message", [
    ("  - {framework: torch, model: se_resnext50, layout: nhwc, batch_size: 4}\n", "layout",
     "builds se_resnext50 NCHW only"),
    ("  - {framework: torch, model: bert, layout: nchw, batch_size: 4}\n", "layout", "does not apply to bert"),
    ("  - {framework: paddle, impl: reference, model: resnet50, mode: compiled, batch_size: 4}\n", "mode",
     "the published program's own"),
    ("  - {framework: torch, model: resnet50, layout: NHWC, batch_size: 4}\n", "layout", "is not one of nchw, nhwc"),
    ("  - {framework: torch, model: bert, mode: compiled, batch_size: 4}\n", "mode", "bert runs eager only"),
    ("  - {framework: torch, model: resnet50, mode: jit, batch_size: 4}\n", "mode", "is not one of eager, compiled"),
    ("  - {framework: torch, model: resnet50, channels_last: true, batch_size: 4}\n", "channels_last",
     "renamed: use layout: nhwc"),
    ("  - {framework: paddle, impl: reference, model: resnet50, precision: bf16, batch_size: 4}\n", "impl",
     "precision 'bf16': PaddleClas runs fp32, amp"),
])
def test_bad_layout_mode_or_precision_names_file_line_and_key(tmp_path, entry, line_key, message):
    with pytest.raises(ConfigError, match=message) as err:
        load(tmp_path, entry)
    assert f"s.yaml:6: {line_key}: " in str(err.value)


def test_a_seeds_fp32_on_a100_is_recorded_as_the_tf32_it_ran(tmp_path):
    a100 = {c.key: c for c in suites.load_suite("a100").cases}
    ref = a100["paddleclas/resnet50/bz256/1n1g/fp32"].reference
    assert ref.math == "tf32" and ref.to_dict()["math"] == "tf32"
    assert a100["paddleclas/resnet50/bz256/1n1g/amp"].reference.math is None
    assert "torch/resnet50/bz256/1n8g/tf32" in a100 and "torch/resnet50/bz256/1n8g/amp-nhwc" in a100
    with pytest.raises(ConfigError, match="'fp16' is not one of fp32, tf32, amp, bf16"):
        load(tmp_path, "  - framework: torch\n    model: resnet50\n    batch_size: 4\n    references:\n"
                       "      - {value: 1, lower: null, upper: null, unit: images/s, math: fp16}\n")


def test_every_gpu_suite_harness_row_states_its_layout():
    for name in ("v100", "a100", "h100", "gpu1"):
        text = suites.suite_path(name).read_text()
        for case in suites.load_suite(name).cases:
            if case.impl == "harness" and case.model in NHWC_MODELS:
                assert case.layout in ("nchw", "nhwc"), (name, case.key)
        assert "layout: nhwc" in text and "layout: nchw" in text, name


def test_gpu1_suite_is_the_one_gpu_check():
    cases = {c.key: c for c in suites.load_suite("gpu1").cases}
    assert {k for k in cases if k.startswith("torch/resnet50/bz256/1n1g/")} == {
        f"torch/resnet50/bz256/1n1g/{t}" for t in ("fp32", "tf32", "amp", "amp-nhwc", "amp-nhwc-compiled")}
    assert {"torch/vgg16/bz128/1n1g/amp-nhwc", "torch/arcface/bz128/1n1g/fp32", "torch/bert/bz32/1n1g/amp"} <= set(cases)
    # three interleaved repeats: the fewest the gate's noise rule (bench/gpu_stages.py) decides on
    assert all(c.framework == "torch" and c.gpus_per_node == 1 and c.repeats == 3 for c in cases.values())
    proof = {c.key: c for c in suites.load_suite("gpu-proof").cases}
    assert set(proof) == {"torch/resnet50/bz256/1n1g/tf32", "torch/resnet50/bz256/1n1g/amp-nhwc",
                          "torch/vgg16/bz128/1n1g/amp-nhwc"} and all(c.repeats == 3 for c in proof.values())
    assert all(cases[k].image_size == c.image_size for k, c in proof.items())  # gpu1's settings, trimmed


def copy_gpu_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / GPU_RUN.name
    shutil.copytree(GPU_RUN, run_dir)
    return run_dir


def test_report_names_the_gpu_and_says_what_an_old_log_did_not_record(tmp_path):
    run_dir = copy_gpu_run(tmp_path)
    report = bench.compose_report(run_dir, suites.load_suite(run_dir / "suite.yaml"))
    text = report.settings
    assert "Accelerators of vm: 1x NVIDIA H100 80GB HBM3 (81559 MiB), driver 580.159.04, CUDA 13.0" in text
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| torch/")}
    assert "TF32 not recorded" in rows["torch/resnet50/bz256/1n1g/fp32"]
    assert rows["torch/resnet50/bz256/1n1g/amp"].startswith("| torch/resnet50/bz256/1n1g/amp | fp16 autocast + loss "
                                                            "scaling; TF32 not recorded")
    assert "| nchw | eager |" in rows["torch/vgg16/bz128/1n1g/amp"]  # channels_last: false in the old log


def with_math(log: Path, tag_fields: dict, stop_fields: dict | None = None) -> None:
    """Rewrite a recorded log's run_start (and run_stop) as the harness now writes them."""
    added = {"run_start": tag_fields, "run_stop": stop_fields or {}}
    rewrite_kitlog(log, lambda d: {**d, **added.get(d["event"], {})})


def test_report_and_run_json_say_what_math_layout_and_mode_ran(tmp_path):
    run_dir = copy_gpu_run(tmp_path)
    logs = run_dir / "logs" / "torch" / "resnet50" / "bz256" / "1n1g"
    fp32, amp = logs / "resnet50_b256_fp32_1.log", logs / "resnet50_b256_amp_1.log"
    with_math(fp32, {"math": {"tf32_matmul": False, "tf32_conv": False, "autocast": None, "loss_scaling": False},
                     "layout": "nchw", "mode": "eager", "cuda_version": "13.0", "cudnn_version": 91900})
    nhwc = logs / "resnet50_b256_amp-nhwc-compiled_1.log"
    amp.rename(nhwc)
    with_math(nhwc, {"math": {"tf32_matmul": True, "tf32_conv": True, "autocast": "float16", "loss_scaling": True},
                     "layout": "nhwc", "mode": "compiled", "cuda_version": "13.0", "cudnn_version": 91900},
              {"compile_seconds": 41.27})
    suite_text = (run_dir / "suite.yaml").read_text().replace("precision: [fp32, amp]", "precision: fp32")
    suite_text += ("  - {framework: torch, model: resnet50, precision: amp, layout: nhwc, mode: compiled, "
                   "batch_size: 256}\n")
    (run_dir / "suite.yaml").write_text(suite_text)
    suite = suites.load_suite(run_dir / "suite.yaml")
    text = bench.compose_report(run_dir, suite).settings
    assert "Framework builds: torch 2.11.0+cu130: CUDA 13.0, cuDNN 9.19.0." in text
    assert "| torch/resnet50/bz256/1n1g/fp32 | TF32 off |  | nchw | eager |  |" in text  # logged before loader
    assert ("| torch/resnet50/bz256/1n1g/amp-nhwc-compiled | fp16 autocast + loss scaling; TF32 on (conv, matmul) | "
            " | nhwc | compiled | 41.3 |") in text

    meta = records.open_run_meta(run_dir, suite)
    by_key = {c.key: c for c in suite.cases}
    run = PlannedRun(by_key["torch/resnet50/bz256/1n1g/amp-nhwc-compiled"], 1)
    records.record_run(run_dir, meta, run, "ok", 1.0, 2.0, "")
    entry = json.loads((run_dir / "run.json").read_text())["runs"][str(run.log_rel)]
    assert (entry["precision"], entry["layout"], entry["mode"]) == ("amp", "nhwc", "compiled")
    assert entry["ran"]["math"]["autocast"] == "float16" and entry["ran"]["compile_seconds"] == 41.27
    assert entry["ran"]["cudnn_version"] == 91900


def test_a_published_fp32_that_ran_tf32_says_so_beside_its_reference(tmp_path):
    from types import SimpleNamespace as NS

    from kit.results.sections import references_section

    ref = Reference(908.244, -0.05, 0.05, "samples/s", "seed 004, A100-FP32 table", math="tf32")
    case = NS(key="paddleclas/resnet50/bz256/1n1g/fp32", references=(ref,), precision="fp32")
    group = NS(key=NS(case_key=lambda name: case.key), unit="samples/s", cases=[NS(name="1n1g", median=900.0)])
    text = references_section(NS(groups=[group]), NS(cases=[case]))
    assert "(published as FP32; the publisher's framework ran TF32, its default on this GPU generation)" in text


def test_a_published_programs_run_names_its_images_cuda_and_cudnn(tmp_path, published):
    run_dir = tmp_path / "run"
    rel = run_dir / "logs/ngc-pytorch/resnet50/bz256/1n8g/resnet50_b256_amp_1.log"
    rel.parent.mkdir(parents=True)
    shutil.copy(published / "perf-v100/pytorch/pytorch_gpu8_amp_bs256.txt", rel)
    (run_dir / "suite.yaml").write_text(
        "schema_version: 1\nname: v100\nhardware: gpu\ndefaults: {repeats: 1, batch_size: 256, gpus_per_node: 8}\n"
        "cases:\n  - {framework: torch, impl: reference, model: resnet50, precision: amp}\n")
    text = bench.compose_report(run_dir, suites.load_suite(run_dir / "suite.yaml")).settings
    assert "Published programs' images (pins): ngc-pytorch (image pytorch/v100): CUDA 11.2, cuDNN " in text


@pytest.mark.parametrize("precision, device, math, wrong", [
    ("fp32", "gpu", {"autocast": None, "tf32_matmul": False}, ""),
    ("fp32", "gpu", {"autocast": None, "tf32_conv": True}, "math allows TF32 on an fp32 run"),
    ("fp32", "gpu", {"autocast": "float16"}, "math autocast 'float16' on a fp32 run on gpu (None)"),
    ("tf32", "gpu", {"autocast": None, "tf32_matmul": True}, ""),
    ("amp", "gpu", {"autocast": "float16"}, ""),
    ("amp", "gpu", {"autocast": None}, "math autocast None on a amp run on gpu ('float16')"),
    ("amp", "cpu", {"autocast": "float16"}, "math autocast 'float16' on a amp run on cpu (None)"),
    ("bf16", "gpu", {"autocast": None}, ""),  # not held: a CPU's autocast depends on the framework
    ("bf16", "cpu", {"autocast": "bfloat16"}, ""),
])
def test_verify_holds_a_logs_math_to_what_its_precision_means(precision, device, math, wrong):
    assert _math_problems({"precision": precision, "device": device, "math": math}) == ([wrong] if wrong else [])


def test_verifys_math_check_reads_the_contracts_table(monkeypatch):
    start = {"precision": "bf16", "device": "gpu", "math": {"autocast": None}}
    assert _math_problems(start) == []
    monkeypatch.setitem(contract.MATH, "bf16", contract.Math(tf32=True, autocast="bfloat16", loss_scaling=False))
    assert _math_problems(start) == ["math autocast None on a bf16 run on gpu ('bfloat16')"]  # now held
    assert _math_problems({"precision": "tf32", "amp_effective": True}) == ["amp_effective True on a tf32 run"]
