"""Reading user-supplied files, and the one error type for bad input.

Every bad input (a log, a claims file, later hosts.yaml) becomes an InputError whose str()
is one line for the user: 'file[:line]: [key: ]reason'.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

MAX_INPUT_BYTES = 2**30  # a log, list or results file the kit reads whole


class KitError(Exception):
    """A failure the user can act on: the CLI prints str() as one line and exits 2 (no traceback)."""


class InputError(Exception):
    def __init__(self, path: str | Path, reason: str, line: int | None = None, key: str | None = None):
        self.path, self.reason, self.line, self.key = str(path), reason, line, key
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {key + ': ' if key else ''}{reason}")


class NotRegularFile(OSError):
    """A pipe, socket or device where a file was expected."""


def open_regular(path: str | Path) -> BinaryIO:
    """A regular file opened for reading; a FIFO, socket or device raises NotRegularFile at once (never blocks),
    a folder IsADirectoryError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise IsADirectoryError(path) if stat.S_ISDIR(mode) else NotRegularFile(path)
    return os.fdopen(fd, "rb")


def read_input(path: str | Path, what: str, error: type[InputError] = InputError,
               max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file the user named, at most max_bytes; any failure is `error` saying why."""
    p = Path(path)
    try:
        with open_regular(p) as f:
            size = os.fstat(f.fileno()).st_size
            data = None
            if size <= max_bytes:  # read what stat says (f.read(n) allocates n), then whatever it grew by
                data = f.read(size + 1)
                if len(data) > size:
                    data += f.read(max_bytes + 1 - len(data))
    except NotRegularFile:
        raise error(p, f"not a regular file (a pipe, socket or device), so not a {what}") from None
    except IsADirectoryError:
        raise error(p, f"is a directory, not a {what}") from None
    except FileNotFoundError:
        raise error(p, "no such file") from None
    except PermissionError:
        raise error(p, "permission denied") from None
    except OSError as exc:
        raise error(p, f"cannot read: {exc.strerror or exc}") from None
    if data is None or len(data) > max_bytes:
        raise error(p, f"larger than {max_bytes} bytes, too large for a {what}")
    return data


def read_json_object(path: str | Path, what: str) -> dict:
    """A JSON object file the user named (read_input's checks); InputError naming it when it is not one."""
    try:
        data = parse_json(read_input(path, what))
    except ValueError as exc:
        raise InputError(path, f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object")
    return data


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {twice[:80]!r} in one JSON object (which value counts is ambiguous)")
    return obj


def parse_json(text: str | bytes) -> Any:
    """json.loads whose every failure is a ValueError (also an integer of thousands of digits, or nesting past
    the interpreter's recursion limit); an object naming a key twice is refused (json.loads keeps the last)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def aware_instant(value: Any) -> dt.datetime | None:
    """An ISO 8601 time with its zone (run.json `started`, say) as a datetime; None for anything else, a time
    without a zone included (not an instant)."""
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
