"""The Docker runtime's GPU path: a GPU rank in `docker run --gpus` beside the GPU sampler on its host.

What is REAL: a test host (network namespaces, its own sshd; tests/nethosts.py) with a Docker engine of its own
(Debian's dockerd, containerd and runc; the machine-wide engine other tests use is untouched), the kit's cpu image
loaded into it, the kit's SSH runner (kit.run.ssh.SshRunner: staging, command_for, sampled(), docker_command(),
wrapper_command over SSH), the GPU sampler (scripts/telemetry/gpu_sampler.py) on the host outside the container,
the kit's launcher (scripts/reference/launch.py) in the container, docker's `--gpus` handling in the daemon, tini
(--init) and the signals between them.

What is a STAND-IN: the GPU boundary and the published program (tests/standin/README.md).
  - nvidia-container-runtime-hook (tests/standin/nvidia-container-runtime-hook/): dockerd registers the "nvidia"
    device driver that `--gpus` selects only when it finds a binary of that name on its PATH as it starts (moby
    daemon/nvidia_linux.go, checked against Debian's docker.io 20.10.24); then, for a container started with
    --gpus, it puts NVIDIA_VISIBLE_DEVICES into the container's environment and adds `nvidia-container-runtime-hook
    prestart` as the container's OCI prestart hook. The stand-in, first on the host engine's PATH, records that it
    ran and gives the container no device (NVIDIA's mounts the driver and the GPUs).
  - nvidia-smi (tests/standin/nvidia-smi/) on the host's PATH: the sampler's source, replaying a real H200's
    `--query-gpu ... --loop-ms=100` rows.
  - DLE PyTorch's main.py (tests/standin/dle_pytorch/main.py), the host's model-code tree mounted over the image's
    (as a docker host's `model_code` is): it replays a real one-GPU log, then exits 3 ("fail") or waits for a stop
    signal ("wait"), as after_checkpoint beside it says ("fail-on-release": exit 3 once the test has seen its samples).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from nethosts import NetHosts, start_free, write_inventory

from kit.config.hosts import load_hosts
from kit.config.suites import load_suite
from kit.core.layout import sidecar_name, telemetry_name
from kit.run.command import RUN_LABEL, SAMPLE_INTERVAL_MS, container_name
from kit.run.plan import PlannedRun
from kit.run.ssh import SshRunner, kill_command, wrapper_command

TESTS = Path(__file__).resolve().parent
STANDIN = TESTS / "standin"
HOOK_DIR = STANDIN / "nvidia-container-runtime-hook"
CONVNETS = "DeepLearningExamples/PyTorch/Classification/ConvNets"
ONE_GPU_LOG = "perf-v100/pytorch/pytorch_gpu1_amp_bs256.txt"
SUITE = """\
schema_version: 1
name: docker-gpu
hardware: gpu
defaults: {repeats: 1, timeout_s: 180, data: synthetic}
cases:
  - {framework: torch, impl: reference, model: resnet50, nodes: 1, gpus_per_node: 1, batch_size: 256,
     precision: amp}
"""

# The kit gives a GPU rank's container `--ulimit memlock=-1` (pinned memory for NCCL/InfiniBand). Raising a hard limit
# needs CAP_SYS_RESOURCE, which the sandbox these tests run in withholds even from root (runc: "error setting rlimit
# type 8: operation not permitted"), so on the test host `docker` is this shim: the real CLI (exec'd: same process,
# same signals) with that one option left out. The tests check that the kit's command line has it.
MEMLOCK_SHIM = """#!/bin/sh
# docker CLI shim (tests only, tests/test_docker_telemetry.py): the real docker without `--ulimit memlock=-1`
ulimit=
for a do
  shift
  if [ -n "$ulimit" ]; then
    ulimit=
    [ "$a" = memlock=-1 ] || set -- "$@" --ulimit "$a"
    continue
  fi
  if [ "$a" = --ulimit ]; then ulimit=1; continue; fi
  set -- "$@" "$a"
