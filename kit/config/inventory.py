"""The inventory: its hosts, the SSH settings for all of them and an optional Slurm cluster, with each key's type and
built-in default (kit.config.hosts reads them from hosts.yaml). Pure: no SSH here."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.config.runtimes import DEFAULT as DEFAULT_RUNTIME
from kit.core.files import SCHEMA_VERSIONS
from kit.core.yamlio import ConfigError

SCHEMA_VERSION = SCHEMA_VERSIONS["hosts.yaml"]

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
    "runtime": ((str,), DEFAULT_RUNTIME),  # native, or a container runtime of kit.config.runtimes
    "python": ((str,), "python3"),
    "model_code": ((str, None), None),  # the programs' checkouts (in a container: over /opt/models); None: the image's
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
    "container": ((str,), "auto"),  # auto, native, a runtime (`docker run` in the step), pyxis (srun --container-image)
    "images": ((str, dict, None), None),  # a runtime or pyxis: one image reference, or framework -> reference
    "model_code": ((str, None), None),  # the published programs' checkouts on the nodes (as a host's model_code)
    "data_dir": ((str, None), None),  # the data root on the nodes (<data_dir>/<format>/, as a host's data_dir)
    "shared_dir": ((str,), None),  # a directory every node and this machine see at the same path
    "python": ((str,), "python3"),
    "nic": ((str, None), None),
    "pending_timeout": ((int, float), 300),  # seconds an allocation may pend before the kit gives up
}
PER_HOST = ("name", "address")
HOST_DEFAULTS = {k: d for k, (_, d) in HOST_KEYS.items() if k not in PER_HOST}
SSH_DEFAULTS = {k: d for k, (_, d) in SSH_KEYS.items()}


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
    runtime: str = DEFAULT_RUNTIME
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
    images: dict[str, str] | None = None  # framework -> image reference (a runtime / pyxis)
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


def _nearest(name: str, names: list[str]) -> str:
    """'did you mean: node10, node01?' (the closest few of a fleet), or the names when there are few."""
    if len(names) <= 8:
        return f"known: {', '.join(names)}"
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"did you mean: {', '.join(close)}? " if close else ""
    return f"{hint}({len(names)} hosts in the inventory)"

