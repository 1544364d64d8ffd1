"""System description (MLPerf Training's system_desc fields) filled from the environment captures. Pure.

Inputs are what a run directory already holds: runs/<id>/env/<host>/capture.json (kit.hosts.capture.HostCapture,
parsed from the raw probe outputs beside it), the versions the harness printed (run_start lines), the image
pins/verified versions, and `system:` from hosts.yaml (submitter, name). Every field MLPerf's
system_desc_checker requires is present; what no capture can tell stays "" and is listed in `unknown_fields`
so a reader sees what was not measured rather than a guess.
"""

from __future__ import annotations

from collections import Counter

from kit.hosts.capture import HostCapture

# mlperf_logging/system_desc_checker/system_desc_checker.py: required_fields (same order)
MLPERF_FIELDS = (
    "submitter", "division", "status", "system_name", "number_of_nodes", "host_processors_per_node",
    "host_processor_model_name", "host_processor_core_count", "host_processor_vcpu_count",
    "host_processor_frequency", "host_processor_caches", "host_processor_interconnect", "host_memory_capacity",
    "host_storage_type", "host_storage_capacity", "host_networking", "host_networking_topology",
    "host_memory_configuration", "accelerators_per_node", "accelerator_model_name",
    "accelerator_host_interconnect", "accelerator_frequency", "accelerator_on-chip_memories",
    "accelerator_memory_configuration", "accelerator_memory_capacity", "accelerator_interconnect",
    "accelerator_interconnect_topology", "cooling", "hw_notes", "framework", "other_software_stack",
    "operating_system", "sw_notes",
)
STATUS = "Research, Development, or Internal (RDI)"
SOFTWARE_KEYS = ("cuda", "cudnn", "nccl", "dali", "python", "driver")


def _one(values: list, what: str, notes: list[str]) -> object:
    """The value every host shares; several values are joined and noted (the consistency rule judges them)."""
    counts = Counter(v for v in values if v not in (None, ""))
    if not counts:
        return ""
    if len(counts) > 1:
        notes.append(f"{what} differs between hosts: " + ", ".join(f"{v} ({n})" for v, n in counts.items()))
        return " / ".join(str(v) for v in counts)
    return next(iter(counts))


def _gib(n_bytes: int | None) -> str:
    return f"{n_bytes / 2**30:.0f} GB" if n_bytes else ""


def _interconnect(capture: HostCapture) -> str:
    topo = capture.topology
    if topo is None:
        return ""
    pairs = topo.nvlink_pairs()
    if pairs:
        return f"NVLink ({len(pairs)} GPU pairs, up to NV{max(n for _, _, n in pairs)})"
    return "PCIe"


def describe(captures: list[HostCapture], *, submitter: str, system_name: str,
             frameworks: dict[str, str] | None = None, software: dict[str, str] | None = None,
             hw_notes: str = "", sw_notes: str = "") -> dict:
    """MLPerf system_desc fields (strings, as in MLPerf's files) + `unknown_fields` + `per_host`."""
    if not captures:
        raise ValueError("a system description needs at least one host capture")
    notes: list[str] = []
    gpu_hosts = [c for c in captures if c.has_gpu]
    gpus = [g for c in gpu_hosts for g in c.smi.gpus]  # type: ignore[union-attr]
    desc: dict = {
        "submitter": submitter,
        "division": "open",
        "status": STATUS,
        "system_name": system_name,
        "number_of_nodes": len(captures),
        "host_processors_per_node": _one([c.cpu.sockets for c in captures], "CPU sockets", notes),
        "host_processor_model_name": _one([c.cpu.model_name for c in captures], "CPU model", notes),
        "host_processor_core_count": _one([c.cpu.cores for c in captures], "CPU cores", notes),
        "host_processor_vcpu_count": _one([c.cpu.logical_cpus for c in captures], "logical CPUs", notes),
        "host_processor_frequency": "",
        "host_processor_caches": "",
        "host_processor_interconnect": "",
        "host_memory_capacity": _one([_gib(c.memory_bytes) for c in captures], "memory", notes),
        "host_storage_type": "",
        "host_storage_capacity": "",
        "host_networking": _one([", ".join(c.ib_devices) and f"InfiniBand ({', '.join(c.ib_devices)})"
                                 or (c.nic and f"Ethernet ({c.nic})") for c in captures], "networking", notes),
        "host_networking_topology": "",
        "host_memory_configuration": "",
        "accelerators_per_node": _one([len(c.smi.gpus) if c.has_gpu else 0 for c in captures], "GPUs", notes),
        "accelerator_model_name": _one([g.product_name for g in gpus], "GPU model", notes),
        "accelerator_host_interconnect": "",
        "accelerator_frequency": _one([f"{g.max_sm_clock_mhz} MHz" if g.max_sm_clock_mhz else None for g in gpus],
                                      "GPU max SM clock", notes),
        "accelerator_on-chip_memories": "",
        "accelerator_memory_configuration": "",
        "accelerator_memory_capacity": _one([f"{g.memory_total_mib / 1024:.0f} GB" if g.memory_total_mib else None
                                             for g in gpus], "GPU memory", notes),
        "accelerator_interconnect": _one([_interconnect(c) for c in gpu_hosts], "GPU interconnect", notes),
        "accelerator_interconnect_topology": _one(
            [c.topology.topology_class() if c.topology else None for c in gpu_hosts], "topology", notes),
        "cooling": "",
        "hw_notes": hw_notes,
        "framework": ", ".join(f"{name} {version}" for name, version in sorted((frameworks or {}).items())),
        "other_software_stack": _software(captures, software or {}, notes),
        "operating_system": _one([c.os_release for c in captures], "OS", notes),
        "sw_notes": sw_notes,
    }
    desc = {k: str(v) if isinstance(v, int) else v for k, v in desc.items()}  # MLPerf's files hold strings
    if notes:
        desc["hw_notes"] = "; ".join(filter(None, [hw_notes, *notes]))
    desc["unknown_fields"] = [k for k in MLPERF_FIELDS if desc[k] == "" and k not in ("hw_notes", "sw_notes")]
    desc["per_host"] = {c.host: _host_line(c) for c in captures}
    return desc


def _software(captures: list[HostCapture], software: dict[str, str], notes: list[str]) -> dict:
    stack = {k: v for k, v in software.items() if v}
    smi = [c.smi for c in captures if c.smi is not None]
    driver = _one([r.driver_version for r in smi], "driver", notes)
    if driver:
        stack.setdefault("driver", driver)
        stack.setdefault("cuda_driver_api", _one([r.cuda_version for r in smi], "CUDA (driver)", notes))
    stack["kernel"] = _one([c.kernel for c in captures], "kernel", notes)
    docker = _one([c.docker_version for c in captures], "Docker", notes)
    if docker:
        stack["docker"] = docker
    return {k: stack[k] for k in sorted(stack)}


def _host_line(c: HostCapture) -> dict:
    return {
        "cpu": c.cpu.model_name, "sockets": c.cpu.sockets, "cores": c.cpu.cores, "logical_cpus": c.cpu.logical_cpus,
        "memory_bytes": c.memory_bytes, "os": c.os_release, "kernel": c.kernel,
        "gpus": c.smi.model_summary() if c.smi else "no GPU",
        "topology": c.topology.topology_class() if c.topology else None,
    }