done
exec {docker} "$@"
"""


class GpuDockerHost:
    def __init__(self, net: NetHosts, root: Path, image: str, hook_log: Path, models: Path):
        self.net, self.root, self.image, self.hook_log, self.models = net, root, image, hook_log, models
        self.name = net.hosts[0].name

    def sh(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.net.run(self.name, list(argv), timeout=timeout)

    def hook_calls(self) -> list[dict]:
        return [json.loads(x) for x in self.hook_log.read_text().splitlines()] if self.hook_log.exists() else []

    def left(self, run_id: str) -> str:
        listed = self.sh("docker", "ps", "-aq", "--filter", f"label={RUN_LABEL}={run_id}")
        assert listed.returncode == 0, listed.stderr
        return listed.stdout.strip()


@pytest.fixture(scope="module")
def gpu_docker_host(tmp_path_factory, cpu_image, cpu_image_seed, published):
    """One test host whose own dockerd has the stand-in hook on its PATH (so `--gpus` works there), the kit's cpu
    image loaded into it, the stand-in nvidia-smi on its PATH and a model-code tree holding the stand-in main.py."""
    root = tmp_path_factory.mktemp("docker-gpu")
    try:
        net = start_free(1, root / "net", prefix="kgd", subnet="172.31.113")
    except RuntimeError as exc:
        pytest.fail(f"SSH test host unavailable: {exc}", pytrace=False)
    try:
        host = net.hosts[0]
        hook_log = root / "hook-calls.jsonl"
        net.start_docker(host.name, path=[str(HOOK_DIR)], env={"STANDIN_HOOK_LOG": str(hook_log)},
                         seed=cpu_image_seed)
        smi = host.bin_dir / "nvidia-smi"  # the GPU boundary replayed, as tests/test_reference_runs.py puts it
        smi.write_text(f"#!/bin/sh\nSTANDIN_SMI_DIR={published.parent / 'nvidia-smi'} exec "
                       f"{STANDIN / 'nvidia-smi' / 'nvidia-smi'} \"$@\"\n")
        smi.chmod(0o755)
        docker = host.bin_dir / "docker"  # this machine cannot raise RLIMIT_MEMLOCK (see MEMLOCK_SHIM)
        docker.write_text(MEMLOCK_SHIM.format(docker=shutil.which("docker")))
        docker.chmod(0o755)
        models = root / "models"
        (models / CONVNETS).mkdir(parents=True)
        shutil.copy(STANDIN / "dle_pytorch" / "main.py", models / CONVNETS / "main.py")
        shutil.copy(published / ONE_GPU_LOG, models / CONVNETS / "replay.log")
        (root / "data").mkdir()
        yield GpuDockerHost(net, root, cpu_image.ref, hook_log, models)
    finally:
        net.close()


def start(site: GpuDockerHost, tmp_path: Path, ending: str) -> tuple[SshRunner, PlannedRun, str]:
    """The kit's SSH runner starting the suite's one GPU rank on the host, in the cpu image (runtime docker)."""
    (site.models / CONVNETS / "after_checkpoint").write_text(ending + "\n")
    inventory = write_inventory(site.net, site.root, ssh={"connect_timeout": 3}, runtime="docker", gpus=1,
                                python="/usr/bin/python3", model_code=str(site.models))
    (tmp_path / "suite.yaml").write_text(SUITE)
    (case,) = load_suite(tmp_path / "suite.yaml").cases
    inv = load_hosts(inventory)
    run_dir = tmp_path / "runs" / f"docker-gpu-{tmp_path.name[-12:]}"
    runner = SshRunner(inv, inv.hosts, run_dir, "gpu", images={"torch": site.image})
    run = PlannedRun(case, 1)
    runner.stage([run], force=True)  # the stand-in tree is no checkout of the pin
    runner.start(run)
    return runner, run, runner.workdir(inv.hosts[0], run)


def launched(line: str) -> list[str]:
    """The argv that wrapper_command's line (what the SSH runner ran on the host) execs, its env prefix left out."""
    words = shlex.split(line)
    inner = shlex.split(words[words.index("-c") + 1])
    argv = inner[inner.index("exec") + 1:len(inner) - inner[::-1].index(">") - 1]  # up to `> stdout.log`
    if argv[0] == "env":
        argv = argv[1:]
        while "=" in argv[0]:
            argv = argv[1:]
    return argv


