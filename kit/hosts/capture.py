"""Machine description from what the probes printed on each host, and the cross-host check.

PURE: parsers of recorded probe output (`nvidia-smi topo -m`, `nvidia-smi -q -x`,
/proc/cpuinfo, /proc/meminfo, /etc/os-release) and the comparison of hosts. Running the
probes is the caller's job; nothing here touches a host, a process or the clock.

A probe output that cannot be read raises EnvCaptureError naming the source (and the line
when there is one). A field a driver does not print ("N/A", missing) is None, never a guess.
"""

from __future__ import annotations

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kit.core.inputs import InputError


class EnvCaptureError(InputError):
    """A probe output that cannot be read; str() is one line: 'source[:line]: reason'."""


# --------------------------------------------------------------------------- topo -m

_AFFINITY_LABELS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_PCIE_LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")  # closest first; SOC = SYS of old drivers
_NV = re.compile(r"NV(\d+)$")
_LINK_WORDS = "X, NV<n>, PIX, PXB, PHB, NODE, SYS"
_GPU = re.compile(r"GPU\d+$")
_DEVICE = re.compile(r"[A-Za-z][\w.:-]*$")
_NIC_LEGEND = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _valid_link(token: str) -> bool:
    return token == "X" or token in _PCIE_LINKS or _NV.match(token) is not None


def _link_rank(link: str) -> tuple[int, int]:
    """Sort key: NVLink (more links first), then PCIe paths from closest to farthest."""
    m = _NV.match(link)
    return (0, -int(m.group(1))) if m else (1, _PCIE_LINKS.index(link) if link in _PCIE_LINKS else 99)


@dataclass
class Topology:
    """The device matrix of `nvidia-smi topo -m`; NICs carry their real names when the NIC Legend gives them."""

    gpus: list[str]
    nics: list[str]
    links: dict[tuple[str, str], str]
    cpu_affinity: dict[str, str | None]
    numa_affinity: dict[str, str | None]
    gpu_numa_id: dict[str, str | None] = field(default_factory=dict)
    source: str = field(default="topo", compare=False)

    @property
    def devices(self) -> list[str]:
        return self.gpus + self.nics

    def link(self, a: str, b: str) -> str:
        for name in (a, b):
            if name not in self.gpus and name not in self.nics:
                raise KeyError(f"{name!r} is not a device of this topology ({', '.join(self.devices)})")
        return "X" if a == b else self.links[(a, b)]

    def nvlink_pairs(self) -> list[tuple[str, str, int]]:
        """(gpu, gpu, bonded NVLink count) for every GPU pair joined by NVLink, each pair once."""
        pairs = []
        for i, a in enumerate(self.gpus):
            for b in self.gpus[i + 1 :]:
                m = _NV.match(self.links[(a, b)])
                if m:
                    pairs.append((a, b, int(m.group(1))))
        return pairs

    def topology_class(self) -> str:
        """Short stable summary, e.g. '8xGPU NV2+NV1+NODE; 1xNIC mlx5_0 [80d549f6]' (the 8x V100 of FleetX).

        The words say what kinds of links there are; the digest covers the whole link matrix
        (device names and order included), so equal matrices give equal classes and any
        differing cell gives a different one. CPU/NUMA affinities are not part of the class.
        """
        gpu_kinds = sorted({self.links[(a, b)] for a in self.gpus for b in self.gpus if a != b}, key=_link_rank)
        words = f"{len(self.gpus)}xGPU"
        if gpu_kinds:
            words += " " + "+".join(gpu_kinds)
        if self.nics:
            words += f"; {len(self.nics)}xNIC {','.join(self.nics)}"
        canonical = ";".join(f"{a}>{b}={self.links[(a, b)]}" for a in self.devices for b in self.devices if a != b)
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:8]
        return f"{words} [{digest}]"

    def to_dict(self) -> dict:
        return {
            "gpus": list(self.gpus),
            "nics": list(self.nics),
            "links": {a: {b: self.links[(a, b)] for b in self.devices if b != a} for a in self.devices},
            "cpu_affinity": dict(self.cpu_affinity),
            "numa_affinity": dict(self.numa_affinity),
            "gpu_numa_id": dict(self.gpu_numa_id),
            "class": self.topology_class(),
        }

    @classmethod
    def from_dict(cls, d: dict, source: str = "topo") -> Topology:
        links = {(a, b): v for a, row in d["links"].items() for b, v in row.items()}
        return cls(
            list(d["gpus"]),
            list(d["nics"]),
            links,
            dict(d["cpu_affinity"]),
            dict(d["numa_affinity"]),
            dict(d.get("gpu_numa_id") or {}),
            source,
        )


