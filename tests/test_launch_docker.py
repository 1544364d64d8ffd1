"""The Docker runtime (kit.config.runtimes.docker): `docker run` argv around a harness command; kit.run.command's
container names, labels and cleanup."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import replace

import pytest

from kit.config.runtimes import DOCKER, ContainerRun
from kit.config.runtimes.base import MEMLOCK_ULIMIT, STACK_ULIMIT
from kit.run.command import (
    CASE_LABEL,
    RUN_LABEL,
    Command,
    Mount,
    cleanup_command,
    container_name,
    kit_labels,
)


def rank_container(image: str, run_id: str, case_key: str, name: str, memlock_unlimited: bool = True,
              **fields) -> ContainerRun:
    """A rank's container as kit.run.command.command_for asks for one (its labels and limits)."""
    limits = (MEMLOCK_ULIMIT, STACK_ULIMIT) if memlock_unlimited else (STACK_ULIMIT,)
    return ContainerRun(image=image, name=name, labels=kit_labels(run_id, case_key), ulimits=limits, **fields)


def docker_line(inner: Command, run: ContainerRun) -> Command:
    """The line the host starts: the inner command's environment passed into the container."""
    return Command(DOCKER.run_argv(replace(run, env=inner.env), inner.argv), {})

INNER = Command(
    [
        "python",
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "/opt/kit/harness/train.py",
        "--framework",
        "torch",
        "--batch-size",
        "256",
    ],
    {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "8", "HOME": "/tmp", "NCCL_SOCKET_IFNAME": "eth0"},
)
RUN = rank_container(
    image="kit/pytorch:a100-0123456789ab",
    run_id="a100-20261121-120000",
    case_key="torch/resnet50/bz256/N1C2/fp32",
    name="kit-a100-20261121-120000-torch-resnet50-bz256-N1C2-fp32-r1-gpu1",
    gpus=2,
    mounts=(Mount("/data/imagenet", "/data/imagenet", read_only=True), Mount("/srv/kit/runs/r1", "/work")),
    user="1000:1000",
    workdir="/work",
)


def test_docker_command_full_argv():
    cmd = docker_line(INNER, RUN)
    assert cmd.argv == [
        "docker", "run", "--rm", "--init", "--name", "kit-a100-20261121-120000-torch-resnet50-bz256-N1C2-fp32-r1-gpu1",
        "--label", "io.kit.run=a100-20261121-120000", "--label", "io.kit.case=torch/resnet50/bz256/N1C2/fp32",
        "--network", "host", "--ipc", "host", "--shm-size", "16g",
        "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "--gpus", '"device=0,1"',
        "--mount", "type=bind,source=/data/imagenet,target=/data/imagenet,readonly",
        "--mount", "type=bind,source=/srv/kit/runs/r1,target=/work",
        "--user", "1000:1000",
        "--workdir", "/work",
        "--env", "HOME=/tmp",
        "--env", "NCCL_SOCKET_IFNAME=eth0",
        "--env", "OMP_NUM_THREADS=8",
        "--env", "PYTHONUNBUFFERED=1",
        "kit/pytorch:a100-0123456789ab",
        "python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "/opt/kit/harness/train.py",
        "--framework", "torch", "--batch-size", "256",
    ]  # fmt: skip
    assert cmd.env == {}
    # the inner command is untouched
    assert INNER.env["HOME"] == "/tmp" and INNER.argv[0] == "python"


def test_docker_command_labels_and_image_position():
    cmd = docker_line(INNER, RUN)
    labels = [cmd.argv[i + 1] for i, a in enumerate(cmd.argv) if a == "--label"]
    assert labels == [f"{RUN_LABEL}=a100-20261121-120000", f"{CASE_LABEL}=torch/resnet50/bz256/N1C2/fp32"]
    assert RUN_LABEL == "io.kit.run" and CASE_LABEL == "io.kit.case"
    i = cmd.argv.index(RUN.image)
    assert cmd.argv[i + 1 :] == INNER.argv
    assert cmd.argv.count(RUN.image) == 1


def test_docker_command_cpu_minimal():
    run = rank_container(
        image="kit/cpu:0123456789ab",
        run_id="cpu-1",
        case_key="paddle/resnet50/bz32/N1C1/fp32",
        name="kit-cpu-1-x-r1-local",
        shm_size="2g",
    )
    cmd = docker_line(Command(["python3", "/opt/kit/harness/train.py"], {}), run)
    assert cmd.argv == [
        "docker", "run", "--rm", "--init", "--name", "kit-cpu-1-x-r1-local",
        "--label", "io.kit.run=cpu-1", "--label", "io.kit.case=paddle/resnet50/bz32/N1C1/fp32",
        "--network", "host", "--ipc", "host", "--shm-size", "2g",
        "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "kit/cpu:0123456789ab", "python3", "/opt/kit/harness/train.py",
    ]  # fmt: skip
    assert "--gpus" not in cmd.argv
    assert "--user" not in cmd.argv and "--workdir" not in cmd.argv and "--env" not in cmd.argv
    assert cmd.env == {}


@pytest.mark.parametrize("gpus,device", [(1, '"device=0"'), (4, '"device=0,1,2,3"'), (8, '"device=0,1,2,3,4,5,6,7"')])
def test_docker_command_gpus(gpus: int, device: str):
    run = rank_container(image="kit/paddle:v100-0123456789ab", run_id="r", case_key="k", name="n", gpus=gpus)
    argv = docker_line(Command(["python"], {}), run).argv
    assert argv.count("--gpus") == 1
    assert argv[argv.index("--gpus") + 1] == device


