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

from kit.suites import Case

REPO_ROOT = Path(__file__).resolve().parent.parent
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
