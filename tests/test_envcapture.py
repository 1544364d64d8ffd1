"""kit.hosts.capture: parsers of recorded real nvidia-smi / /proc outputs; kit.hosts.consistency: the host check."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kit.core.inputs import InputError
from kit.hosts.capture import (
    CpuInfo,
    EnvCaptureError,
    GpuProcess,
    HostCapture,
    SmiReport,
    Topology,
    capture_from_dir,
    capture_from_probes,
    parse_cpuinfo,
    parse_meminfo,
    parse_os_release,
    parse_query_text,
    parse_query_xml,
    parse_topo,
)
from kit.hosts.capture.model import of_vintage
from kit.hosts.consistency import consistency

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KIT_SHARED") or REPO.parent / "shared")  # as in conftest.py
SHARED_SMI = SHARED / "fixtures" / "nvidia-smi"
LOCAL_SMI = REPO / "tests" / "fixtures" / "nvidia-smi"


def shared_fixture(name: str) -> str:
    path = SHARED_SMI / name
    assert path.is_file(), f"fixture missing: {path} (put shared/ beside the repo or set KIT_SHARED)"
    return path.read_text()


def fixture(name: str) -> str:
    return (LOCAL_SMI / name).read_text()


V100 = "topo-m_8xV100-SXM2_mlx5.txt"  # space-aligned, as published in the FleetX report
# one H100 VM, driver 580.159.04 (recorded 2026-11-26): topo -m's header comes wrapped in ESC[4m ... ESC[0m
H100_TOPO = "topo-m_1xH100-80GB-HBM3_driver580.txt"
H100_XML = "q-x_1xH100-80GB-HBM3_driver580.xml"
H100_TEXT = "q_1xH100-80GB-HBM3_driver580.txt"
H100_RUN = SHARED / "fixtures" / "gpu-runs" / "h100-one-20261126-175228"  # a real run dir of that machine


def tabbed(text: str) -> str:
    """The space-aligned paste turned back into nvidia-smi's real layout: runs of spaces -> one tab."""
    lines = [re.sub(r" {2,}", "\t", line.strip()) for line in text.split("\n")]
    lines[0] = "\t" + lines[0]  # the real header starts with a tab (the empty corner cell)
    return "\n".join(lines)


# --------------------------------------------------------------------------- topo -m


def test_v100_published_topology():
    topo = parse_topo(shared_fixture(V100), "v100.txt")
    assert topo.gpus == [f"GPU{i}" for i in range(8)]
    assert topo.nics == ["mlx5_0"]
    assert topo.link("GPU0", "GPU1") == "NV2"
    assert topo.link("GPU0", "GPU3") == "NV1"
    assert topo.link("GPU0", "GPU5") == "NODE"
    assert topo.link("GPU7", "mlx5_0") == topo.link("mlx5_0", "GPU7") == "NODE"
    assert topo.link("GPU2", "GPU2") == "X"
    assert all(topo.link(a, b) == topo.link(b, a) for a in topo.devices for b in topo.devices)
    assert topo.cpu_affinity == {g: "0-23" for g in topo.gpus}
    assert topo.numa_affinity == {g: None for g in topo.gpus}  # this output has no NUMA column
    pairs = topo.nvlink_pairs()
    assert len(pairs) == 16 and ("GPU0", "GPU1", 2) in pairs and ("GPU0", "GPU3", 1) in pairs
    assert sum(n for _, _, n in pairs) == 24  # hybrid cube-mesh: 6 NVLinks per V100
    cls = topo.topology_class()
    assert re.fullmatch(r"8xGPU NV2\+NV1\+NODE; 1xNIC mlx5_0 \[[0-9a-f]{8}\]", cls), cls
    with pytest.raises(KeyError, match="GPU8"):
        topo.link("GPU0", "GPU8")


def test_tab_separated_form_of_the_same_output_parses_equal():
    spaced = shared_fixture(V100)
    tabs = tabbed(spaced)
    assert "\t" in tabs and "  " not in tabs.split("Legend")[0]
    a, b = parse_topo(spaced, "spaces"), parse_topo(tabs, "tabs")
    assert a == b
    assert a.topology_class() == b.topology_class()


def test_real_tab_separated_outputs():
    della = parse_topo(fixture("topo-m_2xA100_2xmlx5_della.txt"))
    assert della.gpus == ["GPU0", "GPU1"] and della.nics == ["mlx5_0", "mlx5_1"]
    assert della.link("GPU0", "GPU1") == "SYS" and della.link("GPU1", "mlx5_1") == "NODE"
    assert della.cpu_affinity == {"GPU0": "0-63", "GPU1": "64-127"}
    assert della.numa_affinity == {"GPU0": "0", "GPU1": "1"}
    assert della.nvlink_pairs() == []
    assert della.topology_class().startswith("2xGPU SYS; 2xNIC mlx5_0,mlx5_1 [")

    traverse = parse_topo(fixture("topo-m_4xV100_NV3_4xmlx5_traverse.txt"))
    assert traverse.nvlink_pairs() == [("GPU0", "GPU1", 3), ("GPU2", "GPU3", 3)]
    assert traverse.link("mlx5_0", "mlx5_1") == "PIX"
    assert traverse.numa_affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "8", "GPU3": "8"}

    # driver 460 pads NUMA affinity with an extra tab: '0-31\t\tN/A'
    p3 = parse_topo(fixture("topo-m_4xV100-SXM2_aws-p3.8xlarge.txt"))
    assert p3.nics == [] and len(p3.nvlink_pairs()) == 6
    assert p3.cpu_affinity == {g: "0-31" for g in p3.gpus}
    assert p3.numa_affinity == {g: None for g in p3.gpus}
    assert p3.topology_class().startswith("4xGPU NV2+NV1 [")


