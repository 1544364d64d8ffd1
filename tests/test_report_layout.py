"""Report layout 2 (kit.results.report.LAYOUTS) against layout 1, on real logs: a published program's GPU telemetry
over its own timed steps with its GPU named, no scaling table for a group of one case, the side-by-side ratio as the
Paddle side over the PyTorch side, outlier notes naming their case; and verify recomputing each layout only under
the rule sets that know it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kit.audit import rules
from kit.audit.evidence import Evidence
from kit.config import programs, reference
from kit.config.cases import Reference
from kit.config.expansion import FROZEN_KEY, freeze
from kit.core.catalogue import quantity_unit
from kit.images.parity import program_stacks
from kit.results import compose
from kit.results.exporters import to_markdown
from kit.results.extract import Method
from kit.results.html import figures_markdown
from kit.results.plotting import throughput_panels
from kit.results.report import LAYOUT, build_report, ratio_pair
from kit.run.bench import write_report
from kit.run.frozen import run_suite

H200 = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128"
PROGRAM = "logs/ngc-pytorch/resnet50/bz256/1n1g"


@pytest.fixture
def h200_run(tmp_path: Path) -> Path:
    """The H200 visit's DLE run with the visit's own nvidia-smi samples (taken through the whole visit, the DLE
    runs included; they name no GPU, only its UUID) as each program run's samples file."""
    run = tmp_path / "gpu-proof-dle-20261128-053336"
    shutil.copytree(H200 / "dle", run)
    for n in (1, 2):
        shutil.copy(H200 / "telemetry" / "smi-100ms.csv", run / PROGRAM / f"resnet50_b256_amp_{n}.gpu-telemetry")
    return run


def composed(run: Path, layout: int):
    suite, _ = run_suite(run)
    return compose.compose_report(run, suite, method_for=reference.log_reduction, ran_as=programs.ran_as,
                                  program_stacks=program_stacks, layout=layout)


def program_run(report):
    group = next(g for g in report.groups if g.key.framework == "ngc-pytorch")
    return group.cases[0].runs[0]


def test_a_published_program_is_sampled_over_its_timed_steps_and_its_gpu_is_named(h200_run):
    old, new = program_run(composed(h200_run, 1)), program_run(composed(h200_run, 2))
    assert old.telemetry["window"] == "whole run" and old.telemetry["seconds"] > 100
    assert old.telemetry["util_gpu_mean"] < 20  # idle and the loader profile counted in: "launch- or input-bound"
    assert old.telemetry["hosts"]["local"]["gpus"] == ["GPU-45d3aa2e-1d0d-9dc5-8f29-be7c48cb8658"]
    tele = new.telemetry
    assert tele["window"] == "timed steps" and 3 < tele["seconds"] < 5
    assert tele["util_gpu_mean"] > 90 and tele["hosts"]["local"]["power_mean_w"] > 500
    assert tele["hosts"]["local"]["gpus"] == ["NVIDIA H200"]  # as env/vm/capture.json names that UUID
    assert tele["images"] / tele["seconds"] == pytest.approx(new.figure.value, rel=0.02)  # its clock, its figure
    md = to_markdown(composed(h200_run, 2))
    assert "| 1n1g | 1 | NVIDIA H200 | timed steps: 3.96 s" in md
    assert "GPU busy 1" not in md and "input-bound" not in md and "GPU-45d3aa2e" not in md


def test_a_group_of_one_case_gets_no_scaling_table(h200_run):
    old, new = to_markdown(composed(h200_run, 1)), to_markdown(composed(h200_run, 2))
    torch_old = old[old.index("## torch · resnet50"):]
    torch_new = new[new.index("## torch · resnet50"):]
    assert "| node_num | gpu_num | samples/s | speedup |" in torch_old and "100.0%" in torch_old
    assert "node_num" not in torch_new and "speedup" not in torch_new and "efficiency" not in torch_new
    assert "| case | runs | median | min | max | CV | peak memory |" in torch_new
    assert "| 1n1g | 2 | 5749.08 | 5740.57 | 5757.58 | 0.21% | 11260 MiB |" in torch_new
    assert "speedup" in figures_markdown(composed(h200_run, 1))  # the page's per-case table, likewise
    assert "speedup" not in figures_markdown(composed(h200_run, 2))


def test_one_name_per_quantity_in_every_table_and_panel(h200_run):
    """Layout 3: the DLE log's images/s and the harness's samples/s are one quantity, named as the model counts it;
    layout 2 wrote both names, in two plot panels for one model."""
    old, new = composed(h200_run, 2), composed(h200_run, 3)
    assert sorted(g.unit for g in old.groups) == ["images/s", "samples/s"]
    assert [g.unit for g in new.groups] == ["images/s", "images/s"]
    assert [unit for unit, _ in throughput_panels(old)] == ["images/s", "samples/s"]
    assert [unit for unit, _ in throughput_panels(new)] == ["images/s"]
    md = to_markdown(new)
    assert "samples/s" not in md.replace("samples/s, median", "")  # nowhere, not even a header
    assert "| node_num" not in md  # (one case per group: no scaling table; its header named the unit)
    assert {g["unit"] for g in new.to_dict()["groups"]} == {"images/s"}


def test_a_figure_counting_samples_is_named_in_its_models_unit():
    assert quantity_unit("resnet50", "samples/s") == quantity_unit("vgg16", "img/s") == "images/s"
    assert quantity_unit("bert", "samples/s") == "sequences/s"
    assert quantity_unit("transformer", "tokens/s") == "tokens/s"
    assert quantity_unit("transformer", "samples/s") == "samples/s"  # sentences are not its tokens
    assert quantity_unit("resnet50", "steps/s") == "steps/s" and quantity_unit("rn50", "img/s") == "img/s"
    assert quantity_unit("cyclegan", "images/s") == "samples/s"  # a pair of images is its sample
    # a reference's unit is taken as its source wrote it: seed 003's BERT "samples/s" are steps/s at its batch, no
    # sequences/s (kit/suites/v100.yaml), while an image model's samples/s are its images/s
    assert not Reference(4.0, None, None, "samples/s").measures("sequences/s")
    assert Reference(393.5, None, None, "samples/s").measures("images/s")


