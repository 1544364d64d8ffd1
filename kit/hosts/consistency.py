"""PURE: the cross-host check of hosts that are to run one benchmark together, and the busy-GPU verdict."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from kit.hosts.capture import HostCapture


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


def _watts(value: float | None) -> str:
    return f"{value:g} W" if value else "N/A"


def _mhz(value: int | None) -> str:
    return f"{value} MHz" if value else "N/A"


# what a GPU is set to that changes a figure (kit.hosts.capture.smi.GpuInfo): hosts of one run must agree
GPU_SETTINGS = {
    "power limit": lambda g: _watts(g.power_limit_w),
    "application clocks": lambda g: f"{_mhz(g.app_graphics_clock_mhz)} graphics, {_mhz(g.app_mem_clock_mhz)} memory",
    "persistence mode": lambda g: g.persistence_mode or "N/A",
    "ECC": lambda g: g.ecc_mode or "N/A",
}


def _differs(what: str, values: dict[str, str]) -> str | None:
    """'what differs: h1,h2 A, h3 B' when the hosts do not all share one value."""
    if len(set(values.values())) <= 1:
        return None
    groups: dict[str, list[str]] = {}
    for host, value in values.items():
        groups.setdefault(value, []).append(host)
    return f"{what} differs: " + ", ".join(f"{','.join(hosts)} {value}" for value, hosts in groups.items())


def consistency(captures: list[HostCapture], require_gpu: bool = False, gpu_settings: bool = True) -> Verdict:
    """Compare hosts that are to run one benchmark together.

    Problems: GPU model/count, driver, CUDA, topology class, network interface or InfiniBand
    devices differing; the GPUs' settings that change a figure differing (power limit, application clocks,
    persistence mode, ECC); hosts with and without GPUs mixed; with require_gpu, any host without GPU. Busy:
    every process already on a GPU. no_gpu: hosts without GPUs (fine for CPU suites). Notes: CPU, memory, OS,
    kernel and Docker differences. gpu_settings=False: as before they were problems (rule sets v1-v3): ECC and
    power limit differences are notes, application clocks and persistence mode not compared.
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
    for what, value in GPU_SETTINGS.items():  # each host's GPUs' values, joined: a host whose GPUs differ shows
        if gpu_settings or what in ("ECC", "power limit"):
            check(what, {h: "/".join(sorted({value(g) for g in r.gpus})) for h, r in smi.items()},
                  problems if gpu_settings else notes)

    busy = {}
    for host, report in smi.items():
        entries = [f"{g.name} runs {p.describe()}" for g in report.gpus for p in g.processes]
        if entries:
            busy[host] = entries
    return Verdict(ok=not problems and not busy, problems=problems, busy=busy, no_gpu=no_gpu, notes=notes)
