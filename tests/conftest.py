from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KIT_SHARED") or REPO.parent / "shared")
PUBLISHED = SHARED / "fixtures" / "published-logs"


@pytest.fixture(scope="session")
def published() -> Path:
    assert PUBLISHED.is_dir(), f"fixtures missing: {PUBLISHED} (put shared/ beside the repo or set KIT_SHARED)"
    return PUBLISHED
