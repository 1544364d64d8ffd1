"""The report's plots from real logs: one panel per unit in scaling.png and frameworks.png (images/s never on the
tokens/s axis), and throughput.png for every run with a figure, a one-case run included, embedded in report.html."""

from __future__ import annotations

import base64
import html
import shutil
from pathlib import Path

import pytest
from PIL import Image

from kit.cli import main
from kit.results import plotting
from kit.results.exporters import write_outputs
from kit.results.extract import Method
from kit.results.html import HTML_NAME, PLOT_ALT
from kit.results.report import build_report

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# (published log below shared/fixtures/published-logs, where it goes in a DLPerf tree): real V100 logs of ResNet50
# (images/s: DLPerf's PyTorch and TensorFlow), and of Transformer (PyTorch's tokens/s, PaddleNLP's words/s)
MIXED = (
    ("perf-v100/pytorch/pytorch_gpu1_amp_bs256.txt", "pytorch/resnet50/bz256/1n1g/resnet50_b256_amp_1.log"),
    ("perf-v100/pytorch/pytorch_gpu8_amp_bs256.txt", "pytorch/resnet50/bz256/1n8g/resnet50_b256_amp_1.log"),
    ("perf-v100/tensorflow/tf_gpu1_amp_bs256.txt", "tensorflow/resnet50/bz256/1n1g/resnet50_b256_amp_1.log"),
    ("perf-v100/tensorflow/tf_gpu8_amp_bs256.txt", "tensorflow/resnet50/bz256/1n8g/resnet50_b256_amp_1.log"),
    ("perf-models/Transformer/OtherReports/PyTorch/logs/V100_LOG/transformer_pytorch_bs5120_fp32_gpu1",
     "pytorch/transformer/bz5120/1n1g/transformer_b5120_fp32_1.log"),
    ("perf-models/Transformer/OtherReports/PyTorch/logs/V100_LOG/transformer_pytorch_bs5120_fp32_gpu8",
     "pytorch/transformer/bz5120/1n8g/transformer_b5120_fp32_1.log"),
    ("perf-models/Transformer/logs/V100_LOG/PaddleNLP_transformer_big_bs5120_fp32_DP_N1C1_log",
     "paddle/transformer/bz5120/1n1g/transformer_b5120_fp32_1.log"),
    ("perf-models/Transformer/logs/V100_LOG/PaddleNLP_transformer_big_bs5120_fp32_DP_N1C8_log",
     "paddle/transformer/bz5120/1n8g/transformer_b5120_fp32_1.log"),
)


