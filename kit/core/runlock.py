"""One writer per run directory: an advisory lock (flock) on <run_dir>/.kit-run.lock naming its holder.

The kernel drops the lock when the holder exits, however it ends (kill -9 included), so a stale file never blocks.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
from pathlib import Path

from kit.core.inputs import KitError

LOCK_NAME = ".kit-run.lock"
_held: dict[Path, int] = {}  # run dir -> fd, kept open for the life of this process


class RunDirBusy(KitError):
    """Another kit process writes this run directory."""


def holder(run_dir: Path) -> str:
    """'pid 123 on host node1 since ...' from the lock file, or what is known."""
    try:
        data = json.loads((Path(run_dir) / LOCK_NAME).read_text())
        return f"pid {data['pid']} on {data['host']} since {data['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def acquire(run_dir: Path) -> None:
    """Hold run_dir's lock until this process exits; RunDirBusy naming the holder when another process has it."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _held:
        return
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunDirBusy(f"{run_dir}: in use by kit {holder(run_dir)}; wait for it to finish (or stop it), "
                         "then resume") from None
    os.ftruncate(fd, 0)
    stamp = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": stamp}).encode() + b"\n")
    _held[run_dir] = fd


def is_busy(run_dir: Path) -> bool:
    """Whether another process holds run_dir's lock now (this process's own lock does not count)."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _held or not (run_dir / LOCK_NAME).is_file():
        return False
    fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def release(run_dir: Path) -> None:
    fd = _held.pop(Path(run_dir).resolve(), None)
    if fd is not None:
        os.close(fd)
