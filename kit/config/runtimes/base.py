"""PURE: what the kit needs from a container runtime (ContainerRuntime), and the container it asks for
(ContainerRun). Argv only: the runners start the processes, on this machine or over SSH."""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

STACK_ULIMIT = "stack=67108864"  # 64 MiB: what NVIDIA's containers ask for
MEMLOCK_ULIMIT = "memlock=-1"  # pinned memory for NCCL/InfiniBand
_BAD_MOUNT_CHARS = (",", ":", "=", "\n")


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = False

    def bind(self) -> str:
        """`--mount`'s value; ValueError for a path that is relative or would split the value."""
        for path in (self.source, self.target):
            if not path.startswith("/") or any(c in path for c in _BAD_MOUNT_CHARS):
                raise ValueError(f"mount path {path!r}: must be absolute, without , : = or newlines")
        return f"type=bind,source={self.source},target={self.target}" + (",readonly" if self.read_only else "")


@dataclass(frozen=True)
class ContainerRun:
    """One container: removed when it ends, an init as pid 1, the host's network and IPC by default."""

    image: str
    name: str
    labels: tuple[tuple[str, str], ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = 0  # how many of the host's GPUs; 0: none
    devices: tuple[int, ...] = ()  # which, by the host's index (nvidia-smi's); (): 0..gpus-1
    shm_size: str = "16g"
    mounts: tuple[Mount, ...] = ()
    user: str | None = None  # "uid:gid"; None: the image's user
    workdir: str | None = None
    ulimits: tuple[str, ...] = (STACK_ULIMIT,)  # "name=soft[:hard]", in order
    network: str = "host"
    ipc: str = "host"

    @property
    def gpu_devices(self) -> tuple[int, ...]:
        """The host's GPUs the container gets, by index."""
        if self.devices and len(self.devices) != self.gpus:
            raise ValueError(f"container {self.name}: {self.gpus} GPU(s) asked, devices {list(self.devices)} given")
        return self.devices or tuple(range(self.gpus))


class ContainerRuntime(ABC):
    """A container engine's command line. `name` is what hosts.yaml's `runtime:` says."""

    name: str
    command: str  # the client on the host's PATH

    @abstractmethod
    def run_argv(self, run: ContainerRun, argv: list[str]) -> list[str]:
        """Start `argv` in the container and wait for it (the client ends as the command does)."""

    @abstractmethod
    def gpu_args(self, devices: tuple[int, ...]) -> list[str]:
        """The flags giving the container these GPUs of the host (by index; at least one)."""

    def remove_argv(self, name: str) -> list[str]:
        """Remove the named container, running or not."""
        return [self.command, "rm", "-f", name]

    def cleanup_argv(self, label: str) -> list[str]:
        """Remove every container carrying `label` ("key=value"), listed on the host itself."""
        where = shlex.quote(f"label={label}")
        return ["sh", "-c", f"ids=$({self.command} ps -aq --filter {where}); "
                f"[ -z \"$ids\" ] || {self.command} rm -f $ids >/dev/null"]

    def image_id_argv(self, ref: str) -> list[str]:
        """Print the image's ID (its digest) where the engine holds it; non-zero exit where it does not."""
        return [self.command, "image", "inspect", "--format", "{{.Id}}", ref]

    def pull_argv(self, ref: str) -> list[str]:
        return [self.command, "pull", "--quiet", ref]

    def load_argv(self) -> list[str]:
        """Load an image archive (`docker save`'s format) from stdin."""
        return [self.command, "load"]
