"""Podman for real, through the kit's runtime interface (kit.config.runtimes): a command run in an image with the
kit's mounts, environment, user, working directory and labels; the image's ID; a labelled container removed by the
run's cleanup. The image is made here, offline: a few of this machine's binaries and their libraries, `podman import`ed.
A missing podman (scripts/install_system_deps.sh installs it) fails, never skips."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kit.config.runtimes import RUNTIMES, ContainerRun, Mount
from kit.config.runtimes.base import STACK_ULIMIT
from kit.run.command import cleanup_command, kit_labels

PODMAN = RUNTIMES["podman"]
TOOLS = ("sh", "cat", "id", "pwd", "env", "sleep")
CAP_SYS_RESOURCE = 24


def sh(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def sandbox_limits() -> tuple[str, ...]:
    """Podman as root raises open files and processes past this machine's limits unless told; where root may not
    raise limits (no CAP_SYS_RESOURCE: a sandbox) the container gets the limits it may have."""
    caps = int(next(ln.split()[1] for ln in Path("/proc/self/status").read_text().splitlines()
                    if ln.startswith("CapEff:")), 16)
    if caps >> CAP_SYS_RESOURCE & 1:
        return ()
    import resource

    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 32768)  # podman caps its own processes at 32768
    return (f"nofile={nofile}:{nofile}", f"nproc={nproc}:{nproc}")


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    if shutil.which("podman") is None:
        pytest.fail("podman not installed (run scripts/install_system_deps.sh)", pytrace=False)
    root = tmp_path_factory.mktemp("rootfs")
    for tool in TOOLS:
        binary = Path(shutil.which(tool)).resolve()
        (root / "bin").mkdir(exist_ok=True)
        shutil.copy(binary, root / "bin" / tool)
        for lib in (w for w in sh("ldd", str(binary)).stdout.split() if w.startswith("/")):
            (root / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(lib, root / lib.lstrip("/"))
    ref = f"localhost/kit-test-podman:{uuid.uuid4().hex[:12]}"
    made = subprocess.run(["sh", "-c", f"tar -C {root} -c . | podman import - {ref}"], capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    yield ref
    sh("podman", "rmi", "-f", ref)


def test_a_command_runs_in_the_image_with_the_kits_mounts_env_user_and_workdir(image, tmp_path):
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    (data / "list.txt").write_text("train 1\n")
    run_id = f"podman-{uuid.uuid4().hex[:8]}"
    run = ContainerRun(image=image, name=f"kit-{run_id}-r1-local", labels=kit_labels(run_id, "torch/x"),
                       env={"PYTHONUNBUFFERED": "1", "HOME": "/tmp", "ODD": "a b'c"},
                       mounts=(Mount(str(data), "/data", read_only=True), Mount(str(work), str(work))),
                       user=f"{os.getuid()}:{os.getgid()}", workdir=str(work),
                       ulimits=(STACK_ULIMIT, *sandbox_limits()))
    script = ("cat /data/list.txt; id -u; pwd; echo \"$ODD\"; echo made > out.txt; "
              "echo x > /data/no 2>/dev/null || echo ro")
    res = sh(*PODMAN.run_argv(run, ["sh", "-c", script]))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["train 1", str(os.getuid()), str(work), "a b'c", "ro"]
    assert (work / "out.txt").read_text() == "made\n" and not (data / "no").exists()
    assert sh("podman", "ps", "-aq", "--filter", f"name={run.name}").stdout == ""  # --rm: gone when it ended
    ident = sh(*PODMAN.image_id_argv(image))
    assert ident.returncode == 0 and len(ident.stdout.strip()) == 64
    assert sh(*PODMAN.image_id_argv("localhost/kit-test-podman:absent")).returncode != 0


def test_the_runs_cleanup_removes_its_running_containers(image):
    run_id = f"podman-{uuid.uuid4().hex[:8]}"
    runs = [ContainerRun(image=image, name=f"kit-{run_id}-r{i}", labels=kit_labels(run_id, "k"),
                         ulimits=(STACK_ULIMIT, *sandbox_limits())) for i in (1, 2)]
    clients = [subprocess.Popen(PODMAN.run_argv(r, ["sleep", "299"]), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for r in runs]
    try:
        listed = ["podman", "ps", "-q", "--filter", f"label=io.kit.run={run_id}"]
        end = time.monotonic() + 60
        while len(sh(*listed).stdout.split()) < 2:
            assert time.monotonic() < end and all(c.poll() is None for c in clients), "containers did not start"
            time.sleep(0.5)
        assert sh(*cleanup_command(run_id, PODMAN)).returncode == 0
        assert sh("podman", "ps", "-aq", "--filter", f"label=io.kit.run={run_id}").stdout.split() == []
        for client in clients:
            client.wait(timeout=60)
        # one container removed by its name (what the SSH runner does after a client stopped early)
        clients.append(subprocess.Popen(PODMAN.run_argv(runs[0], ["sleep", "299"]), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
        while not sh(*listed).stdout.split():
            assert time.monotonic() < end + 60 and clients[-1].poll() is None, "the container did not start"
            time.sleep(0.5)
        assert sh(*PODMAN.remove_argv(runs[0].name)).returncode == 0
        assert sh("podman", "ps", "-aq", "--filter", f"name={runs[0].name}").stdout == ""
        clients[-1].wait(timeout=60)
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
        for r in runs:
            sh(*PODMAN.remove_argv(r.name))