def test_docker_command_gpus_zero_has_no_gpus_flag():
    run = rank_container(image="kit/cpu:0123456789ab", run_id="r", case_key="k", name="n", gpus=0)
    argv = docker_line(Command(["python"], {"A": "1"}), run).argv
    assert "--gpus" not in argv
    assert not any("device=" in a for a in argv)


def test_docker_command_env_is_sorted_and_keeps_values():
    inner = Command(["python"], {"Z": "last", "A": "a b'c", "M": "x=y"})
    run = rank_container(image="img", run_id="r", case_key="k", name="n")
    argv = docker_line(inner, run).argv
    envs = [argv[i + 1] for i, a in enumerate(argv) if a == "--env"]
    assert envs == ["A=a b'c", "M=x=y", "Z=last"]


def test_docker_command_shell_line_round_trips():
    cmd = docker_line(INNER, RUN)
    line = cmd.shell()
    assert shlex.split(line) == cmd.argv
    assert line.startswith("docker run --rm --init ")


@pytest.mark.parametrize(
    "source,target",
    [
        ("/data/a,b", "/data"),
        ("/data", "/work,readonly"),
        ("/data/a:b", "/data"),
        ("/data", "/work:ro"),
        ("data/imagenet", "/data"),
        ("/data", "work"),
        ("./data", "/data"),
        ("", "/data"),
        ("/data/a=b", "/data"),
        ("/data/a\nb", "/data"),
    ],
)
def test_bad_mount_paths_raise(source: str, target: str):
    run = rank_container(image="img", run_id="r", case_key="k", name="n", mounts=(Mount(source, target),))
    with pytest.raises(ValueError, match="must be absolute"):
        docker_line(Command(["python"], {}), run)


def test_bad_second_mount_raises_too():
    run = rank_container(
        image="img",
        run_id="r",
        case_key="k",
        name="n",
        mounts=(Mount("/ok", "/ok"), Mount("/bad,x", "/ok2", read_only=True)),
    )
    with pytest.raises(ValueError, match="'/bad,x'"):
        docker_line(Command(["python"], {}), run)


# ---- container names ---------------------------------------------------------------------------

NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@pytest.mark.parametrize(
    "run_id,case_key,repeat,host",
    [
        ("a100-20261121-120000", "torch/resnet50/bz256/N1C8/amp", 1, "gpu1"),
        ("cpu-smoke-20261121-120000-2", "paddle/resnet50/bz32/N1C1/fp32", 3, "local"),
        ("my run:1", "torch/resnet50/bz256/N2C8/amp", 2, "host.example.com"),
        ("r", "a b/c@d#e$f%g&h*i(j)k+l=m", 10, "h_1"),
    ],
)
def test_container_name_characters(run_id: str, case_key: str, repeat: int, host: str):
    name = container_name(run_id, case_key, repeat, host)
    assert NAME_OK.match(name), name
    assert name.startswith("kit-")
    assert name.endswith(f"-r{repeat}-{host.replace(':', '-')}")


def test_container_name_exact():
    assert container_name("a100-20261121-120000", "torch/resnet50/bz256/N1C8/amp", 1, "gpu1") == (
        "kit-a100-20261121-120000-torch-resnet50-bz256-N1C8-amp-r1-gpu1"
    )


def test_container_name_unique_per_repeat_and_host():
    run_id, case = "a100-20261121-120000", "torch/resnet50/bz256/N2C8/amp"
    names = {container_name(run_id, case, r, h) for r in (1, 2, 3, 10, 11) for h in ("gpu1", "gpu2", "gpu10", "g.1")}
    assert len(names) == 5 * 4
    # and per case and run
    assert container_name(run_id, case, 1, "gpu1") != container_name(run_id, "torch/resnet50/bz128/N2C8/amp", 1, "gpu1")
    assert container_name(run_id, case, 1, "gpu1") != container_name(run_id + "-2", case, 1, "gpu1")


def test_container_name_non_ascii_is_replaced():
    """BUG: container_name keeps any character for which str.isalnum() is true, including non-ASCII
    letters and digits (ü, é, ², Arabic digits), which Docker rejects ([a-zA-Z0-9][a-zA-Z0-9_.-]+)."""
    name = container_name("läuf-1", "torch/resnet50/bz256/N1C1/fp32", 1, "gpü²")
    assert NAME_OK.match(name), f"not a valid Docker container name: {name!r}"


# ---- cleanup ----------------------------------------------------------------------------------


def _filter_word(script: str) -> str:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    return tokens[tokens.index("--filter") + 1]


@pytest.mark.parametrize("run_id", ["a100-20261121-120000", "run 1", "it's", "a b'c\"d$e`f", "x;rm -rf /"])
def test_cleanup_command_quotes_the_label_filter(run_id: str):
    cmd = cleanup_command(run_id)
    assert cmd[:2] == ["sh", "-c"] and len(cmd) == 3
    script = cmd[2]
    label = f"label=io.kit.run={run_id}"
    assert shlex.quote(label) in script
    assert _filter_word(script) == label
    # the script is valid sh
    proc = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 0, proc.stderr
    assert "docker ps -aq --filter " in script and "docker rm -f $ids" in script


def test_cleanup_command_exact():
    assert cleanup_command("r1") == [
        "sh",
        "-c",
        'ids=$(docker ps -aq --filter label=io.kit.run=r1); [ -z "$ids" ] || docker rm -f $ids >/dev/null',
    ]


def test_cleanup_label_matches_docker_command_label():
    run_label = docker_line(Command(["x"], {}), rank_container(image="i", run_id="r 1", case_key="k", name="n")).argv
    label = run_label[run_label.index("--label") + 1]
    assert _filter_word(cleanup_command("r 1")[2]) == f"label={label}"
