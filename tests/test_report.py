from __future__ import annotations

import csv
import json
import shutil

import pytest

from kit.core.layout import GroupKey, RunLog, Stray, classify, find_logs, run_log_path
from kit.results.exporters import to_csv, to_json, to_markdown, write_outputs
from kit.results.extract import Method
from kit.results.report import build_report

DLPERF = "dlperf-tf2-resnet50"
DLPERF_TABLE = [
    "| 1 | 1 | 321.8 | 1.0 |",
    "| 1 | 2 | 574.66 | 1.79 |",
    "| 1 | 4 | 1143.46 | 3.55 |",
    "| 1 | 8 | 2458.74 | 7.64 |",
    "| 2 | 16 | 4849.68 | 15.07 |",
    "| 4 | 32 | 9418.44 | 29.27 |",
]


def test_dlperf_table_reproduced_exactly(published):
    report = build_report(published / DLPERF, Method(skip=1, count=5, round=2))
    markdown = to_markdown(report)
    assert "| node_num | gpu_num | images/s | speedup |" in markdown
    rows = [
        line for line in markdown.splitlines() if line.startswith("| ") and line.count("|") == 5 and line[2].isdigit()
    ]
    assert rows == DLPERF_TABLE
    assert not report.failures and not report.strays


def test_json_csv_and_plot(published, tmp_path):
    report = build_report(published / DLPERF, Method(skip=1, count=5, round=2))
    data = json.loads(to_json(report))
    assert data["schema_version"] == 1
    (group,) = data["groups"]
    assert (group["model"], group["batch_per_device"], group["precision"]) == ("rn50", 128, "fp32")
    case = group["cases"][1]
    assert case["case"] == "1n2g" and case["median"] == 574.66 and case["speedup_rounded"] == 1.79
    assert [r["value"] for r in case["runs"]] == [575.76, 580.55, 574.66, 571.71, 563.93]
    assert case["runs"][0]["file"] == "1n2g/rn50_b128_fp32_1.log" and case["runs"][0]["lines"] == [334, 338]
    rows = list(csv.DictReader(to_csv(report).splitlines()))
    assert [r["median"] for r in rows] == ["321.8", "574.66", "1143.46", "2458.74", "4849.68", "9418.44"]
    written = write_outputs(report, tmp_path / "out")
    assert sorted(p.name for p in written) == ["report.md", "results.csv", "results.json", "scaling.png",
                                               "throughput.png"]
    assert (tmp_path / "out/scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _copy(src, dst):
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)


def test_full_layout_many_nodes_per_card_scaling_and_failures(published, tmp_path):
    """framework/model/bz/NnGg tree, 16n8g, per-card PaddleClas logs, a broken log."""
    root = tmp_path / "logs"
    paddle = published / "perf-v100/paddle"
    for case, run, src in [
        ((1, 1), 1, "PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log"),
        ((1, 8), 1, "PaddleClas_ResNet50_bs256_fp32_DP_N1C8_log"),
        ((16, 8), 1, "paddle_gpu32_fp32_bs256.txt"),
        ((16, 8), 2, "paddle_gpu32_fp32_bs256.txt"),
    ]:
        _copy(paddle / src, root / run_log_path("paddle", "resnet50", 256, *case, "fp32", run))
    broken = root / run_log_path("paddle", "resnet50", 256, 16, 8, "fp32", 3)
    broken.write_text("the host died before training started\n")
    (root / "paddle/resnet50/bz256/1n8g/notes.txt").write_text("operator notes\n")

    report = build_report(root, Method(skip=10))
    (group,) = report.groups
    assert group.key == GroupKey("paddle", "resnet50", 256, "fp32")
    by_case = {c.name: c for c in group.cases}
    assert set(by_case) == {"1n1g", "1n8g", "16n8g"}
    # per-card ips x cards in the case, without any --scale
    assert by_case["1n8g"].median == pytest.approx(3018.015256)
    assert by_case["16n8g"].runs[0].figure.method.scale == 128
    assert by_case["16n8g"].median == pytest.approx(10984.43584 / 32 * 128)
    assert by_case["16n8g"].speedup == pytest.approx(by_case["16n8g"].median / by_case["1n1g"].median)
    assert [(p.name, r) for p, r in report.failures] == [
        ("resnet50_b256_fp32_3.log", "no throughput line of any known format (" + r.split("(", 1)[1])
        for p, r in report.failures
    ]
    assert [s.path.name for s in report.strays] == ["notes.txt"]
    markdown = to_markdown(report)
    assert "## paddle · resnet50 · batch 256 · fp32" in markdown
    assert "resnet50_b256_fp32_3.log`: no throughput line" in markdown