def test_newer_layout_with_nic_legend_and_gpu_numa_id():
    real = parse_topo(fixture("topo-m_2xA100_2xmlx5_della.txt"))
    newer = parse_topo(fixture("derived-topo-m_2xA100_2xmlx5_della_nic-legend_gpu-numa-id.txt"))
    assert newer.nics == ["mlx5_0", "mlx5_1"]  # NIC0/NIC1 named by the NIC Legend
    assert newer.link("GPU1", "mlx5_1") == "NODE"
    assert newer.gpu_numa_id == {"GPU0": None, "GPU1": None}
    assert newer == real and newer.topology_class() == real.topology_class()


def test_empty_cpu_affinity_keeps_columns_in_place():
    # nvidia-smi prints '\t\t0\t\tN/A' where it cannot tell the CPU affinity
    text = fixture("derived-topo-m_2xA100_2xmlx5_della_nic-legend_gpu-numa-id.txt").replace("0-63\t0", "\t0")
    topo = parse_topo(text)
    assert topo.cpu_affinity == {"GPU0": None, "GPU1": "64-127"}
    assert topo.numa_affinity == {"GPU0": "0", "GPU1": "1"}


def test_class_tells_topologies_apart():
    classes = {
        parse_topo(shared_fixture(V100)).topology_class(),
        parse_topo(fixture("topo-m_2xA100_2xmlx5_della.txt")).topology_class(),
        parse_topo(fixture("topo-m_4xV100_NV3_4xmlx5_traverse.txt")).topology_class(),
        parse_topo(fixture("topo-m_4xV100-SXM2_aws-p3.8xlarge.txt")).topology_class(),
    }
    assert len(classes) == 4
    topo = parse_topo(shared_fixture(V100))
    links = dict(topo.links)
    links[("GPU0", "GPU3")] = links[("GPU3", "GPU0")] = "NV2"  # one NVLink more: same kinds, other matrix
    changed = dataclasses.replace(topo, links=links)
    assert changed.topology_class().split("[")[0] == topo.topology_class().split("[")[0]
    assert changed.topology_class() != topo.topology_class()
    assert Topology.from_dict(json.loads(json.dumps(topo.to_dict()))) == topo


def _line_of(text: str, prefix: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), 1) if line.startswith(prefix))


def test_ragged_row_names_source_and_line():
    text = tabbed(shared_fixture(V100))
    line = _line_of(text, "GPU3")
    bad = text.replace(
        "GPU3\tNV1\tNV1\tNV2\tX\tNODE\tNODE\tNODE\tNV2\tNODE\t0-23", "GPU3\tNV1\tNV1\tNV2\tX\tNODE\tNODE"
    )
    assert bad != text
    with pytest.raises(EnvCaptureError, match=rf"^v100-tabs:{line}: ragged row GPU3") as exc:
        parse_topo(bad, "v100-tabs")
    assert isinstance(exc.value, InputError) and exc.value.line == line
    # two cells glued together (a paste that lost a tab, seen in public outputs) is refused too
    glued = fixture("topo-m_2xA100_2xmlx5_della.txt").replace("GPU1\tSYS\t X \tSYS\tNODE", "GPU1\tSYS\t X \tSYSNODE")
    with pytest.raises(EnvCaptureError, match=r"^della:3: unknown link 'SYSNODE' in row GPU1"):
        parse_topo(glued, "della")
    cut = fixture("topo-m_2xA100_2xmlx5_della.txt").replace("mlx5_1\tSYS\tNODE\tSYS\t X \t\t", "mlx5_1\tSYS\tNODE")
    with pytest.raises(EnvCaptureError, match=r"^della:5: ragged row mlx5_1: 2 cells for 4 devices"):
        parse_topo(cut, "della")


def test_unknown_token_names_source_and_line():
    text = shared_fixture(V100)
    line = _line_of(text, "GPU2")
    lines = text.split("\n")
    lines[line - 1] = lines[line - 1].replace("NV1", "QPI", 1)
    with pytest.raises(EnvCaptureError, match=rf"^v100.txt:{line}: unknown link 'QPI' in row GPU2, column GPU1"):
        parse_topo("\n".join(lines), "v100.txt")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty topo output"),
        ("No devices were found\n", "not a topo -m matrix"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV1\t0-7\n", "no matrix row for GPU1"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\tNV1\tNV1\t0-7\nGPU1\tNV1\t X \t0-7\n", "'NV1' off the diagonal"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV1\t0-7\nGPU2\tNV1\t X \t0-7\n", "row 'GPU2' is not a device"),
        ("\tGPU0\tCPU Affinity\nGPU0\t X \t0-7\t1\n", "2 affinity values for 1 columns"),
    ],
)
def test_topo_errors(text, message):
    with pytest.raises(EnvCaptureError, match=re.escape(message)):
        parse_topo(text, "t")


