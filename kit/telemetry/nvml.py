"""gpu_sampler.py's NVML source: JSON lines, the header then one object per GPU per sample (its SAMPLE_KEYS).

    {"telemetry": 1, "source": "nvml", "interval_ms": 100, "started": 1795843984.28, "host": "vm", "driver": "...",
     "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-...", "max_sm_mhz": 1980, "max_mem_mhz": 3201,
               "limit_w": 700.0}]}
    {"t": 1795843984.283, "gpu": 0, "sm_mhz": 345, ..., "energy_mj": 2530801, ..., "reasons": 1}

Every sample key must be there (the sampler writes them all, null where NVML refused one) but util_jpeg, which
samplers before it did not write; t and gpu must be numbers.
"""

from __future__ import annotations

import json

from kit.core.inputs import parse_json
from kit.telemetry.records import Gpu, Sample, Telemetry, TelemetryError, number

# the sample's fields, as the sampler names them (t, gpu and reasons are read apart)
MEASURES = ("sm_mhz", "mem_mhz", "power_w", "limit_w", "energy_mj", "temp_c", "util_gpu", "util_mem", "mem_used_mib")
LATER = ("util_jpeg",)  # sampled since a later sampler: None where a file lacks it


def json_object(text: str, path: str, line: int) -> dict:
    """One JSON object of a line; a cut or malformed line is a TelemetryError naming it."""
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        raise TelemetryError(path, f"not a whole JSON object ({exc.msg} at column {exc.colno}: a cut line?)",
                             line) from None
    except ValueError as exc:
        raise TelemetryError(path, f"not a JSON object ({exc})", line) from None
    if not isinstance(data, dict):
        raise TelemetryError(path, f"a JSON {type(data).__name__}, not an object", line)
    return data


def _int(value: object, path: str, line: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TelemetryError(path, f"{value!r} is not an integer", line, field)
    return value


def _gpus(header: dict, path: str) -> tuple[Gpu, ...]:
    described = header.get("gpus")
    if not isinstance(described, list) or not all(isinstance(g, dict) for g in described):
        raise TelemetryError(path, "the header's gpus must be a list of objects", 1, "gpus")
    return tuple(Gpu(_int(g.get("index"), path, 1, "gpus.index"), g.get("name"), g.get("uuid"),
                     number(g.get("max_sm_mhz"), path, 1, "gpus.max_sm_mhz"),
                     number(g.get("max_mem_mhz"), path, 1, "gpus.max_mem_mhz"),
                     number(g.get("limit_w"), path, 1, "gpus.limit_w")) for g in described)


def _sample(data: dict, path: str, line: int) -> Sample:
    missing = [k for k in ("t", "gpu", *MEASURES, "reasons") if k not in data]
    if missing:
        raise TelemetryError(path, f"a sample without {', '.join(missing)} (a cut or foreign line?)", line, missing[0])
    t = number(data["t"], path, line, "t")
    if t is None:
        raise TelemetryError(path, "a sample without its time", line, "t")
    reasons = data["reasons"]
    return Sample(t, _int(data["gpu"], path, line, "gpu"),
                  *(number(data[k], path, line, k) for k in MEASURES),
                  None if reasons is None else _int(reasons, path, line, "reasons"),
                  **{k: number(data.get(k), path, line, k) for k in LATER})


def parse(path: str, header: dict, lines: list[str]) -> Telemetry:
    """The NVML file whose header object is HEADER and whose lines after it are LINES (line 2 onwards)."""
    interval = number(header.get("interval_ms"), path, 1, "interval_ms")
    if interval is None or interval <= 0:
        raise TelemetryError(path, "the header needs interval_ms > 0", 1, "interval_ms")
    gpus = _gpus(header, path)
    samples = []
    for line, text in enumerate(lines, 2):
        if text.strip():
            sample = _sample(json_object(text, path, line), path, line)
            if not any(g.index == sample.gpu for g in gpus):
                raise TelemetryError(path, f"a sample of GPU {sample.gpu}, which the header does not describe",
                                     line, "gpu")
            samples.append(sample)
    started = number(header.get("started"), path, 1, "started")
    return Telemetry(path, "nvml", header.get("host"), interval / 1000, started, gpus, tuple(samples))
