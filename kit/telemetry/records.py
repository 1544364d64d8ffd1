"""What both telemetry readers return: Sample, Gpu, Telemetry; TelemetryError; the clock-event reason bits."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kit.core.inputs import InputError

# NVML's clocks-event (throttle) reason bits, by the names NVML and nvidia-smi use
REASONS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
}


def reason_names(bits: int) -> list[str]:
    """The names of the reason bits set in BITS (bits NVML may add later are left out)."""
    return [name for name, bit in REASONS.items() if bits & bit]


class TelemetryError(InputError):
    """A telemetry file that cannot be read; str() is one line: 'file[:line]: [field: ]reason'."""


@dataclass(frozen=True)
class Sample:
    """One GPU at one moment, whichever source read it; None where the source or the GPU has no such field."""

    t: float  # seconds since the epoch
    gpu: int  # the GPU's index
    sm_mhz: float | None
    mem_mhz: float | None
    power_w: float | None
    limit_w: float | None
    energy_mj: float | None  # NVML's total-energy counter (mJ since the driver loaded); None from nvidia-smi
    temp_c: float | None
    util_gpu: float | None  # %
    util_mem: float | None  # %
    mem_used_mib: float | None
    reasons: int | None  # clock-event reason bits (REASONS)
    # nvidia-smi's power.draw.instant where it has one: power_w (NVML's power usage, power.draw) is an average over
    # about a second on recent GPUs, which lags a ramp; energy is integrated from this one where every sample has it
    power_instant_w: float | None = None
    util_jpeg: float | None = None  # % of the JPEG engines; None from a sampler, driver or GPU that gives none


@dataclass(frozen=True)
class Gpu:
    """A sampled GPU as the file describes it (nvidia-smi names none: name None)."""

    index: int
    name: str | None
    uuid: str | None
    max_sm_mhz: float | None
    max_mem_mhz: float | None
    limit_w: float | None


@dataclass(frozen=True)
class Telemetry:
    """One telemetry file read. source None: the host had no GPU telemetry, `why` says what each source answered."""

    path: str
    source: str | None  # 'nvml' | 'smi' | None
    host: str | None
    interval_s: float | None
    started: float | None  # the sampler's start, seconds since the epoch
    gpus: tuple[Gpu, ...]
    samples: tuple[Sample, ...]  # in file order
    why: str | None = None

    def gpu(self, index: int) -> Gpu | None:
        return next((g for g in self.gpus if g.index == index), None)


# what nvidia-smi prints for a value the GPU or driver lacks (kit.hosts.capture.smi reads -q; it sits above this layer)
NOT_AVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]", "[Insufficient Permissions]")


def number(value: object, path: str, line: int, field: str) -> float | None:
    """A finite number from a JSON value or a CSV cell; None for null, an empty cell or a not-available word;
    anything else is a TelemetryError naming the file, line and field."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text or text in NOT_AVAILABLE:
            return None
        try:
            result = float(text)
        except ValueError:
            raise TelemetryError(path, f"{text[:40]!r} is not a number", line, field) from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        result = float(value)
    else:
        raise TelemetryError(path, f"{value!r} is not a number", line, field)
    if not math.isfinite(result):
        raise TelemetryError(path, f"{value!r} is not a finite number", line, field)
    return result