def log_tail(path: Path) -> str:
    return path.read_text()[-3000:] if path.exists() else f"(no {path.name})"


def running(runner: SshRunner) -> bool:
    (status,) = runner.statuses()
    return status.exit_code is None and not status.error


def samples(workdir: str, run: PlannedRun) -> list[str]:
    return (Path(workdir) / telemetry_name(run.log_rel.name)).read_text().splitlines()


def until_trained_and_sampled(runner: SshRunner, run: PlannedRun, workdir: str, rows: int) -> Path:
    """Wait for the program's figure in stdout.log and ROWS lines in the samples file; stdout.log's path."""
    stdout = Path(workdir) / "stdout.log"
    end = time.monotonic() + 120
    while "train.total_ips" not in (stdout.read_text() if stdout.exists() else "") or len(samples(workdir, run)) < rows:
        assert time.monotonic() < end and running(runner), (runner.statuses(), log_tail(stdout))
        time.sleep(0.2)
    return stdout


def test_gpu_rank_in_docker_is_sampled_on_the_host_and_ends_with_the_containers_exit_code(gpu_docker_host,
                                                                                           tmp_path):
    site = gpu_docker_host
    calls_before = len(site.hook_calls())
    release = site.models / CONVNETS / "release"
    release.unlink(missing_ok=True)
    runner, run, workdir = start(site, tmp_path, "fail-on-release")
    # it ends once three samples are in (at 200 ms a sample; a loaded host took longer than the program's own run)
    until_trained_and_sampled(runner, run, workdir, 2 + 3)
    release.write_text("")
    try:
        assert runner.wait(run.case.timeout_s)
    finally:
        release.unlink()
    (status,) = runner.statuses()
    out = (Path(workdir) / "stdout.log").read_text()
    # the container's exit code (the stand-in's 3), through tini, `docker run`, the sampler and the SSH wrapper
    assert (status.exit_code, status.error) == (3, "exit 3"), out[-3000:]
    # what the host ran: the sampler outside the container, wrapping `docker run --gpus "device=0"` in the image
    argv = launched(status.command)
    assert argv[0] == "/usr/bin/python3" and argv[1].endswith("/kit-scripts/telemetry/gpu_sampler.py")
    boxed = argv[argv.index("--") + 1:]
    assert argv[argv.index("--gpus") + 1] == "0" and boxed[:4] == ["docker", "run", "--rm", "--init"]
    assert boxed[boxed.index("--gpus") + 1] == '"device=0"' and "memlock=-1" in boxed and site.image in boxed
    name = container_name(runner.run_id, run.case.key, run.repeat, site.name)
    assert boxed[boxed.index("--name") + 1] == name
    assert status.command.count(f"docker rm -f {name}") == 2  # after the run, and after the watcher's stop
    # the container ran (the stand-in's line and the replayed log came out) with the GPU the kit gave it: dockerd's
    # nvidia driver ran the hook before the program and put NVIDIA_VISIBLE_DEVICES=0 in the container's environment
    assert "stand-in main.py " in out and "train.total_ips" in out
    (hook,) = site.hook_calls()[calls_before:]
    assert hook["argv"][1:] == ["prestart"] and hook["nvidia_env"]["NVIDIA_VISIBLE_DEVICES"] == "0"
    # the host's GPU sampled (the stand-in nvidia-smi on the host's PATH) from the run's start to its end
    rows = samples(workdir, run)
    assert rows[0].startswith(f"# telemetry 1 source smi interval_ms {SAMPLE_INTERVAL_MS} ") and f"host {site.name}" in rows[0]
    assert rows[1].startswith("timestamp, index, ") and len(rows) - 2 >= 3, rows[:5]
    assert site.left(runner.run_id) == ""  # --rm: no container left


