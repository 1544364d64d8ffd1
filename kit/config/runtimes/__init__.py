"""PURE: the container runtimes a host may name (hosts.yaml `runtime:`, slurm `container:`): one module each beside
this one, registered in _ALL below, on kit.config.runtimes.base.ContainerRuntime.

    runtime("docker").run_argv(ContainerRun(image, name, ...), argv)   # `docker run ... image argv`
    runtime("native")                                                  # None: no container
    NAMES                                                              # what `runtime:` may say

Adding a runtime: a module here with a ContainerRuntime subclass, listed in _ALL; the inventory accepts its name and
the runners, the dry run and the plan ask it for every command line.
"""

from __future__ import annotations

from kit.config.runtimes import docker, podman
from kit.config.runtimes.base import ContainerRun, ContainerRuntime, Mount

_ALL = (docker.Docker(), podman.Podman())
RUNTIMES: dict[str, ContainerRuntime] = {r.name: r for r in _ALL}
NATIVE = "native"  # no container: the host's own Python
DEFAULT = "docker"  # hosts.yaml's built-in `runtime:`
NAMES = tuple(sorted([NATIVE, *RUNTIMES]))
DOCKER = RUNTIMES["docker"]


def runtime(name: str) -> ContainerRuntime | None:
    """The runtime of that name; None for native; ValueError naming the known ones."""
    if name == NATIVE:
        return None
    if name not in RUNTIMES:
        raise ValueError(f"runtime {name!r}: one of {', '.join(NAMES)}")
    return RUNTIMES[name]


__all__ = ["DEFAULT", "DOCKER", "NAMES", "NATIVE", "RUNTIMES", "ContainerRun", "ContainerRuntime", "Mount", "runtime"]