def test_explicit_scale_overrides_auto(published, tmp_path):
    root = tmp_path
    _copy(published / "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C8_log", root / "1n8g/rn50_b256_fp32_1.log")
    report = build_report(root, Method(skip=10, scale=1.0), scale_given=True)
    assert report.groups[0].cases[0].median == pytest.approx(3018.015256 / 8)
    assert "no 1n1g case" in report.groups[0].notes[0]


def test_layout_classification(tmp_path):
    root = tmp_path
    good = root / "mxnet/resnet50/bz128/10n8g/resnet50_b128_pure_fp16_7.log"
    assert classify(good, root) == RunLog(good, GroupKey("mxnet", "resnet50", 128, "pure_fp16"), 10, 8, 7)
    assert isinstance(classify(root / "1n1g/rn50.log", root), Stray)
    assert "disagrees" in classify(root / "x/m/bz64/1n1g/m_b128_fp32_1.log", root).reason
    assert (
        run_log_path("paddle", "vgg16", 64, 2, 8, "amp", 3).as_posix() == "paddle/vgg16/bz64/2n8g/vgg16_b64_amp_3.log"
    )
    assert find_logs(tmp_path) == ([], [])


def test_each_run_has_its_own_folder_for_side_files_precision_included():
    from kit.core.layout import log_of_run_folder, run_folder, run_log_path

    fp32 = run_log_path("paddle", "resnet50", 256, 4, 8, "fp32", 3)
    amp = run_log_path("paddle", "resnet50", 256, 4, 8, "amp", 3)
    assert run_folder(fp32).as_posix() == "paddle/resnet50/bz256/4n8g/fp32/3"
    assert run_folder(fp32) != run_folder(amp), "an amp run must not overwrite the fp32 run's launcher/host logs"
    assert log_of_run_folder(run_folder(fp32)) == fp32 and log_of_run_folder(run_folder(amp)) == amp
    with pytest.raises(ValueError, match="not a run folder"):
        log_of_run_folder(run_folder(fp32).parent.parent)


def test_a_case_or_group_mixing_log_formats_or_units_is_refused_naming_the_files(published, tmp_path):
    tf2 = published / DLPERF
    paddle = published / "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log"
    for run in (1, 2):
        _copy(tf2 / f"1n1g/rn50_b128_fp32_{run}.log", tmp_path / "case/1n1g" / f"rn50_b128_fp32_{run}.log")
        _copy(tf2 / f"1n1g/rn50_b128_fp32_{run}.log", tmp_path / "group/1n1g" / f"rn50_b128_fp32_{run}.log")
        _copy(paddle, tmp_path / "group/1n8g" / f"rn50_b128_fp32_{run}.log")
    _copy(paddle, tmp_path / "case/1n1g/rn50_b128_fp32_3.log")
    report = build_report(tmp_path / "case", Method())
    assert not report.groups and len(report.failures) == 3
    reason = report.failures[0][1]
    assert "case 1n1g mixes log formats or units" in reason
    assert "paddleclas in samples/s: 1n1g/rn50_b128_fp32_3.log" in reason
    assert "tf2-keras-timehistory in images/s: 1n1g/rn50_b128_fp32_1.log, 1n1g/rn50_b128_fp32_2.log" in reason
    report = build_report(tmp_path / "group", Method())
    assert not report.groups and len(report.failures) == 4
    assert "samples/s: 1n8g/rn50_b128_fp32_1.log" in report.failures[0][1]
    assert "images/s/samples/s" not in to_markdown(report)


def test_batch_by_node_table_in_seed000s_layout(published, tmp_path):
    """Two batch sizes x two shapes of one framework/model/precision: seed 000's "batch / node" table."""
    root = tmp_path / "logs"
    n1c1 = published / "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log"
    n1c8 = published / "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C8_log"
    for batch in (128, 256):
        _copy(n1c1, root / run_log_path("paddle", "resnet50", batch, 1, 1, "fp32", 1))
        _copy(n1c8, root / run_log_path("paddle", "resnet50", batch, 1, 8, "fp32", 1))
    _copy(n1c1, root / run_log_path("paddle", "resnet50", 64, 1, 1, "amp", 1))  # one batch only: no table
    markdown = to_markdown(build_report(root, Method(skip=10, round=2)))
    table = markdown.split("## batch / node: paddle · resnet50 · fp32\n", 1)[1].split("\n## ", 1)[0]
    (group,) = [g for g in build_report(root, Method(skip=10, round=2)).groups
                if g.key == GroupKey("paddle", "resnet50", 128, "fp32")]
    one, eight = group.cases
    assert "| batch / node | 1 x 1 | 1 x 8 |" in table
    assert f"| 128 | {one.median:g} | {eight.median:g} |" in table and f"| 256 | {one.median:g} |" in table
    assert "batch / node: paddle · resnet50 · amp" not in markdown