def test_term_to_the_sampler_stops_the_container_and_ends_the_run_by_it(gpu_docker_host, tmp_path):
    site = gpu_docker_host
    calls_before = len(site.hook_calls())
    runner, run, workdir = start(site, tmp_path, "wait")
    stdout = until_trained_and_sampled(runner, run, workdir, 5)
    # the container is up with the GPU's variable in its environment (its first process, as the host sees it)
    assert site.left(runner.run_id) != ""
    (hook,) = site.hook_calls()[calls_before:]
    environ = site.sh("cat", f"/proc/{hook['pid']}/environ").stdout.split("\0")
    assert "NVIDIA_VISIBLE_DEVICES=0" in environ
    # TERM to the sampler alone (the run's session leader: wrapper_command's pgid file holds its pid, as the host's
    # PID namespace counts)
    pid = (Path(workdir) / "pgid").read_text().strip()
    cmdline = site.sh("cat", f"/proc/{pid}/cmdline").stdout.split("\0")
    assert cmdline[1].endswith("telemetry/gpu_sampler.py"), cmdline
    t0 = time.monotonic()
    assert site.sh("kill", "-TERM", pid).returncode == 0
    assert runner.wait(60)
    (status,) = runner.statuses()
    # the sampler passed it to `docker run`, which passed it to the container (tini, launch.py, main.py): main.py
    # ended by SIGTERM, the container and `docker run` with 128+15, and the sampler as its child did
    assert (status.exit_code, status.error) == (128 + 15, "exit 143"), stdout.read_text()[-3000:]
    assert time.monotonic() - t0 < 30
    assert site.left(runner.run_id) == ""  # nothing left with the run's label
    assert site.sh("sh", "-c", f"kill -0 {pid}").returncode != 0
    # the kit's launcher in the container saw the program end by the signal and removed its scratch folder
    sidecar = json.loads((Path(workdir) / sidecar_name(run.log_rel.name)).read_text())
    assert sidecar["exit_code"] == 128 + 15 and sidecar["scratch"]["removed"] == [
        {"path": "checkpoint.pth.tar", "bytes": 65536}]
    rows = samples(workdir, run)
    assert rows[0].startswith("# telemetry 1 source smi ") and len(rows) - 2 >= 3


def test_the_runners_stop_ends_a_sampled_gpu_container(gpu_docker_host, tmp_path):
    """A timeout or Ctrl-C: SshRunner.stop() (kill_command on the run's tree, then the run's containers removed)."""
    site = gpu_docker_host
    runner, run, workdir = start(site, tmp_path, "wait")
    stdout = until_trained_and_sampled(runner, run, workdir, 3)
    assert site.left(runner.run_id) != ""
    pid = (Path(workdir) / "pgid").read_text().strip()
    t0 = time.monotonic()
    runner.stop()
    assert time.monotonic() - t0 < 30
    (status,) = runner.statuses()
    # the docker client gets TERM from the group's stop and from the sampler passing it on, and ends as its container
    # did (at a third TERM it would exit 1 at once: "got 3 SIGTERM/SIGINTs, forcefully exiting")
    assert status.exit_code == 128 + 15, stdout.read_text()[-3000:]
    assert site.left(runner.run_id) == ""
    assert site.sh("sh", "-c", f"kill -0 -{pid}").returncode != 0  # nothing of the run's process group left
    sidecar = json.loads((Path(workdir) / sidecar_name(run.log_rel.name)).read_text())
    assert sidecar["exit_code"] == 128 + 15 and sidecar["scratch"]["removed"] is not None
    assert samples(workdir, run)[0].startswith("# telemetry 1 source smi ")


