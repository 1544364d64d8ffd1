from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from nethosts import NetHosts, start_free

from kit.run.command import CPU_OPENMP

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KIT_SHARED") or REPO.parent / "shared")
PUBLISHED = SHARED / "fixtures" / "published-logs"


# `make test` runs the test files in parallel (pytest-xdist, -n): a file is one unit of work, so a module's
# fixtures are built once and its tests keep their order; files that share a machine-wide resource (Slurm's
# fixed ports) are one unit. xdist starts the units with the most tests first. (The longest by wall first measured
# no faster -- 20 min 14 s against 19 min 36 s on one VM: the CPU-heavy files then all start together.)
SHARED_UNITS = {"test_slurm.py": "slurm", "test_slurm_programs.py": "slurm", "test_reproduce_slurm.py": "slurm",
                "test_sweep_slurm.py": "slurm", "test_slurm_telemetry.py": "slurm"}


def pytest_configure(config: pytest.Config) -> None:
    for name, value in CPU_OPENMP.items():
        os.environ.setdefault(name, value)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # xdist sets 80x24 in its workers: `ps` on a test host cut lines there
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)
    # started in the background (`make test &`), SIGINT is ignored, and so in every child the Ctrl-C tests interrupt
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a handler: children start with the default


def work_unit(nodeid: str) -> str:
    name = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return SHARED_UNITS.get(name, name)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's scope scheduling with work_unit as the scope. (--dist loadgroup's marks do not reach xdist 3.8
    under pytest 9.2, which no longer reads the item's _nodeid that xdist rewrites.)"""
    from xdist.scheduler import LoadScopeScheduling

    class FileUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return FileUnits(config, log)


@pytest.fixture(scope="session")
def published() -> Path:
    assert PUBLISHED.is_dir(), f"fixtures missing: {PUBLISHED} (put shared/ beside the repo or set KIT_SHARED)"
    return PUBLISHED


@pytest.fixture(scope="session")
def ssh_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetHosts]:
    """Three real SSH hosts h1..h3 (network namespaces + sshd, key-only auth); see tests/nethosts.py.

    Missing infrastructure (not root, no ip/sshd/unshare) fails the tests that use it, never skips.
    Another live test session's hosts are left alone: this one takes the next free prefix/subnet."""
    try:
        net = start_free(3, tmp_path_factory.mktemp("nethosts"))
    except RuntimeError as e:
        pytest.fail(f"SSH test hosts unavailable: {e}", pytrace=False)
    try:
        yield net
    finally:
        net.close()


def _infra_failure(what: str, exc: Exception):
    """Missing Docker infrastructure fails the tests that need it (never a silent skip in CI)."""
    pytest.fail(f"{what} unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def docker_engine():
    """A docker SDK client of this machine's engine (started as root if it is not running)."""
    from dockerparts import ensure_engine

    try:
        return ensure_engine()
    except RuntimeError as exc:
        _infra_failure("Docker engine", exc)


@pytest.fixture(scope="session")
def cpu_image(docker_engine):
    """The pinned cpu image, built for real from the debootstrap base (cached by its content tag)."""
    from dockerparts import cpu_image as build_cpu_image

    return build_cpu_image(docker_engine)


@pytest.fixture(scope="session")
def cpu_image_seed(cpu_image) -> Path:
    """A Docker data-root holding the cpu image, made once per machine: test hosts' engines start from it
    (NetHosts.start_docker seed=) where loading the image is not what a test is about."""
    from dockerparts import seeded_data_root

    try:
        return seeded_data_root(cpu_image)
    except RuntimeError as exc:
        _infra_failure("a Docker data-root holding the cpu image", exc)


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory):
    from dockerparts import Registry

    try:
        reg = Registry(tmp_path_factory.mktemp("registry")).start()
    except RuntimeError as exc:
        _infra_failure("docker-registry", exc)
    try:
        yield reg
    finally:
        reg.close()


@pytest.fixture(scope="session")
def docker_hosts(ssh_hosts: NetHosts, registry, cpu_image_seed):
    """ssh_hosts h1 and h2, each with a Docker engine of its own (own data-root, exec-root, socket, pidfile),
    allowed to pull from the test registry through the hosts' bridge, holding the cpu image from the start (the
    tests of delivery move a small image: tests/test_images.py)."""
    pull_from = f"{ssh_hosts.subnet}.254:{registry.port}"
    try:
        for name in ("h1", "h2"):
            ssh_hosts.start_docker(name, insecure_registries=[pull_from], seed=cpu_image_seed)
    except RuntimeError as exc:
        _infra_failure("Docker engines on the SSH test hosts", exc)
    return ssh_hosts


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A real Slurm: slurmctld on h1, slurmd on h2 and h3 (network namespaces), munged; see tests/slurmhosts.py.

    Missing packages (slurmctld, slurmd, slurm-client, munge) or no root fail the tests that use it, never skip."""
    from slurmhosts import SlurmHosts

    try:
        cluster = SlurmHosts(tmp_path_factory.mktemp("slurm")).start()
    except RuntimeError as exc:
        pytest.fail(f"Slurm test cluster unavailable: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.close()


def redeclare_suite(run_dir: Path, text: str) -> None:
    """A run's suite.yaml replaced and declared anew in run.json, its sha256 and the expansion kit bench freezes
    (what --resume otherwise refuses: an edited suite)."""
    import hashlib
    import json

    from kit.config.expansion import FROZEN_KEY, freeze
    from kit.config.suites import load_suite

    (run_dir / "suite.yaml").write_text(text)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["suite_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    if FROZEN_KEY in meta:
        meta[FROZEN_KEY] = freeze(load_suite(run_dir / "suite.yaml"))
    (run_dir / "run.json").write_text(json.dumps(meta))


@pytest.fixture
def vgg16_saved_program(tmp_path: Path) -> tuple[Path, str]:
    """(an archive shaped as FleetX's vgg16_nchw.tar.gz, its sha256): one top folder vgg16_nchw/ with the files
    FleetX's util.load_program opens (their contents made here: no copy of the real one is reachable here)."""
    import hashlib
    import io
    import tarfile

    from kit.config.programs import implementation

    (saved,) = implementation("paddle", "vgg16").saved_programs
    archive = tmp_path / f"{saved.name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in (*saved.reads, "acc"):
            body = b"softmax_with_cross_entropy_0.tmp_1" if name == "loss_name" else f"{name}\n".encode()
            info = tarfile.TarInfo(f"{saved.name}/{name}")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()
