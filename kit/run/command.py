"""PURE: the ONE command builder — what starts rank r of a run on its host, for any case.

    command_for(run, rank, sites, port, hardware) -> RunCommand
        .program    the kit's harness (train.py, or its launcher) or the publisher's program (kit.config.reference)
        .launched   what the host starts: the program, through scripts/reference/launch.py for a publisher's
                    program (it records <log stem>.cmd.json first), in the site's container where it has an image

The harness, single process: `python train.py ...`; data parallel: the framework's launcher, one per host:
    python -m torch.distributed.run --nnodes N --node_rank R --nproc_per_node G --master_addr A --master_port P \
        train.py ...
    python -m paddle.distributed.launch --nnodes N --rank R --nproc_per_node G --master A:P --log_dir D train.py ...
A Site says what a rank finds where it runs (interpreter, harness, scripts, model code, image). The local
runner, the SSH runner and `kit bench --dry-run` all build their commands here; no process starts here.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from kit import REPO_ROOT
from kit.config import programs, reference
from kit.config.cases import Case
from kit.config.runtimes import DOCKER, ContainerRun, ContainerRuntime, Mount
from kit.config.runtimes.base import MEMLOCK_ULIMIT, STACK_ULIMIT
from kit.core.catalogue import contract, harness
from kit.core.layout import sidecar_name

# a CPU run's OpenMP threads sleep when they wait (GNU's and Intel's runtimes): spinning, they lose their cores
# to any other process and a figure falls many-fold (85x beside one busy process on 2 cores: docs/measurement.md)
CPU_OPENMP = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}

SCRIPTS = REPO_ROOT / "scripts"  # what runs on hosts and in images; never imports kit
HARNESS = SCRIPTS / "harness" / "train.py"
IMAGE_HARNESS = "/opt/kit/harness/train.py"  # where the images carry the harness (kit.images.spec)


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
    """train.py's flags for a case: the contract's (scripts/harness/contract.py) in its order, the device after
    the data, the threads last."""
    if case.data == "imagenet" and not data_list:
        raise ValueError(f"case {case.key} reads ImageNet: give the train_list.txt path")
    model = harness.MODELS[case.model]
    args = []
    for setting in contract.SETTINGS:
        value = getattr(case, setting.key)
        if setting.key == "data":
            value = data_list if case.data == "imagenet" else "synthetic"
        if setting.applies(model) and setting.gives(value):
            args += [setting.flag, str(value)]
        if setting.key == "data":
            args += ["--device", device]
    return args + (["--threads", str(threads)] if threads is not None else [])


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
    if case.impl != "harness":
        raise ValueError(f"case {case.key} is impl {case.impl!r}; only the kit's harness is built here")
    if placement.nnodes != case.nodes:
        raise ValueError(f"case {case.key} needs {case.nodes} node(s), the placement has {placement.nnodes}")
    if not 0 <= placement.node_rank < placement.nnodes:
        raise ValueError(f"node rank {placement.node_rank} outside 0..{placement.nnodes - 1}")
    script = [str(harness), *harness_args(case, threads, data_list, device)]
    env: dict[str, str] = {"PYTHONUNBUFFERED": "1"}
    if threads is not None or device == "cpu":  # a remote host's cores are not known here: its threads its own
        env.update(CPU_OPENMP)
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


# ---- a container per rank and host (kit.config.runtimes: docker, podman, ...) ----------------------------------

RUN_LABEL = "io.kit.run"  # run id: every container of a run is found (and removed) by it
CASE_LABEL = "io.kit.case"


def container_name(run_id: str, case_key: str, repeat: int, host: str) -> str:
    """A valid, unique, readable container name: kit-<run>-<case>-r<repeat>-<host>."""
    raw = f"kit-{run_id}-{case_key}-r{repeat}-{host}"
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.-") else "-" for ch in raw)[:200]


def kit_labels(run_id: str, case_key: str) -> tuple[tuple[str, str], ...]:
    return ((RUN_LABEL, run_id), (CASE_LABEL, case_key))


def cleanup_command(run_id: str, runtime: ContainerRuntime = DOCKER) -> list[str]:
    """argv removing every container labelled with the run id (the ids are listed on the host itself)."""
    return runtime.cleanup_argv(f"{RUN_LABEL}={run_id}")


# ---- one run, one rank: the harness or a publisher's program, native or in a container ---------------

LAUNCHER = "reference/launch.py"  # relative to scripts/: records the run, then becomes the program
SAMPLER = "telemetry/gpu_sampler.py"  # relative to scripts/: samples the GPUs beside every GPU run
# 200 ms: NVML's utilisation changes every ~200 ms (the H200 recording: equal pairs at 100 ms), the energy counter is
# exact at any rate, clocks and throttle reasons hold for seconds; a CPU run keeping every core busy lost 1.7% of its
# figure beside a sampler at 100 ms, 0.9% at 200 ms (make bench-telemetry; docs/measurement.md, "Why 200 ms")
SAMPLE_INTERVAL_MS = 200
# what a host needs from scripts/ to run every published program (staged to <work_dir>/kit-scripts): the launcher,
# what judges a checkout, each program's own scripts, the pinned trees' listings and the import placeholders
SCRIPT_FILES = (LAUNCHER, "reference/code_state.py",
                *sorted({s for p in programs.PROGRAMS.values() for s in p.scripts}),
                *sorted(p.relative_to(SCRIPTS).as_posix() for folder in ("trees", "placeholders")
                        for p in (SCRIPTS / "reference" / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts))


@dataclass(frozen=True)
class Container:
    """How the site wraps a rank in a container."""

    image: str
    mounts: tuple[Mount, ...] = ()
    user: str | None = None  # "uid:gid"; None: the image's user
    shm_size: str = "16g"
    workdir: str | None = None
    # the runtime whose `run` wraps the rank; None: the scheduler starts the step in the image (pyxis)
    runtime: ContainerRuntime | None = DOCKER


@dataclass(frozen=True)
class Site:
    """What one rank finds on the host it runs on (paths are that host's)."""

    name: str = "local"  # the host's name: container names, per-host folders
    address: str = "127.0.0.1"
    nic: str | None = None  # NIC for gloo/NCCL bootstrap traffic
    loopback: bool = False  # every rank on this one machine: bootstrap over lo
    python: str = "python3"
    harness: str = str(HARNESS)
    scripts: str = str(SCRIPTS)
    model_code: str = reference.CODE_ROOT
    train_list: str | None = None  # harness `data: imagenet` cases
    data_dir: str | None = None  # root of the data published programs read (<data_dir>/<format>/); None: theirs
    cpu_threads: int | None = None  # cores the harness processes share (CPU runs on this machine)
    launcher_logs: str | None = None  # paddle launcher --log_dir; None: the launcher's default
    sidecar: str | None = None  # where launch.py records a publisher's run (<log stem>.cmd.json)
    telemetry: str | None = None  # where a GPU run's samples go (<log stem>.gpu-telemetry); None: not sampled
    container: Container | None = None
    gpus: tuple[int, ...] | None = None  # the host's GPUs its ranks are pinned to (a sweep's GPU); None: 0..G-1

    def in_image(self) -> Site:
        """The same site as seen from inside its container: the image's interpreter, harness, scripts, code."""
        return replace(self, harness=IMAGE_HARNESS, scripts=reference.SCRIPTS_DIR, model_code=reference.CODE_ROOT)


@dataclass(frozen=True)
class RunCommand:
    program: Command  # the harness (or its launcher) / the publisher's argv and env
    launched: Command  # what the host starts
    reference: reference.RefCommand | None = None  # the publisher's command (cwd, methods), for reference cases

    @property
    def starts_nothing(self) -> bool:
        """True on hosts whose ranks rank 0 starts (mpirun over ssh): nothing to launch here."""
        return not self.launched.argv


def launch_argv(python: str, scripts_dir: str, cmd: reference.RefCommand, job: reference.RefJob,
                cluster: reference.Cluster, record: str) -> list[str]:
    """The line that records the run, prepares a patched copy or a scratch folder where needed and starts the
    program (its packages before the PYTHONPATH it inherits)."""
    meta = reference.record(cmd, job, cluster)
    argv = [python, f"{scripts_dir}/{LAUNCHER}", "--record", record, "--meta", json.dumps(meta, sort_keys=True),
            "--cwd", cmd.cwd]
    argv += ["--checkout", cmd.checkout] if cmd.checkout else []
    if (SCRIPTS / reference.listing_file(cmd.impl.code)).is_file():
        argv += ["--listing", f"{scripts_dir}/{reference.listing_file(cmd.impl.code)}"]
    for folder in cmd.pythonpath:
        argv += ["--pythonpath", folder]
    for module in cmd.impl.placeholders:
        argv += ["--placeholder", module]
    if cmd.scratch:
        argv += ["--scratch", *(a for name in cmd.impl.saves for a in ("--unlinked", name))]
    if cmd.work_copy:
        argv += ["--work-copy", cmd.work_copy]
    if cmd.patch:
        argv += ["--patch", f"{scripts_dir}/{cmd.patch}"]
    for name in cmd.add:
        argv += ["--add", f"{scripts_dir}/{name}"]
    for path in cmd.outputs:
        argv += ["--collect", path]
    return [*argv, "--", *cmd.argv]


def pinned_env(gpus: tuple[int, ...]) -> dict[str, str]:
    """What pins a process to these GPUs of its host: CUDA_VISIBLE_DEVICES by nvidia-smi's index, CUDA counting in
    nvidia-smi's order (PCI bus id; CUDA's own default puts the fastest first) so the index means the same GPU to
    CUDA, to NVML (the sampler: its --gpus count among CUDA_VISIBLE_DEVICES) and to the capture."""
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus)}


