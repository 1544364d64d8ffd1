"""Each value of an inventory checked where it enters (a file line, an environment variable, a flag): its type,
text converted to that type, and the key's own rule (a host name, an absolute remote path, a TCP port, ...)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from kit.config import runtimes
from kit.config.inventory import HOST_KEYS, SSH_KEYS
from kit.core.yamlio import ConfigError, kind_name

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ADDRESS_RE = re.compile(r"^[A-Za-z0-9:][A-Za-z0-9._:%-]*$")  # DNS name, IPv4, IPv6 (with %zone)
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
MAX_CONNECT_TIMEOUT = 600  # seconds: an SSH connect that waits longer is a host that is not there
SLURM_CONTAINERS = ("auto", runtimes.NATIVE, *runtimes.RUNTIMES, "pyxis")
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class Where(NamedTuple):
    """Where a value came from: a file line, an environment variable, a flag, or the built-ins."""

    path: str | Path
    line: int | None
    key: str
    base: Path | None  # directory that relative local paths are taken from

    def error(self, reason: str) -> ConfigError:
        return ConfigError(self.path, reason, self.line, self.key)


def _from_text(key: str, raw: str, kinds: tuple, where: Where) -> Any:
    """Environment values and string flags are text: convert them to the key's type."""
    if bool in kinds:
        if raw.strip().lower() in TRUE + FALSE:
            return raw.strip().lower() in TRUE
        raise where.error(f"expected one of {', '.join(TRUE + FALSE)}, got {raw!r}")
    for kind in (int, float):
        if kind in kinds:
            try:
                return kind(raw)
            except ValueError:
                if float not in kinds or kind is float:
                    raise where.error(f"expected {kind_name(kinds)}, got {raw!r}") from None
    return raw


def check(key: str, raw: Any, where: Where) -> Any:
    kinds = (HOST_KEYS.get(key) or SSH_KEYS[key])[0]
    if isinstance(raw, str) and str not in kinds:
        if where.line is not None:  # in YAML a quoted "22" is a string by choice: say so
            raise where.error(f"expected {kind_name(tuple(k for k in kinds if k))}, got a string ({raw!r})")
        raw = _from_text(key, raw, kinds, where)
    if None in kinds and raw in (None, ""):
        return None
    types = tuple(k for k in kinds if k is not None)
    if not isinstance(raw, types) or (isinstance(raw, bool) and bool not in types):
        got = "null" if raw is None else type(raw).__name__
        raise where.error(f"expected {kind_name(types)}, got {got}")
    if isinstance(raw, str):
        if not raw:
            raise where.error("must not be empty")
        if CONTROL_RE.search(raw):
            raise where.error("contains a control character (newline, tab, NUL, ...)")
    return _VALIDATORS.get(key, lambda v, w: v)(raw, where)



def _positive(value: float, where: Where) -> float:
    if not 0 < value < float("inf"):
        raise where.error(f"must be more than 0, got {value}")
    return value


def _container(value: str, where: Where) -> str:
    if value not in SLURM_CONTAINERS:
        raise where.error(f"{value!r}: one of {', '.join(SLURM_CONTAINERS)}")
    return value


def _images(value: str | dict, where: Where) -> dict[str, str]:
    """One reference for every framework, or framework -> reference (a framework left out has no image)."""
    from kit.config.case_keys import FRAMEWORKS

    if isinstance(value, str):
        return dict.fromkeys(FRAMEWORKS, _image_ref(value, where))
    out = {}
    for framework, ref in value.items():
        if framework not in FRAMEWORKS:
            raise where.error(f"{framework!r}: not a framework ({', '.join(FRAMEWORKS)})")
        if not isinstance(ref, str):
            raise where.error(f"{framework}: expected an image reference, got {type(ref).__name__}")
        out[framework] = _image_ref(ref, where)
    return out


def _image_ref(ref: str, where: Where) -> str:
    if not ref.strip() or ref.startswith("-") or any(c.isspace() or c in ",\"'" for c in ref):
        raise where.error(f"{ref!r}: not an image reference (no spaces, commas or quotes; not starting with '-')")
    return ref



def _name(value: str, where: Where) -> str:
    if not NAME_RE.match(value):
        raise where.error(f"{value!r}: a host name is letters, digits, '.', '_', '-' (not first): it names "
                          "directories and appears on command lines")
    return value


def _address(value: str, where: Where) -> str:
    if not ADDRESS_RE.match(value):
        raise where.error(f"{value!r} is not a host name or IP address")
    return value


def _port(value: int, where: Where) -> int:
    if not 1 <= value <= 65535:
        raise where.error(f"{value} is not a TCP port (1-65535)")
    return value


def _gpus(value: int, where: Where) -> int:
    if value < 0:
        raise where.error("must be 0 (CPU only) or more")
    return value


def _no_dash(value: str, where: Where) -> str:
    if value.startswith("-"):
        raise where.error(f"{value!r} must not start with '-'")
    return value


def _no_space(value: str, where: Where) -> str:
    if any(c.isspace() for c in value):
        raise where.error(f"{value!r}: no spaces (a list is comma-separated, as NCCL reads it)")
    return value


def _remote_dir(value: str, where: Where) -> str:
    if not value.startswith("/"):
        raise where.error(f"{value!r} must be an absolute path on the host (it is quoted, so ~ does not expand)")
    if value.strip("/") == "":
        raise where.error("refusing '/': the kit writes and cleans up under this directory")
    return value


def _local_path(value: str, where: Where) -> str:
    expanded = os.path.expanduser(value)
    if not os.path.isabs(expanded) and where.base is not None:
        expanded = os.path.join(where.base, expanded)
    return os.path.normpath(expanded)


def _runtime(value: str, where: Where) -> str:
    if value not in runtimes.NAMES:
        raise where.error(f"{value!r}: must be one of {', '.join(runtimes.NAMES)}")
    return value


def _timeout(value: float, where: Where) -> float:
    if not 0 < value <= MAX_CONNECT_TIMEOUT:  # also NaN and inf
        raise where.error(f"must be more than 0 and at most {MAX_CONNECT_TIMEOUT} seconds, got {value}")
    return float(value)


_VALIDATORS = {
    "name": _name,
    "address": _address,
    "port": _port,
    "gpus": _gpus,
    "user": _no_dash,
    "python": _no_dash,
    "nic": _no_space,
    "ib_hca": _no_space,
    "data_dir": _remote_dir,
    "work_dir": _remote_dir,
    "model_code": _remote_dir,
    "key_file": _local_path,
    "known_hosts": _local_path,
    "runtime": _runtime,
    "connect_timeout": _timeout,
}
SLURM_CHECKS = {
    "partition": _no_dash,
    "account": _no_dash,
    "time_limit": _positive,
    "gpus_per_node": _gpus,
    "container": _container,
    "images": _images,
    "model_code": _remote_dir,
    "data_dir": _remote_dir,
    "shared_dir": _remote_dir,
    "python": _no_dash,
    "nic": _no_space,
    "pending_timeout": _positive,
}

