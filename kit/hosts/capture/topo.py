"""`nvidia-smi topo -m`: the device link matrix, CPU/NUMA affinities and the topology class."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from kit.core.text import clean_output
from kit.hosts.capture.errors import EnvCaptureError

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
    """Map the fields after the matrix cells to the columns after the matrix (affinities, then any unknown ones).

    nvidia-smi pads the last value and an N/A with one more tab ('0-31\\t\\tN/A', '0-15\\t0\\t\\tN/A') and may
    leave a value empty ('\\t\\t0\\t\\tN/A' when CPU affinity is unknown; NIC rows: all empty): trailing empty
    fields, and an empty one before the last value or an N/A, are no values. Every affinity column needs its
    value; unknown columns after them may lack theirs, or have more.
    """
    while fields and not fields[-1]:
        fields.pop()
    if not fields:
        return {}
    if tabbed:
        fields = [f for i, f in enumerate(fields) if f or (fields[i + 1] != "N/A" and i + 2 < len(fields))]
    known = max((i + 1 for i, c in enumerate(labels) if c in _AFFINITY_LABELS), default=0)
    if len(fields) < known or (known == len(labels) and len(fields) > known):
        raise EnvCaptureError(
            source, f"{len(fields)} affinity values for {len(labels)} columns ({', '.join(labels)})", lineno
        )
    return dict(zip(labels, fields, strict=False))


def parse_topo(text: str, source: str = "topo") -> Topology:
    """`nvidia-smi topo -m` output (tab-separated as printed, or space-aligned as pasted; escapes and CRs dropped).

    Columns after the affinity columns that this parser does not know (a newer driver's) are read and ignored."""
    lines = clean_output(text).split("\n")
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