@pytest.mark.parametrize("shell", ["bash", "dash"])  # a login shell of either (Debian's useradd gives /bin/sh: dash)
@pytest.mark.parametrize("stopped", [False, True])
def test_the_wrappers_after_command_runs_however_the_run_ended(tmp_path, stopped, shell):
    """wrapper_command(after=...): what a docker host runs once its rank ended (`docker rm -f` of the rank's
    container: a `docker run` client stopped in its first moments leaves its container behind, created or running),
    whether the run ended by itself or was stopped (kill_command), the run's exit status kept."""
    workdir, marker = tmp_path / "run", tmp_path / "after"
    line = wrapper_command(str(workdir), {}, ["sh", "-c", "trap 'exit 143' TERM; sleep 30 & wait" if stopped else "exit 7"],
                           after=f"echo ran > {marker}; exit 1")
    proc = subprocess.Popen([shell, "-c", line])
    if stopped:
        end = time.monotonic() + 10
        while not (workdir / "pgid").exists() or not (workdir / "pgid").read_text().strip():
            assert time.monotonic() < end
            time.sleep(0.02)
        subprocess.run([shell, "-c", kill_command(str(workdir))], check=True, timeout=30)  # the login shell
    assert proc.wait(timeout=30) == (128 + 15 if stopped else 7)
    assert marker.read_text() == "ran\n"


def test_the_stop_signals_the_runs_group_once_and_each_process_outside_it(tmp_path):
    """kill_command: the run's process group gets TERM, and so does every descendant that left the group (a launcher's
    worker in a session of its own); the group's members are not signalled again by pid (a docker client force-exits
    at its third TERM, not waiting for its container)."""
    workdir = tmp_path / "run"
    pids = {name: tmp_path / f"{name}.pid" for name in ("root", "member", "worker")}
    counting = "echo $$ > {}; trap 'exit 143' TERM; while :; do sleep 0.05; done"
    tree = (f"sh -c {shlex.quote(counting.format(pids['member']))} & "
            f"setsid sh -c {shlex.quote(counting.format(pids['worker']))} & "
            f"{counting.format(pids['root'])}")
    proc = subprocess.Popen(["bash", "-c", wrapper_command(str(workdir), {}, ["sh", "-c", tree])])
    end = time.monotonic() + 10
    while not all(p.exists() and p.read_text().strip() for p in pids.values()):
        assert time.monotonic() < end
        time.sleep(0.05)
    listed = subprocess.run(["bash", "-c", kill_command(str(workdir)).split("kill -TERM")[0] + 'echo "$tree"'],
                            capture_output=True, text=True, check=True).stdout.split()
    pid = {name: p.read_text().strip() for name, p in pids.items()}
    assert pid["worker"] in listed and pid["root"] not in listed and pid["member"] not in listed  # (and the
    # worker's own children)
    subprocess.run(["bash", "-c", kill_command(str(workdir))], check=True, timeout=30)
    assert proc.wait(timeout=30) == 128 + 15
    for name in pid:
        assert subprocess.run(["kill", "-0", pid[name]], capture_output=True).returncode != 0, name


def test_the_stop_returns_once_a_process_deaf_to_term_is_killed_and_gone(tmp_path):
    """kill_command: a run that ignores SIGTERM gets SIGKILL after the grace period, and the stop returns only once
    the killed processes are gone (reaped), so nothing of the run is listed on the host after it."""
    workdir = tmp_path / "run"
    root = tmp_path / "root.pid"
    deaf = f"echo $$ > {shlex.quote(str(root))}; trap '' TERM; while :; do sleep 0.05; done"
    proc = subprocess.Popen(["bash", "-c", wrapper_command(str(workdir), {}, ["sh", "-c", deaf])])
    end = time.monotonic() + 10
    while not (root.exists() and root.read_text().strip()):
        assert time.monotonic() < end
        time.sleep(0.05)
    began = time.monotonic()
    subprocess.run(["bash", "-c", kill_command(str(workdir), grace=0.5)], check=True, timeout=30)
    assert time.monotonic() - began >= 0.5  # it outlived TERM
    assert subprocess.run(["kill", "-0", root.read_text().strip()], capture_output=True).returncode != 0
    assert proc.wait(timeout=30) == 128 + 9