def _split_header(line: str) -> list[str]:
    cells = line.split("\t") if "\t" in line else re.split(r"\s{2,}", line)
    return [c.strip() for c in cells if c.strip()]


def _affinity_values(fields: list[str], labels: list[str], tabbed: bool, source: str, lineno: int) -> dict:
    """Map the fields after the matrix cells to the affinity columns.

    nvidia-smi pads the last column with an extra tab ('0-31\\t\\tN/A', '0-47\\t0\\t\\tN/A') and
    may leave a value empty ('\\t\\t0\\t\\tN/A' when CPU affinity is unknown): the last non-empty
    field is the last column; the ones before it, less one separator, fill the others in order.
    """
    while fields and not fields[-1]:
        fields.pop()
    if not fields:
        return {}
    last = fields.pop()
    if tabbed and fields and not fields[-1]:
        fields.pop()
    if len(fields) != len(labels) - 1:
        raise EnvCaptureError(
            source, f"{len(fields) + 1} affinity values for {len(labels)} columns ({', '.join(labels)})", lineno
        )
    return dict(zip(labels, fields + [last], strict=True))


def parse_topo(text: str, source: str = "topo") -> Topology:
    """`nvidia-smi topo -m` output (tab-separated as printed, or space-aligned as pasted)."""
    lines = text.replace("\r\n", "\n").split("\n")
    header_at = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if header_at is None:
        raise EnvCaptureError(source, "empty topo output")
    header = _split_header(lines[header_at])
    n_dev = next((i for i, c in enumerate(header) if c in _AFFINITY_LABELS), len(header))
    columns, labels = header[:n_dev], header[n_dev:]
    if not columns or not _GPU.match(columns[0]):
        start = lines[header_at].strip()[:40]
        raise EnvCaptureError(source, f"not a topo -m matrix: header starts {start!r}", header_at + 1)
    for c in columns:
        if not _DEVICE.match(c):
            raise EnvCaptureError(source, f"header column {c!r} is not a device name", header_at + 1)
    if len(set(columns)) != len(columns):
        raise EnvCaptureError(source, "header names a device twice", header_at + 1)
    for c in labels:
        if c not in _AFFINITY_LABELS:
            raise EnvCaptureError(source, f"unknown column {c!r} after the device matrix", header_at + 1)

    rows: dict[str, tuple[list[str], dict, int]] = {}
    end = len(lines)
    for i in range(header_at + 1, len(lines)):
        raw = lines[i]
        if not raw.strip() or raw.strip() == "Legend:":
            end = i
            break
        tabbed = "\t" in raw
        fields = [f.strip() for f in raw.split("\t")] if tabbed else raw.split()
        label = fields[0]
        if label not in columns:
            raise EnvCaptureError(source, f"row {label!r} is not a device of the header", i + 1)
        if label in rows:
            raise EnvCaptureError(source, f"second row for {label}", i + 1)
        if len(fields) < len(columns) + 1:
            reason = f"ragged row {label}: {len(fields) - 1} cells for {len(columns)} devices"
            raise EnvCaptureError(source, reason, i + 1)
        cells = fields[1 : len(columns) + 1]
        for j, cell in enumerate(cells):
            if not _valid_link(cell):
                raise EnvCaptureError(
                    source,
                    f"unknown link {cell!r} in row {label}, column {columns[j]} (expected {_LINK_WORDS})",
                    i + 1,
                )
            if (cell == "X") != (columns[j] == label):
                raise EnvCaptureError(source, f"row {label}, column {columns[j]}: {cell!r} off the diagonal", i + 1)
        affinity = _affinity_values(fields[len(columns) + 1 :], labels, tabbed, source, i + 1)
        if affinity and not _GPU.match(label):
            raise EnvCaptureError(source, f"row {label} (a NIC) has affinity values", i + 1)
        rows[label] = (cells, affinity, i + 1)
    missing = [c for c in columns if c not in rows]
    if missing:
        raise EnvCaptureError(source, f"no matrix row for {', '.join(missing)} (output cut short?)", header_at + 1)

    legend = {}
    for raw in lines[end:]:
        m = _NIC_LEGEND.match(raw)
        if m:
            legend[m.group(1)] = m.group(2)
    name = {c: legend.get(c, c) for c in columns}
    if len(set(name.values())) != len(columns):
        raise EnvCaptureError(source, "NIC Legend gives two devices the same name")

    links = {(name[a], name[b]): rows[a][0][j] for a in columns for j, b in enumerate(columns) if a != b}
    gpus = [c for c in columns if _GPU.match(c)]

    def column(label: str) -> dict[str, str | None]:
        values = {g: rows[g][1].get(label) for g in gpus}
        return {g: None if v in (None, "", "N/A") else v for g, v in values.items()}

    return Topology(
        gpus=gpus,
        nics=[name[c] for c in columns if not _GPU.match(c)],
        links=links,
        cpu_affinity=column("CPU Affinity"),
        numa_affinity=column("NUMA Affinity"),
        gpu_numa_id=column("GPU NUMA ID"),
        source=source,
    )