def test_h100_driver_580_header_in_escapes():
    text = shared_fixture(H100_TOPO)
    assert text.startswith("\t\x1b[4mGPU0\tCPU Affinity") and text.count("\x1b") == 2  # as the driver printed it
    topo = parse_topo(text, "h100")
    assert topo.gpus == ["GPU0"] and topo.nics == [] and topo.links == {} and topo.nvlink_pairs() == []
    assert topo.link("GPU0", "GPU0") == "X"
    assert topo.cpu_affinity == {"GPU0": "0-15"} and topo.numa_affinity == {"GPU0": "0"}
    assert topo.gpu_numa_id == {"GPU0": None}  # printed as N/A
    assert re.fullmatch(r"1xGPU \[[0-9a-f]{8}\]", topo.topology_class())
    # the kit's own capture on that machine (escapes stripped there by a wrapper) says the same
    stored = json.loads((H100_RUN / "env" / "vm" / "capture.json").read_text())
    assert topo.to_dict() == stored["topology"]


def _every_line(text: str, before: str, after: str) -> str:
    return "\n".join(before + line + after if line else line for line in text.split("\n"))


H100_ROW = "GPU0\t X \t0-15\t0\t\tN/A\n"
_AFFINITIES = ({"GPU0": "0-15"}, {"GPU0": "0"}, {"GPU0": None})  # cpu, numa, gpu numa id of the recording
# name -> (what a driver/terminal may print instead, derived from the recording; the affinities it gives)
H100_TOPO_VARIANTS = {
    "escapes on every line": (lambda t: _every_line(t, "\x1b[1m", "\x1b[0m"), _AFFINITIES),
    "escapes inside cells": (lambda t: t.replace(H100_ROW, "\x1b]0;gpu\x07\x1b[?25lGPU0\t\x1b[7m X \x1b[27m\t"
                                                 "\x1b[38;5;2m0-15\x1b[m\t0\t\t\x1b(BN/A\n"), _AFFINITIES),
    "CRLF": (lambda t: t.replace("\n", "\r\n"), _AFFINITIES),
    "no legend": (lambda t: t[: t.index("\nLegend:")], _AFFINITIES),
    "no legend, no newline": (lambda t: t[: t.index("\nLegend:")].rstrip("\n"), _AFFINITIES),
    "extra trailing column": (lambda t: t.replace("GPU NUMA ID", "GPU NUMA ID\tC2C Mode").replace(
        H100_ROW, H100_ROW.replace("N/A\n", "N/A\tDisabled\n")), _AFFINITIES),
    "extra trailing columns, no value": (lambda t: t.replace("GPU NUMA ID", "GPU NUMA ID\tC2C Mode\tX"), _AFFINITIES),
    "NUMA affinity N/A (a VM that hides it)": (lambda t: t.replace(H100_ROW, "GPU0\t X \t0-15\t\tN/A\t\tN/A\n"),
                                               ({"GPU0": "0-15"}, {"GPU0": None}, {"GPU0": None})),
    "GPU NUMA ID given": (lambda t: t.replace(H100_ROW, "GPU0\t X \t0-15\t0\t\t1\n"),
                          ({"GPU0": "0-15"}, {"GPU0": "0"}, {"GPU0": "1"})),
    "all at once": (lambda t: _every_line(t[: t.index("\nLegend:")].replace("GPU NUMA ID", "GPU NUMA ID\tNew"),
                                          "\x1b[2m", "\x1b[0m").replace("\n", "\r\n"), _AFFINITIES),
}


@pytest.mark.parametrize("variant", list(H100_TOPO_VARIANTS))
def test_h100_topology_variants(variant):
    derive, (cpu, numa, gpu_numa) = H100_TOPO_VARIANTS[variant]
    text = derive(shared_fixture(H100_TOPO))
    assert text != shared_fixture(H100_TOPO)
    topo = parse_topo(text, variant)
    assert topo.gpus == ["GPU0"] and topo.nics == [] and topo.links == {}
    assert (topo.cpu_affinity, topo.numa_affinity, topo.gpu_numa_id) == (cpu, numa, gpu_numa)


