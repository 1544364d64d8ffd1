"""/proc/cpuinfo, /proc/meminfo and /etc/os-release: CPU, memory and OS of a host."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kit.core.text import clean_output
from kit.hosts.capture.errors import EnvCaptureError


@dataclass
class CpuInfo:
    model_name: str | None
    sockets: int | None
    cores: int | None  # physical cores over all sockets
    logical_cpus: int


def parse_cpuinfo(text: str, source: str = "/proc/cpuinfo") -> CpuInfo:
    blocks: list[dict[str, str]] = []
    for chunk in re.split(r"\n\s*\n", clean_output(text)):
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
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB\s*$", clean_output(text), re.MULTILINE)
    if not m:
        raise EnvCaptureError(source, "no 'MemTotal: N kB' line")
    return int(m.group(1)) * 1024


def parse_os_release(text: str, source: str = "/etc/os-release") -> str:
    """PRETTY_NAME (or NAME VERSION) of an os-release file."""
    values = {}
    for line in clean_output(text).splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            values[key.strip()] = value.strip().strip("'\"")
    name = values.get("PRETTY_NAME") or " ".join(v for v in (values.get("NAME"), values.get("VERSION")) if v)
    if not name:
        raise EnvCaptureError(source, "neither PRETTY_NAME nor NAME")
    return name


# Each line `<cgroup file>: <contents>`: the CPU-quota files of every cgroup this shell sits in, leaf to root (v2
# cpu.max; v1 cpu.cfs_quota_us and cpu.cfs_period_us), as probe "cpu-quota" prints them.
CPU_QUOTA_PROBE = (
    "while IFS=: read -r _ ctl p; do case \",$ctl,\" in ,,) r=/sys/fs/cgroup; fs=cpu.max ;; "
    "*,cpu,*) r=/sys/fs/cgroup/cpu; fs='cpu.cfs_quota_us cpu.cfs_period_us' ;; *) continue ;; esac; "
    "while :; do for f in $fs; do [ -r \"$r$p/$f\" ] && echo \"$r$p/$f: $(cat \"$r$p/$f\")\"; done; "
    "case \"$p\" in ''|/) break ;; esac; p=${p%/*}; done; done < /proc/self/cgroup; true"
)


def parse_cpu_quota(text: str) -> dict | None:
    """The tightest CPU quota over a host's cgroups from CPU_QUOTA_PROBE's lines: {"cores": quota / period,
    "file": the file that sets it}; None where no cgroup limits the CPU."""
    tightest: dict | None = None
    v1: dict[str, dict[str, int]] = {}
    for line in clean_output(text).splitlines():
        path, sep, value = line.partition(": ")
        if not sep:
            continue
        folder, _, name = path.rpartition("/")
        fields = value.split()
        if name == "cpu.max" and len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            cores, where = int(fields[0]) / int(fields[1]), path
        elif name in ("cpu.cfs_quota_us", "cpu.cfs_period_us") and len(fields) == 1 and \
                fields[0].lstrip("-").isdigit():
            v1.setdefault(folder, {})[name] = int(fields[0])
            both = v1[folder]
            if len(both) < 2 or both["cpu.cfs_quota_us"] <= 0 or both["cpu.cfs_period_us"] <= 0:
                continue
            cores, where = both["cpu.cfs_quota_us"] / both["cpu.cfs_period_us"], f"{folder}/cpu.cfs_quota_us"
        else:
            continue
        if tightest is None or cores < tightest["cores"]:
            tightest = {"cores": round(cores, 4), "file": where}
    return tightest


def parse_cpus_allowed(text: str, source: str = "/proc/self/status") -> int:
    """How many logical CPUs a process may run on (its affinity: Cpus_allowed_list, e.g. '0-3,8')."""
    m = re.search(r"^Cpus_allowed_list:\s*(\S+)\s*$", clean_output(text), re.MULTILINE)
    if not m:
        raise EnvCaptureError(source, "no 'Cpus_allowed_list:' line")
    count = 0
    for part in m.group(1).split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count
