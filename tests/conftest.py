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
