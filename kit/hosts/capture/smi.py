"""`nvidia-smi -q -x` (and its plain-text twin `nvidia-smi -q`): driver, CUDA and per-GPU memory, clocks, ECC,
power limits, PCIe link and processes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from kit.core.text import clean_output
from kit.hosts.capture.errors import EnvCaptureError

_NOT_AVAILABLE = ("N/A", "[N/A]", "[Not Supported]", "Not Supported", "Unknown Error")
_QUANTITY = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/]*)\s*$")
_MIB = {"MiB": 1.0, "GiB": 1024.0, "KiB": 1 / 1024, "MB": 1.0, "GB": 1024.0}
_MHZ, _PCT, _WATTS, _GEN, _LANES = ("MHz",), ("%",), ("W",), ("",), ("x",)
_LINK, _LINK_TEXT = "pci/pci_gpu_link_info", "PCI/GPU Link Info"

# GpuInfo field -> (its path in -q -x, its path in -q, units); both outputs print the same values
_GPU_FIELDS: dict[str, tuple[str, str, dict[str, float] | tuple[str, ...] | None]] = {
    "product_name": ("product_name", "Product Name", None),
    "uuid": ("uuid", "GPU UUID", None),
    "pci_bus_id": ("pci/pci_bus_id", "PCI/Bus Id", None),
    "memory_total_mib": ("fb_memory_usage/total", "FB Memory Usage/Total", _MIB),
    "memory_used_mib": ("fb_memory_usage/used", "FB Memory Usage/Used", _MIB),
    "graphics_clock_mhz": ("clocks/graphics_clock", "Clocks/Graphics", _MHZ),
    "sm_clock_mhz": ("clocks/sm_clock", "Clocks/SM", _MHZ),
    "mem_clock_mhz": ("clocks/mem_clock", "Clocks/Memory", _MHZ),
    "max_graphics_clock_mhz": ("max_clocks/graphics_clock", "Max Clocks/Graphics", _MHZ),
    "max_sm_clock_mhz": ("max_clocks/sm_clock", "Max Clocks/SM", _MHZ),
    "max_mem_clock_mhz": ("max_clocks/mem_clock", "Max Clocks/Memory", _MHZ),
    "ecc_mode": ("ecc_mode/current_ecc", "ECC Mode/Current", None),
    "persistence_mode": ("persistence_mode", "Persistence Mode", None),
    "mig_mode": ("mig_mode/current_mig", "MIG Mode/Current", None),
    "utilization_gpu_pct": ("utilization/gpu_util", "Utilization/GPU", _PCT),
    "app_graphics_clock_mhz": ("applications_clocks/graphics_clock", "Applications Clocks/Graphics", _MHZ),
    "app_mem_clock_mhz": ("applications_clocks/mem_clock", "Applications Clocks/Memory", _MHZ),
    # the PCIe link in use and the most it can train to (the GPU's and its slot's); an idle GPU may train down
    "pcie_gen_current": (f"{_LINK}/pcie_gen/current_link_gen", f"{_LINK_TEXT}/PCIe Generation/Current", _GEN),
    "pcie_gen_max": (f"{_LINK}/pcie_gen/max_link_gen", f"{_LINK_TEXT}/PCIe Generation/Max", _GEN),
    "pcie_width_current": (f"{_LINK}/link_widths/current_link_width", f"{_LINK_TEXT}/Link Width/Current", _LANES),
    "pcie_width_max": (f"{_LINK}/link_widths/max_link_width", f"{_LINK_TEXT}/Link Width/Max", _LANES),
}
# keys a capture has held only since: application clocks from 2026-11-28, the PCIe link from 2026-12-05
# (model.of_vintage)
LATER_GPU_KEYS = ("app_graphics_clock_mhz", "app_mem_clock_mhz", "pcie_gen_current", "pcie_gen_max",
                  "pcie_width_current", "pcie_width_max")
# power limits: the block of drivers >= 530 first, then the older one; in each, the limit in force by its names
_POWER_BLOCKS = (("gpu_power_readings", "GPU Power Readings"), ("power_readings", "Power Readings"))
_POWER_LIMITS = {
    "power_limit_w": (("current_power_limit", "Current Power Limit"), ("enforced_power_limit", "Enforced Power Limit"),
                      ("power_limit", "Power Limit")),
    "default_power_limit_w": (("default_power_limit", "Default Power Limit"),),
    "max_power_limit_w": (("max_power_limit", "Max Power Limit"),),
}


def _value(text: str | None) -> str | None:
    """The stripped text; None when missing, empty or one of the driver's not-available words."""
    value = text.strip() if text is not None else None
    return None if not value or value in _NOT_AVAILABLE else value


def _quantity(value: str | None, units: dict[str, float] | tuple[str, ...]) -> float | None:
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
    app_graphics_clock_mhz: int | None = None  # application clocks: what the GPU runs at under load, unless boosted
    app_mem_clock_mhz: int | None = None
    pcie_gen_current: int | None = None  # the PCIe link in use: generation and lanes
    pcie_gen_max: int | None = None  # the most the link can train to (GPU and slot)
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None

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


def _gpu(index: int, get: Callable[[str], str | None], which: int, processes: list[GpuProcess],
         bus_id: str | None) -> GpuInfo:
    """One GPU from get(path): the value there, "" for a block, None when absent; which=0: paths as -q -x names
    them, 1: as -q does."""
    values: dict = {}
    for name, (*paths, units) in _GPU_FIELDS.items():
        value = get(paths[which])
        values[name] = value if units is None else _int(_quantity(value, units))
    block = next((b[which] for b in _POWER_BLOCKS if get(b[which]) is not None), None)
    for name, spellings in _POWER_LIMITS.items():
        found = (_quantity(get(f"{block}/{s[which]}"), _WATTS) for s in spellings) if block else ()
        values[name] = next((w for w in found if w is not None), None)
    values["pci_bus_id"] = values["pci_bus_id"] or bus_id
    return GpuInfo(index=index, processes=processes, **values)


