"""The container runtime interface (kit.config.runtimes): the registry hosts.yaml's `runtime:` names, Podman's command
line beside Docker's, every runner asking the host's runtime, and a new runtime landing in one module + its entry in
the registry (a toy runtime added to a copy of the kit). The real Podman runs are tests/test_podman.py."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit.config.hosts import load_hosts
from kit.config.inventory import HostConfig
from kit.config.runtimes import DOCKER, NAMES, RUNTIMES, ContainerRun, Mount, runtime
from kit.config.runtimes.base import MEMLOCK_ULIMIT, STACK_ULIMIT
from kit.config.suites import load_suite
from kit.run.command import cleanup_command, command_for, container_name
from kit.run.dryrun import render_cluster
from kit.run.plan import PlannedRun, unfit
from kit.run.ssh import SshRunner, ssh_site

ROOT = Path(__file__).resolve().parent.parent
PODMAN = RUNTIMES["podman"]
SUITE = """\
schema_version: 1
name: boxed
hardware: gpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 1, batch_size: 2, image_size: 32, num_classes: 10}
cases:
  - {framework: torch, model: resnet50, nodes: 2, gpus_per_node: 2}
  - {framework: tensorflow, impl: reference, model: resnet50, nodes: 2, gpus_per_node: 8, batch_size: 256}
