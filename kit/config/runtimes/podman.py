"""Podman: docker's command line, daemonless. GPUs through CDI (`nvidia-ctk cdi generate` on the host); with the
host's IPC the container sees the host's /dev/shm, and Podman refuses a --shm-size beside it; `--init` needs
catatonit."""

from __future__ import annotations

from kit.config.runtimes.base import ContainerRun
from kit.config.runtimes.docker import Docker


class Podman(Docker):
    name = command = "podman"

    def shm_args(self, run: ContainerRun) -> list[str]:
        return [] if run.ipc == "host" else super().shm_args(run)

    def gpu_args(self, devices: tuple[int, ...]) -> list[str]:
        return [a for i in devices for a in ("--device", f"nvidia.com/gpu={i}")]