def png_size(path: Path) -> tuple[int, int]:
    """The PNG's pixel size, after Pillow has checked the whole file is a PNG it can read."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        image.verify()
    with Image.open(path) as image:
        image.load()  # every pixel decodes
        return image.size


def pixels(inches: tuple[float, float], dpi: int) -> tuple[int, int]:
    return round(inches[0] * dpi), round(inches[1] * dpi)


@pytest.fixture(scope="module")
def mixed(published, tmp_path_factory):
    """A DLPerf tree of real logs in four units, its report and the files write_outputs wrote."""
    root = tmp_path_factory.mktemp("mixed")
    for src, dst in MIXED:
        (root / "tree" / dst).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(published / src, root / "tree" / dst)
    report = build_report(root / "tree", Method())
    assert not report.failures
    return report, {p.name: p for p in write_outputs(report, root / "out")}


def test_scaling_draws_one_panel_per_unit(mixed, tmp_path):
    report, written = mixed
    panels = plotting.scaling_panels(report)
    assert [(unit, [g.key.label() for g in groups]) for unit, groups in panels] == [
        ("words/s", ["paddle · transformer · batch 5120 · fp32"]),
        ("images/s", ["pytorch · resnet50 · batch 256 · amp", "tensorflow · resnet50 · batch 256 · amp"]),
        ("tokens/s", ["pytorch · transformer · batch 5120 · fp32"]),
    ]
    assert plotting.write_plot(report, tmp_path / "scaling.png") == 3, "the figure's axes: one per unit"
    width, height = plotting.SCALING_PANEL_IN
    assert png_size(written["scaling.png"]) == pixels((width, 3 * height), plotting.SCALING_DPI) == (900, 1368)


def test_frameworks_side_by_side_one_panel_per_unit(mixed, tmp_path):
    report, written = mixed
    panels = plotting.framework_panels(report)
    assert [(unit, frameworks, [(key, sorted(row)) for key, row in rows]) for unit, frameworks, rows in panels] == [
        ("images/s", ["pytorch", "tensorflow"], [(("resnet50", 256, "amp", "1n1g"), ["pytorch", "tensorflow"]),
                                                 (("resnet50", 256, "amp", "1n8g"), ["pytorch", "tensorflow"])]),
        # a row stays whole: Paddle's words/s beside PyTorch's tokens/s, on an axis of their own
        ("tokens/s | words/s", ["paddle", "pytorch"], [(("transformer", 5120, "fp32", "1n1g"), ["paddle", "pytorch"]),
                                                       (("transformer", 5120, "fp32", "1n8g"), ["paddle", "pytorch"])]),
    ]
    resnet = panels[0][2][1][1]
    assert round(resnet["tensorflow"].median, 2) == 9408.83 and round(resnet["pytorch"].median, 2) == 5793.51
    assert plotting.write_framework_plot(report, tmp_path / "frameworks.png") == 2
    assert png_size(written["frameworks.png"]) == pixels(plotting.frameworks_size(report), plotting.FRAMEWORKS_DPI)
    assert plotting.frameworks_size(report) == (6.0, 2 * plotting.FRAMEWORKS_PANEL_H_IN)


def test_throughput_shows_every_case_one_panel_per_unit(mixed, tmp_path):
    report, written = mixed
    panels = plotting.throughput_panels(report)
    assert [(unit, [label for label, _, _ in cases]) for unit, cases in panels] == [
        ("words/s", ["paddle · transformer · batch 5120 · fp32 · 1n1g", "paddle · transformer · batch 5120 · fp32 · 1n8g"]),
        ("images/s", ["pytorch · resnet50 · batch 256 · amp · 1n1g", "pytorch · resnet50 · batch 256 · amp · 1n8g",
                      "tensorflow · resnet50 · batch 256 · amp · 1n1g", "tensorflow · resnet50 · batch 256 · amp · 1n8g"]),
        ("tokens/s", ["pytorch · transformer · batch 5120 · fp32 · 1n1g",
                      "pytorch · transformer · batch 5120 · fp32 · 1n8g"]),
    ]
    assert sum(len(cases) for _, cases in panels) == sum(len(g.cases) for g in report.groups) == 8
    assert plotting.write_throughput_plot(report, tmp_path / "throughput.png") == 3
    assert png_size(written["throughput.png"]) == pixels(plotting.throughput_size(report), plotting.THROUGHPUT_DPI)
    assert png_size(written["throughput.png"])[0] == 1200
    assert list(written) == ["report.md", "results.json", "results.csv", "throughput.png", "scaling.png",
                             "frameworks.png"]


def test_a_one_case_run_gets_its_throughput_plot_in_the_page(tmp_path, capsys):
    """One CPU run of one framework on one device (the harness's real Transformer log): no scaling, no frameworks
    side by side, but throughput.png, and report.html shows it."""
    log = tmp_path / "tree" / "torch" / "transformer" / "bz256" / "1n1g" / "transformer_b256_fp32_1.log"
    log.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "harness-logs" / "transformer_torch_cpu.log", log)
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "tree"), "--out", str(out)]) == 0
    assert "| torch/transformer/bz256/1n1g/fp32 | 1 | 1 |" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.md", "results.csv", "results.json",
                                                     "throughput.png"]
    report = build_report(tmp_path / "tree", Method())
    ((unit, ((label, framework, case),)),) = plotting.throughput_panels(report)
    assert (unit, label, framework, len(case.runs)) == ("tokens/s", "torch · transformer · batch 256 · fp32 · 1n1g",
                                                        "torch", 1)
    assert plotting.scaling_panels(report) == [] and plotting.framework_panels(report) == []
    assert png_size(out / "throughput.png") == pixels(plotting.throughput_size(report), plotting.THROUGHPUT_DPI)
    data = base64.b64encode((out / "throughput.png").read_bytes()).decode("ascii")
    alt = html.escape(f"throughput.png: {PLOT_ALT['throughput.png']}")
    assert f'<img src="data:image/png;base64,{data}" alt="{alt}">' in (out / HTML_NAME).read_text()


def test_no_figure_no_plot(tmp_path):
    """A tree whose only log gives no figure: no plot is written (and none is claimed)."""
    case = tmp_path / "tree" / "1n1g"
    case.mkdir(parents=True)
    (case / "rn50_b128_fp32_1.log").write_text("no figure here\n")
    report = build_report(tmp_path / "tree", Method())
    assert report.groups == [] and len(report.failures) == 1
    assert plotting.write_throughput_plot(report, tmp_path / "throughput.png") == 0
    assert sorted(p.name for p in write_outputs(report, tmp_path / "out")) == ["report.md", "results.csv",
                                                                               "results.json"]
    assert not (tmp_path / "throughput.png").exists()
