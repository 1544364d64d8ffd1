"""Stand-ins only where the real program cannot run here (issue 58): tests/standin/README.md names each one with why,
in one line, and names no folder that is not there."""

from __future__ import annotations

import re

from conftest import REPO

STANDIN = REPO / "tests" / "standin"


def table() -> dict[str, str]:
    rows = [line for line in (STANDIN / "README.md").read_text().splitlines() if line.startswith("| `")]
    out = {}
    for row in rows:
        names, why = (cell.strip() for cell in row.strip("|").split("|"))
        for name in re.findall(r"`([^`]+)/`", names):
            out[name] = why
    return out


def test_every_stand_in_is_listed_with_why_and_nothing_else():
    folders = sorted(p.name for p in STANDIN.iterdir() if p.is_dir() and p.name != "__pycache__")
    listed = table()
    assert sorted(listed) == folders
    assert all(len(why) > 20 and "\n" not in why for why in listed.values()), listed

