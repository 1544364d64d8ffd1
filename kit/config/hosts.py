"""Inventory: hosts.yaml -> validated HostConfig objects (errors name file:line:key). Pure: no SSH here.

A hosts file (see hosts.example.yaml, the documented example):
    schema_version: 1
    ssh: {known_hosts: ~/.ssh/known_hosts, accept_new_host_keys: false, connect_timeout: 10}
    defaults: {user: bench, gpus: 8, ...}          # any host key except name and address
    hosts:
      - {name: node1, address: 192.0.2.11, ...}    # any host key; the first host is rank 0

Merge order, later wins, one key at a time:
    1. built-in defaults (HOST_DEFAULTS, SSH_DEFAULTS below; `user` defaults to the local login
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

import difflib
import os
import pwd
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from kit.core.files import SCHEMA_VERSIONS
from kit.core.yamlio import ConfigError, LineDict, kind_name, load_yaml

SCHEMA_VERSION = SCHEMA_VERSIONS["hosts.yaml"]
RUNTIMES = ("docker", "native")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ADDRESS_RE = re.compile(r"^[A-Za-z0-9:][A-Za-z0-9._:%-]*$")  # DNS name, IPv4, IPv6 (with %zone)
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
SECRET_WORDS = ("password", "passwd", "passphrase")
MAX_CONNECT_TIMEOUT = 600  # seconds: an SSH connect that waits longer is a host that is not there
PASSWORD_REFUSED = "plaintext passwords are refused; use a key file or ssh-agent"

# key -> (accepted types, built-in default); None in the types means the key may be null/empty
HOST_KEYS: dict[str, tuple[tuple, Any]] = {
    "name": ((str,), None),
    "address": ((str,), None),
    "port": ((int,), 22),
    "user": ((str,), None),  # None: the local login name
    "key_file": ((str, None), None),  # None: ssh-agent and the default keys (~/.ssh/id_*)
    "gpus": ((int,), 0),  # 0: a CPU-only host
    "nic": ((str, None), None),  # NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME; None: let the library pick
    "ib_hca": ((str, None), None),  # NCCL_IB_HCA; None: no InfiniBand
    "data_dir": ((str,), "/var/tmp/kit/data"),
    "work_dir": ((str,), "/var/tmp/kit"),
    "runtime": ((str,), "docker"),
    "python": ((str,), "python3"),
    "model_code": ((str, None), None),  # the programs' checkouts (docker: mounted over /opt/models); None: the image's
}
SSH_KEYS: dict[str, tuple[tuple, Any]] = {
    "known_hosts": ((str, None), None),  # None: ~/.ssh/known_hosts
    "accept_new_host_keys": ((bool,), False),
    "connect_timeout": ((int, float), 10.0),
}
SYSTEM_KEYS = {"submitter": "organisation named in the bundle", "name": "system name in the bundle"}
# `slurm:` (kit cluster --scheduler slurm, kit.run.slurm): key -> (accepted types, default); no default: required
SLURM_KEYS: dict[str, tuple[tuple, Any]] = {
    "partition": ((str,), None),
    "account": ((str, None), None),
    "time_limit": ((int, None), None),  # minutes per case (each job step's srun --time); None: the case's timeout
    "gpus_per_node": ((int,), 0),  # --gpus-per-node of the allocation; 0: CPU only
    "container": ((str,), "auto"),  # auto, native, docker (docker run in the step), pyxis (srun --container-image)
    "images": ((str, dict, None), None),  # docker/pyxis: one image reference, or framework -> reference
    "model_code": ((str, None), None),  # the published programs' checkouts on the nodes (as a host's model_code)
    "data_dir": ((str, None), None),  # the data root on the nodes (<data_dir>/<format>/, as a host's data_dir)
    "shared_dir": ((str,), None),  # a directory every node and this machine see at the same path
    "python": ((str,), "python3"),
    "nic": ((str, None), None),
    "pending_timeout": ((int, float), 300),  # seconds an allocation may pend before the kit gives up
}
SLURM_CONTAINERS = ("auto", "native", "docker", "pyxis")
PER_HOST = ("name", "address")
HOST_DEFAULTS = {k: d for k, (_, d) in HOST_KEYS.items() if k not in PER_HOST}
SSH_DEFAULTS = {k: d for k, (_, d) in SSH_KEYS.items()}
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
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True, kw_only=True)
class HostConfig:
    name: str
    address: str
    port: int = 22
    user: str
    key_file: str | None = None
    gpus: int = 0
    nic: str | None = None
    ib_hca: str | None = None
    data_dir: str = HOST_DEFAULTS["data_dir"]
    work_dir: str = HOST_DEFAULTS["work_dir"]
    runtime: str = "docker"
    python: str = "python3"
    model_code: str | None = None
    line: int = 0  # line of the entry in the hosts file

    @property
    def label(self) -> str:
        """'node1 (192.0.2.11)', with ':port' when not 22: how messages name a host."""
        if self.port == 22:
            return f"{self.name} ({self.address})"
        return f"{self.name} ({f'[{self.address}]' if ':' in self.address else self.address}:{self.port})"


@dataclass(frozen=True, kw_only=True)
class SlurmConfig:
    partition: str
    shared_dir: str
    account: str | None = None
    time_limit: int | None = None
    gpus_per_node: int = 0
    container: str = "auto"
    images: dict[str, str] | None = None  # framework -> image reference (docker / pyxis)
    model_code: str | None = None
    data_dir: str | None = None
    python: str = "python3"
    nic: str | None = None
    pending_timeout: float = 300.0

    def image(self, framework: str) -> str | None:
        return (self.images or {}).get(framework)
    line: int = 0


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: list[HostConfig]
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts
    accept_new_host_keys: bool = False
    connect_timeout: float = 10.0
    schema_version: int = SCHEMA_VERSION
    submitter: str | None = None  # system: section, for the auditor bundle's system description
    system_name: str | None = None
    slurm: SlurmConfig | None = None  # `slurm:` section (kit cluster --scheduler slurm)

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def known_hosts_file(self) -> Path:
        return Path(os.path.expanduser(self.known_hosts or "~/.ssh/known_hosts"))

    def get(self, name: str) -> HostConfig:
        for host in self.hosts:
            if host.name == name:
                return host
        raise ConfigError(self.path, f"no host named {name[:100]!r}; {_nearest(name, self.names)}")

    def select(self, names: str | Iterable[str] | None) -> list[HostConfig]:
        """'a,b' or ['a', 'b'] -> those hosts in that order (the first is rank 0); None or '' -> all."""
        if not names:
            return list(self.hosts)
        wanted = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        for n in wanted:
            if wanted.count(n) > 1:
                raise ConfigError(self.path, f"host {n!r} named twice")
        return [self.get(n) for n in wanted if n]


class Where(NamedTuple):
    """Where a value came from: a file line, an environment variable, a flag, or the built-ins."""

    path: str | Path
    line: int | None
    key: str
    base: Path | None  # directory that relative local paths are taken from

    def error(self, reason: str) -> ConfigError:
        return ConfigError(self.path, reason, self.line, self.key)


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
            ssh[key] = _check(key, raw, where)

    common = {**HOST_DEFAULTS, "user": _local_user(env)}
    for key, raw in defaults.items():
        common[key] = _check(key, raw, Where(path, defaults.line_of(key), key, base))
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
            values[key] = _check(key, raw, Where(path, entry.line_of(key), key, base))
        for key, raw, where in host_late:
            values[key] = _check(key, raw, where)
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
        values[key] = _SLURM_CHECKS.get(key, lambda v, w: v)(raw, where)
    return SlurmConfig(**values, line=data.line_of("slurm") or 0)


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
    from kit.config.suites import FRAMEWORKS

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


def _nearest(name: str, names: list[str]) -> str:
    """'did you mean: node10, node01?' (the closest few of a fleet), or the names when there are few."""
    if len(names) <= 8:
        return f"known: {', '.join(names)}"
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"did you mean: {', '.join(close)}? " if close else ""
    return f"{hint}({len(names)} hosts in the inventory)"


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


def _check(key: str, raw: Any, where: Where) -> Any:
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
    if value not in RUNTIMES:
        raise where.error(f"{value!r}: must be one of {', '.join(RUNTIMES)}")
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
_SLURM_CHECKS = {
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

__all__ = ["ConfigError", "HostConfig", "Inventory", "SlurmConfig", "load_hosts", "ENV_VARS", "HOST_DEFAULTS",
           "SSH_DEFAULTS"]