def _xml_get(el: ET.Element) -> Callable[[str], str | None]:
    def get(path: str) -> str | None:
        node = el.find(path)
        if node is not None and len(node):  # a block: present, no value of its own
            return ""
        return _value(node.text) if node is not None else None

    return get


def _xml_processes(gpu: ET.Element) -> list[GpuProcess]:
    processes = []
    for p in gpu.findall("processes/process_info"):
        get = _xml_get(p)
        pid = get("pid")
        processes.append(
            GpuProcess(
                pid=int(pid) if pid and pid.isdigit() else -1,
                name=get("process_name") or "?",
                type=get("type"),
                used_memory_mib=_int(_quantity(get("used_memory"), _MIB)),
            )
        )
    return processes


def parse_query_xml(text: str, source: str = "nvidia-smi -q -x") -> SmiReport:
    """`nvidia-smi -q -x` output. The real DOCTYPE line (an external DTD, never fetched) is
    accepted; entity declarations and internal DTD subsets are refused."""
    text = clean_output(text)
    if _UNSAFE_XML.search(text):
        raise EnvCaptureError(source, "XML declares entities or an internal DTD subset: refused")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else None
        raise EnvCaptureError(source, f"malformed XML: {exc}", line) from None
    if root.tag != "nvidia_smi_log":
        raise EnvCaptureError(source, f"root element is <{root.tag}>, not <nvidia_smi_log>")
    get = _xml_get(root)
    attached = get("attached_gpus")
    return SmiReport(
        driver_version=get("driver_version"),
        cuda_version=get("cuda_version"),
        gpus=[_gpu(i, _xml_get(g), 0, _xml_processes(g), g.get("id")) for i, g in enumerate(root.findall("gpu"))],
        attached_gpus=int(attached) if attached and attached.isdigit() else None,
        source=source,
    )


# --------------------------------------------------------------------------- nvidia-smi -q (text)

_KEY_VALUE = re.compile(r"( *)(\S.*?)\s+: ?(.*)$")  # 'Driver Version      : 580.159.04'; a section has no ' : '
_GPU_SECTION = re.compile(r"GPU (\S+)$")  # 'GPU 00000000:00:06.0'
_BANNER = re.compile(r"=+NVSMI LOG=+$")


@dataclass
class _Node:
    key: str
    value: str | None  # None: a section heading
    children: list[_Node] = field(default_factory=list)

    def get(self, path: str) -> str | None:
        node: _Node | None = self
        for key in path.split("/"):
            node = next((c for c in node.children if c.key == key), None)
            if node is None:
                return None
        return "" if node.value is None else _value(node.value)


def _text_tree(lines: list[str]) -> _Node:
    """The indented 'Key : value' lines as a tree: a line belongs to the nearest line above it indented less."""
    root = _Node("", None)
    stack: list[tuple[int, _Node]] = [(-1, root)]
    for line in lines:
        if not line.strip():
            continue
        m = _KEY_VALUE.match(line)
        indent, key, value = (len(m.group(1)), m.group(2), m.group(3)) if m else (
            len(line) - len(line.lstrip(" ")), line.strip(), None)
        while stack[-1][0] >= indent:
            stack.pop()
        node = _Node(key, value)
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def _text_processes(gpu: _Node) -> list[GpuProcess]:
    """'Processes : None', or one 'Process ID : n' per process with Type, Name and Used GPU Memory under it
    (or beside it, as older drivers print them)."""
    section = next((c for c in gpu.children if c.key == "Processes"), None)
    found: list[dict[str, str | None]] = []
    for entry in section.children if section else []:
        if entry.key == "Process ID":
            found.append({"pid": _value(entry.value)})
            found[-1].update((c.key, _value(c.value)) for c in entry.children)
        elif found:
            found[-1][entry.key] = _value(entry.value)
    return [
        GpuProcess(
            pid=int(p["pid"]) if (p["pid"] or "").isdigit() else -1,
            name=p.get("Name") or "?",
            type=p.get("Type"),
            used_memory_mib=_int(_quantity(p.get("Used GPU Memory"), _MIB)),
        )
        for p in found
    ]


def parse_query_text(text: str, source: str = "nvidia-smi -q") -> SmiReport:
    """`nvidia-smi -q` output (the text form of -q -x): the same SmiReport, as far as the text gives it."""
    lines = clean_output(text).split("\n")
    if not any(_BANNER.match(line.strip()) for line in lines):
        start = next((line.strip() for line in lines if line.strip()), "")[:40]
        raise EnvCaptureError(source, f"not nvidia-smi -q output (no NVSMI LOG banner): starts {start!r}")
    root = _text_tree(lines)
    sections = [(c, _GPU_SECTION.match(c.key)) for c in root.children if c.value is None]
    gpus = [(node, m.group(1)) for node, m in sections if m]
    attached = root.get("Attached GPUs")
    return SmiReport(
        driver_version=root.get("Driver Version"),
        cuda_version=root.get("CUDA Version"),
        gpus=[_gpu(i, g.get, 1, _text_processes(g), bus_id) for i, (g, bus_id) in enumerate(gpus)],
        attached_gpus=int(attached) if attached and attached.isdigit() else None,
        source=source,
    )