"""


def suite(tmp_path: Path):
    (tmp_path / "boxed.yaml").write_text(SUITE)
    return load_suite(tmp_path / "boxed.yaml")


def hosts(rt: str) -> list[HostConfig]:
    return [HostConfig(name=f"n{i}", address=f"10.8.0.{i}", user="u", gpus=2, runtime=rt, work_dir="/srv/kit")
            for i in (1, 2)]


def test_the_registry_names_every_runtime_and_native_is_none():
    assert NAMES == ("docker", "native", "podman")
    assert runtime("native") is None and runtime("docker") is DOCKER and runtime("podman") is PODMAN
    assert [r.command for r in RUNTIMES.values()] == ["docker", "podman"]
    with pytest.raises(ValueError, match="runtime 'rkt': one of docker, native, podman"):
        runtime("rkt")


def test_hosts_yaml_selects_podman_for_hosts_and_slurm(tmp_path):
    path = tmp_path / "hosts.yaml"
    path.write_text("schema_version: 1\ndefaults: {runtime: podman}\nhosts:\n  - {name: a, address: 10.0.0.1}\n"
                    "  - {name: b, address: 10.0.0.2, runtime: docker}\n"
                    "slurm: {partition: p, shared_dir: /srv/kit, container: podman}\n")
    inv = load_hosts(path, env={})
    assert [h.runtime for h in inv.hosts] == ["podman", "docker"] and inv.slurm.container == "podman"
    assert HostConfig(name="x", address="y", user="u").runtime == "docker"  # the built-in default


def test_podman_line_is_dockers_but_for_gpus_and_shared_memory():
    run = ContainerRun(image="kit/pytorch:a100-x", name="kit-r-c-r1-n1", labels=(("io.kit.run", "r"),),
                       env={"B": "2", "A": "a b"}, gpus=2, mounts=(Mount("/d", "/d", read_only=True),),
                       user="0:0", workdir="/w", ulimits=(MEMLOCK_ULIMIT, STACK_ULIMIT))
    assert PODMAN.run_argv(run, ["python", "t.py"]) == [
        "podman", "run", "--rm", "--init", "--name", "kit-r-c-r1-n1", "--label", "io.kit.run=r",
        "--network", "host", "--ipc", "host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1",
        "--mount", "type=bind,source=/d,target=/d,readonly", "--user", "0:0", "--workdir", "/w",
        "--env", "A=a b", "--env", "B=2", "kit/pytorch:a100-x", "python", "t.py",
    ]  # fmt: skip
    docker = DOCKER.run_argv(run, ["python", "t.py"])
    assert docker[docker.index("--ipc") + 2:docker.index("--ipc") + 4] == ["--shm-size", "16g"]
    assert docker[docker.index("--gpus") + 1] == '"device=0,1"'
    private = ContainerRun(image="i", name="n", ipc="private", shm_size="2g")
    assert PODMAN.run_argv(private, ["x"])[8:12] == ["--ipc", "private", "--shm-size", "2g"]
    with pytest.raises(ValueError, match="must be absolute"):
        PODMAN.run_argv(ContainerRun(image="i", name="n", mounts=(Mount("rel", "/x"),)), ["x"])


def test_a_container_is_given_the_gpus_named_or_the_first_ones():
    pinned = ContainerRun(image="i", name="n", gpus=1, devices=(3,))
    assert DOCKER.run_argv(pinned, ["x"])[DOCKER.run_argv(pinned, ["x"]).index("--gpus") + 1] == '"device=3"'
    assert "nvidia.com/gpu=3" in PODMAN.run_argv(pinned, ["x"])
    assert "nvidia.com/gpu=1" in PODMAN.run_argv(ContainerRun(image="i", name="n", gpus=2), ["x"])
    with pytest.raises(ValueError, match="2 GPU\\(s\\) asked, devices \\[3\\] given"):
        DOCKER.run_argv(ContainerRun(image="i", name="n", gpus=2, devices=(3,)), ["x"])

def test_image_and_container_commands_name_their_runtime():
    assert PODMAN.image_id_argv("kit/cpu:x") == ["podman", "image", "inspect", "--format", "{{.Id}}", "kit/cpu:x"]
    assert DOCKER.remove_argv("n") == ["docker", "rm", "-f", "n"]
    assert PODMAN.pull_argv("r:5000/kit/cpu:x") == ["podman", "pull", "--quiet", "r:5000/kit/cpu:x"]
    assert PODMAN.load_argv() == ["podman", "load"]
    assert cleanup_command("r1", PODMAN) == [
        "sh", "-c", 'ids=$(podman ps -aq --filter label=io.kit.run=r1); [ -z "$ids" ] || podman rm -f $ids >/dev/null']


def test_every_runner_part_asks_the_hosts_runtime(tmp_path):
    harness, tf = suite(tmp_path).cases
    for rt in ("docker", "podman"):
        group = hosts(rt)
        sites = [ssh_site(h, "/srv/kit/w", "x.log", "kit/pytorch:x") for h in group]
        assert sites[0].container.runtime is RUNTIMES[rt]
        launched = command_for(harness, 1, 0, sites, 31000, "gpu", "r1").launched
        cmd = launched.argv[launched.argv.index("--") + 1:]  # after the GPU sampler
        assert cmd[:3] == [rt, "run", "--rm"] and launched.env == {}
        assert unfit(tf, group, "gpu") == ("one mpirun over 2 hosts cannot start ranks in the other hosts' "
                                           f"containers yet; n1, n2 have runtime {rt} (run it on native hosts)")
        runner = SshRunner(None, group, tmp_path / "r1", "gpu", images={"torch": "kit/pytorch:x"})
        (_host, _workdir, line), _ = runner.commands(PlannedRun(harness, 1), 31000)
        name = container_name("r1", harness.key, 1, "n1")
        assert line.endswith(f"({rt} rm -f {name}) < /dev/null > /dev/null 2>&1; exit $rc; }}")
        text = "\n".join(render_cluster(suite(tmp_path), group, "here"))
        assert "  n1 (in the image): " in text and f"(10.8.0.1, {rt}, 2 GPUs)" in text
    native = [ssh_site(h, "/w", "x.log", None) for h in hosts("native")]
    assert native[0].container is None
    assert unfit(tf, hosts("native"), "cpu") is None
    assert "(in the image)" not in "\n".join(render_cluster(suite(tmp_path), hosts("native"), "x"))


# ---- a new runtime: one module and its entry in the registry ------------------------------------------------

TOY = '''"""Toy: a runtime added by tests/test_runtimes.py."""

from __future__ import annotations

from kit.config.runtimes.docker import Docker


class Toy(Docker):
    name = "toy"
    command = "toyctl"

    def gpu_args(self, devices: tuple[int, ...]) -> list[str]:
        return ["--toy-gpus", ",".join(str(i) for i in devices)]
'''

USE_TOY = '''
import sys
from pathlib import Path
from kit.config.hosts import load_hosts
from kit.config.suites import load_suite
from kit.run.command import cleanup_command, command_for
from kit.run.dryrun import render_cluster
from kit.run.plan import PlannedRun
from kit.run.ssh import SshRunner, ssh_site

tmp = Path(sys.argv[1])
inv = load_hosts(tmp / "hosts.yaml", env={})
suite = load_suite(tmp / "boxed.yaml")
harness = suite.cases[0]
sites = [ssh_site(h, "/srv/kit/w", "x.log", "kit/pytorch:x") for h in inv.hosts]
launched = command_for(harness, 1, 0, sites, 31000, "gpu", "r1").launched.argv
print(" ".join(launched[launched.index("--") + 1:][:3]), launched[launched.index("--toy-gpus") + 1])
runner = SshRunner(inv, inv.hosts, tmp / "r1", "gpu", images={"torch": "kit/pytorch:x"})
print(runner.commands(PlannedRun(harness, 1), 31000)[0][2].rsplit("(", 1)[1].split(")")[0])
print(cleanup_command("r1", sites[0].container.runtime)[2].split(";")[0])
print([line for line in render_cluster(suite, inv.hosts, "here") if "2-node cases" in line][0])
print(inv.slurm.container)
'''


def copy_with_toy_runtime(into: Path) -> Path:
    """A copy of the kit with the toy runtime: its module, and its entry in the registry's _ALL."""
    shutil.copytree(ROOT / "kit", into / "kit", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("scripts", "docker"):
        (into / name).symlink_to(ROOT / name)
    (into / "kit/config/runtimes/toy.py").write_text(TOY)
    registry = into / "kit/config/runtimes/__init__.py"
    text = registry.read_text()
    for old, new in (("import docker, podman", "import docker, podman, toy"),
                     ("podman.Podman())", "podman.Podman(), toy.Toy())")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    registry.write_text(text)
    return into


def test_a_new_runtime_lands_in_one_module_and_its_registry_entry(tmp_path):
    copy = copy_with_toy_runtime(tmp_path / "copy")
    changed = filecmp.dircmp(ROOT / "kit", copy / "kit", ignore=["__pycache__"])

    def diff(d, where=""):
        return ([f"{where}{n}" for n in d.diff_files + d.left_only + d.right_only]
                + [p for name, sub in d.subdirs.items() for p in diff(sub, f"{where}{name}/")])

    assert sorted(diff(changed)) == ["config/runtimes/__init__.py", "config/runtimes/toy.py"]
    harness = suite(tmp_path).cases[0]
    (tmp_path / "hosts.yaml").write_text(
        "schema_version: 1\ndefaults: {runtime: toy, gpus: 2, user: u}\nhosts:\n  - {name: a, address: 10.0.0.1}\n"
        "  - {name: b, address: 10.0.0.2}\nslurm: {partition: p, shared_dir: /srv/kit, container: toy}\n")
    out = subprocess.run([sys.executable, "-c", USE_TOY, str(tmp_path)], capture_output=True, text=True, timeout=120,
                         cwd=copy, env={**os.environ, "PYTHONPATH": str(copy)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "toyctl run --rm 0,1",
        f"toyctl rm -f {container_name('r1', harness.key, 1, 'a')}",
        "ids=$(toyctl ps -aq --filter label=io.kit.run=r1)",
        "  2-node cases: a (10.0.0.1, toy, 2 GPUs), b (10.0.0.2, toy, 2 GPUs)",
        "toy",
    ]
    # and the kit as it is knows no toy
    plain = subprocess.run([sys.executable, "-c", USE_TOY, str(tmp_path)], capture_output=True, text=True,
                           timeout=120, cwd=ROOT)
    assert plain.returncode != 0 and "container: 'toy': one of auto, native, docker, podman, pyxis" in plain.stderr
