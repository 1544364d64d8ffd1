"""Reading user-supplied files, and the one error type for bad input.

Every bad input (a log, a claims file, later hosts.yaml) becomes an InputError whose str()
is one line for the user: 'file[:line]: [key: ]reason'.
"""

from __future__ import annotations

from pathlib import Path


class KitError(Exception):
    """A failure the user can act on: the CLI prints str() as one line and exits 2 (no traceback)."""


class InputError(Exception):
    def __init__(self, path: str | Path, reason: str, line: int | None = None, key: str | None = None):
        self.path, self.reason, self.line, self.key = str(path), reason, line, key
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {key + ': ' if key else ''}{reason}")


def read_input(path: str | Path, what: str, error: type[InputError] = InputError) -> bytes:
    """The bytes of a file the user named; any failure is `error` saying why in plain words."""
    p = Path(path)
    try:
        return p.read_bytes()
    except IsADirectoryError:
        raise error(p, f"is a directory, not a {what}") from None
    except FileNotFoundError:
        raise error(p, "no such file") from None
    except PermissionError:
        raise error(p, "permission denied") from None
    except OSError as exc:
        raise error(p, f"cannot read: {exc.strerror or exc}") from None
