"""HostCapture: one host's parsed machine description, from raw probe outputs or the files that keep them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from kit.core.inputs import parse_json
from kit.core.text import clean_output
from kit.hosts.capture.errors import EnvCaptureError
from kit.hosts.capture.smi import LATER_GPU_KEYS, SmiReport, parse_query_xml
from kit.hosts.capture.system import (
    CpuInfo,
    parse_cpu_quota,
    parse_cpuinfo,
    parse_cpus_allowed,
    parse_meminfo,
    parse_os_release,
)
from kit.hosts.capture.topo import Topology, parse_topo

LATER_HOST_KEYS = ("cpu_quota", "cpus_allowed")  # captured from 2026-12-05 (of_vintage)


def of_vintage(parsed: dict, stored: dict) -> dict:
    """A capture re-parsed now, as a capture.json of STORED's vintage: ones written before the kit captured the
    application clocks or the PCIe link (kit.hosts.capture.smi.LATER_GPU_KEYS) or the CPU quota (LATER_HOST_KEYS)
    lack those keys; a key any of STORED's GPUs holds is kept (and compared)."""
    if isinstance(stored, dict):
        parsed = {k: v for k, v in parsed.items() if k not in LATER_HOST_KEYS or k in stored}
    gpus = ((stored.get("smi") or {}).get("gpus") or []) if isinstance(stored, dict) else []
    absent = {k for k in LATER_GPU_KEYS if not any(k in g for g in gpus if isinstance(g, dict))}
    if not parsed.get("smi") or not gpus or not absent:
        return parsed
    smi = {**parsed["smi"], "gpus": [{k: v for k, v in g.items() if k not in absent}
                                     for g in parsed["smi"]["gpus"]]}
    return {**parsed, "smi": smi}


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
    cpu_quota: dict | None = None  # the tightest cgroup CPU quota {"cores", "file"}; None: none limits it
    cpus_allowed: int | None = None  # the logical CPUs its sessions may run on (affinity); None: not captured

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
            "cpu_quota": self.cpu_quota,
            "cpus_allowed": self.cpus_allowed,
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
            cpu_quota=d.get("cpu_quota"),
            cpus_allowed=d.get("cpus_allowed"),
        )


REQUIRED_PROBES = ("cpuinfo", "meminfo", "os-release", "kernel")


def capture_from_probes(name: str, raw: dict[str, tuple[int, str]], nic: str | None = None,
                        commands: dict[str, str] | None = None) -> HostCapture:
    """The parsed machine description from raw probe outputs (pure); commands (probe -> the command it ran)
    let a failed required probe's error say what ran, e.g. "h1: `cat /proc/cpuinfo` exited 127"."""

    def ok(probe: str) -> str | None:
        code, text = raw.get(probe, (1, ""))
        return clean_output(text) if code == 0 and text.strip() else None

    def ran(probe: str) -> str:
        command = (commands or {}).get(probe)
        return f"`{command}`" if command else f"probe {probe!r}"

    def required(probe: str) -> str:
        if probe not in raw:
            raise EnvCaptureError(name, f"no {probe!r} probe output")
        code, text = raw[probe]
        if code != 0:
            raise EnvCaptureError(name, f"{ran(probe)} exited {code}")
        return text

    texts = {probe: required(probe) for probe in REQUIRED_PROBES}
    kernel = clean_output(texts["kernel"]).strip()
    if not kernel:
        raise EnvCaptureError(name, f"{ran('kernel')} printed nothing")
    if raw.get("has-nvidia-smi", (1, ""))[0] == 0:  # installed: a failing nvidia-smi is a broken driver, not "no GPU"
        for probe in ("nvidia-smi-q", "nvidia-smi-topo"):
            code = raw.get(probe, (0, ""))[0]
            if code != 0:
                raise EnvCaptureError(name, f"{ran(probe)} exited {code}: nvidia-smi is installed but fails "
                                      "(a driver/library version mismatch after a driver update?)")
    smi = topo = None
    if ok("nvidia-smi-q"):
        smi = parse_query_xml(raw["nvidia-smi-q"][1], f"{name}: nvidia-smi -q -x")
    if ok("nvidia-smi-topo"):
        topo = parse_topo(raw["nvidia-smi-topo"][1], f"{name}: nvidia-smi topo -m")
    return HostCapture(
        host=name,
        smi=smi,
        topology=topo,
        cpu=parse_cpuinfo(texts["cpuinfo"], f"{name}:/proc/cpuinfo"),
        memory_bytes=parse_meminfo(texts["meminfo"], f"{name}:/proc/meminfo"),
        os_release=parse_os_release(texts["os-release"], f"{name}:/etc/os-release"),
        kernel=kernel,
        docker_version=(ok("docker") or "").strip() or None,
        ib_devices=sorted((ok("infiniband") or "").split()),
        nic=nic if nic and raw.get("nic", (1, ""))[0] == 0 else None,
        cpu_quota=parse_cpu_quota(text) if (text := ok("cpu-quota")) else None,
        cpus_allowed=parse_cpus_allowed(text, f"{name}: Cpus_allowed_list") if (text := ok("cpus-allowed")) else None,
    )


def capture_from_dir(name: str, host_dir: Path) -> HostCapture:
    """Parse a host's kept raw probe outputs again (env/<host>/probes.json + <probe>.txt), as an auditor does."""
    probes_file = host_dir / "probes.json"
    try:
        probes = parse_json(probes_file.read_bytes())
    except (OSError, ValueError) as exc:
        raise EnvCaptureError(str(probes_file), f"cannot read: {exc}") from None
    if not isinstance(probes, dict) or not all(isinstance(e, dict) for e in probes.values()):
        raise EnvCaptureError(str(probes_file), "not a JSON object of probe entries")
    raw, commands = {}, {}
    for probe, entry in probes.items():
        text_file = host_dir / f"{probe}.txt"
        code = entry.get("exit", 1)
        if not isinstance(code, int):
            raise EnvCaptureError(str(probes_file), f"{probe}: exit {code!r} is not an integer")
        raw[probe] = (code, text_file.read_text() if text_file.is_file() else "")
        if isinstance(entry.get("command"), str):
            commands[probe] = entry["command"]
    for needed in REQUIRED_PROBES:
        if needed not in raw:
            raise EnvCaptureError(str(probes_file), f"no {needed!r} probe recorded")
    return capture_from_probes(name, raw, (probes.get("nic") or {}).get("interface"), commands)
