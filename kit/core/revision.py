"""The kit's own source revision: the git commit of its checkout (run.json records it at a run's start, a bundle's
provenance at bundling)."""

from __future__ import annotations

import subprocess

from kit import REPO_ROOT


def source_revision() -> dict:
    """The kit's own git commit (and whether its tree had changes), or why it is unknown."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"commit": None, "error": str(exc)}
    if head.returncode != 0:
        return {"commit": None, "error": (head.stderr.strip() or "not a git checkout")[:200]}
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
