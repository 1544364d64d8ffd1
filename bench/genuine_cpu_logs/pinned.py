"""What the genuine-CPU-log drivers share (run_plsc.py, run_paddle_models18.py): the program's environment and its
run on one core with its whole log kept. NOT part of any program or of the kit."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


def program_environ(venv: Path, **extra: str) -> dict[str, str]:
    """The few variables the program runs with: the venv's `bin` first on PATH (its `python3`), one OpenMP/MKL thread,
    and EXTRA (e.g. PYTHONPATH of a shim, CPU_NUM)."""
    return {
        "PATH": f"{venv.resolve() / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        **extra,
    }


def run_pinned(argv: list[str], cwd: Path, env: dict[str, str], log: Path, cpu: str) -> tuple[int, float, float]:
    """Run ARGV in CWD pinned to core(s) CPU (taskset -c), its stdout and stderr together into LOG as printed:
    (exit code, started, finished) in seconds since 1970."""
    started = time.time()
    with log.open("wb") as sink:
        code = subprocess.run(["taskset", "-c", cpu, *argv], cwd=cwd, env=env, stdout=sink,
                              stderr=subprocess.STDOUT).returncode
    return code, started, time.time()
