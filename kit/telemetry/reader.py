"""read(): a gpu_sampler.py file, whichever source wrote it, by its first line."""

from __future__ import annotations

from pathlib import Path

from kit.core.inputs import read_input
from kit.telemetry import nvml, smi
from kit.telemetry.records import Telemetry, TelemetryError

SCHEMA = 1  # gpu_sampler.py's SCHEMA
SOURCES = ("nvml", "smi")


def _schema(value: object, path: str) -> None:
    if str(value) != str(SCHEMA):
        raise TelemetryError(path, f"telemetry schema {value!r}; this kit reads {SCHEMA}", 1, "telemetry")


def read(path: str | Path) -> Telemetry:
    """The samples of a telemetry file; a file of a host with no GPU telemetry reads as no samples and its why."""
    name = str(path)
    text = read_input(path, "telemetry file", TelemetryError).decode("utf-8", errors="replace")
    if text.strip() and not text.endswith("\n"):  # a cut row may still parse: '0x000000' of '0x0000000000000001'
        raise TelemetryError(name, "the last line has no newline: cut mid-line (the sampler stopped while writing); "
                                   "remove it to read the rest", text.count("\n") + 1)
    lines = text.split("\n")
    first = lines[0].rstrip("\r")
    if first.startswith("{"):
        header = nvml.json_object(first, name, 1)
        if "telemetry" not in header:
            raise TelemetryError(name, "a JSON line without 'telemetry': not a gpu_sampler.py header", 1)
        _schema(header["telemetry"], name)
        source = header.get("source")
        if source is None:  # the sampler found no source on that host
            why = header.get("why")
            why = "; ".join(map(str, why)) if isinstance(why, list) else str(why or "no reason given")
            return Telemetry(name, None, header.get("host"), None, None, (), (), why)
        if source != "nvml":
            raise TelemetryError(name, f"unknown source {source!r} (a JSON header is nvml's; known: "
                                       f"{', '.join(SOURCES)})", 1, "source")
        return nvml.parse(name, header, lines[1:])
    if first.startswith(smi.HEADER):
        header = smi.read_header(first, name)
        _schema(header["telemetry"], name)
        if header.get("source") != "smi":
            raise TelemetryError(name, f"unknown source {header.get('source')!r} (a '#' header is nvidia-smi's; "
                                       f"known: {', '.join(SOURCES)})", 1, "source")
        return smi.parse(name, header, [line.rstrip("\r") for line in lines[1:]])
    what = "empty" if not first.strip() else f"starts {first[:60]!r}"
    raise TelemetryError(name, f"not a gpu_sampler.py file ({what}; a JSON header or '# telemetry 1 source smi ...')",
                         1)
