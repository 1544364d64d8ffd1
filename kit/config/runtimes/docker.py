"""Docker: `docker run` (GPUs through the NVIDIA container toolkit's --gpus)."""

from __future__ import annotations

from kit.config.runtimes.base import ContainerRun, ContainerRuntime


class Docker(ContainerRuntime):
    name = command = "docker"

    def run_argv(self, run: ContainerRun, argv: list[str]) -> list[str]:
        out = [self.command, "run", "--rm", "--init", "--name", run.name]
        for key, value in run.labels:
            out += ["--label", f"{key}={value}"]
        out += ["--network", run.network, "--ipc", run.ipc, *self.shm_args(run)]
        for limit in run.ulimits:
            out += ["--ulimit", limit]
        out += self.gpu_args(run.gpu_devices) if run.gpus else []
        for mount in run.mounts:
            out += ["--mount", mount.bind()]
        out += ["--user", run.user] if run.user else []
        out += ["--workdir", run.workdir] if run.workdir else []
        for key, value in sorted(run.env.items()):
            out += ["--env", f"{key}={value}"]
        return [*out, run.image, *argv]

    def shm_args(self, run: ContainerRun) -> list[str]:
        return ["--shm-size", run.shm_size]

    def gpu_args(self, devices: tuple[int, ...]) -> list[str]:
        return ["--gpus", '"device=' + ",".join(str(i) for i in devices) + '"']
