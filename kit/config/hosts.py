"""Inventory: hosts.yaml -> validated HostConfig objects (errors name file:line:key). Pure: no SSH here.

A hosts file (see hosts.example.yaml, the documented example):
    schema_version: 1
    ssh: {known_hosts: ~/.ssh/known_hosts, accept_new_host_keys: false, connect_timeout: 10}
    defaults: {user: bench, gpus: 8, ...}          # any host key except name and address
    hosts:
      - {name: node1, address: 192.0.2.11, ...}    # any host key; the first host is rank 0

Merge order, later wins, one key at a time:
    1. built-in defaults (HOST_DEFAULTS, SSH_DEFAULTS of kit.config.inventory; `user` defaults to the local login
       name, as ssh does)
    2. `defaults:` in the file                     (host keys only)
    3. the host's own entry under `hosts:`         (host keys only; `ssh:` for the ssh keys)
    4. KIT_* environment variables (ENV_VARS below), applied to every host; an empty one is unset
    5. `overrides`: the command-line flags, applied to every host; a None value is a flag not given
Every value is checked where it enters, so an error names the file:line:key, the environment
variable or the flag it came from, even when a later layer replaces it.

Refused: any key whose name contains password/passwd/passphrase, anywhere (key files or ssh-agent
only); unknown keys; host names outside [A-Za-z0-9._-] (they name directories); two hosts with one
name or one address:port; relative data_dir/work_dir (remote paths are always quoted, so `~` would
not expand). Remote paths may contain spaces and shell metacharacters: kit.hosts.connect quotes every
command line. Local paths (key_file, known_hosts) may use `~`; relative ones in the file are taken
from the file's directory, relative ones from the environment or a flag from the current directory.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kit.config.host_values import CONTROL_RE, SLURM_CHECKS, Where, check
from kit.config.inventory import (
    HOST_DEFAULTS,
    HOST_KEYS,
    PER_HOST,
    SCHEMA_VERSION,
    SLURM_KEYS,
    SSH_DEFAULTS,
    SSH_KEYS,
    HostConfig,
    Inventory,
    SlurmConfig,
)
from kit.core.yamlio import ConfigError, LineDict, kind_name, load_yaml

SECRET_WORDS = ("password", "passwd", "passphrase")
PASSWORD_REFUSED = "plaintext passwords are refused; use a key file or ssh-agent"
SYSTEM_KEYS = {"submitter": "organisation named in the bundle", "name": "system name in the bundle"}
ENV_VARS = {
    "KIT_SSH_USER": "user",
    "KIT_SSH_PORT": "port",
    "KIT_SSH_KEY": "key_file",
    "KIT_GPUS": "gpus",
    "KIT_NIC": "nic",
    "KIT_IB_HCA": "ib_hca",
    "KIT_DATA_DIR": "data_dir",
    "KIT_WORK_DIR": "work_dir",
    "KIT_RUNTIME": "runtime",
    "KIT_PYTHON": "python",
    "KIT_MODEL_CODE": "model_code",
    "KIT_KNOWN_HOSTS": "known_hosts",
    "KIT_ACCEPT_NEW_HOST_KEYS": "accept_new_host_keys",
    "KIT_CONNECT_TIMEOUT": "connect_timeout",
}


def load_hosts(path: str | Path, env: Mapping[str, str] = os.environ,
               overrides: Mapping[str, Any] | None = None) -> Inventory:
    path = Path(path)
    data = load_yaml(path)
    _refuse_secrets(data, path)
    if not isinstance(data, LineDict):
        raise ConfigError(path, "top level must be a mapping (schema_version, ssh, defaults, hosts)", 1)
    _reject_unknown(data, {"schema_version", "ssh", "defaults", "hosts", "system", "slurm"}, path, "")
    if "schema_version" not in data:
        raise ConfigError(path, f"missing required key (this kit reads schema_version: {SCHEMA_VERSION})", 1,
                          "schema_version")
    version = data["schema_version"]
    if type(version) is not int or version != SCHEMA_VERSION:
        raise ConfigError(path, f"unsupported schema_version {version!r} (this kit reads "
                                f"{SCHEMA_VERSION})", data.line_of("schema_version"), "schema_version")
    ssh_section = _section(data, "ssh", path)
    _reject_unknown(ssh_section, set(SSH_KEYS), path, "ssh")
    defaults = _section(data, "defaults", path)
    _reject_unknown(defaults, set(HOST_KEYS) - set(PER_HOST), path, "defaults")
    entries = data.get("hosts")
    slurm = _slurm(data, path)
    if slurm is not None and "hosts" not in data:  # a Slurm cluster's nodes come from its allocations
        entries = []
    elif not isinstance(entries, list) or not entries:
        line = data.line_of("hosts") if "hosts" in data else 1
        raise ConfigError(path, "expected a non-empty list of hosts ({name: ..., address: ...})", line, "hosts")
    base = path.resolve().parent
    late = _late_layers(env, overrides or {})
    _refuse_secret_names(late)

    ssh = dict(SSH_DEFAULTS)
    for layer in ([(k, v, Where(path, ssh_section.line_of(k), k, base)) for k, v in ssh_section.items()],
                  [item for item in late if item[0] in SSH_KEYS]):
        for key, raw, where in layer:
            ssh[key] = check(key, raw, where)

    common = {**HOST_DEFAULTS, "user": _local_user(env)}
    for key, raw in defaults.items():
        common[key] = check(key, raw, Where(path, defaults.line_of(key), key, base))
    host_late = [item for item in late if item[0] in HOST_KEYS]
    hosts: list[HostConfig] = []
    names: dict[str, int] = {}
    addresses: dict[tuple[str, int], int] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, LineDict):
            raise ConfigError(path, f"host {i + 1} must be a mapping ({{name: ..., address: ...}})",
                              data.line_of("hosts"), "hosts")
        _reject_unknown(entry, set(HOST_KEYS), path, "hosts")
        for key in PER_HOST:
            if key not in entry:
                raise ConfigError(path, "missing required key", entry.line, key)
        values = dict(common)
        for key, raw in entry.items():
            values[key] = check(key, raw, Where(path, entry.line_of(key), key, base))
        for key, raw, where in host_late:
            values[key] = check(key, raw, where)
        host = HostConfig(**values, line=entry.line)
        for seen, ident, key in ((names, host.name.casefold(), "name"),
                                 (addresses, (host.address.lower(), host.port), "address")):
            if ident in seen:
                raise ConfigError(path, f"already used by the host at line {seen[ident]}", entry.line_of(key), key)
            seen[ident] = entry.line
        hosts.append(host)
    system = _system(data, path)
    return Inventory(path, hosts, ssh["known_hosts"], ssh["accept_new_host_keys"], float(ssh["connect_timeout"]),
                     submitter=system.get("submitter"), system_name=system.get("name"), slurm=slurm)


def _slurm(data: LineDict, path: Path) -> SlurmConfig | None:
    """`slurm: {partition: ..., shared_dir: ..., ...}` checked key by key (errors name slurm.<key>)."""
    if "slurm" not in data:
        return None
    section = _section(data, "slurm", path)
    _reject_unknown(section, set(SLURM_KEYS), path, "slurm")
    values: dict[str, Any] = {}
    for key, (kinds, _default) in SLURM_KEYS.items():
        if key not in section:
            if _default is None and None not in kinds:
                raise ConfigError(path, "missing required key", data.line_of("slurm"), f"slurm.{key}")
            continue
        raw, where = section[key], Where(path, section.line_of(key), f"slurm.{key}", None)
        types = tuple(k for k in kinds if k is not None)
        if None in kinds and raw is None:
            values[key] = None
            continue
        if not isinstance(raw, types) or isinstance(raw, bool):
            raise where.error(f"expected {kind_name(types)}, got {'null' if raw is None else type(raw).__name__}")
        if isinstance(raw, str) and (not raw.strip() or CONTROL_RE.search(raw)):
            raise where.error("expected a non-empty one-line string")
        values[key] = SLURM_CHECKS.get(key, lambda v, w: v)(raw, where)
    return SlurmConfig(**values, line=data.line_of("slurm") or 0)


def _system(data: LineDict, path: Path) -> dict[str, str]:
    """`system: {submitter: ..., name: ...}`: who submits and what the system is called (bundle only)."""
    section = _section(data, "system", path)
    _reject_unknown(section, set(SYSTEM_KEYS), path, "system")
    out = {}
    for key, value in section.items():
        if not isinstance(value, str) or not value.strip() or CONTROL_RE.search(value):
            raise ConfigError(path, "expected a non-empty one-line string", section.line_of(key), f"system.{key}")
        out[key] = value.strip()
    return out


def _section(data: LineDict, key: str, path: Path) -> LineDict:
    value = data.get(key)
    if value is None:
        return LineDict()
    if not isinstance(value, LineDict):
        raise ConfigError(path, f"expected a mapping, got {type(value).__name__}", data.line_of(key), key)
    return value


def _reject_unknown(entry: LineDict, known: set[str], path: Path, section: str) -> None:
    for key in entry:
        if key in known:
            continue
        if key in PER_HOST:
            reason = "is per host: set it in each entry under hosts:"
        elif section != "ssh" and key in SSH_KEYS:
            reason = "belongs under ssh: (it applies to every host)"
        elif section == "ssh" and key in HOST_KEYS:
            reason = "is a host key: put it under defaults: or in a host entry"
        else:
            reason = f"unknown key; known: {', '.join(sorted(known))}"
        raise ConfigError(path, reason, entry.line_of(key), str(key))


def _is_secret(key: object) -> bool:
    return any(word in str(key).lower() for word in SECRET_WORDS)


def _refuse_secrets(node: Any, path: Path) -> None:
    """Any key naming a password, at any depth, stops the load before anything else is read."""
    if isinstance(node, dict):
        for key, value in node.items():
            if _is_secret(key):
                line = node.line_of(key) if isinstance(node, LineDict) else None
                raise ConfigError(path, PASSWORD_REFUSED, line, str(key))
            _refuse_secrets(value, path)
    elif isinstance(node, list):
        for item in node:
            _refuse_secrets(item, path)


def _late_layers(env: Mapping[str, str], overrides: Mapping[str, Any]) -> list[tuple[str, Any, Where]]:
    """Environment, then flags, as (key, raw value, where) in the order they apply."""
    items = []
    for var, key in ENV_VARS.items():
        if env.get(var):
            items.append((key, env[var], Where("environment", None, var, Path.cwd())))
    for var in env:
        if var.startswith("KIT_") and _is_secret(var):
            items.append((var, None, Where("environment", None, var, None)))
    for key, value in overrides.items():
        if value is not None:
            items.append((key, value, Where("command line", None, key, Path.cwd())))
    return items


def _refuse_secret_names(items: list[tuple[str, Any, Where]]) -> None:
    for key, _, where in items:
        if _is_secret(key):
            raise where.error(PASSWORD_REFUSED)
        if key not in HOST_KEYS and key not in SSH_KEYS or key in PER_HOST:
            known = sorted(set(HOST_KEYS) - set(PER_HOST) | set(SSH_KEYS))
            raise where.error(f"unknown setting; known: {', '.join(known)}")


def _local_user(env: Mapping[str, str]) -> str:
    for var in ("LOGNAME", "USER"):
        if env.get(var):
            return env[var]
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return "root" if os.getuid() == 0 else str(os.getuid())



__all__ = ["ConfigError", "ENV_VARS", "load_hosts"]