# --------------------------------------------------------------------------- nvidia-smi -q -x

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


# --------------------------------------------------------------------------- /proc and /etc


@dataclass
class CpuInfo:
    model_name: str | None
    sockets: int | None
    cores: int | None  # physical cores over all sockets
    logical_cpus: int


def parse_cpuinfo(text: str, source: str = "/proc/cpuinfo") -> CpuInfo:
    blocks: list[dict[str, str]] = []
    for chunk in re.split(r"\n\s*\n", text):
        entry = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip().lower()] = value.strip()
        if "processor" in entry:
            blocks.append(entry)
    if not blocks:
        raise EnvCaptureError(source, "no 'processor' entries")
    models = [b["model name"] for b in blocks if b.get("model name")]
    sockets_seen = {b["physical id"] for b in blocks if "physical id" in b}
    pairs = {(b["physical id"], b["core id"]) for b in blocks if "physical id" in b and "core id" in b}
    sockets = len(sockets_seen) or None
    if pairs:
        cores: int | None = len(pairs)
    elif sockets and blocks[0].get("cpu cores", "").isdigit():
        cores = int(blocks[0]["cpu cores"]) * sockets
    else:
        cores = None
    return CpuInfo(model_name=models[0] if models else None, sockets=sockets, cores=cores, logical_cpus=len(blocks))


def parse_meminfo(text: str, source: str = "/proc/meminfo") -> int:
    """MemTotal in bytes."""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB\s*$", text, re.MULTILINE)
    if not m:
        raise EnvCaptureError(source, "no 'MemTotal: N kB' line")
    return int(m.group(1)) * 1024


