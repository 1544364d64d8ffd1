"""The files the kit reads and writes, each with its schema version, and the one atomic writer.

Every file the kit writes goes through write_text/write_json: a temporary name beside the target, then one
rename, so a reader (or an interrupted run) sees the old file or the new one, never half of either.
write_json stamps the file's `schema_version` from SCHEMA_VERSIONS, the one table of every format's version.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# the compliance rule set a run made by this kit is judged by (run.json rules_version): the newest of
# kit/audit/rules/ (tests/test_rules_engine.py holds the two equal)
CURRENT_RULES = "v11"

SCHEMA_VERSIONS = {
    # read: what a user or the repository writes
    "hosts.yaml": 1,
    "suite": 1,  # kit/suites/*.yaml and suite files given by path
    "pins.yaml": 1,
    "rules": 1,  # kit/audit/rules/<version>/*.yaml
    # written: what a run, a bundle or an image build leaves behind
    "run.json": 2,  # 2: a run's figure is `figure` (1: `samples_per_sec`); kit.core.rundir migrates 1
    "results.json": 1,
    "images.json": 1,
    "manifest.json": 1,  # a bundle's sha256 manifest (and provenance.json beside it)
    "cmd.json": 1,  # a reference run's sidecar (scripts/reference/launch.py completes it)
    "sweep.json": 1,  # a sweep's hosts and how each ended (kit.core.rundir.SWEEP_SHAPE)
}


def write_text(path: Path, text: str) -> Path:
    """Write atomically: a temporary file beside the target, then one rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def stamped(kind: str, data: dict) -> dict:
    """data with `schema_version` (first) set to the version of its kind of file."""
    return {"schema_version": SCHEMA_VERSIONS[kind], **{k: v for k, v in data.items() if k != "schema_version"}}


def write_json(path: Path, data: dict, kind: str, *, sort_keys: bool = False) -> Path:
    """data as indented JSON, stamped with the schema version of `kind` (a SCHEMA_VERSIONS key), atomically."""
    return write_text(path, json.dumps(stamped(kind, data), indent=2, sort_keys=sort_keys) + "\n")
