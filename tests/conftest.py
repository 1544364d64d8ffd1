from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from nethosts import NetHosts, start_free

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KIT_SHARED") or REPO.parent / "shared")
PUBLISHED = SHARED / "fixtures" / "published-logs"


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
def docker_hosts(ssh_hosts: NetHosts, registry):
    """ssh_hosts h1 and h2, each with a Docker engine of its own (own data-root, exec-root, socket, pidfile),
    allowed to pull from the test registry through the hosts' bridge."""
    pull_from = f"{ssh_hosts.subnet}.254:{registry.port}"
    try:
        for name in ("h1", "h2"):
            ssh_hosts.start_docker(name, insecure_registries=[pull_from])
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
