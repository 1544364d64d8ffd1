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
    parse_cpuinfo,
    parse_meminfo,
    parse_os_release,
    parse_query_xml,
    parse_topo,
)
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
        ("\tGPU0\tCPU Affinity\tBogus\nGPU0\t X \t0-7\t1\n", "unknown column 'Bogus'"),
    ],
)
def test_topo_errors(text, message):
    with pytest.raises(EnvCaptureError, match=re.escape(message)):
        parse_topo(text, "t")


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
    assert "note: power limit differs: h1 70 W, h2 500 W" in v.lines()


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
