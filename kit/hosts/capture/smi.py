"""`nvidia-smi -q -x`: driver, CUDA and per-GPU memory, clocks, ECC, power limits and processes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import asdict, dataclass, field

from kit.hosts.capture.errors import EnvCaptureError

_NOT_AVAILABLE = ("N/A", "[N/A]", "[Not Supported]", "Not Supported", "Unknown Error")
_QUANTITY = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/]*)\s*$")
_MIB = {"MiB": 1.0, "GiB": 1024.0, "KiB": 1 / 1024, "MB": 1.0, "GB": 1024.0}


def _text(el: ET.Element | None, path: str) -> str | None:
    """The stripped text at path; None when missing, empty or one of the driver's not-available words."""
    if el is None:
        return None
    node = el.find(path)
    if node is None or node.text is None:
        return None
    value = node.text.strip()
    return None if not value or value in _NOT_AVAILABLE else value


def _number(el: ET.Element | None, path: str, units: dict[str, float] | tuple[str, ...]) -> float | None:
    value = _text(el, path)
    m = _QUANTITY.match(value) if value else None
    if not m or m.group(2) not in units:
        return None
    scale = units[m.group(2)] if isinstance(units, dict) else 1.0
    return float(m.group(1)) * scale


def _int(value: float | None) -> int | None:
    return None if value is None else int(round(value))


@dataclass
class GpuProcess:
    pid: int
    name: str
    type: str | None  # C compute, G graphics, C+G, M (MPS) ...
    used_memory_mib: int | None  # None where the driver cannot tell (WDDM, some MIG setups)

    def describe(self) -> str:
        memory = f"{self.used_memory_mib} MiB" if self.used_memory_mib is not None else "memory N/A"
        kind = ", graphics" if self.type == "G" else ""
        return f"pid {self.pid} {self.name} ({memory}{kind})"


@dataclass
class GpuInfo:
    index: int  # position in the report (nvidia-smi's order: PCI bus id)
    product_name: str | None
    uuid: str | None
    pci_bus_id: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    graphics_clock_mhz: int | None
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    max_graphics_clock_mhz: int | None
    max_sm_clock_mhz: int | None
    max_mem_clock_mhz: int | None
    ecc_mode: str | None  # current: Enabled / Disabled
    power_limit_w: float | None  # the limit in force
    default_power_limit_w: float | None
    max_power_limit_w: float | None
    persistence_mode: str | None
    mig_mode: str | None
    utilization_gpu_pct: int | None
    processes: list[GpuProcess] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"GPU{self.index}"

    @classmethod
    def from_dict(cls, d: dict) -> GpuInfo:
        return cls(**{**d, "processes": [GpuProcess(**p) for p in d.get("processes") or []]})


@dataclass
class SmiReport:
    driver_version: str | None
    cuda_version: str | None
    gpus: list[GpuInfo]
    attached_gpus: int | None = None  # the driver's count: more than len(gpus) when queried with -i
    source: str = field(default="nvidia-smi", compare=False)

    def model_summary(self) -> str:
        """'Tesla V100-SXM2-32GB x8', or 'A x4 + B x4' on a mixed host, or 'no GPU'."""
        counts = Counter(g.product_name or "unknown GPU" for g in self.gpus)
        return " + ".join(f"{name} x{n}" for name, n in sorted(counts.items())) or "no GPU"

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("source")
        return d

    @classmethod
    def from_dict(cls, d: dict, source: str = "nvidia-smi") -> SmiReport:
        return cls(
            d.get("driver_version"),
            d.get("cuda_version"),
            [GpuInfo.from_dict(g) for g in d["gpus"]],
            d.get("attached_gpus"),
            source,
        )


_UNSAFE_XML = re.compile(r"<!ENTITY|<!DOCTYPE[^>\[]*\[", re.IGNORECASE)


def _power(gpu: ET.Element) -> tuple[float | None, float | None, float | None]:
    """Power limits from gpu_power_readings (drivers >= 530) or power_readings (older)."""
    block = gpu.find("gpu_power_readings")
    if block is None:
        block = gpu.find("power_readings")
    if block is None:
        return None, None, None
    watts = ("W",)
    limit = _number(block, "current_power_limit", watts)
    if limit is None:
        limit = _number(block, "enforced_power_limit", watts)
    if limit is None:
        limit = _number(block, "power_limit", watts)
    return limit, _number(block, "default_power_limit", watts), _number(block, "max_power_limit", watts)


def _gpu(index: int, gpu: ET.Element) -> GpuInfo:
    mhz = ("MHz",)
    limit, default_limit, max_limit = _power(gpu)
    processes = []
    for p in gpu.findall("processes/process_info"):
        pid = _text(p, "pid")
        processes.append(
            GpuProcess(
                pid=int(pid) if pid and pid.isdigit() else -1,
                name=_text(p, "process_name") or "?",
                type=_text(p, "type"),
                used_memory_mib=_int(_number(p, "used_memory", _MIB)),
            )
        )
    return GpuInfo(
        index=index,
        product_name=_text(gpu, "product_name"),
        uuid=_text(gpu, "uuid"),
        pci_bus_id=_text(gpu, "pci/pci_bus_id") or gpu.get("id"),
        memory_total_mib=_int(_number(gpu, "fb_memory_usage/total", _MIB)),
        memory_used_mib=_int(_number(gpu, "fb_memory_usage/used", _MIB)),
        graphics_clock_mhz=_int(_number(gpu, "clocks/graphics_clock", mhz)),
        sm_clock_mhz=_int(_number(gpu, "clocks/sm_clock", mhz)),
        mem_clock_mhz=_int(_number(gpu, "clocks/mem_clock", mhz)),
        max_graphics_clock_mhz=_int(_number(gpu, "max_clocks/graphics_clock", mhz)),
        max_sm_clock_mhz=_int(_number(gpu, "max_clocks/sm_clock", mhz)),
        max_mem_clock_mhz=_int(_number(gpu, "max_clocks/mem_clock", mhz)),
        ecc_mode=_text(gpu, "ecc_mode/current_ecc"),
        power_limit_w=limit,
        default_power_limit_w=default_limit,
        max_power_limit_w=max_limit,
        persistence_mode=_text(gpu, "persistence_mode"),
        mig_mode=_text(gpu, "mig_mode/current_mig"),
        utilization_gpu_pct=_int(_number(gpu, "utilization/gpu_util", ("%",))),
        processes=processes,
    )


def parse_query_xml(text: str, source: str = "nvidia-smi -q -x") -> SmiReport:
    """`nvidia-smi -q -x` output. The real DOCTYPE line (an external DTD, never fetched) is
    accepted; entity declarations and internal DTD subsets are refused."""
    if _UNSAFE_XML.search(text):
        raise EnvCaptureError(source, "XML declares entities or an internal DTD subset: refused")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else None
        raise EnvCaptureError(source, f"malformed XML: {exc}", line) from None
    if root.tag != "nvidia_smi_log":
        raise EnvCaptureError(source, f"root element is <{root.tag}>, not <nvidia_smi_log>")
    attached = _text(root, "attached_gpus")
    return SmiReport(
        driver_version=_text(root, "driver_version"),
        cuda_version=_text(root, "cuda_version"),
        gpus=[_gpu(i, g) for i, g in enumerate(root.findall("gpu"))],
        attached_gpus=int(attached) if attached and attached.isdigit() else None,
        source=source,
    )