def parse_os_release(text: str, source: str = "/etc/os-release") -> str:
    """PRETTY_NAME (or NAME VERSION) of an os-release file."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            values[key.strip()] = value.strip().strip("'\"")
    name = values.get("PRETTY_NAME") or " ".join(v for v in (values.get("NAME"), values.get("VERSION")) if v)
    if not name:
        raise EnvCaptureError(source, "neither PRETTY_NAME nor NAME")
    return name


# --------------------------------------------------------------------------- hosts


@dataclass
class HostCapture:
    host: str
    smi: SmiReport | None  # None: no GPU / no nvidia-smi on this host
    topology: Topology | None
    cpu: CpuInfo
    memory_bytes: int
    os_release: str
    kernel: str
    docker_version: str | None = None
    ib_devices: list[str] = field(default_factory=list)
    nic: str | None = None  # the interface for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME

    @property
    def has_gpu(self) -> bool:
        return self.smi is not None and bool(self.smi.gpus)

    def to_dict(self) -> dict:
        return {
            "host": self.host,
            "smi": self.smi.to_dict() if self.smi else None,
            "topology": self.topology.to_dict() if self.topology else None,
            "cpu": asdict(self.cpu),
            "memory_bytes": self.memory_bytes,
            "os_release": self.os_release,
            "kernel": self.kernel,
            "docker_version": self.docker_version,
            "ib_devices": list(self.ib_devices),
            "nic": self.nic,
        }

    @classmethod
    def from_dict(cls, d: dict) -> HostCapture:
        return cls(
            host=d["host"],
            smi=SmiReport.from_dict(d["smi"]) if d.get("smi") else None,
            topology=Topology.from_dict(d["topology"]) if d.get("topology") else None,
            cpu=CpuInfo(**d["cpu"]),
            memory_bytes=d["memory_bytes"],
            os_release=d["os_release"],
            kernel=d["kernel"],
            docker_version=d.get("docker_version"),
            ib_devices=list(d.get("ib_devices") or []),
            nic=d.get("nic"),
        )


def capture_from_probes(name: str, raw: dict[str, tuple[int, str]], nic: str | None = None) -> HostCapture:
    """The parsed machine description from raw probe outputs (pure)."""

    def ok(probe: str) -> str | None:
        code, text = raw.get(probe, (1, ""))
        return text if code == 0 and text.strip() else None

    smi = topo = None
    if ok("nvidia-smi-q"):
        smi = parse_query_xml(raw["nvidia-smi-q"][1], f"{name}: nvidia-smi -q -x")
    if ok("nvidia-smi-topo"):
        topo = parse_topo(raw["nvidia-smi-topo"][1], f"{name}: nvidia-smi topo -m")
    return HostCapture(
        host=name,
        smi=smi,
        topology=topo,
        cpu=parse_cpuinfo(raw["cpuinfo"][1], f"{name}:/proc/cpuinfo"),
        memory_bytes=parse_meminfo(raw["meminfo"][1], f"{name}:/proc/meminfo"),
        os_release=parse_os_release(raw["os-release"][1], f"{name}:/etc/os-release"),
        kernel=raw["kernel"][1].strip(),
        docker_version=(ok("docker") or "").strip() or None,
        ib_devices=sorted((ok("infiniband") or "").split()),
        nic=nic if nic and raw.get("nic", (1, ""))[0] == 0 else None,
    )


def capture_from_dir(name: str, host_dir: Path) -> HostCapture:
    """Parse a host's kept raw probe outputs again (env/<host>/probes.json + <probe>.txt), as an auditor does."""
    probes_file = host_dir / "probes.json"
    try:
        probes = json.loads(probes_file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EnvCaptureError(str(probes_file), f"cannot read: {exc}") from None
    raw = {}
    for probe, entry in probes.items():
        text_file = host_dir / f"{probe}.txt"
        raw[probe] = (int(entry.get("exit", 1)), text_file.read_text() if text_file.is_file() else "")
    for needed in ("cpuinfo", "meminfo", "os-release", "kernel"):
        if needed not in raw:
            raise EnvCaptureError(str(probes_file), f"no {needed!r} probe recorded")
    return capture_from_probes(name, raw, (probes.get("nic") or {}).get("interface"))


@dataclass
class Verdict:
    """ok: no problem and no busy GPU. notes: differences that do not stop a run but belong in a report."""

    ok: bool
    problems: list[str]
    busy: dict[str, list[str]]
    no_gpu: list[str]
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"problem: {p}" for p in self.problems]
        out += [f"busy: {host}: {entry}" for host, entries in self.busy.items() for entry in entries]
        out += [f"no GPU: {host}" for host in self.no_gpu]
        out += [f"note: {n}" for n in self.notes]
        return out

    def to_dict(self) -> dict:
        return asdict(self)


