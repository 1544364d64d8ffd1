#!/usr/bin/env python3
"""Sample what each GPU does while a run trains, into one raw file: beside a command, or until a signal.

    python3 gpu_sampler.py --out LOG_STEM.gpu-telemetry [--interval-ms 200] [--gpus 0,1] [--source auto|nvml|smi] \
        -- ARGV...                      # the run: sampled from its start to its end; exits as ARGV did
    python3 gpu_sampler.py --out FILE [...] [--seconds S]     # alone: until SIGTERM/SIGINT (or S seconds)

With ARGV (how the kit starts every run on a GPU host): ARGV runs as this process's child, in its session, its
output this process's; SIGTERM/SIGINT/SIGHUP are passed on to it; sampling stops when it ends, and this process
ends as it did (its exit status, or the signal that ended it). A sampler that cannot sample never fails the run:
the file then says why.

Two sources, each writing what it read, unreduced:
  nvml  NVML through nvidia-ml-py (pynvml), where the kit's Python runs: JSON lines, a header line
        {"telemetry": 1, "source": "nvml", ...the GPUs...} then one line per GPU per sample (SAMPLE_KEYS).
  smi   `nvidia-smi --query-gpu=FIELDS --format=csv,nounits -lms N`, where only the driver is there (a published
        program's image, a Slurm node): a header line "# telemetry 1 source smi ..." then nvidia-smi's own CSV, its
        header row included. FIELDS is SMI_FIELDS, less the ones this driver does not know (asked once first).
auto: nvml when pynvml imports and initialises, else smi. --gpus counts as CUDA does: among CUDA_VISIBLE_DEVICES where
that is set (a Slurm task's allocated GPUs, by index or UUID), else among all. A sampler held up (a loaded host, a
stopped process) takes its next sample when it resumes and keeps its interval from there, never a burst to catch up.
Alone: exit 0 when stopped by a signal or --seconds; 2 bad input; 3 no source works here (no GPU, no driver): the
file then holds the header and why. Standard library only, pynvml optional; never imports the kit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

SCHEMA = 1
# nvidia-smi --query-gpu names, in the order of the CSV; the ones a driver lacks are left out (asked first)
SMI_FIELDS = ("timestamp", "index", "name", "uuid", "clocks.current.sm", "clocks.current.memory", "clocks.max.sm",
              "power.draw", "power.draw.instant", "enforced.power.limit", "temperature.gpu", "utilization.gpu",
              "utilization.memory", "utilization.jpeg", "memory.used", "clocks_event_reasons.active")
SMI_OLD_NAMES = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}  # drivers before 535
INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')  # nvidia-smi's answer to a field it lacks
# one NVML sample of one GPU: seconds since the epoch, MHz, W, mJ (counter since the driver loaded), C, %, MiB, bits,
# % (the JPEG engines' utilisation; null where NVML gives none: no JPEG engine, MIG, an older driver or nvidia-ml-py)
SAMPLE_KEYS = ("t", "gpu", "sm_mhz", "mem_mhz", "power_w", "limit_w", "energy_mj", "temp_c", "util_gpu", "util_mem",
               "mem_used_mib", "reasons", "util_jpeg")
EXIT_BAD_INPUT, EXIT_NO_SOURCE = 2, 3


def parse(argv: list[str] | None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    dashed = "--" in argv
    command = argv[argv.index("--") + 1:] if dashed else []
    argv = argv[:argv.index("--")] if dashed else argv
    p = argparse.ArgumentParser(prog="gpu_sampler.py", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--interval-ms", type=int, default=200)
    p.add_argument("--gpus", default="", help="comma-separated indices among the run's visible GPUs (default: all)")
    p.add_argument("--source", choices=("auto", "nvml", "smi"), default="auto")
    p.add_argument("--seconds", type=float, default=0, help="stop after this long (default: at SIGTERM/SIGINT)")
    a = p.parse_args(argv)
    a.command = command
    if dashed and not command:
        p.error("nothing to run after --")
    if not 10 <= a.interval_ms <= 60_000:
        p.error(f"--interval-ms: 10 to 60000, got {a.interval_ms}")
    try:
        a.gpus = [int(g) for g in a.gpus.split(",") if g.strip()]
    except ValueError:
        p.error(f"--gpus: comma-separated integers, got {a.gpus!r}")
    return a


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stop:
    """Set by the deadline or set(): a stop signal (alone) or the end of the run (beside a command)."""

    def __init__(self, seconds: float = 0) -> None:
        self.event = threading.Event()
        self.deadline = time.monotonic() + seconds if seconds > 0 else None

    def set(self) -> None:
        self.event.set()

    def wait(self, seconds: float) -> bool:
        """True when it is time to stop (waits at most SECONDS)."""
        if self.deadline is not None:
            seconds = min(seconds, max(0.0, self.deadline - time.monotonic()))
            if self.event.wait(seconds) or time.monotonic() >= self.deadline:
                return True
            return False
        return self.event.wait(seconds)


def visible_gpus(gpus: list[int], env=os.environ) -> list[int | str]:
    """The devices the run's GPUs GPUS are (all where empty), as NVML indices or GPU UUIDs: positions among
    CUDA_VISIBLE_DEVICES where it is set (CUDA reads it up to its first entry that is neither), else the indices."""
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return list(gpus)
    devices: list[int | str] = []
    for entry in (e.strip() for e in listed.split(",")):
        if entry.isdigit():
            devices.append(int(entry))
        elif entry.startswith("GPU-"):
            devices.append(entry)
        else:
            break
    if not devices:
        raise ValueError(f"CUDA_VISIBLE_DEVICES={listed!r}: the run sees no GPU")
    if bad := [g for g in gpus if not 0 <= g < len(devices)]:
        raise ValueError(f"no GPU {bad[0]} among CUDA_VISIBLE_DEVICES={listed!r}")
    return [devices[g] for g in gpus] if gpus else devices


# ---- NVML ------------------------------------------------------------------------------------------------------

def nvml_open(gpus: list[int]):
    """(pynvml, [(index, handle)], the header's GPUs) or raises why not."""
    import pynvml

    wanted = visible_gpus(gpus)
    pynvml.nvmlInit()
    count = pynvml.nvmlDeviceGetCount()
    wanted = wanted or list(range(count))
    if bad := [g for g in wanted if isinstance(g, int) and not 0 <= g < count]:
        raise ValueError(f"no GPU {bad[0]} here (NVML sees {count})")
    handles = []
    for g in wanted:
        h = pynvml.nvmlDeviceGetHandleByIndex(g) if isinstance(g, int) else pynvml.nvmlDeviceGetHandleByUUID(g)
        handles.append((g if isinstance(g, int) else pynvml.nvmlDeviceGetIndex(h), h))
    described = []
    for g, h in handles:
        described.append({"index": g, "name": _str(pynvml.nvmlDeviceGetName(h)),
                          "uuid": _str(pynvml.nvmlDeviceGetUUID(h)),
                          "max_sm_mhz": _try(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
                          "max_mem_mhz": _try(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_MEM),
                          "limit_w": _milli(_try(pynvml.nvmlDeviceGetEnforcedPowerLimit, h))})
    return pynvml, handles, described


def _str(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _try(fn, *args):
    """FN(*ARGS), or None where this GPU does not support it."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001  (pynvml.NVMLError_NotSupported and kin: the field is absent, not fatal)
        return None


def _milli(value) -> float | None:
    return None if value is None else round(value / 1000, 3)


def nvml_sample(nv, g: int, h) -> dict:
    util = _try(nv.nvmlDeviceGetUtilizationRates, h)
    memory = _try(nv.nvmlDeviceGetMemoryInfo, h)
    reasons_of = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                  or nv.nvmlDeviceGetCurrentClocksThrottleReasons)
    reasons = _try(reasons_of, h)
    jpeg_of = getattr(nv, "nvmlDeviceGetJpgUtilization", None)  # an older nvidia-ml-py has none
    jpeg = None if jpeg_of is None else _try(jpeg_of, h)  # [percent, sampling period in us]
    return {"t": round(time.time(), 3), "gpu": g,
            "sm_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            "mem_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            "power_w": _milli(_try(nv.nvmlDeviceGetPowerUsage, h)),
            "limit_w": _milli(_try(nv.nvmlDeviceGetEnforcedPowerLimit, h)),
            "energy_mj": _try(nv.nvmlDeviceGetTotalEnergyConsumption, h),
            "temp_c": _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            "util_gpu": None if util is None else util.gpu, "util_mem": None if util is None else util.memory,
            "mem_used_mib": None if memory is None else round(memory.used / 2**20, 1),
            "reasons": reasons, "util_jpeg": None if jpeg is None else jpeg[0]}


def run_nvml(a: argparse.Namespace, out, stop: Stop) -> int:
    nv, handles, described = nvml_open(a.gpus)
    header = {"telemetry": SCHEMA, "source": "nvml", "interval_ms": a.interval_ms, "started": round(time.time(), 3),
              "host": os.uname().nodename, "driver": _str(_try(nv.nvmlSystemGetDriverVersion) or ""), "gpus": described}
    out.write(json.dumps(header) + "\n")
    step = a.interval_ms / 1000
    next_at = time.monotonic()
    while True:
        for g, h in handles:
            out.write(json.dumps(nvml_sample(nv, g, h)) + "\n")
        out.flush()
        now = time.monotonic()
        next_at = next_at + step if next_at + step > now else now + step  # held up: one interval from now
        if stop.wait(max(0.0, next_at - time.monotonic())):
            return 0


# ---- nvidia-smi ------------------------------------------------------------------------------------------------

def smi_fields(smi: str) -> list[str]:
    """SMI_FIELDS this driver answers (old names where it has those). nvidia-smi names the first field it lacks: that
    one is swapped for its old name or left out, and the rest asked again. So a missing field costs one call more, not
    every field a call of its own (each call starts nvidia-smi, up to a second on a busy host, before the first
    sample)."""
    fields = list(SMI_FIELDS)
    while fields:
        answer = _smi_answer(smi, ",".join(fields))
        if answer is None:
            return fields
        lacked = INVALID_FIELD.search(answer)
        if lacked is None or lacked.group(1) not in fields:
            if "not a valid field" in answer:  # worded otherwise: ask each field alone, then its old name
                alone = (next((c for c in (f, SMI_OLD_NAMES.get(f)) if c and _smi_answer(smi, c) is None), None)
                         for f in fields)
                return [f for f in alone if f]
            raise RuntimeError(f"{smi} --query-gpu: {answer.strip()[:500]}")  # no GPU, no driver
        i = fields.index(lacked.group(1))
        if fields[i] in SMI_OLD_NAMES:
            fields[i] = SMI_OLD_NAMES[fields[i]]
        else:
            del fields[i]
    return fields


def _smi_answer(smi: str, fields: str) -> str | None:
    """None when nvidia-smi answers FIELDS, else what it said instead."""
    try:
        done = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    said = done.stdout + done.stderr
    return None if done.returncode == 0 and "not a valid field" not in said else said or f"exit {done.returncode}"


def run_smi(a: argparse.Namespace, out, stop: Stop) -> int:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise FileNotFoundError("nvidia-smi is not on PATH")
    fields = smi_fields(smi)
    if "timestamp" not in fields or "index" not in fields:
        raise RuntimeError(f"{smi} answers none of the sampled fields")
    out.write(f"# telemetry {SCHEMA} source smi interval_ms {a.interval_ms} started {time.time():.3f} "
              f"host {os.uname().nodename}\n")
    out.flush()
    wanted = visible_gpus(a.gpus)
    argv = [smi, f"--query-gpu={','.join(fields)}", "--format=csv,nounits", f"--loop-ms={a.interval_ms}"]
    if wanted:
        argv.append(f"--id={','.join(map(str, wanted))}")
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, text=True)
    try:
        while not stop.wait(0.2):
            if proc.poll() is not None:  # a stop of the run's process group reached it first: keep what it took
                if _rows(a.out) >= 1:
                    return 0
                raise _smi_ended(argv, proc, a.out)
        deadline = time.monotonic() + max(2.0, 3 * a.interval_ms / 1000)  # a run shorter than nvidia-smi's start
        while proc.poll() is None and _rows(a.out) < 1 and time.monotonic() < deadline:  # still gets its one row
            time.sleep(0.05)
        if proc.poll() and _rows(a.out) < 1:  # it refused (no such GPU) before a row
            raise _smi_ended(argv, proc, a.out)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return 0


def _smi_ended(argv: list[str], proc: subprocess.Popen, path: Path) -> RuntimeError:
    """Why nvidia-smi ended: its stderr, else what it printed (its errors go to stdout: into the file)."""
    said = proc.stderr.read().strip() or " ".join(path.read_text(errors="replace").splitlines()[1:]).strip()
    return RuntimeError(f"{' '.join(argv)} ended: exit {proc.returncode}: {said[:500]}")


def _rows(path: Path) -> int:
    """nvidia-smi's data rows in the file so far (its header row and ours aside)."""
    try:
        return max(0, len(path.read_bytes().splitlines()) - 2)
    except OSError:
        return 0


def sample(a: argparse.Namespace, stop: Stop) -> int:
    """Sample into a.out from the first source that works until STOP; EXIT_NO_SOURCE (the file says why) if none."""
    sources = ["nvml", "smi"] if a.source == "auto" else [a.source]
    why = []
    with open(a.out, "w", buffering=1) as out:
        for source in sources:
            try:
                return (run_nvml if source == "nvml" else run_smi)(a, out, stop)
            except Exception as exc:  # noqa: BLE001  (no pynvml, no driver, no GPU: the next source, or say why)
                why.append(f"{source}: {type(exc).__name__}: {exc}")
                out.seek(0)
                out.truncate()
        out.write(json.dumps({"telemetry": SCHEMA, "source": None, "why": why}) + "\n")
    print(f"gpu_sampler.py: no GPU telemetry here: {'; '.join(why)}", file=sys.stderr, flush=True)
    return EXIT_NO_SOURCE


def beside(a: argparse.Namespace) -> int:
    """Run a.command as a child, sampling from its start to its end; end as it ended."""
    stop = Stop()
    try:
        child = subprocess.Popen(a.command)
    except OSError as exc:
        print(f"gpu_sampler.py: cannot start {a.command[0]}: {exc}", file=sys.stderr)
        return 127
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    sampler = threading.Thread(target=sample, args=(a, stop), name="kit-gpu-sampler", daemon=True)
    sampler.start()
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:  # a signal arrived while waiting: passed on, wait again
            continue
    stop.set()
    sampler.join(timeout=10)
    if code < 0:  # ended by a signal: end by the same one, so the caller sees what it would have seen
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    if a.command:
        return beside(a)
    stop = Stop(a.seconds)
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: stop.set())
    return sample(a, stop)


if __name__ == "__main__":
    sys.exit(main())