def test_the_side_by_side_ratio_is_the_paddle_side_over_the_pytorch_side():
    family = {"fleetx": "paddle", "ngc-mxnet": "mxnet", "paddle": "paddle", "torch": "torch",
              "ngc-pytorch": "torch"}
    rows = [(("vgg16", 128, "fp32", "1n1g"), {"fleetx": 1, "ngc-mxnet": 2}),
            (("resnet50", 256, "fp32", "1n1g"), {"paddle": 1, "torch": 2, "fleetx": 3, "ngc-pytorch": 4}),
            (("resnet50", 256, "amp", "1n1g"), {"paddle": 1, "torch": 2})]
    names = ["fleetx", "ngc-mxnet", "ngc-pytorch", "paddle", "torch"]
    assert ratio_pair(names, rows, family) == ("paddle", "torch")  # layout 1 divided fleetx by ngc-mxnet
    assert ratio_pair(names, rows[:2], family) == ("paddle", "torch")  # a tie: the harness's own two
    assert ratio_pair(["fleetx", "ngc-mxnet"], rows[:1], family) == ("fleetx", "ngc-mxnet")  # no Paddle/PyTorch
    assert ratio_pair(["a", "b", "c"], [(("m", 1, "fp32", "1n1g"), {"b": 1, "c": 2})], {}) == ("b", "c")
    assert ratio_pair(["a", "b"], [], {}) is None


def test_an_outlier_note_names_its_case_log_and_figures(published, tmp_path):
    case = tmp_path / "logs" / "tf2" / "rn50" / "bz128" / "1n1g"
    case.mkdir(parents=True)
    src = published / "dlperf-tf2-resnet50"
    for n in range(1, 5):
        shutil.copy(src / "1n1g" / f"rn50_b128_fp32_{n}.log", case / f"rn50_b128_fp32_{n}.log")
    shutil.copy(src / "1n2g" / "rn50_b128_fp32_1.log", case / "rn50_b128_fp32_5.log")  # a 2-GPU log, misfiled
    method = Method(skip=1, count=5, round=2)
    (old,) = build_report(tmp_path / "logs", method, layout=1).groups[0].notes
    (new,) = build_report(tmp_path / "logs", method, layout=2).groups[0].notes
    assert old == "1n1g: run(s) 5 are MAD outliers (|modified z| > 3.5)"
    assert new == ("tf2/rn50/bz128/1n1g/fp32: run 5 (tf2/rn50/bz128/1n1g/rn50_b128_fp32_5.log): 575.76 against the "
                   "case's median 322.25 images/s (MAD outlier: |modified z| > 3.5)")


def test_verify_recomputes_the_report_in_the_layout_results_json_declares(h200_run):
    write_report(h200_run, run_suite(h200_run)[0], plots=False)
    assert json.loads((h200_run / "results.json").read_text())["layout"] == LAYOUT == 4
    recomputed = ("results_recomputed", "report_recomputed", "derived_files_recomputed")

    def failed(version: str | None = None) -> dict[str, list[str]]:
        return {f.rule.name: [f"{v.file}:{v.line}: {v.message}" for v in f.violations]
                for f in rules.evaluate(rules.load_rules(version), Evidence(h200_run)) if f.violations}

    for version in (None, "v1", "v7"):  # a later kit's report judged under an earlier set: in its own layout
        assert not set(recomputed) & set(failed(version)), version
    results = json.loads((h200_run / "results.json").read_text())
    results["layout"] = 3  # layout 3's standing: the nearest figure, MLPerf's, decides; layout 4's, the same run's DLE
    (h200_run / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    said = failed()["report_recomputed"]
    assert any("(the published program ngc-pytorch/resnet50/bz256/1n1g/amp, this run) | 1 | 0.99" in line
               and "MLPerf Training v4.0 (NVIDIA) H200" in line for line in said), said
    results["layout"] = 1  # declared as layout 1: recomputed as layout 1, which the written files are not
    (h200_run / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    said = failed()
    assert set(recomputed) <= set(said)
    assert any("recomputed '| case | runs | min | max | CV | efficiency" in line or "node_num" in line
               for line in said["report_recomputed"])
    results["layout"] = 9
    (h200_run / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    evidence = Evidence(h200_run)
    assert evidence.layout == LAYOUT
    assert ("results.json", "layout: 9 is no report layout this kit knows (1, 2, 3, 4)") in evidence.problems


def test_the_recorded_expansion_is_held_to_suite_yaml(h200_run):
    meta = json.loads((h200_run / "run.json").read_text())
    suite, _ = run_suite(h200_run)
    meta[FROZEN_KEY] = json.loads(json.dumps(freeze(suite)))
    (h200_run / "run.json").write_text(json.dumps(meta, indent=2))
    write_report(h200_run, suite, plots=False)

    def expansion_findings() -> list[str]:
        (finding,) = [f for f in rules.evaluate(rules.load_rules(), Evidence(h200_run))
                      if f.rule.name == "suite_expansion_recorded"]
        return [v.message for v in finding.violations]

    assert expansion_findings() == []
    meta[FROZEN_KEY]["cases"][0]["repeats"] = 5
    (h200_run / "run.json").write_text(json.dumps(meta, indent=2))
    assert expansion_findings() == ["expanded_suite.cases[0].repeats: recorded '5', suite.yaml expands to '2'"]
