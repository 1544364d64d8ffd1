"""STAND-IN pynvml (tests only): replays the real NVML samples recorded on an NVIDIA H200, driver 580.159.04
(tests/fixtures/gpu-runs/h200-20261128/telemetry/nvml-100ms.jsonl, or $STANDIN_NVML_SAMPLES), one recorded sample
per recorded interval of wall time since nvmlInit, looping (the energy counter keeps counting up across loops).
Only what scripts/telemetry/gpu_sampler.py calls is here.

nvmlDeviceGetJpgUtilization (as nvidia-ml-py 13.580.126 names it and shapes its answer): the recorded sample's util_jpeg where the recording has one; that recording has none,
so the JPEG utilisation the same H200's `nvidia-smi -q -x` recorded (0 %, COMPOSED: one value for every sample) and,
as the real call returns, [percent, sampling period in us] (the period, which no recording holds, is the recording's
interval: COMPOSED). $STANDIN_NVML_NOT_SUPPORTED (function names, comma-separated) makes those raise the real module's
NVMLError_NotSupported, as on a GPU without the engine."""

import json
import os
import re
import time
from pathlib import Path
from types import SimpleNamespace

RECORDED = Path(os.environ.get("STANDIN_NVML_SAMPLES") or Path(__file__).resolve().parents[2] / "fixtures"
                / "gpu-runs" / "h200-20261128" / "telemetry" / "nvml-100ms.jsonl")
SNAPSHOT = Path(__file__).resolve().parents[2] / "fixtures" / "gpu-runs" / "h200-20261128" / "nvidia-smi" / "q-x.xml"
NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
NVML_ERROR_NOT_SUPPORTED = 3
_state: dict = {}


class NVMLError(Exception):
    def __init__(self, value=None):
        super().__init__(value)
        self.value = value


class NVMLError_NotSupported(NVMLError):  # noqa: N801  (the real module's name for NVML_ERROR_NOT_SUPPORTED)
    def __str__(self):
        return "Not Supported"


def _refused(name: str) -> None:
    if name in os.environ.get("STANDIN_NVML_NOT_SUPPORTED", "").split(","):
        raise NVMLError_NotSupported(NVML_ERROR_NOT_SUPPORTED)


def nvmlInit():
    lines = [json.loads(line) for line in RECORDED.read_text().splitlines()]
    _state.update(header=lines[0], samples=[s for s in lines[1:] if s["gpu"] == 0], start=time.monotonic())


def nvmlShutdown():
    _state.clear()


def _now() -> dict:
    samples = _state["samples"]
    step = (time.monotonic() - _state["start"]) * 1000 // _state["header"]["interval_ms"]
    loops, i = divmod(int(step), len(samples))
    sample = dict(samples[i])
    sample["energy_mj"] += loops * (samples[-1]["energy_mj"] - samples[0]["energy_mj"])
    return sample


def nvmlSystemGetDriverVersion():
    return _state["header"]["driver"]


def nvmlDeviceGetCount():
    return len(_state["header"]["gpus"])


def nvmlDeviceGetHandleByIndex(index):
    return _state["header"]["gpus"][index]


def nvmlDeviceGetHandleByUUID(uuid):
    for gpu in _state["header"]["gpus"]:
        if gpu["uuid"] == (uuid.decode() if isinstance(uuid, bytes) else uuid):
            return gpu
    raise NVMLError("Not Found")  # the real module's NVMLError_NotFound


def nvmlDeviceGetIndex(handle):
    return handle["index"]


def nvmlDeviceGetName(handle):
    return handle["name"]


def nvmlDeviceGetUUID(handle):
    return handle["uuid"]


def nvmlDeviceGetMaxClockInfo(handle, kind):
    return handle["max_sm_mhz"] if kind == NVML_CLOCK_SM else handle["max_mem_mhz"]


def nvmlDeviceGetEnforcedPowerLimit(handle):
    return int(handle["limit_w"] * 1000)


def nvmlDeviceGetClockInfo(handle, kind):
    return _now()["sm_mhz" if kind == NVML_CLOCK_SM else "mem_mhz"]


def nvmlDeviceGetPowerUsage(handle):
    return int(_now()["power_w"] * 1000)


def nvmlDeviceGetTotalEnergyConsumption(handle):
    return _now()["energy_mj"]


def nvmlDeviceGetTemperature(handle, sensor):
    return _now()["temp_c"]


def nvmlDeviceGetUtilizationRates(handle):
    s = _now()
    return SimpleNamespace(gpu=s["util_gpu"], memory=s["util_mem"])


def nvmlDeviceGetMemoryInfo(handle, version=None):
    return SimpleNamespace(used=int(_now()["mem_used_mib"] * 2**20))


def nvmlDeviceGetCurrentClocksEventReasons(handle):
    return _now()["reasons"]


def nvmlDeviceGetJpgUtilization(handle):
    _refused("nvmlDeviceGetJpgUtilization")
    sample = _now()
    if "util_jpeg" not in sample:
        if "jpeg_util" not in _state:
            _state["jpeg_util"] = int(re.search(r"<jpeg_util>(\d+) %</jpeg_util>", SNAPSHOT.read_text()).group(1))
        sample["util_jpeg"] = _state["jpeg_util"]
    if sample["util_jpeg"] is None:  # recorded as refused there
        raise NVMLError_NotSupported(NVML_ERROR_NOT_SUPPORTED)
    return [sample["util_jpeg"], _state["header"]["interval_ms"] * 1000]