def command_for(case: Case, repeat: int, rank: int, sites: list[Site], port: int, hardware: str,
                run_id: str = "") -> RunCommand:
    """Rank `rank` of a run of `case` over `sites` (rank order; rank 0 is the master). A site pinned to some of its
    host's GPUs (Site.gpus, a GPU run) starts its rank under pinned_env; in a container the runtime gives it those
    GPUs alone (inside, CUDA counts them from 0) and the pin stays outside, for the sampler."""
    site = sites[rank]
    if site.gpus is not None and hardware == "gpu" and len(site.gpus) != case.gpus_per_node:
        raise ValueError(f"case {case.key} uses {case.gpus_per_node} GPU(s) a host; site {site.name} is pinned "
                         f"to {len(site.gpus)}: {list(site.gpus)}")
    pin = pinned_env(site.gpus) if site.gpus is not None and hardware == "gpu" else {}
    boxed = site.container is not None
    here = site.in_image() if boxed else site
    if case.impl == "reference":
        job = case.ref_job(hardware)
        cluster = reference.Cluster(rank, tuple(s.address for s in sites), port, site.nic)
        ref = reference.build(job, cluster, code_root=here.model_code, scripts_dir=here.scripts,
                              data_dir=reference.data_path(site.data_dir, job))
        program = Command(ref.argv, ref.env)
        if not ref.argv:
            return RunCommand(program, Command([]), ref)
        record = site.sidecar or sidecar_name(case.log_path(repeat).name)  # no run folder yet: beside the log
        python = "python3" if boxed else site.python
        # Open MPI tags each chunk it reads from a rank: Python writing print()'s text and its newline apart
        # (PYTHONUNBUFFERED) splits the lines; "" is unset for Python and overrides an image's ENV
        kit_env = {"PYTHONUNBUFFERED": "" if ref.impl.tagged_output else "1"}
        if hardware == "cpu":
            kit_env.update(CPU_OPENMP)
        if site.launcher_logs and "paddle.distributed.launch" in ref.argv:
            kit_env["PADDLE_LOG_DIR"] = site.launcher_logs  # every rank's workerlog.N, gathered with the run
        inner = Command(launch_argv(python, here.scripts, ref, job, cluster, record), {**kit_env, **ref.env})
    else:
        threads = max(1, site.cpu_threads // case.gpus_per_node) if hardware == "cpu" and site.cpu_threads else None
        nic = site.nic or ("lo" if site.loopback and case.processes > 1 else None)
        placement = Placement(len(sites), rank, sites[0].address, port, nic, site.address if len(sites) > 1 else None)
        inner = program = build_command(
            case, placement, python="python" if boxed else site.python, harness=here.harness, threads=threads,
            data_list=site.train_list, device="cpu" if hardware == "cpu" else "gpu",
            launcher_log_dir=site.launcher_logs if case.processes > 1 else None)
        ref = None
    box = site.container
    if not boxed or box.runtime is None:
        launched = Command(inner.argv, {**inner.env, "HOME": "/tmp"}) if boxed else inner
        launched = Command(launched.argv, {**launched.env, **pin}) if pin else launched
    else:  # pinned memory for NCCL/InfiniBand; CPU runs keep the host's limit (a sandbox may forbid raising it)
        launched = Command(box.runtime.run_argv(ContainerRun(
            image=box.image, name=container_name(run_id, case.key, repeat, site.name),
            labels=kit_labels(run_id, case.key), env={**inner.env, "HOME": "/tmp"},
            gpus=case.gpus_per_node if hardware == "gpu" else 0, devices=site.gpus if pin else (),
            shm_size=box.shm_size, mounts=box.mounts, user=box.user, workdir=box.workdir,
            ulimits=(MEMLOCK_ULIMIT, STACK_ULIMIT) if hardware == "gpu" else (STACK_ULIMIT,)), inner.argv), pin)
    return RunCommand(program, sampled(launched, site, case.gpus_per_node) if hardware == "gpu" else launched, ref)


def sampled(launched: Command, site: Site, gpus: int) -> Command:
    """LAUNCHED beside the GPU sampler on its host (outside any container: the host's Python and driver), which
    writes site.telemetry from the run's start to its end and ends as the run did."""
    if not site.telemetry:
        return launched
    sampler = [site.python, f"{site.scripts}/{SAMPLER}", "--out", site.telemetry, "--interval-ms",
               str(SAMPLE_INTERVAL_MS), "--gpus", ",".join(str(g) for g in range(gpus)), "--"]
    return Command([*sampler, *launched.argv], launched.env)
