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