def _differs(what: str, values: dict[str, str]) -> str | None:
    """'what differs: h1,h2 A, h3 B' when the hosts do not all share one value."""
    if len(set(values.values())) <= 1:
        return None
    groups: dict[str, list[str]] = {}
    for host, value in values.items():
        groups.setdefault(value, []).append(host)
    return f"{what} differs: " + ", ".join(f"{','.join(hosts)} {value}" for value, hosts in groups.items())


def consistency(captures: list[HostCapture], require_gpu: bool = False) -> Verdict:
    """Compare hosts that are to run one benchmark together.

    Problems: GPU model/count, driver, CUDA, topology class, network interface or InfiniBand
    devices differing; hosts with and without GPUs mixed; with require_gpu, any host
    without GPU. Busy: every process already on a GPU. no_gpu: hosts without GPUs (fine for
    CPU suites). Notes: CPU, memory, OS, kernel, Docker, ECC and power-limit differences.
    """
    if not captures:
        raise ValueError("consistency() needs at least one host capture")
    hosts = [c.host for c in captures]
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"host named twice: {sorted(h for h, n in Counter(hosts).items() if n > 1)}")
    problems: list[str] = []
    notes: list[str] = []
    gpu_hosts = [c for c in captures if c.has_gpu]
    no_gpu = [c.host for c in captures if not c.has_gpu]
    if require_gpu and no_gpu:
        problems.append(f"no GPU on {', '.join(no_gpu)} (this suite needs GPUs)")
    elif gpu_hosts and no_gpu:
        problems.append(f"GPUs on some hosts only: none on {', '.join(no_gpu)}")

    def check(what: str, values: dict[str, str], into: list[str]) -> None:
        message = _differs(what, values)
        if message:
            into.append(message)

    smi = {c.host: c.smi for c in gpu_hosts if c.smi is not None}
    models = {h: r.model_summary() for h, r in smi.items()}
    same_models = len({frozenset(Counter(g.product_name for g in r.gpus)) for r in smi.values()}) <= 1
    check("GPU model" if not same_models else "GPU count", models, problems)
    check("driver", {h: r.driver_version or "unknown" for h, r in smi.items()}, problems)
    check("CUDA version", {h: r.cuda_version or "unknown" for h, r in smi.items()}, problems)
    check(
        "topology", {c.host: c.topology.topology_class() if c.topology else "not captured" for c in gpu_hosts}, problems
    )
    if any(c.nic for c in captures):
        check("network interface (NCCL_SOCKET_IFNAME)", {c.host: c.nic or "none" for c in captures}, problems)
    if any(c.ib_devices for c in captures):
        check("InfiniBand device set", {c.host: ",".join(sorted(c.ib_devices)) or "none" for c in captures}, problems)

    check("CPU", {c.host: f"{c.cpu.model_name or 'unknown'} ({c.cpu.logical_cpus} logical)" for c in captures}, notes)
    check("memory", {c.host: f"{c.memory_bytes / 2**30:.0f} GiB" for c in captures}, notes)
    check("OS", {c.host: c.os_release for c in captures}, notes)
    check("kernel", {c.host: c.kernel for c in captures}, notes)
    check("Docker", {c.host: c.docker_version or "none" for c in captures}, notes)
    check("ECC", {h: "/".join(sorted({g.ecc_mode or "N/A" for g in r.gpus})) for h, r in smi.items()}, notes)
    check(
        "power limit",
        {
            h: "/".join(sorted({f"{g.power_limit_w:g} W" if g.power_limit_w else "N/A" for g in r.gpus}))
            for h, r in smi.items()
        },
        notes,
    )

    busy = {}
    for host, report in smi.items():
        entries = [f"{g.name} runs {p.describe()}" for g in report.gpus for p in g.processes]
        if entries:
            busy[host] = entries
    return Verdict(ok=not problems and not busy, problems=problems, busy=busy, no_gpu=no_gpu, notes=notes)
