"""PURE command builder: (case, placement of this host) -> the argv and environment that start it.

Single process: `python train.py ...`. Data parallel: the framework's own launcher, one per host:
    python -m torch.distributed.run --nnodes N --node_rank R --nproc_per_node G --master_addr A --master_port P \
        train.py ...
    python -m paddle.distributed.launch --nnodes N --rank R --nproc_per_node G --master A:P --log_dir D train.py ...
No process is started here (see kit.bench / the multi-host runner).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from kit import REPO_ROOT
from kit.config.suites import Case

HARNESS = REPO_ROOT / "scripts" / "harness" / "train.py"


@dataclass(frozen=True)
class Placement:
    """Where this host sits in the job."""

    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    socket_ifname: str | None = None  # NIC for gloo/NCCL bootstrap traffic
    host_addr: str | None = None  # this host's address on that NIC (Paddle's launcher cannot always guess it)


@dataclass(frozen=True)
class Command:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """One line to paste into a shell (every argument quoted)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + shlex.join(self.argv)


def harness_args(
    case: Case, threads: int | None = None, data_list: str | None = None, device: str = "auto"
) -> list[str]:
    """train.py's flags for a case."""
    if case.data == "imagenet" and not data_list:
        raise ValueError(f"case {case.key} reads ImageNet: give the train_list.txt path")
    args = [
        "--framework", case.framework,
        "--model", case.model,
        "--batch-size", str(case.batch_size),
        "--precision", case.precision,
        "--image-size", str(case.image_size),
        "--num-classes", str(case.num_classes),
        "--warmup-steps", str(case.warmup_steps),
        "--measure-steps", str(case.measure_steps),
        "--data", data_list if case.data == "imagenet" else "synthetic",
        "--device", device,
    ]  # fmt: skip
    if case.channels_last:
        args.append("--channels-last")
    if threads is not None:
        args += ["--threads", str(threads)]
    return args


def build_command(
    case: Case,
    placement: Placement = Placement(),
    *,
    python: str = "python3",
    harness: str | Path = HARNESS,
    threads: int | None = None,
    data_list: str | None = None,
    device: str = "auto",
    launcher_log_dir: str | None = None,
) -> Command:
    if case.runner != "harness":
        raise ValueError(f"case {case.key} uses runner {case.runner!r}; only the kit's harness is built here")
    if placement.nnodes != case.nodes:
        raise ValueError(f"case {case.key} needs {case.nodes} node(s), the placement has {placement.nnodes}")
    if not 0 <= placement.node_rank < placement.nnodes:
        raise ValueError(f"node rank {placement.node_rank} outside 0..{placement.nnodes - 1}")
    script = [str(harness), *harness_args(case, threads, data_list, device)]
    env: dict[str, str] = {"PYTHONUNBUFFERED": "1"}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
        if case.framework == "paddle":
            env["FLAGS_paddle_num_threads"] = str(threads)
    if placement.socket_ifname:
        env["GLOO_SOCKET_IFNAME"] = placement.socket_ifname
        env["NCCL_SOCKET_IFNAME"] = placement.socket_ifname
    if case.processes == 1:
        return Command([python, *script], env)
    if case.framework == "torch":
        launcher = [
            python, "-m", "torch.distributed.run",
            "--nnodes", str(placement.nnodes),
            "--node_rank", str(placement.node_rank),
            "--nproc_per_node", str(case.gpus_per_node),
            "--master_addr", placement.master_addr,
            "--master_port", str(placement.master_port),
        ]  # fmt: skip
    else:
        launcher = [
            python, "-m", "paddle.distributed.launch",
            "--nnodes", str(placement.nnodes),
            "--nproc_per_node", str(case.gpus_per_node),
        ]  # fmt: skip
        if placement.nnodes > 1:
            master = f"{placement.master_addr}:{placement.master_port}"
            launcher += ["--rank", str(placement.node_rank), "--master", master]
            if placement.host_addr:
                launcher += ["--host", placement.host_addr]
        if launcher_log_dir:
            launcher += ["--log_dir", launcher_log_dir]
    return Command([*launcher, *script], env)


# ---- the Docker runtime: one `docker run` per case and host -------------------------------------

RUN_LABEL = "io.kit.run"  # run id: every container of a run is found (and removed) by it
CASE_LABEL = "io.kit.case"
IMAGE_HARNESS = "/opt/kit/harness/train.py"  # where the images carry the harness (kit.imagespec)
_BAD_MOUNT_CHARS = (",", ":", "=", "\n")


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class DockerRun:
    image: str  # a reference the host's engine holds (kit/cpu:<tag>)
    run_id: str
    case_key: str
    name: str  # container name, unique per run, case, repeat and host
    gpus: int = 0  # GPUs of this host given to the container (0..gpus-1); 0: none (CPU)
    shm_size: str = "16g"
    mounts: tuple[Mount, ...] = ()
    user: str | None = None  # "uid:gid"; None: the image's user
    # pinned memory for NCCL/InfiniBand; CPU runs keep the host's limit (a sandbox may forbid raising it)
    memlock_unlimited: bool = True
    workdir: str | None = None


def container_name(run_id: str, case_key: str, repeat: int, host: str) -> str:
    """A valid, unique, readable container name: kit-<run>-<case>-r<repeat>-<host>."""
    raw = f"kit-{run_id}-{case_key}-r{repeat}-{host}"
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.-") else "-" for ch in raw)[:200]


def docker_command(inner: Command, run: DockerRun) -> Command:
    """Wrap a harness command in `docker run`: host network and IPC, unlimited memlock, labels for cleanup."""
    argv = [
        "docker", "run", "--rm", "--init", "--name", run.name,
        "--label", f"{RUN_LABEL}={run.run_id}", "--label", f"{CASE_LABEL}={run.case_key}",
        "--network", "host", "--ipc", "host", "--shm-size", run.shm_size,
    ]  # fmt: skip
    if run.memlock_unlimited:
        argv += ["--ulimit", "memlock=-1"]
    argv += ["--ulimit", "stack=67108864"]
    if run.gpus:
        argv += ["--gpus", '"device=' + ",".join(str(i) for i in range(run.gpus)) + '"']
    for m in run.mounts:
        for path in (m.source, m.target):
            if not path.startswith("/") or any(c in path for c in _BAD_MOUNT_CHARS):
                raise ValueError(f"mount path {path!r}: must be absolute, without , : = or newlines")
        argv += ["--mount", f"type=bind,source={m.source},target={m.target}" + (",readonly" if m.read_only else "")]
    if run.user:
        argv += ["--user", run.user]
    if run.workdir:
        argv += ["--workdir", run.workdir]
    for key, value in sorted(inner.env.items()):
        argv += ["--env", f"{key}={value}"]
    return Command([*argv, run.image, *inner.argv], {})


def cleanup_command(run_id: str) -> list[str]:
    """argv removing every container labelled with the run id (the ids are listed on the host itself)."""
    label = shlex.quote(f"label={RUN_LABEL}={run_id}")
    return ["sh", "-c", f"ids=$(docker ps -aq --filter {label}); [ -z \"$ids\" ] || docker rm -f $ids >/dev/null"]