def test_escapes_and_crlf_in_a_big_matrix_keep_links_and_lines():
    della = fixture("derived-topo-m_2xA100_2xmlx5_della_nic-legend_gpu-numa-id.txt")
    plain = parse_topo(della)
    coloured = _every_line(della, "\x1b[4m", "\x1b[0m")
    coloured = coloured.replace("\tSYS\t", "\t\x1b[31mSYS\x1b[0m\t").replace("\n", "\r\n")
    assert parse_topo(coloured) == plain
    # and what is still not a topo -m matrix is refused, naming the probe and the line (escapes left out)
    v100 = _every_line(tabbed(shared_fixture(V100)), "\x1b[1m", "\x1b[0m").replace("\n", "\r\n")
    source = "h1: nvidia-smi topo -m"
    ragged = v100.replace("GPU3\tNV1\tNV1\tNV2\tX\tNODE\tNODE\tNODE\tNV2\tNODE\t0-23", "GPU3\tNV1\tNV1\tNV2\tX\tNODE")
    with pytest.raises(EnvCaptureError, match=rf"^h1: nvidia-smi topo -m:{_line_of(v100, chr(27) + '[1mGPU3')}: "
                                              r"ragged row GPU3: 5 cells for 9 devices"):
        parse_topo(ragged, source)
    qpi = v100.replace("GPU2\tNV2\tNV1", "GPU2\t\x1b[32mQPI\x1b[0m\tNV1")
    with pytest.raises(EnvCaptureError, match=r"^h1: nvidia-smi topo -m:4: unknown link 'QPI' in row GPU2, col"):
        parse_topo(qpi, source)
    with pytest.raises(EnvCaptureError, match=r"^h1: nvidia-smi topo -m:1: not a topo -m matrix: header starts "
                                              r"'No devices were found'"):
        parse_topo("\x1b[1mNo devices were found\x1b[0m\r\n", source)
    h100 = shared_fixture(H100_TOPO)
    with pytest.raises(EnvCaptureError, match=r"^h1: nvidia-smi topo -m:2: 5 affinity values for 3 columns"):
        parse_topo(h100.replace(H100_ROW, "GPU0\t X \t0-15\t0\t7\t8\t9\n"), source)
    with pytest.raises(EnvCaptureError, match=r"^h1: nvidia-smi topo -m:2: 2 affinity values for 3 columns"):
        parse_topo(h100.replace(H100_ROW, "GPU0\t X \t0-15\t0\n"), source)


# --------------------------------------------------------------------------- nvidia-smi -q -x


def test_tesla_t4_busy():
    report = parse_query_xml(fixture("tesla-t4.xml"), "tesla-t4.xml")
    assert (report.driver_version, report.cuda_version, report.attached_gpus) == ("515.105.01", "11.7", 1)
    (gpu,) = report.gpus
    assert gpu.name == "GPU0" and gpu.product_name == "Tesla T4"
    assert gpu.uuid == "GPU-d37e67a5-91dd-3774-a5cb-99096249601a" and gpu.pci_bus_id == "00000000:00:1E.0"
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (15360, 1032)
    assert (gpu.graphics_clock_mhz, gpu.sm_clock_mhz, gpu.mem_clock_mhz) == (585, 585, 5000)
    assert (gpu.max_graphics_clock_mhz, gpu.max_sm_clock_mhz, gpu.max_mem_clock_mhz) == (1590, 1590, 5001)
    assert gpu.ecc_mode == "Enabled" and gpu.persistence_mode == "Disabled" and gpu.mig_mode is None
    assert (gpu.power_limit_w, gpu.default_power_limit_w, gpu.max_power_limit_w) == (70.0, 70.0, 70.0)
    assert gpu.utilization_gpu_pct == 0
    assert gpu.processes == [
        GpuProcess(675, "/usr/lib/xorg/Xorg", "G", 22),
        GpuProcess(5762, "python", "C", 1005),
    ]
    assert report.model_summary() == "Tesla T4 x1"
    # its PCIe link as recorded: Gen3 in use, 8 of its 16 lanes (the slot's)
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (3, 3, 8, 16)


def test_a100_newer_schema():
    report = parse_query_xml(fixture("a100-sxm4-v12.xml"), "a100.xml")
    assert (report.driver_version, report.cuda_version) == ("535.54.03", "12.2")
    assert report.attached_gpus == 4 and len(report.gpus) == 1  # recorded with -i: one of four
    (gpu,) = report.gpus
    assert gpu.product_name == "NVIDIA A100-SXM4-80GB" and gpu.memory_total_mib == 81920
    assert gpu.power_limit_w == 500.0 and gpu.default_power_limit_w == 500.0 and gpu.max_power_limit_w == 500.0
    assert (gpu.max_graphics_clock_mhz, gpu.max_mem_clock_mhz) == (1410, 1593)
    assert gpu.mig_mode == "Enabled" and gpu.ecc_mode == "Enabled"
    assert gpu.utilization_gpu_pct is None  # 'N/A' under MIG
    assert gpu.processes == []


def test_missing_fields_are_none():
    root = ET.fromstring(fixture("tesla-t4.xml"))
    gpu = root.find("gpu")
    for tag in ("fb_memory_usage", "power_readings", "clocks", "ecc_mode", "processes", "pci"):
        gpu.remove(gpu.find(tag))
    root.remove(root.find("cuda_version"))
    report = parse_query_xml(ET.tostring(root, encoding="unicode"), "trimmed")
    (info,) = report.gpus
    assert report.cuda_version is None and report.driver_version == "515.105.01"
    assert info.memory_total_mib is None and info.power_limit_w is None and info.sm_clock_mhz is None
    assert info.ecc_mode is None and info.processes == []
    assert info.pci_bus_id == "00000000:00:1E.0"  # from the <gpu id=...> attribute
    assert info.max_sm_clock_mhz == 1590


