"""Running the hardware yardstick (scripts/yardstick/hardware.py) on this host, in a process of this interpreter
(it needs PyTorch, as the harness does): its checked result, or a KitError saying why there is none.

    result = measure(device="gpu")          # {"device": "gpu", "gpu": "NVIDIA H200", "measures": [...], ...}
    gpu_present()                           # an NVIDIA driver's device node here: a GPU suite measures it first
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from kit.core.inputs import KitError, parse_json
from kit.results.yardstick import check_yardstick

HARDWARE = Path(__file__).resolve().parents[2] / "scripts" / "yardstick" / "hardware.py"
NVIDIA_DEVICE = Path("/dev/nvidiactl")
TIMEOUT_S = 300  # the defaults take ~20 s on an H200 (start, CUDA context and 7 measures of 5 windows)


def gpu_present() -> bool:
    return NVIDIA_DEVICE.exists()


def measure(device: str = "auto", repeats: int = 5, only: str | None = None, gemm_n: int | None = None,
            copy_mib: int | None = None, window_s: float | None = None, quiet: bool = False) -> dict:
    """hardware.py --json; its progress lines go to stderr as they come (quiet: kept from it)."""
    argv = [sys.executable, str(HARDWARE), "--json", "--device", device, "--repeats", str(repeats)]
    for flag, value in (("--only", only), ("--gemm-n", gemm_n), ("--copy-mib", copy_mib), ("--window-s", window_s)):
        if value is not None:
            argv += [flag, str(value)]
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE if quiet else None, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise KitError(f"yardstick: {HARDWARE.name} did not end within {TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = (done.stderr or "").strip().splitlines()[-1:] if quiet else []
        raise KitError(f"yardstick: {HARDWARE.name} exited {done.returncode}"
                       + (f": {said[0][:200]}" if said else " (its reason is above; it needs PyTorch, as the harness "
                          "does)"))
    try:
        result = parse_json(done.stdout)
    except ValueError as exc:
        raise KitError(f"yardstick: {HARDWARE.name} printed no JSON ({exc})") from None
    if not isinstance(result, dict):
        raise KitError(f"yardstick: {HARDWARE.name} printed no JSON object")
    check_yardstick(result, HARDWARE.name)
    result.setdefault("host", socket.gethostname())
    return result
