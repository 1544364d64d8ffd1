from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
PUBLISHED = SHARED / "fixtures" / "published-logs"


@pytest.fixture(scope="session")
def published() -> Path:
    assert PUBLISHED.is_dir(), f"fixtures missing: {PUBLISHED} (shared/ must sit beside the repo)"
    return PUBLISHED