def test_xml_errors():
    text = fixture("tesla-t4.xml")
    with pytest.raises(EnvCaptureError, match=r"^cut\.xml:\d+: malformed XML") as exc:
        parse_query_xml(text[: len(text) // 2], "cut.xml")
    assert exc.value.line and exc.value.line > 100
    with pytest.raises(EnvCaptureError, match="entities or an internal DTD subset"):
        parse_query_xml('<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>', "evil")
    with pytest.raises(EnvCaptureError, match="not <nvidia_smi_log>"):
        parse_query_xml("<other/>", "o")


def _h100_expected(report: SmiReport) -> None:
    """What the recorded H100 VM's -q -x and -q both say."""
    assert (report.driver_version, report.cuda_version, report.attached_gpus) == ("580.159.04", "13.0", 1)
    (gpu,) = report.gpus
    assert gpu.product_name == "NVIDIA H100 80GB HBM3" and report.model_summary() == "NVIDIA H100 80GB HBM3 x1"
    assert gpu.uuid == "GPU-de96fac7-8f78-ce3a-a5f5-f948c3743f82" and gpu.pci_bus_id == "00000000:00:06.0"
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (81559, 0)
    assert gpu.mig_mode == "Disabled" and gpu.ecc_mode == "Enabled" and gpu.persistence_mode == "Enabled"
    assert (gpu.power_limit_w, gpu.default_power_limit_w, gpu.max_power_limit_w) == (700.0, 700.0, 700.0)
    assert (gpu.graphics_clock_mhz, gpu.sm_clock_mhz, gpu.mem_clock_mhz) == (345, 345, 2619)
    assert (gpu.max_graphics_clock_mhz, gpu.max_sm_clock_mhz, gpu.max_mem_clock_mhz) == (1980, 1980, 2619)
    assert gpu.utilization_gpu_pct == 0 and gpu.processes == []


def test_h100_driver_580_query_xml():
    report = parse_query_xml(shared_fixture(H100_XML), "h100.xml")
    _h100_expected(report)
    stored = json.loads((H100_RUN / "env" / "vm" / "capture.json").read_text())
    # what the kit wrote on that machine, then: the application clocks are captured since
    assert of_vintage({"smi": report.to_dict()}, stored)["smi"] == stored["smi"]
    assert (report.gpus[0].app_graphics_clock_mhz, report.gpus[0].app_mem_clock_mhz) == (1980, 2619)


def _in_tag(xml: str, tag: str, value: str) -> str:
    out, n = re.subn(rf"<{tag}>[^<]*</{tag}>", f"<{tag}>{value}</{tag}>", xml, count=1)
    assert n == 1, tag
    return out


H100_XML_VARIANTS = {
    "escapes on every line": lambda x: _every_line(x, "\x1b[1m", "\x1b[0m"),
    "escapes inside values": lambda x: _in_tag(x, "product_name", "\x1b[1mNVIDIA H100 80GB HBM3\x1b[0m"),
    "CRLF": lambda x: x.replace("\n", "\r\n"),
}


@pytest.mark.parametrize("variant", list(H100_XML_VARIANTS))
def test_h100_query_xml_variants(variant):
    report = parse_query_xml(H100_XML_VARIANTS[variant](shared_fixture(H100_XML)), variant)
    _h100_expected(report)


def test_h100_query_xml_with_mig_enabled():
    xml = _in_tag(_in_tag(shared_fixture(H100_XML), "current_mig", "Enabled"), "gpu_util", "N/A")
    (gpu,) = parse_query_xml(xml, "mig").gpus
    assert gpu.mig_mode == "Enabled" and gpu.utilization_gpu_pct is None
    assert gpu.memory_total_mib == 81559 and gpu.power_limit_w == 700.0


# --------------------------------------------------------------------------- nvidia-smi -q (text)


def test_h100_query_text_says_what_the_xml_says():
    text = parse_query_text(shared_fixture(H100_TEXT), "h100.txt")
    _h100_expected(text)
    assert text == parse_query_xml(shared_fixture(H100_XML))  # recorded the same second on the same machine
    assert text.source == "h100.txt"


# derived, not recorded: the T4's two processes (tesla-t4.xml) in -q's layout, Type/Name/memory under each Process ID
BUSY = """    Processes
        GPU instance ID                                : N/A
        Compute instance ID                            : N/A
        Process ID                                     : 675
            Type                                       : G
            Name                                       : /usr/lib/xorg/Xorg
            Used GPU Memory                            : 22 MiB
        GPU instance ID                                : N/A
        Compute instance ID                            : N/A
        Process ID                                     : 5762
            Type                                       : C
            Name                                       : python
            Used GPU Memory                            : 1005 MiB
"""
IDLE = "    Processes                                          : None\n"


def test_h100_query_text_variants():
    real = shared_fixture(H100_TEXT)
    for variant in (_every_line(real, "\x1b[1m", "\x1b[0m"), real.replace("\n", "\r\n"),
                    real.replace("NVIDIA H100 80GB HBM3", "\x1b[4mNVIDIA H100 80GB HBM3\x1b[24m")):
        _h100_expected(parse_query_text(variant, "variant"))
    mig = real.replace("    MIG Mode\n        Current                                        : Disabled",
                       "    MIG Mode\n        Current                                        : Enabled")
    mig = mig.replace("        GPU                                            : 0 %", "        GPU        : N/A")
    assert mig.count("Enabled") == real.count("Enabled") + 1 and mig.count("N/A") == real.count("N/A") + 1
    (gpu,) = parse_query_text(mig).gpus
    assert gpu.mig_mode == "Enabled" and gpu.utilization_gpu_pct is None
    busy = parse_query_text(real.replace(IDLE, BUSY), "busy")
    assert busy.gpus[0].processes == [
        GpuProcess(675, "/usr/lib/xorg/Xorg", "G", 22),
        GpuProcess(5762, "python", "C", 1005),
    ]
    flat = BUSY.replace("            ", "        ")  # the same fields beside Process ID instead of under it
    assert parse_query_text(real.replace(IDLE, flat)).gpus[0].processes == busy.gpus[0].processes
    # drivers < 530: 'Power Readings' with 'Power Limit'
    old = real.replace("    GPU Power Readings\n", "    Power Readings\n")
    old = old.replace("Current Power Limit   ", "Power Limit           ")
    assert old.count("    Power Readings\n") == 1 and "Current Power Limit" not in old
    (gpu,) = parse_query_text(old).gpus
    assert (gpu.power_limit_w, gpu.default_power_limit_w, gpu.max_power_limit_w) == (700.0, 700.0, 700.0)


def test_query_text_refuses_what_is_not_its_output():
    with pytest.raises(EnvCaptureError, match=r"^h1: nvidia-smi -q: not nvidia-smi -q output .*starts '<\?xml"):
        parse_query_text(shared_fixture(H100_XML), "h1: nvidia-smi -q")
    with pytest.raises(EnvCaptureError, match="not nvidia-smi -q output"):
        parse_query_text("", "empty")
    with pytest.raises(EnvCaptureError, match="starts .NVIDIA-SMI has failed"):
        parse_query_text("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "t")


# --------------------------------------------------------------------------- /proc, /etc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/cpuinfo is Linux")
def test_cpuinfo_of_this_machine():
    text = Path("/proc/cpuinfo").read_text()
    cpu = parse_cpuinfo(text)
    assert cpu.logical_cpus == len(re.findall(r"^processor\s*:", text, re.MULTILINE))
    assert cpu.logical_cpus >= (os.cpu_count() or 1) or cpu.logical_cpus == len(os.sched_getaffinity(0))
    names = re.findall(r"^model name\s*:\s*(.*)$", text, re.MULTILINE)
    assert cpu.model_name == (names[0].strip() if names else None)
    if cpu.sockets is not None:
        assert 1 <= cpu.sockets <= cpu.logical_cpus
    if cpu.cores is not None:
        assert 1 <= cpu.cores <= cpu.logical_cpus
    with pytest.raises(EnvCaptureError, match="no 'processor' entries"):
        parse_cpuinfo("")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux")
def test_meminfo_and_os_release_of_this_machine():
    total = parse_meminfo(Path("/proc/meminfo").read_text())
    assert abs(total - os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) <= total // 100
    release = Path("/etc/os-release")
    if release.is_file():
        assert parse_os_release(release.read_text())
    with pytest.raises(EnvCaptureError, match="MemTotal"):
        parse_meminfo("MemFree: 1 kB\n")


# --------------------------------------------------------------------------- one host's capture


def _copy_of_h100_host(tmp_path: Path) -> Path:
    """A writable copy of env/vm/ of the real H100 run (raw probe outputs, probes.json, capture.json)."""
    host_dir = tmp_path / "vm"
    host_dir.mkdir()
    for f in (H100_RUN / "env" / "vm").iterdir():
        (host_dir / f.name).write_bytes(f.read_bytes())
    return host_dir


def test_a_failed_required_probe_names_its_command_and_exit_status(tmp_path):
    from kit.hosts import probe  # (not pure: only for its probe commands and the frame reader)

    # no frame at all in the probe script's output (no bash, output cut): every probe counts as exited 127
    with pytest.raises(EnvCaptureError, match=r"^h1: `cat /proc/cpuinfo` exited 127$"):
        probe.probe_from_output("h1", None, "", "0123", tmp_path / "h1")  # as check_env and kit bench call it
    nothing = probe.read_probes("", None, "0123")
    assert {code for code, _ in nothing.values()} == {127}
    with pytest.raises(EnvCaptureError, match=r"^h1: `cat /proc/cpuinfo` exited 127$"):
        capture_from_probes("h1", nothing, None, dict(probe.PROBES))
    with pytest.raises(EnvCaptureError, match=r"^h1: probe 'cpuinfo' exited 127$"):
        capture_from_probes("h1", nothing)
    # re-read from a run directory: the command comes from probes.json
    host_dir = _copy_of_h100_host(tmp_path)
    probes = json.loads((host_dir / "probes.json").read_text())
    probes["meminfo"]["exit"] = 1
    (host_dir / "probes.json").write_text(json.dumps(probes))
    with pytest.raises(EnvCaptureError, match=r"^vm: `cat /proc/meminfo` exited 1$"):
        capture_from_dir("vm", host_dir)
    probes["meminfo"]["exit"] = 0
    (host_dir / "probes.json").write_text(json.dumps(probes))
    (host_dir / "kernel.txt").write_text("\n")
    with pytest.raises(EnvCaptureError, match=r"^vm: `uname -r` printed nothing$"):
        capture_from_dir("vm", host_dir)


def test_h100_run_directory_reparses_with_the_drivers_own_topo_output(tmp_path):
    stored = json.loads((H100_RUN / "env" / "vm" / "capture.json").read_text())
    assert of_vintage(capture_from_dir("vm", H100_RUN / "env" / "vm").to_dict(), stored) == stored
    host_dir = _copy_of_h100_host(tmp_path)
    (host_dir / "nvidia-smi-topo.txt").write_bytes((SHARED_SMI / H100_TOPO).read_bytes())  # escapes as printed
    assert of_vintage(capture_from_dir("vm", host_dir).to_dict(), stored) == stored


# --------------------------------------------------------------------------- consistency

CPU = CpuInfo("AMD EPYC", 1, 2, 2)


def capture(host: str, smi: SmiReport | None = None, topo: Topology | None = None, **kw) -> HostCapture:
    fields = dict(
        cpu=CPU,
        memory_bytes=64 * 2**30,
        os_release="Debian GNU/Linux 12 (bookworm)",
        kernel="6.1.0-18-amd64",
        docker_version="20.10.24",
        ib_devices=[],
        nic="eth0",
    )
    fields.update(kw)
    return HostCapture(host=host, smi=smi, topology=topo, **fields)


@pytest.fixture(scope="module")
def a100() -> SmiReport:
    return parse_query_xml(fixture("a100-sxm4-v12.xml"), "a100")


@pytest.fixture(scope="module")
def t4() -> SmiReport:
    return parse_query_xml(fixture("tesla-t4.xml"), "t4")


@pytest.fixture(scope="module")
def v100_topo() -> Topology:
    return parse_topo(shared_fixture(V100))


def test_identical_hosts_are_ok(a100, v100_topo):
    v = consistency([capture("h1", a100, v100_topo), capture("h2", a100, v100_topo)])
    assert v.ok and v.problems == [] and v.busy == {} and v.no_gpu == [] and v.notes == []


def test_different_gpu_model_driver_cuda_and_busy(a100, t4):
    v = consistency([capture("h1", t4), capture("h2", a100)])
    assert not v.ok
    assert "GPU model differs: h1 Tesla T4 x1, h2 NVIDIA A100-SXM4-80GB x1" in v.problems
    assert "driver differs: h1 515.105.01, h2 535.54.03" in v.problems
    assert "CUDA version differs: h1 11.7, h2 12.2" in v.problems
    assert v.busy == {
        "h1": ["GPU0 runs pid 675 /usr/lib/xorg/Xorg (22 MiB, graphics)", "GPU0 runs pid 5762 python (1005 MiB)"]
    }
    assert "power limit differs: h1 70 W, h2 500 W" in v.problems  # a GPU setting that changes a figure


def test_driver_alone_differs(a100):
    newer = dataclasses.replace(a100, driver_version="550.54.15")
    v = consistency([capture("h1", a100), capture("h2", a100), capture("h3", newer)])
    assert v.problems == ["driver differs: h1,h2 535.54.03, h3 550.54.15"] and not v.ok


def test_gpu_count_and_topology_and_interface_differ(a100, v100_topo):
    two = dataclasses.replace(a100, gpus=a100.gpus + [dataclasses.replace(a100.gpus[0], index=1)])
    p3 = parse_topo(fixture("topo-m_4xV100-SXM2_aws-p3.8xlarge.txt"))
    v = consistency([capture("h1", a100, v100_topo), capture("h2", two, p3, nic="ens3")])
    assert "GPU count differs: h1 NVIDIA A100-SXM4-80GB x1, h2 NVIDIA A100-SXM4-80GB x2" in v.problems
    assert any(
        p.startswith("topology differs: h1 8xGPU NV2+NV1+NODE; 1xNIC mlx5_0 [") and ", h2 4xGPU NV2+NV1 [" in p
        for p in v.problems
    ), v.problems
    assert "network interface (NCCL_SOCKET_IFNAME) differs: h1 eth0, h2 ens3" in v.problems


def test_busy_gpu_alone_makes_it_not_ok(t4):
    v = consistency([capture("h1", t4), capture("h2", t4)])
    assert v.problems == [] and set(v.busy) == {"h1", "h2"} and not v.ok


def test_hosts_without_gpu(a100):
    cpu_only = consistency([capture("c1"), capture("c2")])
    assert cpu_only.ok and cpu_only.no_gpu == ["c1", "c2"] and cpu_only.problems == []
    needs_gpu = consistency([capture("c1"), capture("c2")], require_gpu=True)
    assert not needs_gpu.ok and needs_gpu.problems == ["no GPU on c1, c2 (this suite needs GPUs)"]
    mixed = consistency([capture("h1", a100), capture("c1")])
    assert mixed.no_gpu == ["c1"] and mixed.problems == ["GPUs on some hosts only: none on c1"]


def test_soft_differences_are_notes(a100):
    v = consistency([capture("h1", a100), capture("h2", a100, kernel="6.8.0-47-generic", docker_version=None)])
    assert v.ok and v.problems == []
    assert v.notes == ["kernel differs: h1 6.1.0-18-amd64, h2 6.8.0-47-generic", "Docker differs: h1 20.10.24, h2 none"]


def test_ib_devices_differ():
    v = consistency([capture("c1", ib_devices=["mlx5_0"]), capture("c2")])
    assert v.problems == ["InfiniBand device set differs: c1 mlx5_0, c2 none"] and not v.ok


def test_json_round_trip(t4, v100_topo):
    host = capture("h1", t4, v100_topo, ib_devices=["mlx5_0"])
    data = json.loads(json.dumps(host.to_dict()))
    assert data["topology"]["class"] == v100_topo.topology_class()
    assert data["smi"]["gpus"][0]["processes"][1]["name"] == "python"
    assert HostCapture.from_dict(data) == host
    verdict = consistency([host, capture("h2")])
    assert json.loads(json.dumps(verdict.to_dict()))["no_gpu"] == ["h2"]


def test_bad_calls():
    with pytest.raises(ValueError, match="at least one"):
        consistency([])
    with pytest.raises(ValueError, match="twice"):
        consistency([capture("h1"), capture("h1")])


def test_module_is_pure():
    """No remote, container, process, network or clock module: only parsing and comparison."""
    hosts = REPO / "kit" / "hosts"
    files = sorted((hosts / "capture").glob("*.py")) + [hosts / "consistency.py"]
    assert {p.name for p in files} >= {"__init__.py", "topo.py", "smi.py", "system.py", "model.py", "consistency.py"}
    forbidden = {"fabric", "invoke", "paramiko", "docker", "subprocess", "socket", "os", "time", "datetime", "psutil"}
    for path in files:
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
        assert imported & forbidden == set(), (path.name, imported)


def test_an_installed_nvidia_smi_that_fails_is_a_broken_driver_not_no_gpu(tmp_path):
    host_dir = _copy_of_h100_host(tmp_path)
    probes = json.loads((host_dir / "probes.json").read_text())
    assert probes["has-nvidia-smi"]["exit"] == 0
    probes["nvidia-smi-q"]["exit"] = 18  # NVML: driver/library version mismatch
    (host_dir / "probes.json").write_text(json.dumps(probes))
    with pytest.raises(EnvCaptureError, match=r"^vm: `nvidia-smi -q -x` exited 18: nvidia-smi is installed but "
                                              r"fails"):
        capture_from_dir("vm", host_dir)
    probes["nvidia-smi-q"]["exit"], probes["has-nvidia-smi"]["exit"] = 18, 1  # not installed: no GPU, no error
    (host_dir / "probes.json").write_text(json.dumps(probes))
    assert capture_from_dir("vm", host_dir).smi is None


def test_gpu_settings_that_change_a_figure_must_agree(a100, v100_topo):
    """Power limit, application clocks, persistence mode and ECC: problems (the run is refused, --force records
    it); the rule sets before v4 keep their verdict (power limit and ECC as notes, the others not compared)."""
    gpu = a100.gpus[0]
    other = dataclasses.replace(a100, gpus=[dataclasses.replace(
        gpu, power_limit_w=400.0, app_graphics_clock_mhz=900, app_mem_clock_mhz=800,
        persistence_mode="Enabled" if gpu.persistence_mode != "Enabled" else "Disabled", ecc_mode="Disabled")])
    pair = [capture("h1", a100, v100_topo), capture("h2", other, v100_topo)]
    v = consistency(pair)
    assert not v.ok and [p.split(" differs")[0] for p in v.problems] == [
        "power limit", "application clocks", "persistence mode", "ECC"]
    assert "power limit differs: h1 500 W, h2 400 W" in v.problems
    assert v.problems[1].endswith("h2 900 MHz graphics, 800 MHz memory")
    old = consistency(pair, gpu_settings=False)
    assert old.ok and old.problems == [] and [n.split(" differs")[0] for n in old.notes] == ["power limit", "ECC"]


def test_a_capture_written_before_the_application_clocks_still_matches_its_raw_outputs():
    parsed = capture_from_dir("vm", H100_RUN / "env" / "vm").to_dict()
    stored = json.loads((H100_RUN / "env" / "vm" / "capture.json").read_text())
    assert "app_graphics_clock_mhz" not in stored["smi"]["gpus"][0] and parsed != stored
    assert of_vintage(parsed, stored) == stored
    newer = json.loads(json.dumps(parsed))  # written now: the keys are there, and compared
    assert of_vintage(parsed, newer) == newer
    newer["smi"]["gpus"][0]["app_graphics_clock_mhz"] = 1000
    assert of_vintage(parsed, newer) != newer


H200_SMI = REPO / "tests" / "fixtures" / "gpu-runs" / "h200-20261128" / "nvidia-smi"


def test_the_pcie_link_from_both_outputs_and_a_capture_of_the_day_before_still_matches(tmp_path):
    """PCIe generation and width, in use and at most, as -q -x and -q print them (the H200's: Gen5 x16); the
    H200's capture of 2026-12-04 (application clocks, no PCIe link) re-parsed today is that capture still."""
    from test_gpu_visit_h200_20261204 import unpacked

    for report in (parse_query_xml((H200_SMI / "q-x.xml").read_text()), parse_query_text((H200_SMI / "q.txt").read_text())):
        (gpu,) = report.gpus
        assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (5, 5, 16, 16)
    host = unpacked("proof", tmp_path) / "2-suite/run/env/vm"
    stored = json.loads((host / "capture.json").read_text())
    assert "app_graphics_clock_mhz" in stored["smi"]["gpus"][0] and "pcie_gen_max" not in stored["smi"]["gpus"][0]
    parsed = capture_from_dir("vm", host).to_dict()
    assert parsed["smi"]["gpus"][0]["pcie_width_max"] == 16 and of_vintage(parsed, stored) == stored
    newer = json.loads(json.dumps(parsed))  # written now: the link is there, and compared
    newer["smi"]["gpus"][0]["pcie_width_current"] = 8
    assert of_vintage(parsed, newer) != newer
