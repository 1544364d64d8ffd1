"""Kit-wide settings: one merge of built-in defaults, KIT_* environment variables and command-line flags.

Merge order, later wins, one setting at a time (the order kit.config.hosts follows for per-host values):
    1. built-in defaults
    2. KIT_* environment variables; an empty one is unset
    3. flags: resolve(flags), keyed by setting name; None or "" is a flag not given

    setting     default                          environment     flag
    hosts_file  None: ./hosts.yaml (hosts_path)  KIT_HOSTS_FILE  --hosts-file
    model_code  None: the images' CODE_ROOT      KIT_MODEL_CODE  -
    cache_dir   ~/.cache/kit                     KIT_CACHE_DIR   -
    debug       False                            KIT_DEBUG       -  (any non-empty value turns it on)

model_code is this machine's root of the reference programs' checkouts (kit.run.plan, kit.run.command); None means the
pinned images' root, kit.config.reference.CODE_ROOT. cache_dir holds the image builds' downloads
(kit.images.build). debug keeps the traceback of an internal error (kit.cli.main).

Per-host values (user, port, gpus, data_dir, ...) are not settings: kit.config.hosts merges them from
hosts.yaml with its own KIT_* variables (kit.config.hosts.ENV_VARS). KIT_MODEL_CODE is read by both: here
for runs on this machine, there as every host's `model_code` in multi-node jobs.

Only the standard library is imported here: the Fabric tasks (kit.tasks) use this module too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_HOSTS_FILE = Path("hosts.yaml")


def _default_cache_dir() -> Path:
    return Path(os.path.expanduser("~/.cache/kit"))


@dataclass(frozen=True)
class Settings:
    hosts_file: Path | None = None  # configured inventory; None: hosts.yaml in the current directory
    model_code: str | None = None  # None: kit.config.reference.CODE_ROOT
    cache_dir: Path = field(default_factory=_default_cache_dir)
    debug: bool = False

    @property
    def hosts_path(self) -> Path:
        """The hosts file to load: the configured one, else hosts.yaml."""
        return self.hosts_file or DEFAULT_HOSTS_FILE


# setting -> (environment variable, flag, parse); the table in the docstring above
SOURCES: dict[str, tuple[str, str | None, Callable[[Any], Any]]] = {
    "hosts_file": ("KIT_HOSTS_FILE", "--hosts-file", Path),
    "model_code": ("KIT_MODEL_CODE", None, str),
    "cache_dir": ("KIT_CACHE_DIR", None, Path),
    "debug": ("KIT_DEBUG", None, bool),
}


def resolve(flags: Mapping[str, Any] | None = None, env: Mapping[str, str] = os.environ) -> Settings:
    """Defaults, then the environment, then the flags given (a None or "" value is a flag not given)."""
    flags = flags or {}
    unknown = sorted(set(flags) - set(SOURCES))
    if unknown:
        raise ValueError(f"no such setting: {', '.join(unknown)}")
    values = {}
    for name, (var, _flag, parse) in SOURCES.items():
        if flags.get(name) not in (None, ""):
            values[name] = parse(flags[name])
        elif env.get(var):
            values[name] = parse(env[var])
    return Settings(**values)


def hosts_file(flag: str | Path | None = None, env: Mapping[str, str] = os.environ) -> Path:
    """The hosts file to load: --hosts-file, else $KIT_HOSTS_FILE, else hosts.yaml."""
    return resolve({"hosts_file": flag}, env).hosts_path


def configured_hosts_file(flag: str | Path | None = None, env: Mapping[str, str] = os.environ) -> Path | None:
    """The hosts file if one is configured (--hosts-file, else $KIT_HOSTS_FILE), else None."""
    return resolve({"hosts_file": flag}, env).hosts_file


def optional_hosts_file(flag: str | Path | None = None, env: Mapping[str, str] = os.environ) -> Path | None:
    """Where a hosts file is optional: the configured one (--hosts-file or $KIT_HOSTS_FILE alike: missing, it is
    an error when loaded), else hosts.yaml when present, else None."""
    configured = configured_hosts_file(flag, env)
    if configured is not None:
        return configured
    return DEFAULT_HOSTS_FILE if DEFAULT_HOSTS_FILE.is_file() else None
