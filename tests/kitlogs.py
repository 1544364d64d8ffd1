"""Rewriting a harness log's :::KITLOG lines in a test (a forgery, or a log as a newer harness writes it)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

MARK = ":::KITLOG "


def rewrite_kitlog(log: Path, edit: Callable[[dict], dict | Iterable[dict]]) -> None:
    """Each :::KITLOG line's object through edit: a dict replaces it, an iterable of dicts replaces it by those
    lines (none drops it); other lines stay as they are."""
    out = []
    for line in log.read_text().splitlines(keepends=True):
        if not line.startswith(MARK):
            out.append(line)
            continue
        new = edit(json.loads(line[len(MARK):]))
        out += [MARK + json.dumps(d) + "\n" for d in ([new] if isinstance(new, dict) else new)]
    log.write_text("".join(out))


def recorded_clean(run_dir) -> None:
    """DERIVED: each published program's command record under RUN_DIR given the model_code_state today's launcher
    writes of a checkout clean at the commit the record names (scripts/reference/code_state.py). For real runs
    recorded before the launcher wrote it (the H200 visit's DLE runs), whose commit was the pin."""
    import json
    from pathlib import Path

    for sidecar in Path(run_dir).rglob("*.cmd.json"):
        meta = json.loads(sidecar.read_text())
        meta.setdefault("model_code_state", {"commit": meta.get("model_code_commit"), "modified": [], "deleted": [],
                                             "untracked": [], "hidden": [], "clean": True})
        sidecar.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
