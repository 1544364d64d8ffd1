"""What the genuine-CPU-log drivers share (run_plsc.py, run_paddle_models18.py, run_dle_tf1.py): the program's
environment, its run on one core with its whole log kept, and its code checked out of a git directory at its commit.
NOT part of any program or of the kit."""

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


def checkout(git: Path, commit: str, subdir: str, dest: Path) -> list[str]:
    """SUBDIR of the git directory GIT at COMMIT under DEST (git archive), each file's blob checked against the
    commit's tree (SystemExit where one differs): the files."""
    archive = subprocess.run(["git", f"--git-dir={git}", "archive", commit, subdir], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    tree = subprocess.run(["git", f"--git-dir={git}", "ls-tree", "-r", commit, subdir], check=True,
                          capture_output=True, text=True).stdout.splitlines()
    files = []
    for row in tree:
        meta, path = row.split("\t", 1)
        blob = meta.split()[2]
        got = subprocess.run(["git", "hash-object", str(dest / path)], check=True, capture_output=True,
                             text=True).stdout.strip()
        if got != blob:
            raise SystemExit(f"{path}: blob {got}, the commit's is {blob}")
        files.append(path)
    return files
