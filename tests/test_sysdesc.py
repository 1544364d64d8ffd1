"""System description (MLPerf Training system_desc fields) from REAL recorded probe outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlperf_logging.system_desc_checker.system_desc_checker import check_system_desc

from kit.audit.sysdesc import MLPERF_FIELDS, describe
from kit.hosts import capture as ec

SMI = Path(__file__).parent / "fixtures" / "nvidia-smi"
CPUINFO = Path("/proc/cpuinfo").read_text()
MEMINFO = "MemTotal:       1056640952 kB\n"
OS = 'PRETTY_NAME="Ubuntu 20.04.6 LTS"\nNAME="Ubuntu"\n'


def host(name: str, xml: str, topo: str | None) -> ec.HostCapture:
    raw = {"nvidia-smi-q": (0, (SMI / xml).read_text()), "cpuinfo": (0, CPUINFO), "meminfo": (0, MEMINFO),
           "os-release": (0, OS), "kernel": (0, "5.4.0-150-generic\n"), "docker": (0, "24.0.5\n"),
           "infiniband": (0, "mlx5_0\nmlx5_1\n")}
    if topo:
        raw["nvidia-smi-topo"] = (0, (SMI / topo).read_text())
    return ec.capture_from_probes(name, raw, "ib0")


def test_two_a100_hosts_fill_the_accelerator_fields(tmp_path):
    a = host("n1", "a100-sxm4-v12.xml", "topo-m_2xA100_2xmlx5_della.txt")
    b = host("n2", "a100-sxm4-v12.xml", "topo-m_2xA100_2xmlx5_della.txt")
    desc = describe([a, b], submitter="Lab", system_name="2x A100 box", frameworks={"paddle": "2.5.0"},
                    software={"cuda": "11.2", "cudnn": "8.2", "nccl": "", "dali": ""})
    assert set(MLPERF_FIELDS) <= set(desc)
    gpu = a.smi.gpus[0]
    assert desc["number_of_nodes"] == "2"
    assert desc["accelerator_model_name"] == gpu.product_name == "NVIDIA A100-SXM4-80GB"
    assert desc["accelerators_per_node"] == str(len(a.smi.gpus))
    assert desc["accelerator_memory_capacity"] == f"{gpu.memory_total_mib / 1024:.0f} GB"
    assert desc["accelerator_interconnect_topology"] == a.topology.topology_class()
    assert desc["accelerator_interconnect"] == "PCIe"  # GPU0-GPU1 is SYS in this topo -m
    assert desc["host_networking"] == "InfiniBand (mlx5_0, mlx5_1)"
    assert desc["host_memory_capacity"] == "1008 GB" and desc["operating_system"] == "Ubuntu 20.04.6 LTS"
    assert desc["framework"] == "paddle 2.5.0"
    stack = desc["other_software_stack"]
    assert stack["cuda"] == "11.2" and stack["driver"] == a.smi.driver_version and "nccl" not in stack
    assert "host_storage_type" in desc["unknown_fields"] and "accelerator_model_name" not in desc["unknown_fields"]
    path = tmp_path / "system.json"
    path.write_text(json.dumps(desc))
    valid, name, *_ = check_system_desc(str(path), "training", "4.1.0")
    assert valid and name == "2x A100 box"


def test_hosts_that_differ_are_shown_and_noted_never_averaged():
    desc = describe([host("n1", "a100-sxm4-v12.xml", None), host("n2", "tesla-t4.xml", None)],
                    submitter="Lab", system_name="mixed")
    models = desc["accelerator_model_name"].split(" / ")
    assert sorted(models) == sorted(["NVIDIA A100-SXM4-80GB", host("x", "tesla-t4.xml", None).smi.gpus[0].product_name])
    assert "GPU model differs between hosts" in desc["hw_notes"]
    assert desc["per_host"]["n2"]["gpus"].startswith("Tesla T4")


def test_no_capture_no_description():
    with pytest.raises(ValueError, match="at least one host capture"):
        describe([], submitter="x", system_name="y")
