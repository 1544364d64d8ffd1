"""One writer per run directory: an advisory lock (flock) on <run_dir>/.kit-run.lock naming its holder.

The kernel drops the lock when the holder exits, however it ends (kill -9 included), so a stale file never blocks.
The file is opened without following links: a symlink (or anything but a regular file) there is refused, never
written through.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import socket
import stat
from pathlib import Path

from kit.core.inputs import KitError

LOCK_NAME = ".kit-run.lock"
_held: dict[Path, int] = {}  # run dir -> fd, kept open for the life of this process


class RunDirBusy(KitError):
    """Another kit process writes this run directory."""


class LockFileError(KitError):
    """The lock file is a link or not a regular file (one line naming it)."""


def _open(path: Path, flags: int, mode: int = 0o644) -> int:
    """path opened without following a link; LockFileError naming it when it is a link or not a regular file."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LockFileError(f"{path}: the run's lock file is a symbolic link; refusing to follow it (remove "
                                "it: a kit process makes a new one)") from None
        if exc.errno == errno.EISDIR:
            raise LockFileError(f"{path}: the run's lock file is not a regular file; remove it (a kit process "
                                "makes a new one)") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LockFileError(f"{path}: the run's lock file is not a regular file; remove it (a kit process makes "
                            "a new one)")
    return fd


def holder(run_dir: Path) -> str:
    """'pid 123 on host node1 since ...' from the lock file, or what is known."""
    try:
        fd = _open(Path(run_dir) / LOCK_NAME, os.O_RDONLY)
        with os.fdopen(fd, "rb") as f:
            data = json.loads(f.read(4096))
        return f"pid {data['pid']} on {data['host']} since {data['since']}"
    except (OSError, ValueError, KeyError, TypeError, KitError):
        return "another process"


def acquire(run_dir: Path, then: str = "resume") -> None:
    """Hold run_dir's lock until this process exits; RunDirBusy naming the holder when another process has it
    (its message ends '..., then <then>')."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _held:
        return
    fd = _open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunDirBusy(f"{run_dir}: in use by kit {holder(run_dir)}; wait for it to finish (or stop it), "
                         f"then {then}") from None
    os.ftruncate(fd, 0)
    stamp = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": stamp}).encode() + b"\n")
    _held[run_dir] = fd


def is_busy(run_dir: Path) -> bool:
    """Whether another process holds run_dir's lock now (this process's own lock does not count)."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _held or not os.path.lexists(run_dir / LOCK_NAME):
        return False
    fd = _open(run_dir / LOCK_NAME, os.O_RDONLY)
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
